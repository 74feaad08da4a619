"""Evaluating a constructed model layer by layer, in any precision.

:class:`PerLayer` wraps a model so one forward pass returns the read-out after every layer
(floats: one evaluation per precision for a whole layer trace). In mpN, deep models are
evaluated one exported layer (:func:`layerwise`) or BaseConv block (:func:`blockwise_mp`) at
a time, each layer's weights loaded in turn: the same arithmetic as interpreting the whole
model, without exporting every layer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from precision.backends import backend_for
from precision.backends.torch_backend import cast_module, round_to_dtype
from precision.constructions import baseconv_gd
from precision.evaluate import mp_program
from precision.formats.simulate import prepare_module, round_tensor, simulation
from precision.models.linear_attention import LSA, LinearTransformer, RestrictedLSA


class PerLayer(nn.Module):
    """Wraps a model so one forward pass returns the read-out after every layer (or every
    ``stride`` layers): one export, one evaluation per precision for a whole layer trace."""

    def __init__(self, model: nn.Module, kind: str, d: int) -> None:
        super().__init__()
        self.model, self.kind, self.d = model, kind, d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind.startswith("baseconv_gd"):  # w^T x_q after each GD layer (3-layer step)
            causal = self.kind == "baseconv_gd"
            lay = (baseconv_gd._layout if causal else baseconv_gd._layout_noncausal)(self.d)
            h, outs = self.model.inp(x), []
            for i, layer in enumerate(self.model.layers[:-1]):
                h = layer(h)
                if i >= 2 and (causal or i % 3 == 2):
                    outs.append((h[:, -1, lay["q"]] * h[:, -1, lay["w"]]).sum(-1))
            return torch.stack(outs, dim=1)                  # (batch, iters)
        outs, h = [], x
        for layer in range(self.model.depth):               # Newton–Schulz: 2 layers a step
            h = self.model.step(h, layer)
            if layer % 2 == 1:
                outs.append(h[:, :, : self.d])              # X_t^T (row tokens)
        return torch.stack(outs, dim=1)                      # (batch, steps, d, d)


def _layer_step(model: nn.Module, h: torch.Tensor, layer: int) -> torch.Tensor:
    """Layer ``layer`` of a LinearTransformer (000 eq. 3.1), LSA (002) or RestrictedLSA (003)
    on tokens h (batch, N, width): the same operations as the model's own forward pass."""
    if isinstance(model, RestrictedLSA):
        return h + model.attn(h, layer)
    if isinstance(model, LinearTransformer | LSA):
        return model.step(h, layer)
    raise TypeError(f"no per-layer step for {type(model).__name__}")


def _sub_model(model: nn.Module, layers: Sequence[int]) -> nn.Module:
    """A copy of a layered model (per-layer parameters stacked along dim 0, MLPs in a
    ``ModuleList``) holding only ``layers``, in that order."""
    sub = copy.deepcopy(model)
    idx = torch.as_tensor(list(layers), dtype=torch.long)
    with torch.no_grad():
        for name, prm in list(model.named_parameters(recurse=False)):
            if prm.shape[0] == model.depth:
                setattr(sub, name, nn.Parameter(prm.detach()[idx].clone()))
    if getattr(model, "mlp", None) is not None:
        sub.mlp = nn.ModuleList(copy.deepcopy(model.mlp[i]) for i in layers)
    sub.depth = len(layers)
    return sub


class _Window(nn.Module):
    """One layer of a layered model as a module of its own, loadable with the weights of any
    of its layers, plus fixed ``tail`` layers applied to a copy of the state for a read-out.

    forward(h (batch, N, width)) -> (h after the layer, read(tail(h after the layer))). The
    layers of :class:`LinearTransformer` / :class:`LSA` / :class:`RestrictedLSA` models share
    one graph, so one export serves every layer."""

    def __init__(self, model: nn.Module, tail: Sequence[int],
                 read: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.sub = _sub_model(model, [0, *tail])
        self.read = read

    def load(self, model: nn.Module, layer: int) -> None:
        """Copy layer ``layer``'s weights of ``model`` into the window's layer (cast to the
        window's dtype, the rounding ``model.to(dtype)`` does)."""
        with torch.no_grad():
            for name, prm in model.named_parameters(recurse=False):
                if prm.shape[0] == model.depth:
                    dst = getattr(self.sub, name)[0]
                    dst.copy_(round_to_dtype(prm[layer], dst.dtype))
            if getattr(model, "mlp", None) is not None:
                for dst, src in zip(self.sub.mlp[0].parameters(), model.mlp[layer].parameters(),
                                    strict=True):
                    dst.copy_(round_to_dtype(src, dst.dtype))

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = _layer_step(self.sub, h, 0)
        r = h
        for layer in range(1, self.sub.depth):
            r = _layer_step(self.sub, r, layer)
        return h, self.read(r)


def layerwise(model: nn.Module, x: torch.Tensor, p: Any,
               read: Callable[[torch.Tensor], torch.Tensor], *, every: int = 1, start: int = 0,
               tail: Sequence[int] = ()) -> list[np.ndarray]:
    """Read-outs of a layered model after layers start + every, start + 2 every, ... (of its
    first depth - len(tail) layers), ``read`` applied after the ``tail`` layers; each read-out
    without its batch axis, as exact values.

    The model runs one layer at a time through a :class:`_Window` loaded with that layer's
    weights: the arithmetic of evaluating the whole model (floats: the model cast to the
    dtype, on x rounded to it; a simulated format: its parameters and x rounded into it, every
    op under its per-op rounding; mpN: the graph interpreter), but in mpN one export of a
    one-layer graph instead of one of the whole model, whose torch.export time (~0.4 s a
    layer) would dominate."""
    model.eval()
    if p.is_simulated:  # parameters rounded into the format once, held in the carrier
        model = prepare_module(copy.deepcopy(model), p)
    window = _Window(model, tail, read).eval()
    h: Any = x
    if p.is_mp:
        prog = mp_program(window, x)

        def run(h: Any) -> Any:
            return prog(h, precision=p)
    elif p.is_simulated:
        mode = simulation(p)  # one stochastic count for the whole trace

        def run(h: Any) -> Any:
            with torch.no_grad(), mode:
                return window(h)
        h = round_tensor(x, p)
    else:
        window = cast_module(window, p.torch_dtype)

        def run(h: Any) -> Any:
            with torch.no_grad():
                return window(h)
        h = round_to_dtype(x, p.torch_dtype)
    outs = []
    for layer in range(model.depth - len(tail)):
        window.load(model, layer)
        h, r = run(h)
        if layer >= start and (layer + 1 - start) % every == 0:
            outs.append(backend_for(p).to_exact(r)[0])
    return outs


class _Block(nn.Module):
    """``k`` BaseConv layers, then the read-out w^T x_q at the last token."""

    def __init__(self, layers: list[nn.Module], q: slice, w: slice) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.q, self.w = q, w

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        for layer in self.layers:
            h = layer(h)
        return h, (h[:, -1, self.q] * h[:, -1, self.w]).sum(-1)


class _Prefix(nn.Module):
    """A BaseConv's input projection and its first layers."""

    def __init__(self, inp: nn.Module, layers: list[nn.Module]) -> None:
        super().__init__()
        self.inp, self.layers = inp, nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return h


def blockwise_mp(model: nn.Module, x: torch.Tensor, p: Any, k: int, blocks: int, q: slice,
                  w: slice, start: int = 0) -> np.ndarray:
    """The read-out after each of ``blocks`` blocks of ``k`` layers of a BaseConv (after its
    first ``start`` layers), in mpN.

    Same arithmetic as interpreting the whole model (each block's weights are loaded from the
    model before it runs), but one export of a k-layer block instead of one of the whole
    model, whose torch.export time dominates (~0.2 s per layer)."""
    block = _Block([copy.deepcopy(layer) for layer in model.layers[start:start + k]], q, w)
    h = mp_program(_Prefix(model.inp, list(model.layers[:start])), x)(x, precision=p)
    prog = mp_program(block, torch.zeros(x.shape[:2] + (model.cfg.width,), dtype=x.dtype))
    outs = []
    for b in range(blocks):
        lo = start + k * b
        with torch.no_grad():
            for dst, src in zip(block.layers, model.layers[lo:lo + k], strict=True):
                dst.load_state_dict(src.state_dict())
        h, r = prog(h, precision=p)
        outs.append(backend_for(p).to_exact(r))
    return np.stack(outs, axis=1)[0]                        # (blocks,)
