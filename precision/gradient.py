"""The gradient of a loss of a module's output with respect to its parameters, in any
precision, beside :func:`precision.evaluate.evaluate`::

    grads = gradient(model, x, target, "mp50")    # {parameter name: MPOutput}
    grads = gradient(model, x, target, "float8_e4m3")   # {parameter name: torch.Tensor}

The loss is the mean squared error over every output entry, L = mean((f(x) - target)^2).
The result maps each trainable parameter's name (``named_parameters()``) to dL/dparameter,
of the parameter's shape.

**mpN.** L and its gradient are traced to ATen once per model structure and input shape
(:func:`_trace`: the model exported as the forward's program is, then ``make_fx`` of
``torch.func.grad`` of L on that graph, with PyTorch's core ATen decompositions): each op's
derivative is the formula PyTorch's autograd has for it, decomposed into core ATen, so no
derivative is written here and the backward is one more graph of the ops the forward runs on.
That graph (forward and backward; the parameters, buffers, ``x`` and ``target`` as inputs,
converted exactly from their stored values at each call) is walked by the interpreter that
evaluates forwards (:class:`~precision.backends.interpreter.program.GraphProgram`), every
node in mpN. Each gradient is an :class:`~precision.mp_output.MPOutput`; its ``.digits`` are
those the same gradient in mp2N confirms (computed on first use).

**Floats** (float32, float64, bfloat16, float16): a copy of the model in the dtype, ``x`` and
``target`` rounded into it, L and its gradient by PyTorch's autograd in that dtype (its own
kernels; under ``casts="promote"`` every float cast the model makes is the dtype, as
``evaluate`` does). **Simulated formats** (FP8, MX, ``eXmY``, integer weights, stochastic
rounding): as format training computes a step's gradient, the copy's parameters rounded
into the format and every op of the forward *and* the backward rounded
(:mod:`precision.formats.op_rounding` is active while autograd runs the backward); returned
in the carrier dtype. A per-module assignment is refused: the backward's ops run outside
every module's ``forward``.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
import weakref
from typing import Any

import numpy as np
import torch
from torch._decomp import core_aten_decompositions
from torch.func import functional_call, functionalize, grad
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.attention import SDPBackend, sdpa_kernel

from precision.backends.interpreter import GraphProgram
from precision.backends.interpreter.program import as_float64
from precision.backends.promote_casts import PromoteCasts
from precision.backends.torch_backend import cast_module, round_to_dtype
from precision.evaluate import evaluating, exact_output
from precision.formats.simulate import prepare_module, round_tensor, simulation
from precision.module_fingerprint import structure_key
from precision.mp_output import MPOutput
from precision.precisions import Precision, PrecisionError, as_precision
from precision.reference import certain_digits, check_precision

#: (structure, input shapes) -> the traced loss-and-gradient program, per model.
_PROGRAMS: weakref.WeakKeyDictionary[torch.nn.Module, dict[Any, tuple[Any, GraphProgram]]] = \
    weakref.WeakKeyDictionary()


def mse(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The loss: mean((out - target)^2) over every entry."""
    return ((out - target) ** 2).mean()


def _trainable(model: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def gradient(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor,
             precision: Precision | str | torch.dtype) -> dict[str, torch.Tensor | MPOutput]:
    """dL/dparameter of L = mean((model(x) - target)^2) for every trainable parameter of
    ``model``, computed in ``precision`` (module docstring): a ``torch.Tensor`` per parameter
    for a float or simulated precision, an :class:`MPOutput` for an mpN. The model is run in
    eval mode and left as it was.

    Shapes: ``x`` as the model takes it; ``target`` the model's output shape; each gradient
    its parameter's shape.
    """
    p = as_precision(precision)
    if p.modules:
        raise PrecisionError(f"{p.name}: a gradient is computed in one precision, not a "
                             "per-module assignment (the backward's ops run outside every "
                             "module's forward)")
    if not isinstance(x, torch.Tensor) or not isinstance(target, torch.Tensor):
        raise TypeError("gradient takes x and target as tensors")
    names = [n for n, _ in _trainable(model)]
    if not names:
        raise ValueError("the model has no trainable parameter to differentiate")
    with evaluating(model):
        with torch.no_grad():   # the loss is over matching entries, never a broadcast
            out = as_float64(model)(as_float64(x))
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        if got != tuple(target.shape):
            raise ValueError(f"target has shape {tuple(target.shape)}, the model's output "
                             f"{got}: the loss is the MSE over matching entries")
        if p.is_mp:
            values = _mp_gradient(model, x, target, p)

            def certify(name: str, mine: np.ndarray) -> float:
                check = _mp_gradient(model, x, target, check_precision(p))[name]
                return certain_digits(mine, check, int(p.digits or 0))

            return {n: MPOutput(v, p, (lambda n=n, v=v: certify(n, v)))
                    for n, v in values.items()}
        return _float_gradient(model, x, target, p)


def _float_gradient(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor,
                    p: Precision) -> dict[str, torch.Tensor]:
    """PyTorch's autograd in the dtype, or under the format's per-op rounding."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch's pytree deprecation on copy
        clone = copy.deepcopy(model)
    if p.is_simulated:
        clone = prepare_module(clone, p)
        xin, tin = (round_tensor(t, p) if t.is_floating_point() else t for t in (x, target))
        mode: Any = simulation(p)
        dtype = p.carrier_dtype
    else:
        dtype = p.torch_dtype
        clone = cast_module(clone, dtype)
        xin, tin = (round_to_dtype(t, dtype) if t.is_floating_point() else t
                    for t in (x, target))
        mode = contextlib.nullcontext()
    promote = PromoteCasts(dtype) if p.casts == "promote" else contextlib.nullcontext()
    params = _trainable(clone)
    xin = xin.clone(memory_format=torch.contiguous_format)
    with torch.enable_grad(), promote, mode:
        loss = mse(clone(xin), tin)
        grads = torch.autograd.grad(loss, [q for _, q in params], allow_unused=True)
    return {n: (g if g is not None else torch.zeros_like(q)).detach()
            for (n, q), g in zip(params, grads, strict=True)}


def program(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor) -> GraphProgram:
    """The traced loss-and-gradient graph of ``model`` for inputs shaped like ``x`` and
    ``target`` (module docstring), cached per model while its structure is unchanged."""
    key = (tuple(x.shape), x.dtype, tuple(target.shape))
    structure = structure_key(model)
    per_model = _PROGRAMS.setdefault(model, {})
    cached = per_model.get(key)
    if cached is None or cached[0] != structure:
        per_model[key] = (structure, GraphProgram(_trace(model, x, target)))
    return per_model[key][1]


def loss_program(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor
                 ) -> GraphProgram:
    """L alone, traced as the gradient is (inputs: the trainable parameters, the buffers,
    ``x``, ``target``; output: (L,)), for a check of the gradient that is independent of any
    derivative, such as central differences of L in mpN."""
    return GraphProgram(_trace(model, x, target, loss_only=True))


def _trace(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor,
           loss_only: bool = False) -> torch.fx.GraphModule:
    """make_fx of (trainable parameters..., buffers..., x, target) -> (dL/dparameter...)
    (``loss_only``: -> (L,)) on a float64 copy, through its exported graph.

    The model is first exported (``torch.export``, decomposed to core ATen, as the forward's
    program is: data-dependent Python of the model's own code, such as a library's mask
    checks, is resolved there), then L of that graph is differentiated by ``torch.func.grad``
    and traced with the core ATen decompositions, mutations removed (``functionalize``): the
    backward of ATen ops, each by PyTorch's own formula. Buffers are inputs too, so the
    program reads their values at each call, as it reads the parameters'."""
    copy64 = as_float64(model)
    x64, t64 = as_float64(x), as_float64(target)
    with warnings.catch_warnings(), torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
        warnings.simplefilter("ignore")   # torch.export's own notes
        exported = torch.export.export(copy64, (x64,))
        table = core_aten_decompositions()
        if _slices_cover_convolutions(exported.graph):
            table[torch.ops.aten.convolution.default] = _conv1d_by_slices
        graph_module = exported.run_decompositions(table).module()
    names = [n for n, _ in _trainable(model)]
    exported_params = dict(graph_module.named_parameters())
    lost = [n for n in names if n not in exported_params]
    if lost:   # else functional_call would use the traced copy's values: a stale gradient
        raise ValueError(f"the exported model has no parameter {lost[0]!r} (of "
                         f"{len(lost)} missing): its gradient cannot be traced")
    buffers = [n for n, _ in model.named_buffers()]
    exported_buffers = dict(graph_module.named_buffers())
    buffers = [n for n in buffers if n in exported_buffers]

    def loss(state: dict[str, torch.Tensor], xs: torch.Tensor, ts: torch.Tensor
             ) -> torch.Tensor:
        return mse(functional_call(graph_module, state, (xs,)), ts)

    def grads(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        params = dict(zip(names, args[:len(names)], strict=True))
        state = dict(zip(buffers, args[len(names):-2], strict=True))
        if loss_only:
            return (loss({**params, **state}, args[-2], args[-1]),)
        out = grad(lambda ps: loss({**ps, **state}, args[-2], args[-1]))(params)
        return tuple(out[n] for n in names)

    weights = dict(copy64.named_parameters())
    example = [weights[n].detach() for n in names] + [exported_buffers[n] for n in buffers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch's tracing notes
        traced = make_fx(functionalize(grads, remove="mutations"),
                         decomposition_table=core_aten_decompositions())(*example, x64, t64)
    traced.buffer_names = buffers   # the inputs after the parameters, in this order
    return traced


def _slices_cover_convolutions(graph: torch.fx.Graph) -> bool:
    """True when the exported graph has convolutions and each is one
    :func:`_conv1d_by_slices` computes (1-D, stride 1, dilation 1, not transposed): their
    backward is then that of slices and products, which the interpreter runs (it has no
    ``convolution_backward``)."""
    aten = torch.ops.aten
    convs = [n for n in graph.nodes if n.target in (aten.convolution.default, aten.conv1d.default)]

    def one_d(node: torch.fx.Node) -> bool:
        args = list(node.args) + [[1], [0], [1], False][len(node.args) - 3:]
        transposed = node.target is aten.convolution.default and bool(args[6])
        return (len(args[1].meta["val"].shape) == 3 and list(args[3]) == [1]
                and list(args[5]) == [1] and not transposed)

    return bool(convs) and all(one_d(n) for n in convs)


def _conv1d_by_slices(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                      stride: list[int], padding: list[int], dilation: list[int],
                      transposed: bool, output_padding: list[int], groups: int
                      ) -> torch.Tensor:
    """aten.convolution of a 1-D input (n, c_in, L), stride and dilation 1, as a sum over the
    kernel's K taps of grouped products: out[n, o, t] = sum_k sum_i w[o, i, k] x_pad[n, i, t + k]
    (+ bias[o]); the same sums as the convolution, in another order."""
    n, c_in, _ = x.shape
    c_out, c_group, k = weight.shape
    xp = torch.nn.functional.pad(x, (padding[0], padding[0]))
    steps = xp.shape[-1] - k + 1
    xg = xp.reshape(n, groups, c_group, xp.shape[-1])
    wg = weight.reshape(groups, c_out // groups, c_group, k)
    out = sum(torch.einsum("ngil,goi->ngol", xg[..., j:j + steps], wg[..., j])
              for j in range(k))
    out = out.reshape(n, c_out, steps)
    return out if bias is None else out + bias[None, :, None]


def _mp_gradient(model: torch.nn.Module, x: torch.Tensor, target: torch.Tensor,
                 p: Precision) -> dict[str, np.ndarray]:
    """The gradient's exact arb values per parameter name, computed in the mpN ``p``."""
    params = _trainable(model)
    prog = program(model, x, target)
    state = dict(model.named_buffers())
    buffers = [state[n].detach() for n in prog.module.buffer_names]
    out = prog(*[q.detach() for _, q in params], *buffers, x, target, precision=p)
    out = out if isinstance(out, tuple) else (out,)
    return {n: exact_output(p, v) for (n, _), v in zip(params, out, strict=True)}
