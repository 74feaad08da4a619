"""Arbitrary-precision backend: numpy object arrays of python-flint ``arb`` midpoints.

Semantics are those of mpmath at ``p`` bits: every operation rounds its result to ``p`` bits
(round-to-nearest on the midpoint) and the ball radius arb tracks is dropped, so an ``mpN``
computation behaves like an ``N``-digit floating-point machine, never like interval
arithmetic (whose radii would blow up over thousands of iterations).

Speed: elementwise work runs through numpy's object loops calling arb's C methods
(~0.2 us per operation including radius stripping, vs ~1.3 us for mpmath ``mpf``); matrix
products go through ``flint.arb_mat`` (C, ~0.012 us per multiply-add), never element by
element in Python.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import flint
import numpy as np

from precision.backends.base import Backend
from precision.backends.mat_batch import MatBatch, OuterProducts, Pending, PendingSum
from precision.precisions import Precision

_mid = np.frompyfunc(flint.arb.mid, 1, 1)


class workprec:
    """``flint.ctx.prec = bits`` for a block (``with workprec(256):``) or a function
    (``@workprec(256)``), the caller's precision restored after it, also on an exception
    (mpmath's ``workprec``). Nests; one instance per ``with`` (a decorated function enters a
    fresh one per call). Cheap: it wraps every array operation of this backend."""

    __slots__ = ("bits", "old")

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.old = 0

    def __enter__(self) -> None:
        self.old = flint.ctx.prec
        flint.ctx.prec = self.bits

    def __exit__(self, *exc: object) -> None:
        flint.ctx.prec = self.old

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def at_bits(*args: Any, **kwargs: Any) -> Any:
            with workprec(self.bits):
                return fn(*args, **kwargs)

        return at_bits


def _round_value(x: Any) -> flint.arb:
    """One Python number (int, float, Fraction-like, arb) rounded at the current ctx precision."""
    if isinstance(x, flint.arb):
        return (+x).mid()
    if isinstance(x, bool | np.bool_):
        x = int(x)
    if isinstance(x, np.integer):
        x = int(x)
    if isinstance(x, np.floating):
        x = float(x)
    if isinstance(x, int | float):
        if isinstance(x, float) and not math.isfinite(x):
            return flint.arb("nan") if math.isnan(x) else flint.arb(x)
        return (+flint.arb(x)).mid()
    if hasattr(x, "numerator") and hasattr(x, "denominator"):
        return (flint.arb(int(x.numerator)) / int(x.denominator)).mid()
    if hasattr(x, "man_exp"):  # an mpmath mpf-like value via its string
        return (+flint.arb(str(x))).mid()
    raise TypeError(f"cannot convert {type(x).__name__} to an arbitrary-precision number")


_round_array = np.frompyfunc(_round_value, 1, 1)


def exact_array(values: Any) -> np.ndarray:
    """Numbers that fit a float64 (any float format's values do) as an object array of exact
    ``flint.arb`` values, same shape. No rounding: arb holds every float64 exactly."""
    arr = np.asarray(values, dtype=np.float64)
    out = np.fromiter(map(flint.arb, arr.reshape(-1).tolist()), dtype=object, count=arr.size)
    return out.reshape(arr.shape)


class MPArray:
    """An n-d array of ``arb`` midpoints computing at ``prec`` bits.

    Shape semantics follow numpy (broadcasting, slicing, ``.T``); indexing down to a single
    entry returns a 0-d :class:`MPArray` that behaves like a number (``float()``, ``<``).

    Two forms, one at a time: an object array :attr:`a` of arb, or a batch of 2-d
    ``arb_mat``s (:class:`~precision.backends.mat_batch.MatBatch`): the result of a matrix
    product, and what ``+``, ``-``, scaling by a number per 2-d slice, running sums
    (:func:`~precision.backends.interpreter.reductions.cumulative`) and moves of whole 2-d
    slices make of it, all in C with no Python object per entry. An outer product (a matrix
    product with inner dimension 1, or the broadcast product of a column and a row) and the
    sum of a batch and an object array are held pending
    (:class:`~precision.backends.mat_batch.Pending`) until a consumer picks the form.
    Reading :attr:`a` converts once (~0.1-0.25 us per entry) and drops the batch, so the
    object array can be written in place as before. Either form holds the same arb values,
    so every result is the same, bit for bit.
    """

    __slots__ = ("_a", "_batch", "prec", "clean", "finite")
    __array_priority__ = 1000  # numpy defers to our operators

    def __init__(self, a: np.ndarray, prec: int, clean: bool = False,
                 finite: bool = False) -> None:
        self._a: np.ndarray | None = a
        self._batch: MatBatch | Pending | None = None
        self.prec = prec
        self.clean = clean  # True: every entry is known to have radius 0
        # True: every entry is known to be finite (False: not known). Sums, differences and
        # products of finite arb values are finite (arb's exponents do not overflow), so
        # they skip the scan for IEEE infinities their results would otherwise need.
        self.finite = finite

    @classmethod
    def of_batch(cls, batch: MatBatch | Pending, prec: int, finite: bool) -> MPArray:
        """An array held as a batch of ``arb_mat``s or as a pending value."""
        out = cls.__new__(cls)
        out._a, out._batch = None, batch
        out.prec, out.finite = prec, finite
        out.clean = isinstance(batch, MatBatch) and batch.exact
        return out

    @property
    def a(self) -> np.ndarray:
        """The entries as an object array of arb (converted from the batch form on first
        read, which then drops the batch)."""
        if self._a is None:
            with workprec(self.prec):
                self._a = self._batch.entries()  # type: ignore[union-attr]
            self._batch = None
        return self._a

    @a.setter
    def a(self, value: np.ndarray) -> None:
        self._a, self._batch = value, None

    @property
    def batch(self) -> MatBatch | None:
        """The ``arb_mat`` batch this array is held as, or None (an object array or a pending
        value)."""
        return self._batch if isinstance(self._batch, MatBatch) else None

    @property
    def batchable(self) -> bool:
        """Held as a batch or as a pending value (a batch at C cost)."""
        return self._batch is not None

    def as_batch(self) -> MatBatch:
        """This array (n-d >= 2) as a batch of ``arb_mat``s: its own (a pending value
        computed by ``arb_mat`` and kept), or converted from :attr:`a` (not kept: :attr:`a`
        may be written in place)."""
        if isinstance(self._batch, MatBatch):
            return self._batch
        if self._batch is not None:
            with workprec(self.prec):
                self._batch = self._batch.batch()
            return self._batch
        return MatBatch.from_entries(self.a, self.clean)

    def stripped(self) -> MPArray:
        """This array with the ball radii dropped (in place; the midpoints are unchanged).

        Sums, differences and products keep arb's radii (their midpoints do not depend on
        them), which saves a pass over the data; comparisons, transcendental functions and
        conversions call this first so they see exact midpoints.
        """
        if not self.clean:
            with workprec(self.prec):
                self.a = np.asarray(_mid(self.a), dtype=object) if self.a.ndim else np.array(
                    self.a[()].mid(), dtype=object)
            self.clean = True
        return self

    # --- shape ------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape if self._a is not None else self._batch.shape  # type: ignore

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._a.size if self._a is not None else math.prod(self.shape)

    def __len__(self) -> int:
        return len(self._a) if self._a is not None else self.shape[0]

    @property
    def T(self) -> MPArray:  # noqa: N802 - numpy spelling
        return MPArray(self.a.T, self.prec, self.clean, self.finite)

    def reshape(self, *shape: int) -> MPArray:
        return MPArray(self.a.reshape(*shape), self.prec, self.clean, self.finite)

    def __getitem__(self, idx: Any) -> MPArray:
        item = self.a[idx]
        if not isinstance(item, np.ndarray):
            item = np.array(item, dtype=object)
        return MPArray(item, self.prec, self.clean, self.finite)

    def __setitem__(self, idx: Any, value: Any) -> None:
        if isinstance(value, MPArray) and not value.clean:
            value.stripped()
        self.finite = self.finite and known_finite(value)
        self.a[idx] = self._coerce(value)

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i in range(len(self.a)):
            yield self[i]

    # --- conversions -------------------------------------------------------------
    def _coerce(self, other: Any) -> Any:
        """An operand as an object array / arb at this precision."""
        if isinstance(other, MPArray):
            return other.a[()] if other.a.ndim == 0 else other.a
        with workprec(self.prec):
            if isinstance(other, np.ndarray):
                return _round_array(other.astype(object)) if other.ndim else _round_value(
                    other.item()
                )
            return _round_value(other)

    def __float__(self) -> float:
        self.stripped()
        if self.a.size != 1:
            raise TypeError("only single-entry arrays convert to float")
        return float(self.a.reshape(-1)[0])

    def __bool__(self) -> bool:
        self.stripped()
        if self.a.size != 1:
            raise ValueError("the truth value of an array with more than one entry is ambiguous")
        return bool(self.a.reshape(-1)[0] != 0)

    def to_float64(self) -> np.ndarray:
        """Entries rounded to float64 (numpy)."""
        self.stripped()
        return np.fromiter(map(float, self.a.reshape(-1).tolist()), dtype=np.float64,
                           count=self.a.size).reshape(self.a.shape)

    def to_exact_numpy(self) -> np.ndarray:
        """The exact arb entries (a copy of the object array)."""
        return self.stripped().a.copy()

    def __repr__(self) -> str:
        return f"MPArray(prec={self.prec}, shape={self.shape}, {self.to_float64()!r})"

    # --- arithmetic ---------------------------------------------------------------
    def _binary(
        self, other: Any, op: Callable[[Any, Any], Any], reflected: bool = False,
        exact_mid: bool = True, kind: str = "",
    ) -> MPArray:
        """Elementwise ``op`` rounded at ``prec``. ``exact_mid``: the result's midpoint does
        not depend on input radii (+, -, *), so radii are kept and stripped lazily.
        ``kind`` ("+", "-", "*"): the op, for the ``arb_mat`` batch form
        (:func:`batch_binary`)."""
        if kind and (self._batch is not None or isinstance(other, MPArray) and (
                other._batch is not None or kind == "*")):
            res = batch_binary(self, other, kind, reflected)
            if res is not None:
                return res
        if not exact_mid:
            self.stripped()
            if isinstance(other, MPArray):
                other.stripped()
        b = self._coerce(other)
        with workprec(self.prec):
            res = op(b, self.a) if reflected else op(self.a, b)
            if not exact_mid:
                res = _mid(res) if isinstance(res, np.ndarray) else res.mid()
        if not isinstance(res, np.ndarray):
            res = np.array(res, dtype=object)
        elif res.dtype != object:
            res = res.astype(object)
        return MPArray(res, self.prec, clean=not exact_mid,
                       finite=exact_mid and self.finite and known_finite(other))

    def __add__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x + y, kind="+")

    def __radd__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x + y, reflected=True, kind="+")

    def __sub__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x - y, kind="-")

    def __rsub__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x - y, reflected=True, kind="-")

    def __mul__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x * y, kind="*")

    def __rmul__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x * y, reflected=True, kind="*")

    def __truediv__(self, o: Any) -> MPArray:
        res = self._binary(o, lambda x, y: x / y, exact_mid=False)
        # finite / a finite nonzero number (a mean's count) is finite
        res.finite = self.finite and isinstance(o, int | float) and o != 0 and math.isfinite(o)
        return res

    def __rtruediv__(self, o: Any) -> MPArray:
        return self._binary(o, lambda x, y: x / y, reflected=True, exact_mid=False)

    def __pow__(self, k: int) -> MPArray:
        if not isinstance(k, int):
            raise TypeError("MPArray supports integer powers only")
        return self._binary(k, lambda x, y: x**y, exact_mid=False)

    def __neg__(self) -> MPArray:
        # python-flint rounds even unary minus to ctx.prec, so it needs our precision too.
        with workprec(self.prec):
            if self.batch is not None:
                return MPArray.of_batch(self.batch.negated(), self.prec, self.finite)
            return MPArray(np.asarray(-self.a, dtype=object), self.prec, self.clean,
                           self.finite)

    def __pos__(self) -> MPArray:
        return self

    def __abs__(self) -> MPArray:
        with workprec(self.prec):
            return MPArray(np.asarray(np.abs(self.a), dtype=object), self.prec, self.clean,
                           self.finite)

    def _cmp(self, o: Any, op: Callable[[Any, Any], Any]) -> Any:
        self.stripped()
        if isinstance(o, MPArray):
            o.stripped()
        b = self._coerce(o)
        res = op(self.a, b)
        return bool(res) if not isinstance(res, np.ndarray) or res.ndim == 0 else res

    def __lt__(self, o: Any) -> Any:
        return self._cmp(o, lambda x, y: x < y)

    def __le__(self, o: Any) -> Any:
        return self._cmp(o, lambda x, y: x <= y)

    def __gt__(self, o: Any) -> Any:
        return self._cmp(o, lambda x, y: x > y)

    def __ge__(self, o: Any) -> Any:
        return self._cmp(o, lambda x, y: x >= y)

    # --- matrix products through arb_mat (C speed) ----------------------------------
    def __matmul__(self, other: Any) -> MPArray:
        if not isinstance(other, MPArray):
            other = MPArray(
                np.asarray(self._coerce(np.asarray(other, dtype=np.float64))), self.prec
            )
        return matmul(self, other)

    def __rmatmul__(self, other: Any) -> MPArray:
        left = MPArray(np.asarray(self._coerce(np.asarray(other, dtype=np.float64))), self.prec)
        return matmul(left, self)


def matmul(x: MPArray, y: MPArray) -> MPArray:
    """numpy ``matmul`` semantics (1-d, 2-d, batched) with each 2-d product in ``arb_mat``.

    Every output entry is a dot product computed by arb at ``prec`` bits and rounded once to
    its midpoint, like a BLAS dot product with a higher-precision accumulator. The result is
    held as its batch of ``arb_mat``s (:attr:`MPArray.batch`); an operand held so is used as
    it is. An outer product (inner dimension 1) of finite operands is held as its factors
    (:class:`~precision.backends.mat_batch.OuterProducts`): one product per entry, which
    the entrywise products and the ``arb_mat`` product both give rounded once.
    """
    prec = max(x.prec, y.prec)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul: 0-d operand (use *)")
    xv, yv = x.ndim == 1, y.ndim == 1
    a = x if not xv else MPArray(x.a.reshape(1, -1), x.prec, x.clean, x.finite)
    b = y if not yv else MPArray(y.a.reshape(-1, 1), y.prec, y.clean, y.finite)
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"matmul: shapes {x.shape} and {y.shape} do not align")
    finite = x.finite and y.finite
    if a.shape[-1] == 1 and not (xv or yv) and finite:
        return MPArray.of_batch(OuterProducts(_factor(a), _factor(b)), prec, True)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    with workprec(prec):
        left, right = _broadcast(a.as_batch(), batch), _broadcast(b.as_batch(), batch)
        prod = left.times(right)
    out = MPArray.of_batch(prod, prec, finite)
    if xv or yv:
        res = out.a[..., 0, :] if xv else out.a
        res = res[..., 0] if yv else res
        return MPArray(np.asarray(res, dtype=object), prec, clean=True, finite=finite)
    return out


def _factor(v: MPArray) -> np.ndarray | MatBatch:
    """An outer product's factor as it is held: its batch, or its object array."""
    return v.batch if v.batch is not None else v.a


def _broadcast(b: MatBatch, lead: tuple[int, ...]) -> MatBatch:
    """``b`` with its leading axes broadcast to ``lead`` (slices shared, not copied)."""
    return b if b.lead == lead else b.regroup(np.broadcast_to(b.lead_index(), lead))


def _per_slice(v: Any, x: MPArray) -> list[flint.arb] | None:
    """The number each 2-d slice of ``x`` (n-d >= 2) is multiplied by in ``v * x``: ``v`` a
    Python number, an arb, or an MPArray whose last two axes have size 1 and whose shape
    broadcasts to ``x``'s; None otherwise."""
    n = math.prod(x.shape[:-2])
    if isinstance(v, int | float | flint.arb | np.integer | np.floating):
        return [x._coerce(v)] * n
    if not isinstance(v, MPArray) or v.ndim > x.ndim:
        return None
    shape = (1,) * (x.ndim - v.ndim) + v.shape
    lead = x.shape[:-2]
    if shape[-2:] != (1, 1) or np.broadcast_shapes(shape[:-2], lead) != lead:
        return None
    return np.broadcast_to(v.a.reshape(shape[:-2]), lead).reshape(-1).tolist()


def batch_binary(x: MPArray, other: Any, kind: str, reflected: bool) -> MPArray | None:
    """``x (kind) other`` (``kind`` "+", "-" or "*"; ``other (kind) x`` when ``reflected``)
    in the batch form, or None where it does not apply (the object arrays then do it).

    Applies to operands known finite (IEEE infinities need the entrywise fix-up) and n-d
    >= 2: ``+`` / ``-`` of two arrays of one shape, one of them held as a batch
    (``arb_mat`` ``+`` / ``-``: ``arb_add`` / ``arb_sub`` per entry; with an object array,
    held pending, :class:`~precision.backends.mat_batch.PendingSum`, since converting it
    only pays where the result stays a batch); ``*`` of an array held as a batch (or
    pending outer products) by a number per 2-d slice (a constant, or beta of shape
    (B, 1, 1) times a (B, W, W) state: ``arb_mul`` per entry); and ``*`` of a column
    (..., m, 1) by a row (..., 1, n), held as pending outer products.
    """
    if not (x.finite and known_finite(other)):
        return None
    y = other if isinstance(other, MPArray) else None
    if kind != "*":
        if y is None or y.shape != x.shape or x.ndim < 2:
            return None
        left, right = (y, x) if reflected else (x, y)
        sign = 1 if kind == "+" else -1
        if left.batch is None and right.batch is None:
            return None
        if left.batchable and right.batchable:
            with workprec(x.prec):
                res = left.as_batch().plus(right.as_batch(), sign)
            return MPArray.of_batch(res, x.prec, True)
        # a batch and an object array: the consumer picks the form
        pending = PendingSum(_factor(left), _factor(right), sign)
        return MPArray.of_batch(pending, x.prec, True)
    for mat, num in ((x, other), (y, x)):
        if mat is not None and mat.ndim >= 2 and (mat.batch is not None or isinstance(
                mat._batch, OuterProducts)):
            factors = _per_slice(num, mat)
            if factors is not None:
                with workprec(x.prec):
                    res = mat.as_batch().scaled(factors)
                return MPArray.of_batch(res, x.prec, True)
    if y is None or y.ndim != x.ndim or x.ndim < 2 or isinstance(x._batch, Pending) or (
            isinstance(y._batch, Pending)):
        return None
    for col, row in ((x, y), (y, x)):
        if col.shape[-1] == 1 and row.shape[-2] == 1 and col.shape[-2] * row.shape[-1] > 1:
            try:
                np.broadcast_shapes(col.shape[:-2], row.shape[:-2])
            except ValueError:
                return None
            return MPArray.of_batch(OuterProducts(_factor(col), _factor(row)), x.prec, True)
    return None


def known_finite(v: Any) -> bool:
    """Whether ``v`` (an MPArray, a number, an arb or a numpy array) is known to hold only
    finite values (an MPArray by its ``finite`` flag; False: not known)."""
    if isinstance(v, MPArray):
        return v.finite
    if isinstance(v, bool | int | np.integer | np.bool_):
        return True
    if isinstance(v, float | np.floating):
        return math.isfinite(v)
    if isinstance(v, flint.arb):
        return v.is_finite()
    if isinstance(v, np.ndarray) and v.dtype != object:
        return v.dtype.kind in "iub" or (v.dtype.kind == "f" and bool(np.isfinite(v).all()))
    return False


def elementwise(method: Callable[[Any], Any]) -> Callable[[MPArray], MPArray]:
    """Lift a one-argument arb function (``flint.arb.exp``, ...) to MPArrays, rounded at prec."""
    ufunc = np.frompyfunc(lambda v: method(v).mid(), 1, 1)

    def apply(x: MPArray) -> MPArray:
        x.stripped()
        with workprec(x.prec):
            res = ufunc(x.a)
        if not isinstance(res, np.ndarray):
            res = np.array(res, dtype=object)
        return MPArray(res, x.prec, clean=True)

    return apply


_sqrt = elementwise(flint.arb.sqrt)
_exp = elementwise(flint.arb.exp)
_log = elementwise(flint.arb.log)


class MPBackend(Backend):
    """Array namespace over :class:`MPArray` at the precision's bit count."""

    def __init__(self, precision: Precision) -> None:
        self.precision = precision
        self.prec = precision.bits

    def asarray(self, data: Any) -> MPArray:
        if isinstance(data, MPArray):
            src = data.a
        elif hasattr(data, "detach"):  # a torch tensor: its float64 image is exact
            import torch

            src = data.detach().to(torch.float64).numpy()
        else:
            src = np.asarray(data)
            if src.dtype != object:
                src = src.astype(np.float64)
        with workprec(self.prec):
            if src.ndim == 0:
                res = np.array(_round_value(src.item() if src.dtype != object else src[()]),
                               dtype=object)
            else:
                res = _round_array(src.astype(object))
        return MPArray(np.asarray(res, dtype=object), self.prec, clean=True)

    def zeros(self, shape: tuple[int, ...] | int) -> MPArray:
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        out = np.empty(shape, dtype=object)
        out.fill(flint.arb(0))
        return MPArray(out, self.prec, clean=True)

    def eye(self, n: int) -> MPArray:
        out = self.zeros((n, n))
        for i in range(n):
            out.a[i, i] = flint.arb(1)
        return out

    def copy(self, a: MPArray) -> MPArray:
        return MPArray(a.a.copy(), a.prec, a.clean, a.finite)

    def sqrt(self, a: MPArray) -> MPArray:
        return _sqrt(a)

    def exp(self, a: MPArray) -> MPArray:
        return _exp(a)

    def log(self, a: MPArray) -> MPArray:
        return _log(a)

    def abs(self, a: MPArray) -> MPArray:
        return abs(a)

    def sum(self, a: MPArray, axis: int | None = None) -> MPArray:
        # Sequential summation through numpy's object reduce (each add rounded at prec, as
        # a floating-point machine would); ~3x faster than a product with a ones vector.
        src = a.a.reshape(-1) if axis is None else a.a
        if src.shape[0 if axis is None else axis] == 0:
            shape = () if axis is None else tuple(np.delete(a.shape, axis))
            return self.zeros(shape)
        with workprec(a.prec):
            res = np.add.reduce(src, axis=0 if axis is None else axis)
        return MPArray(np.asarray(res, dtype=object), a.prec)

    def max(self, a: MPArray) -> MPArray:
        flat = a.stripped().a.reshape(-1)
        best = flat[0]
        for v in flat[1:]:
            if v > best:
                best = v
        return MPArray(np.array(best, dtype=object), a.prec)

    def outer(self, a: MPArray, b: MPArray) -> MPArray:
        return MPArray(a.a.reshape(-1, 1), a.prec) * MPArray(b.a.reshape(1, -1), b.prec)

    def diag(self, a: MPArray) -> MPArray:
        if a.ndim == 1:
            out = self.zeros((a.size, a.size))
            for i in range(a.size):
                out.a[i, i] = a.a[i]
            return out
        return MPArray(np.array(np.diagonal(a.a)), a.prec)

    def to_float(self, a: MPArray) -> float:
        return float(a)

    def to_numpy(self, a: MPArray) -> np.ndarray:
        return a.to_float64()

    def to_exact(self, a: MPArray) -> np.ndarray:
        return a.to_exact_numpy()

    def isfinite(self, a: MPArray) -> bool:
        return all(v.is_finite() for v in a.stripped().a.reshape(-1))
