"""Values, context and shared helpers of the arbitrary-precision graph interpreter.

Values flowing through an interpreted graph:

* :class:`~precision.backends.mp_backend.MPArray` for floating tensors (arb midpoints),
* :class:`~precision.backends.interpreter.complex.MPComplex` for complex tensors (a pair of
  MPArrays, real and imaginary part),
* numpy ``bool`` / ``int64`` arrays for masks and indices,
* Python scalars, lists and tuples for the rest.

Every op of the table is a function ``op(ctx, *args, **kwargs)``; ``ctx`` carries the
working precision.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import flint
import numpy as np

from precision.backends.mp_backend import MPArray, MPBackend, known_finite, workprec

OpTable = dict[Any, Callable[..., Any]]

_IS_FINITE = flint.arb.is_finite
_MID = np.frompyfunc(flint.arb.mid, 1, 1)

ZERO = flint.arb(0)
ONE = flint.arb(1)
POS_INF = flint.arb("inf")
NEG_INF = flint.arb("-inf")
NAN = flint.arb("nan")


class UnsupportedOpError(NotImplementedError):
    """The graph uses an op (or an op variant) the interpreter does not implement."""


class Ctx:
    """Interpretation context: the backend (precision) and its bit count."""

    def __init__(self, xp: MPBackend) -> None:
        self.xp = xp
        self.prec = xp.prec

    def arr(self, v: Any) -> MPArray:
        """A float operand as an MPArray (numpy bool/int arrays and scalars converted)."""
        if isinstance(v, MPArray):
            return v
        if isinstance(v, np.ndarray):
            if v.dtype == object:
                return self.xp.asarray(v)
            out = self.xp.asarray(v.astype(np.float64))
            out.finite = known_finite(v)
            return out
        c = self.const(v)
        return MPArray(np.array(c, dtype=object), self.prec, finite=c.is_finite())

    def wrap(self, a: Any) -> MPArray:
        """An object array of arb (already at this precision) as an MPArray."""
        return MPArray(np.asarray(a, dtype=object), self.prec)

    def const(self, v: Any) -> flint.arb:
        """A Python number (int, float incl. inf/nan, bool) as an arb rounded at prec."""
        if isinstance(v, flint.arb):
            return v
        if isinstance(v, bool | np.bool_):
            v = int(v)
        if isinstance(v, float | np.floating):
            v = float(v)
            if not math.isfinite(v):
                return NAN if math.isnan(v) else (POS_INF if v > 0 else NEG_INF)
        with workprec(self.prec):
            return (+flint.arb(int(v) if isinstance(v, np.integer) else v)).mid()

    def pi(self) -> flint.arb:
        with workprec(self.prec):
            return flint.arb.pi().mid()

    def filled(self, shape: Sequence[int], value: flint.arb) -> MPArray:
        out = np.empty(tuple(shape), dtype=object)
        out.fill(value)
        return MPArray(out, self.prec, clean=True, finite=value.is_finite())


def is_float(v: Any) -> bool:
    return isinstance(v, MPArray)


def is_integral(v: Any) -> bool:
    """An integer or boolean value: a Python / numpy int or bool, or an int / bool array."""
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "iub"
    return isinstance(v, int | np.integer | np.bool_)


def shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape) if hasattr(x, "shape") else np.shape(x)


def ndim_of(x: Any) -> int:
    return len(shape_of(x))


def map_array(x: Any, fn: Callable[[np.ndarray], np.ndarray]) -> Any:
    """Apply a pure shape operation (reshape, slice, transpose...) to any tensor value."""
    if isinstance(x, MPArray):
        return MPArray(np.asarray(fn(x.a), dtype=object), x.prec, x.clean, x.finite)
    if hasattr(x, "map_parts"):  # MPComplex
        return x.map_parts(lambda p: map_array(p, fn))
    return np.asarray(fn(np.asarray(x)))


def float_result(ctx: Ctx, res: Any) -> Any:
    """numpy arithmetic on ints/bools that produced floats continues as an MPArray."""
    res = np.asarray(res)
    return ctx.arr(res) if res.dtype.kind == "f" else res


def reduce_axes(dims: Any, ndim: int) -> list[int]:
    """Normalised, sorted reduction axes (None or [] means all)."""
    if dims is None or (isinstance(dims, list | tuple) and len(dims) == 0):
        return list(range(ndim))
    if isinstance(dims, int):
        dims = [dims]
    return sorted({d % max(ndim, 1) for d in dims})


def as_float64(x: Any) -> np.ndarray:
    """Any tensor value rounded to float64 (for IEEE fall-backs and integer conversions)."""
    if isinstance(x, MPArray):
        return x.to_float64()
    return np.asarray(x, dtype=np.float64)


def _ieee(v: Any, fallback: Callable[[float], float]) -> flint.arb:
    """``fallback`` (a float64 function) at the float value of ``v``, as an arb."""
    with np.errstate(all="ignore"):
        f = float(fallback(float(v)))
    if math.isnan(f):
        return NAN
    return POS_INF if f == math.inf else NEG_INF if f == -math.inf else flint.arb(f)


def lift(method: Callable[[Any], Any], fallback: Callable[[float], float] | None = None
         ) -> Callable[[Any, Any], MPArray]:
    """An elementwise op from a one-argument arb method, rounded at prec.

    arb returns an indeterminate ball where IEEE arithmetic returns +-inf (log(0),
    exp(inf)); entries whose arb result is not finite are recomputed with ``fallback``
    (the float64 function) on the input's float value, which gives PyTorch's answer there.

    A C method of ``flint.arb`` (``flint.arb.exp``) runs as two numpy object passes (the
    method, then the midpoint) and a finiteness scan, with no Python frame per entry; a
    Python function runs as one pass of ``method(v).mid()``. Same midpoints either way.
    """
    if not isinstance(method, types.FunctionType | types.LambdaType):
        raw = np.frompyfunc(method, 1, 1)

        def apply_c(ctx: Any, x: Any) -> MPArray:
            xa = ctx.arr(x).stripped()
            with workprec(xa.prec):
                res = np.asarray(_MID(raw(xa.a)), dtype=object)
            if fallback is not None:
                flat = res.reshape(-1)
                finite = np.fromiter(map(_IS_FINITE, flat.tolist()), dtype=bool,
                                     count=flat.size)
                if not finite.all():
                    src = xa.a.reshape(-1)
                    for i in np.flatnonzero(~finite).tolist():
                        flat[i] = _ieee(src[i], fallback)
                return MPArray(res, xa.prec, clean=True, finite=bool(finite.all()))
            return MPArray(res, xa.prec, clean=True)

        return apply_c

    def one(v: Any) -> Any:
        r = method(v).mid()
        if r.is_finite() or fallback is None:
            return r
        return _ieee(v, fallback)

    ufunc = np.frompyfunc(one, 1, 1)

    def apply(ctx: Any, x: Any) -> MPArray:
        xa = ctx.arr(x).stripped()
        with workprec(xa.prec), np.errstate(all="ignore"):  # the IEEE fall-back's flags
            res = ufunc(xa.a)
        return MPArray(np.asarray(res, dtype=object), xa.prec, clean=True)

    return apply




def fix_nonfinite(res: MPArray, a: Any, b: Any, op: Callable[[Any, Any], Any]) -> MPArray:
    """Redo the non-finite entries of a binary result with float64 (IEEE) semantics:
    arb turns -inf + 2 or 1 / 0 into indeterminate balls where IEEE gives +-inf. A result
    known finite (:attr:`MPArray.finite`: a sum or product of finite operands) is not
    scanned; one found finite is marked so."""
    if res.finite:
        return res
    flat = res.a.reshape(-1)
    if all(map(_IS_FINITE, flat.tolist())):
        res.finite = True
        return res
    fa = np.broadcast_to(as_float64(a), res.shape).reshape(-1)
    fb = np.broadcast_to(as_float64(b), res.shape).reshape(-1)
    out = flat.copy()
    with np.errstate(all="ignore"):
        for i, v in enumerate(flat):
            if not v.is_finite():
                f = float(op(np.float64(fa[i]), np.float64(fb[i])))
                out[i] = NAN if math.isnan(f) else (
                    POS_INF if f == math.inf else NEG_INF if f == -math.inf else flint.arb(f))
    return MPArray(out.reshape(res.shape), res.prec, clean=res.clean)
