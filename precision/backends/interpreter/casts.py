"""The ``keep`` cast policy in the interpreter: values a model computes in a narrower float
dtype are rounded into that dtype.

A model that casts to float32 inside (an RMSNorm's variance, RoPE frequencies, a softmax)
computes those nodes in float32 when PyTorch runs it in float64. The exported graph records
each node's dtype (``node.meta["val"]``, exported from the float64 model); under ``keep`` the
interpreter rounds every such node's result into its dtype, so mpN runs the model as written:
its own float32 islands stay float32, everything else is computed in mpN. Under ``promote``
nothing is rounded (every float is the evaluation precision).

Rounding is one correct rounding (to nearest, ties to even) at the dtype's significand bits
with its exponent range: beyond the largest finite value is +-inf, below the smallest normal
the grid of the subnormals (through the float64 image where that is provably the same, by
exact integer arithmetic where it may not be).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flint
import numpy as np
import torch

from precision.backends.interpreter.complex import MPComplex
from precision.backends.interpreter.core import NEG_INF, POS_INF
from precision.backends.mp_backend import MPArray, exact_array
from precision.backends.torch_backend import round_to_dtype
from precision.precisions import FLOAT_BITS, torch_dtype_of

#: Float dtypes narrower than float64 -> their name in :data:`FLOAT_BITS`; a complex dtype
#: by the float dtype of its parts.
NARROW_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
    torch.complex64: "float32", torch.complex32: "float16",
}


aten = torch.ops.aten

#: Ops that only move, select or copy values: their narrow results are their narrow inputs,
#: already on the dtype's grid, so they are not rounded again.
DATA_MOVEMENT = frozenset({
    aten.view.default, aten._unsafe_view.default, aten.reshape.default,
    aten.permute.default, aten.transpose.int, aten.t.default, aten.expand.default,
    aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.squeeze.default,
    aten.slice.Tensor, aten.select.int, aten.clone.default, aten.alias.default,
    aten.cat.default, aten.stack.default, aten.index.Tensor, aten.gather.default,
    aten.repeat.default, aten.flip.default, aten.split.Tensor, aten.split_with_sizes.default,
    aten.unbind.int, aten.contiguous.default, aten.where.self, aten.index_select.default,
})


def narrow_dtype(node: torch.fx.Node) -> torch.dtype | None:
    """The narrowest float dtype below float64 among a graph node's outputs (None: none)."""
    val = node.meta.get("val")
    vals = val if isinstance(val, list | tuple) else [val]
    found = [v.dtype for v in vals if isinstance(v, torch.Tensor) and v.dtype in NARROW_DTYPES]
    return min(found, key=lambda d: FLOAT_BITS[NARROW_DTYPES[d]]) if found else None


def _rounder(dtype: torch.dtype) -> Any:
    """One arb midpoint -> the nearest value of ``dtype`` (an exact arb), in integer
    arithmetic on its mantissa and exponent (arb's own rounding truncates midpoints)."""
    bits = FLOAT_BITS[NARROW_DTYPES[dtype]]
    info = torch.finfo(torch_dtype_of(NARROW_DTYPES[dtype]))
    largest = flint.arb(float(info.max))
    lowest_quantum = math.frexp(float(info.tiny))[1] - bits  # log2 of the smallest subnormal

    def one(v: Any) -> Any:
        if not v.is_finite() or v.is_zero():
            return v
        man, exp = (int(t) for t in v.man_exp())                # v = man * 2^exp exactly
        quantum = max(exp + abs(man).bit_length() - bits, lowest_quantum)
        if quantum <= exp:
            return v                                            # already on the grid
        shift = quantum - exp
        n, rest = divmod(abs(man), 1 << shift)
        half = 1 << (shift - 1)
        if rest > half or (rest == half and n % 2):
            n += 1
        r = flint.arb((-n if man < 0 else n, quantum))
        if abs(r) > largest:
            return POS_INF if man > 0 else NEG_INF
        return r

    return np.frompyfunc(one, 1, 1), bits


_ROUNDERS: dict[torch.dtype, Any] = {}
_MID = np.frompyfunc(flint.arb.mid, 1, 1)


def _through_float64(f: np.ndarray, dtype: torch.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Entries ``f`` (the float64 images of exact values) rounded into ``dtype`` by numpy /
    the bfloat16 grid, and the mask of those where that double rounding may differ from one
    rounding of the exact value: a float64 image exactly halfway between two neighbours of
    ``dtype`` (monotone rounding puts the exact value on that side of no other tie), or below
    the smallest normal (the subnormal grid), or not finite."""
    name = NARROW_DTYPES[dtype]
    low = 52 - (FLOAT_BITS[name] - 1)                  # dropped significand bits
    bits = f.view(np.uint64) & np.uint64((1 << low) - 1)
    with np.errstate(all="ignore"):
        unsure = (bits == np.uint64(1 << (low - 1))) | ~(np.abs(f) >= torch.finfo(
            torch_dtype_of(name)).tiny) | ~np.isfinite(f)
        if name == "bfloat16":
            rounded = round_to_dtype(torch.from_numpy(f), torch.bfloat16).double().numpy()
        else:
            rounded = f.astype(np.float32 if name == "float32" else np.float16).astype(
                np.float64)
    return rounded, unsure


def map_arrays(value: Any, fn: Callable[[MPArray], MPArray]) -> Any:
    """``value`` (an MPArray, an MPComplex, or a tuple / list of values) with ``fn`` applied
    to every float array in it (the real and imaginary parts of a complex one); other values
    unchanged."""
    if isinstance(value, tuple | list):
        return type(value)(map_arrays(v, fn) for v in value)
    if isinstance(value, MPComplex):
        return MPComplex(fn(value.re), fn(value.im))
    return fn(value) if isinstance(value, MPArray) else value


def round_into(value: Any, dtype: torch.dtype) -> Any:
    """``value`` (an MPArray, an MPComplex, or a tuple / list of values) with every float
    array rounded into ``dtype`` (one of :data:`NARROW_DTYPES`); other values unchanged."""
    return map_arrays(value, lambda a: _round_array(a, dtype))


def _round_array(value: MPArray, dtype: torch.dtype) -> MPArray:
    """One array rounded into ``dtype``. Fast path: through the float64 image (numpy's single
    rounding from float64), exact but for the entries :func:`_through_float64` flags, which
    take the exact integer rounding."""
    if dtype not in _ROUNDERS:
        _ROUNDERS[dtype] = _rounder(dtype)
    ufunc, bits = _ROUNDERS[dtype]
    if bits >= value.prec:
        return value
    # float() of an arb is its midpoint's float64 image, so the radii sums and products
    # keep need not be stripped first; only the unsure entries need their exact midpoints.
    flat = value.a.reshape(-1)
    f = np.fromiter(map(float, flat.tolist()), dtype=np.float64, count=flat.size)
    rounded, unsure = _through_float64(f, dtype)
    out = exact_array(rounded)
    idx = np.nonzero(unsure)[0]
    if idx.size:
        out[idx] = ufunc(_MID(flat[idx]))
    return MPArray(out.reshape(value.shape), value.prec, clean=True,
                   finite=value.finite and bool(np.isfinite(rounded).all()))
