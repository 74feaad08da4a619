"""Kernel-independent numerics for generating data: the same float64 values on every machine.

A BLAS product (``X @ w``, a QR, a Cholesky, an eigen-decomposition) sums in an order chosen
by the library's kernel for this CPU and by its thread count, and numpy's transcendental
ufuncs (``exp``, ``log10``, ``power``) dispatch to SIMD code that may differ in the last bit
from the scalar code. Problem data built with them differ between machines, and so do the
mpN digits measured on them. Every generator of problem data (:mod:`precision.problems`,
the trained tasks, the studies' data, the constructions' step sizes) computes through this
module instead, whose every result is defined by IEEE-754 binary64 arithmetic alone:

* random draws come from numpy's ``Generator`` (PCG64; ``standard_normal``, ``random``,
  ``integers``), which is plain C compiled once, with no CPU dispatch;
* a sum is :func:`tree_sum`: pairwise, in a fixed tree (element ``i`` plus element
  ``i + h`` at each level), made of elementwise additions only, each of them correctly rounded
  whatever vector unit computes it; products are elementwise multiplications;
* square roots and divisions are IEEE operations (correctly rounded everywhere);
* a transcendental value (a power, a tanh) is evaluated in certified ball arithmetic
  (python-flint ``arb``, integer software) at :data:`BITS` bits and rounded to the nearest
  float64; the eigenvalues of a symmetric matrix come from Jacobi rotations made of
  elementwise operations (:func:`eigvalsh`).

What this does not cover: the rare tail and wedge cases of numpy's ziggurat normal sampler
call the C library's ``exp``/``log1p`` (the same library on one machine, whatever the
kernel); a platform whose compiler fuses ``a * b + c`` inside numpy's sampler would need
checking (x86-64 builds do not fuse).

:data:`DATA_VERSION` names this way of generating data; every stored run records it (and its
id hashes it), so a run computed from data of another version is never reused or mixed.
"""

from __future__ import annotations

import math

import flint
import numpy as np
import torch

#: Version of the data every generator produces. 1: float64 BLAS/LAPACK and torch sampling
#: (machine-dependent, before this module); 2: the kernel-independent numerics of this module.
DATA_VERSION = 2

#: Working precision (bits) of the ball-arithmetic evaluations before rounding to float64.
BITS = 160

#: Most entries of one elementwise-product block in :func:`matmul` (bounds its memory).
_BLOCK = 1 << 22


def tree_sum(a: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sum of ``a`` along ``axis`` in a fixed pairwise tree: at each level the first half plus
    the second half (an odd last element carried up unchanged). Elementwise IEEE additions
    only, so the result is the same on every CPU, kernel and thread count. An empty axis sums
    to 0."""
    x = np.asarray(a, dtype=np.float64)
    if axis % max(x.ndim, 1):
        x = np.moveaxis(x, axis, 0)
    x = np.ascontiguousarray(x)
    if x.shape[0] == 0:
        return np.zeros(x.shape[1:])
    while x.shape[0] > 1:
        half = x.shape[0] // 2
        s = x[:half] + x[half:2 * half]
        x = np.concatenate([s, x[2 * half:]], axis=0) if x.shape[0] % 2 else s
    return x[0].copy()


def prefix_sum(a: np.ndarray, axis: int) -> np.ndarray:
    """Running sums along ``axis``, left to right (``numpy.cumsum``'s order, one elementwise
    addition per step: fast for a short axis of long rows)."""
    x = np.moveaxis(np.array(a, dtype=np.float64), axis, 0)
    for i in range(1, x.shape[0]):
        x[i] += x[i - 1]
    return np.moveaxis(x, 0, axis)


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Dot products along the last axis (broadcast): ``tree_sum(a * b, -1)``."""
    return tree_sum(np.asarray(a, dtype=np.float64) * np.asarray(b, dtype=np.float64), -1)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for a (..., n, k) and b (..., k, m) (or b (k,): a matrix-vector product), each
    entry a :func:`tree_sum` of elementwise products; blocks of rows bound the memory."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if b.ndim == 1:
        return dot(a, b)
    if a.ndim == 1:
        return tree_sum(a[:, None] * b, axis=-2)
    n, k, m = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), dtype=np.int64))
    rows = max(1, _BLOCK // max(1, batch * k * m))
    parts = [tree_sum(a[..., i:i + rows, :, None] * b[..., None, :, :], axis=-2)
             for i in range(0, n, rows)]
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=-2)


def orthonormal_columns(g: np.ndarray) -> np.ndarray:
    """The Q of the QR decomposition of ``g`` (n, k), n >= k, full column rank, whose R has a
    positive diagonal: classical Gram-Schmidt with one re-orthogonalisation (orthogonal to
    about the float64 epsilon), every inner product a :func:`tree_sum`."""
    g = np.asarray(g, dtype=np.float64)
    n, k = g.shape
    q = np.empty((n, k))
    for j in range(k):
        v = g[:, j].copy()
        for _ in range(2 if j else 0):
            basis = q[:, :j]
            r = tree_sum(basis * v[:, None], axis=0)
            v = v - tree_sum(basis * r[None, :], axis=1)
        q[:, j] = v / np.sqrt(tree_sum(v * v))
    return q


def lstsq(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least-squares weights w (batch, D) of X (batch, N, D), y (batch, N), N >= D, full
    column rank: X = Q R by classical Gram-Schmidt with one re-orthogonalisation (as
    :func:`orthonormal_columns`, batched), then R w = Q^T y by back substitution. Inner
    products over the N rows are tree sums (:func:`tree_sum`); sums over columns (at most D terms)
    go left to right. Elementwise IEEE operations only, so the same bits whatever the memory
    address, kernel or thread count (LAPACK's ``gelsd`` differs in the last bits between
    calls on differently aligned copies of the same X). Backward stable as Householder QR."""
    A = np.ascontiguousarray(np.moveaxis(np.asarray(X, dtype=np.float64), 1, 0))  # (N, b, D)
    yt = np.ascontiguousarray(np.asarray(y, dtype=np.float64).T)                   # (N, b)
    d = A.shape[2]
    Q = np.empty_like(A)
    R = np.zeros((A.shape[1], d, d))

    def combine(r: np.ndarray, j: int) -> np.ndarray:      # Q[:, :, :j] r, left to right
        acc = Q[:, :, 0] * r[None, :, 0]
        for i in range(1, j):
            acc = acc + Q[:, :, i] * r[None, :, i]
        return acc

    for j in range(d):
        v = A[:, :, j].copy()
        for _ in range(2 if j else 0):
            r = tree_sum(Q[:, :, :j] * v[:, :, None], axis=0)          # (b, j)
            v = v - combine(r, j)
            R[:, :j, j] += r
        R[:, j, j] = np.sqrt(tree_sum(v * v, axis=0))
        Q[:, :, j] = v / R[None, :, j, j]
    c = tree_sum(Q * yt[:, :, None], axis=0)                             # Q^T y (b, D)
    w = np.zeros((A.shape[1], d))
    for i in range(d - 1, -1, -1):
        rest = np.zeros(A.shape[1])
        for k in range(i + 1, d):
            rest = rest + R[:, i, k] * w[:, k]
        w[:, i] = (c[:, i] - rest) / R[:, i, i]
    return w


def orthonormal(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """n x k matrix with orthonormal columns, Haar-distributed: :func:`orthonormal_columns` of
    an n x k standard Gaussian matrix drawn from ``rng``."""
    return orthonormal_columns(rng.standard_normal((n, k)))


def tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` as a torch tensor in torch's own memory (a copy, 64-byte aligned). numpy aligns
    its arrays to 16 bytes only, and a BLAS kernel's float result can depend on where its
    operands start: the same values at two addresses gave other last bits (measured: a
    float64 Transformer's forward, the product ``u H``). Data that reach a model go through
    here, so a run's float numbers do not depend on the state of the heap."""
    return torch.from_numpy(np.ascontiguousarray(a)).clone()


def rng_from(gen: torch.Generator) -> np.random.Generator:
    """A numpy ``Generator`` (PCG64) seeded by two 62-bit integers drawn from the torch
    generator ``gen`` (integer draws: the same whatever the CPU kernel), so a stream of batches
    drawn from one seeded torch generator is the same on every machine, while torch's own
    samplers (whose vectorised paths depend on the CPU capability) are never used for data."""
    words = torch.randint(0, 2**62, (2,), generator=gen, dtype=torch.int64)
    return np.random.default_rng(words.tolist())


def uniform(rng: np.random.Generator, low: float, high: float,
            size: int | tuple[int, ...] | None = None) -> np.ndarray | float:
    """Uniform draws on [low, high): ``low + (high - low) * u`` with u from ``rng.random`` (two
    separate IEEE operations, never fused)."""
    u = rng.random(size)
    if size is None:
        return float(low) + (float(high) - float(low)) * float(u)
    return float(low) + (float(high) - float(low)) * u


def _nearest(x: flint.arb) -> float:
    """The float64 nearest to the midpoint of ``x`` (computed at :data:`BITS` bits)."""
    return float(x.mid())


def _ball(x: float | tuple[int, int]) -> flint.arb:
    """A float (exactly) or an exact fraction ``(p, q)`` as a ball."""
    if isinstance(x, tuple):
        return flint.arb(flint.fmpq(int(x[0]), int(x[1])))
    return flint.arb(float(x))


def power(base: float, exponent: float | tuple[int, int], scale: float = 1.0) -> float:
    """``scale * base ** exponent`` (base > 0) rounded to float64 from a :data:`BITS`-bit
    evaluation; ``exponent`` a float or an exact fraction ``(p, q)``."""
    old = flint.ctx.prec
    flint.ctx.prec = BITS
    try:
        e = _ball(exponent)
        if e.is_zero():
            return float(scale)
        return _nearest(flint.arb(float(scale)) * (flint.arb(float(base)).log() * e).exp())
    finally:
        flint.ctx.prec = old


def geometric(base: float, stop: tuple[int, int], count: int) -> np.ndarray:
    """``count`` log-spaced values ``base ** (stop * i / (count - 1))``, i = 0 .. count - 1
    (``stop`` an exact fraction ``(p, q)``; like ``numpy.logspace``), each rounded to float64
    from a :data:`BITS`-bit evaluation; ``[1.0]`` when count is 1."""
    if count == 1:
        return np.ones(1)
    p, q = stop
    return np.array([power(base, (p * i, q * (count - 1))) for i in range(count)])


def eigvalsh(h: np.ndarray, max_sweeps: int = 60) -> np.ndarray:
    """Eigenvalues (ascending) of the symmetric part of ``h``: cyclic Jacobi rotations in the
    round-robin (Brent-Luk) order, the n/2 disjoint rotations of a round applied at once, in
    elementwise IEEE operations only (no LAPACK): the same on every machine, accurate to a
    few units of the float64 epsilon times the matrix norm; O(n^3) per sweep, vectorised."""
    a = np.asarray(h, dtype=np.float64)
    a = (a + a.T) / 2
    n = a.shape[0]
    if n == 1:
        return a[0].copy()
    top = float(np.max(np.abs(a)))
    if not math.isfinite(top):
        raise ValueError("eigvalsh needs a finite matrix")
    if top == 0.0:
        return np.zeros(n)
    scale = math.ldexp(1.0, -math.frexp(top)[1])    # a power of two: exact, undone at the end
    a = a * scale
    m = n + n % 2                      # an even count: index n is a dummy (no rotation)
    order = list(range(m))
    total = float(tree_sum((a * a).ravel()))
    for _ in range(max_sweeps):
        diag = np.diagonal(a)
        off = total - float(tree_sum(diag * diag)) if total else 0.0
        if not off > (1e-32 * total):  # off-diagonal mass below the rounding of the diagonal
            break
        for _ in range(m - 1):
            pairs = [(min(order[i], order[m - 1 - i]), max(order[i], order[m - 1 - i]))
                     for i in range(m // 2)]
            pairs = [pq for pq in pairs if pq[1] < n]
            p = np.array([pq[0] for pq in pairs])
            q = np.array([pq[1] for pq in pairs])
            c, s_ = _rotations(a[p, p], a[q, q], a[p, q])
            ap, aq = a[p, :], a[q, :]
            a[p, :] = c[:, None] * ap - s_[:, None] * aq
            a[q, :] = s_[:, None] * ap + c[:, None] * aq
            ap, aq = a[:, p], a[:, q]
            a[:, p] = c[None, :] * ap - s_[None, :] * aq
            a[:, q] = s_[None, :] * ap + c[None, :] * aq
            order = [order[0], order[-1], *order[1:-1]]
        total = float(tree_sum((a * a).ravel()))
    return np.sort(np.diagonal(a) / scale)


def _rotations(app: np.ndarray, aqq: np.ndarray, apq: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Cosines and sines of the Jacobi rotations that zero a_pq (Rutishauser's formulas:
    theta = (a_qq - a_pp) / (2 a_pq), t = sign(theta) / (|theta| + sqrt(theta^2 + 1)));
    no rotation where a_pq is 0."""
    zero = apq == 0
    with np.errstate(over="ignore", divide="ignore"):
        theta = (aqq - app) / (2.0 * np.where(zero, 1.0, apq))
    big = np.abs(theta) > 1e150         # theta^2 would overflow: t = 1 / (2 theta)
    tame = np.where(big, 1.0, theta)
    t = np.where(big, 0.5 / np.where(big, theta, 1.0),
                 np.where(theta < 0, -1.0, 1.0) / (np.abs(tame) + np.sqrt(tame * tame + 1.0)))
    c = 1.0 / np.sqrt(t * t + 1.0)
    s = t * c
    return np.where(zero, 1.0, c), np.where(zero, 0.0, s)


def mean(a: np.ndarray) -> float:
    """Mean of the entries of ``a``: a :func:`tree_sum` divided by their count."""
    a = np.asarray(a, dtype=np.float64).ravel()
    return float(tree_sum(a)) / a.size


def linear_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line ``y ~ slope x + intercept`` (``numpy.polyfit(x, y, 1)`` without
    LAPACK): the centred closed form, every sum a :func:`tree_sum`."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    xm, ym = mean(x), mean(y)
    dx = x - xm
    slope = float(tree_sum(dx * (y - ym))) / float(tree_sum(dx * dx))
    return slope, ym - slope * xm


def tanh(x: np.ndarray) -> np.ndarray:
    """Elementwise tanh rounded to float64 from a :data:`BITS`-bit evaluation (numpy's tanh
    has SIMD paths that may differ from the scalar one in the last bit)."""
    x = np.asarray(x, dtype=np.float64)
    old = flint.ctx.prec
    flint.ctx.prec = BITS
    try:
        flat = [_nearest(flint.arb(float(v)).tanh()) for v in x.ravel()]
    finally:
        flint.ctx.prec = old
    return np.array(flat, dtype=np.float64).reshape(x.shape)
