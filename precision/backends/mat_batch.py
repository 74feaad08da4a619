"""A batch of 2-d ``flint.arb_mat``s standing for an (..., m, n) array of arb values.

The form an :class:`~precision.backends.mp_backend.MPArray` keeps between matrix products
(a recurrent state, a running sum of outer products): one ``arb_mat`` per leading index, in C
order, so products, sums, differences, scalings, running sums and moves of whole 2-d slices
run in C on it with no Python object per entry. Every operation here is the arb operation the
object-array form would do entry by entry (``arb_add``, ``arb_sub``, ``arb_mul`` at the
working precision), so the midpoints are the same, bit for bit.

Values are immutable: every operation returns a new batch, and a batch may share its
``arb_mat``s with another (a moved or broadcast batch), which is safe because none is ever
written in place.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import flint
import numpy as np


class MatBatch:
    """``mats[i]`` is the (rows, cols) slice at leading index ``i`` (C order over ``lead``).

    ``exact``: every entry is known to have radius 0 (a product's result, rounded to its
    midpoint); sums, differences and scalings keep arb's radii, as the object form does.
    """

    __slots__ = ("mats", "lead", "rows", "cols", "exact")

    def __init__(self, mats: list[flint.arb_mat], lead: tuple[int, ...], rows: int, cols: int,
                 exact: bool) -> None:
        self.mats = mats
        self.lead = lead
        self.rows = rows
        self.cols = cols
        self.exact = exact

    @property
    def shape(self) -> tuple[int, ...]:
        return self.lead + (self.rows, self.cols)

    # --- conversions ----------------------------------------------------------------
    @classmethod
    def from_entries(cls, a: np.ndarray, exact: bool) -> MatBatch:
        """An object array of arb, shape (..., m, n) with n-d >= 2, as a batch (one bulk C
        conversion per slice, ~0.1 us per entry; the entries are copied exactly)."""
        m, n = a.shape[-2:]
        rows = a.reshape(-1, m * n).tolist()
        return cls([flint.arb_mat(m, n, r) for r in rows], a.shape[:-2], m, n, exact)

    def entries(self) -> np.ndarray:
        """The object array of the entries (radii as they stand), shape :attr:`shape`."""
        flat: list[flint.arb] = []
        for mat in self.mats:
            flat.extend(mat.entries())
        return np.fromiter(flat, dtype=object, count=len(flat)).reshape(self.shape)

    def product_mats(self) -> list[flint.arb_mat]:
        """The slices as a product takes them: their midpoints (radii dropped, one C pass,
        ``arb_mat.mid``), unless every entry is known to be exact.

        The radii must go whatever the product's shape. arb's dot product (the classical
        ``arb_mat`` product of inner dimension 3 and more) and its block algorithm both lower
        the working precision of a result whose operands carry radii to what those radii
        leave certain, so a product of operands with radius 1e-5 at 110 bits comes out with
        ~14 correct digits, not 33. An iterate whose radii grow (a momentum method's sums)
        then loses its digits step by step, and the rounding this backend simulates (each
        product a dot product rounded once to N digits) is no longer the one computed."""
        return self.mats if self.exact else [mat.mid() for mat in self.mats]

    # --- data movement --------------------------------------------------------------
    def lead_index(self) -> np.ndarray:
        """The position of each slice in :attr:`mats`, shape :attr:`lead`."""
        return np.arange(len(self.mats)).reshape(self.lead)

    def regroup(self, index: np.ndarray, transpose: bool = False) -> MatBatch:
        """The slices ``mats[index]`` (any int array of positions: selected, sliced,
        broadcast or permuted leading axes), each transposed when ``transpose``."""
        mats = [self.mats[i] for i in np.asarray(index).reshape(-1).tolist()]
        if transpose:
            return MatBatch([mat.transpose() for mat in mats], tuple(np.shape(index)),
                            self.cols, self.rows, self.exact)
        return MatBatch(mats, tuple(np.shape(index)), self.rows, self.cols, self.exact)

    @staticmethod
    def concatenate(batches: Sequence[MatBatch], axis: int) -> MatBatch:
        """The batches joined along leading axis ``axis`` (same slice shape)."""
        mats: list[flint.arb_mat] = []
        index = []
        for b in batches:
            index.append(b.lead_index() + len(mats))
            mats.extend(b.mats)
        first = batches[0]
        whole = MatBatch(mats, (len(mats),), first.rows, first.cols,
                         all(b.exact for b in batches))
        return whole.regroup(np.concatenate(index, axis=axis))

    # --- arithmetic (call under the working precision) --------------------------------
    def plus(self, other: MatBatch, sign: int) -> MatBatch:
        """``self + other`` (sign 1) or ``self - other`` (sign -1), slice by slice, same
        shape: arb_mat ``+`` / ``-`` is ``arb_add`` / ``arb_sub`` per entry."""
        if sign > 0:
            mats = [x + y for x, y in zip(self.mats, other.mats, strict=True)]
        else:
            mats = [x - y for x, y in zip(self.mats, other.mats, strict=True)]
        return MatBatch(mats, self.lead, self.rows, self.cols, False)

    def scaled(self, factors: list[flint.arb]) -> MatBatch:
        """Slice i times the number ``factors[i]`` (``arb_mul`` per entry)."""
        # ``_scalar_mul_`` is what ``arb_mat * arb`` calls (arb_mat_scalar_mul_arb), without
        # the operator's type dispatch (a third of its cost at 32 x 32)
        mats = [x._scalar_mul_(f) for x, f in zip(self.mats, factors, strict=True)]
        return MatBatch(mats, self.lead, self.rows, self.cols, False)

    def negated(self) -> MatBatch:
        return MatBatch([-x for x in self.mats], self.lead, self.rows, self.cols, self.exact)

    def times(self, other: MatBatch) -> MatBatch:
        """The matrix products slice by slice (same leading shape) of the slices' midpoints,
        each entry a dot product rounded once to its midpoint."""
        mats = [(x * y).mid() for x, y in zip(self.product_mats(), other.product_mats(),
                                               strict=True)]
        return MatBatch(mats, self.lead, self.rows, other.cols, True)

    def outer_times(self, other: MatBatch) -> MatBatch:
        """Outer products slice by slice ((m, 1) times (1, n), same leading shape) of the
        slices as they stand: each entry is ``arb_mul`` of two entries, radii included,
        exactly the entrywise product."""
        mats = [x * y for x, y in zip(self.mats, other.mats, strict=True)]
        return MatBatch(mats, self.lead, self.rows, other.cols, False)

    def running_sum(self, axis: int) -> MatBatch:
        """Cumulative sums along leading axis ``axis``: S_0 = X_0, S_j = S_{j-1} + X_j, each
        sum rounded (numpy's ``add.accumulate`` of the entries, in C per slice)."""
        index = np.moveaxis(self.lead_index(), axis, 0).reshape(self.lead[axis], -1).tolist()
        out = list(self.mats)
        for prev, cur in zip(index, index[1:], strict=False):
            for i, j in zip(prev, cur, strict=True):
                out[j] = out[i] + self.mats[j]
        exact = self.exact and self.lead[axis] <= 1
        return MatBatch(out, self.lead, self.rows, self.cols, exact)


def _private(v: np.ndarray | MatBatch) -> np.ndarray | MatBatch:
    """An operand kept by a pending value: a batch as it is (immutable), an object array as
    a copy (its owner may write into it later)."""
    return np.array(v, dtype=object) if isinstance(v, np.ndarray) else v


def _as_batch(v: np.ndarray | MatBatch, lead: tuple[int, ...]) -> MatBatch:
    """An operand of a pending value as a batch with leading shape ``lead``."""
    b = MatBatch.from_entries(v, False) if isinstance(v, np.ndarray) else v
    return b if b.lead == lead else b.regroup(np.broadcast_to(b.lead_index(), lead))


def _as_entries(v: np.ndarray | MatBatch) -> np.ndarray:
    return v.entries() if isinstance(v, MatBatch) else v


class Pending(ABC):
    """A value not yet computed, held as its operation and operands, which one of two
    consumers computes: :meth:`entries` (the entrywise object-array operation, for an op
    that reads entries) or :meth:`batch` (the ``arb_mat`` operation, for a product, a sum
    with a batch, a running sum). Both are the same arb operation on the same operands,
    so they give the same balls; the batch is kept once computed (it is immutable), so the
    several consumers of one value compute it once."""

    __slots__ = ("shape", "_batch")

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self._batch: MatBatch | None = None

    def batch(self) -> MatBatch:
        """The value as a batch (call under the working precision)."""
        if self._batch is None:
            self._batch = self._compute_batch()
        return self._batch

    def entries(self) -> np.ndarray:
        """The value as an object array (call under the working precision)."""
        return self._batch.entries() if self._batch is not None else self._compute_entries()

    @abstractmethod
    def _compute_batch(self) -> MatBatch:
        """The ``arb_mat`` operation."""

    @abstractmethod
    def _compute_entries(self) -> np.ndarray:
        """The entrywise operation on object arrays."""


class OuterProducts(Pending):
    """x_i y_i^T for each leading index i: ``col`` (..., m, 1) and ``row`` (..., 1, n),
    leading shapes broadcasting, each an object array or a :class:`MatBatch`; entrywise
    products of the object arrays or ``arb_mat`` products of inner dimension 1. A one-term
    product is ``arb_mul`` either way (arb_mat's classical algorithm for an inner dimension
    of at most 2), so both give the same midpoints and radii."""

    __slots__ = ("col", "row")

    def __init__(self, col: np.ndarray | MatBatch, row: np.ndarray | MatBatch) -> None:
        lead = np.broadcast_shapes(col.shape[:-2], row.shape[:-2])
        super().__init__(lead + (col.shape[-2], row.shape[-1]))
        self.col, self.row = _private(col), _private(row)

    def _compute_entries(self) -> np.ndarray:
        return np.asarray(_as_entries(self.col) * _as_entries(self.row), dtype=object)

    def _compute_batch(self) -> MatBatch:
        lead = self.shape[:-2]
        return _as_batch(self.col, lead).outer_times(_as_batch(self.row, lead))


class PendingSum(Pending):
    """``left + right`` (sign 1) or ``left - right`` (sign -1), one shape, one of them a
    :class:`MatBatch` (a product's result) and the other an object array: ``arb_add`` /
    ``arb_sub`` per entry either way (as entries, after reading the batch's entries; as a
    batch, after converting the object array)."""

    __slots__ = ("left", "right", "sign")

    def __init__(self, left: np.ndarray | MatBatch, right: np.ndarray | MatBatch,
                 sign: int) -> None:
        super().__init__(tuple(left.shape))
        self.left, self.right, self.sign = _private(left), _private(right), sign

    def _compute_entries(self) -> np.ndarray:
        left, right = _as_entries(self.left), _as_entries(self.right)
        return np.asarray(left + right if self.sign > 0 else left - right, dtype=object)

    def _compute_batch(self) -> MatBatch:
        lead = self.shape[:-2]
        return _as_batch(self.left, lead).plus(_as_batch(self.right, lead), self.sign)
