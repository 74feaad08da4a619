"""Damped Newton for mu-regularised logistic regression in 11 + 2k layers (000 Thm 5.2, App. C).

The model is :class:`~precision.models.linear_attention.LinearTransformer` (000 eq. 3.1:
unnormalised linear attention, then a residual ReLU MLP, no biases used) with hand-set
weights. One Newton step takes 11 + 2k layers, k = Newton–Schulz steps for the Hessian
inverse; ``steps`` Newton steps are the block stacked ``steps`` times (the output has the
input's format, 000 eq. C.3).

Task (000 eq. 3.5, labels y_i in {-1, +1}, ||a_i|| <= 1):
f(x) = (1/n) sum_i log(1 + exp(-y_i x^T a_i)) + (mu/2) ||x||^2 and the damped step
x+ = x - eta(x) H^{-1} grad f with eta = 1/(1 + lambda), lambda^2 = grad^T H^{-1} grad
(``damping="reference"``: the step of :func:`precision.solvers.newton_logistic`), or
eta = 2 sqrt(mu)/(2 sqrt(mu) + lambda) (``damping="self_concordant"``: Thm 5.2's step,
Newton on g = f / (4 mu), 000 Sec. 5.1).

Embedding (column form H, one column per sample; the model's row tokens are E = H^T, so the
input is (1, n, 7d + 4); n >= d). Rows, with S = [I_d 0] (d x n):

=======  ======  ==============================================================
block    rows    content (input -> role)
=======  ======  ==============================================================
X        d       0 -> Newton–Schulz iterate [X_t 0] ~ [G^{-1} 0]
G        d       0 -> [G 0], G = A^T D A + n mu I = n * Hessian; later [g 0]
T        d       0 -> Lemma 4.1's scratch block; later [u 0], u = X g
I        d       S (constant; row 1 = e_1^T)
A        d       A^T (constant)
y        1       y^T (constant)
x        d       x_t 1_n^T (the iterate, in every column)
P        d       0 -> scratch for (D A)^T
z        1       0 -> scratch: z_i = x^T a_i; later n lambda^2 (column 1)
s        1       0 -> scratch: d_i, p_i, y_i p_i, eta
one      1       1_n^T (constant)
=======  ======  ==============================================================

App. C's format (C.2) has 7d + 5 rows with a row e_1^T / n. **Departure**: 1/n is not a
float64 number, so a weight or input 1/n would inject float64 rounding into mp50. Here
nothing is divided by n: G = n * Hessian and g = n * grad f are formed instead (the sum over
the n tokens makes the factor n; the constant n mu enters as the product of the weights mu
and the integer n, computed in the working precision), the Newton direction G^{-1} g is the
same, and n lambda^2 = g^T G^{-1} g is what the step-size gadget receives (its knots absorb
the 1/n, like every other function value the gadgets approximate).

Layers of one Newton step (000 App. C, Steps 1-9; "attn" = 000 eq. 3.1a, "MLP" = 3.1b):

1. attn: z = x^T a_i (eq. C.4, V = e_1^T, K = x 1^T, Q = A^T). MLP: s = d_i ~ h(z_i),
   h(z) = sigma(z) sigma(-z) = p_i (1 - p_i) (Step 1; even in y, so one input); clears z.
2. attn: G += n mu S (the mu I term of Step 3, head 2). MLP: P = (D A)^T, each d_i a_ik by
   the polarisation d a = ((4d + a)^2 - (4d - a)^2) / 16 with two square gadgets (Step 2;
   the paper uses Bai et al.'s product approximation); clears s.
3. attn: G += A^T P^T S = [A^T D A 0] (Step 3, head 1). MLP: clears P.
4. attn: X += alpha S G_blk^T S = [alpha G^T 0] (eq. C.11): X_0 = alpha G^T.
5. .. 2k + 4: k Newton–Schulz steps X <- X (2I - G X), 2 layers each (Lemma 4.1, as in
   :mod:`precision.constructions.lsa_newton`; G is not exactly symmetric, so the general
   two-layer form is used).
2k+5. attn: z again (Step 5, eq. C.14). MLP: s = p_i ~ sigma(-y_i z_i): two gadgets, one for
   sigma(-z) (y = +1) and one for sigma(z) (y = -1), each gated off for the other label by
   an offset M (1 -/+ y), M = 4 z_max (exact for y in {-1, +1}); clears z.
2k+6. attn: G <- [n mu x 0] (clears G; eq. C.17's head). MLP: s = y_i p_i by 000 Step 6's
   gadget o1 + o2 = ReLU(p/2 + 2y) - ReLU(-p/2 + 2y) + ReLU(-p/2 - 2y) - ReLU(p/2 - 2y)
   (exact for |p| < 4 and y in {-1, +1}).
2k+7. attn: G += -A^T (y p) e_1^T, so G = [g 0], g = n grad f (Step 7). MLP: clears s.
2k+8. attn: T += X g = [u 0], u ~ G^{-1} g = H^{-1} grad f (Step 8, first layer).
2k+9. attn: z = g^T u e_1^T = n lambda^2 in column 1 (Step 8, second layer). MLP: s =
   eta(z) by the step-size gadget (eq. C.20); clears z. Other columns get eta(0) (000's
   "inconsequential values").
2k+10. attn: T <- eta u e_1^T (Step 9, first layer). MLP: clears s exactly.
2k+11. attn: x -= (eta u) 1^T and X, G, T <- 0 (Step 9, eq. C.22). Output in the input
   format (eq. C.3) with x_{t+1}.

**The ReLU gadgets** (000 leaves their form open: "splitting [the range] into 1/eps
intervals ... 4/eps ReLU neurons"). A scalar function f on [t_0, t_N] is replaced by its
piecewise-linear interpolant with N + 1 knots, written with N + 1 ReLUs and a constant:
L(x) = f(t_0) + sum_{j=0}^{N} c_j ReLU(x - t_j), c_0 = s_0, c_j = s_j - s_{j-1},
c_N = -s_{N-1} (s_j the slope on [t_j, t_{j+1}]); L is constant outside the interval.
The offsets -t_j and the constant enter through the row ``one`` (eq. 3.1 has no biases;
the MLP biases are zero). The coefficients are computed at 256 bits and rounded once to
float64 (they are weights). Error: ~ (h^2 / 8) max |f''| = O(N^-2) on uniform knots. Ranges:
z in [-z_max, z_max] (default z_max = the smallest integer >= sqrt(2 ln 2 / mu): the damped
iterates from 0 stay in the sublevel set f <= f(0) = ln 2, so ||x|| <= sqrt(2 ln 2/mu), and
|z| <= ||x|| by ||a_i|| <= 1); squares on [-2, 2] (4 d_i + a_ik in [-1, 2]); the step size
on n lambda^2 in [0, n lam2_max], lam2_max = (1 + mu z_max)^2 / mu (||grad f|| <=
1 + mu ||x||, H >= mu I), with quadratically spaced knots t_j = n lam2_max (j/N)^2, since
1/(1 + sqrt(.)) has an infinite slope at 0 (000 Step 3's "square root error"): its error is
O(1/N) in the first cell instead of O(N^-1/2) with uniform knots. Width N means N intervals
per gadget; the MLP width is 2d(N + 1) + 2 (the product layer's).

**Newton–Schulz scaling.** X_0 = alpha G^T needs alpha < 2 / sigma_max(G)^2. Data-free
bounds: n mu <= sigma(G) <= n (1/4 + mu) (d_i <= 1/4, ||a_i|| <= 1); the default alpha is the
largest power of two <= 2 / (sigma_max^2 + sigma_min^2) (exact in every precision).

**Measured** (000 Sec. 6 problem: d = 5, n = 26, mu = 0.1, seed 0; one step from x = 0,
||x_model - x_dampedNewton||_2): k = 10 and N = 16, 32, 64, 128, 256 give 1.7e-2, 5.3e-3,
1.2e-3, 3.0e-4, 8.3e-5 (~N^-2); N = 128 and k = 1..6 give 0.50, 0.34, 0.17, 4.4e-2,
3.3e-3, 2.8e-4 (Newton–Schulz), flat from k = 6 on. Iterated, the model converges to a fixed
point at ~0.5 N^-2 ... 0.6 N^-2 from the minimiser (5.2e-4 at N = 32, 3.4e-5 at N = 128), the
same in float32, float64 and mp50: the gadgets' approximation error, not rounding, is the
floor for every practical N (float32 rounding moves the output by ~1e-7).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import flint
import numpy as np
import torch
from torch import nn

from precision.backends.mp_backend import workprec
from precision.constructions.layout import blocks
from precision.models.linear_attention import LinearTransformer

_GADGET_BITS = 256  # precision for the gadgets' knot values and slopes (then rounded once)


def layers_per_step(k: int) -> int:
    """Layers of one damped Newton step with k Newton–Schulz steps: 11 + 2k (000 Thm 5.2)."""
    return 11 + 2 * k


def rows(d: int) -> dict[str, slice]:
    """Row blocks of the width-(7d + 4) embedding (see the module docstring)."""
    names = [("X", d), ("G", d), ("T", d), ("I", d), ("A", d), ("y", 1), ("x", d), ("P", d),
             ("z", 1), ("s", 1), ("one", 1)]
    return blocks(names)


def width_of(d: int) -> int:
    """Token width 7d + 4."""
    return rows(d)["one"].stop


def mlp_width(d: int, N: int) -> int:
    """Neurons per MLP: the product layer's 2d (N + 1) + 2 (the widest)."""
    return 2 * d * (N + 1) + 2


def default_z_max(mu: float) -> int:
    """Smallest integer >= sqrt(2 ln 2 / mu): a bound on ||x|| for the damped iterates from 0."""
    return int(math.ceil(math.sqrt(2.0 * math.log(2.0) / mu)))


def default_alpha(n: int, mu: float) -> float:
    """Largest power of two <= 2 / (sigma_max^2 + sigma_min^2), sigma in [n mu, n (1/4+mu)]."""
    smax, smin = n * (0.25 + mu), n * mu
    return 2.0 ** math.floor(math.log2(2.0 / (smax * smax + smin * smin)))


# --- the ReLU gadget ---------------------------------------------------------------------
@workprec(_GADGET_BITS)
def pl_gadget(fn: Callable[[Any], Any], knots: list[float]) -> tuple[float, list[float]]:
    """(f(t_0), [c_0, ..., c_N]) of the ReLU form of the piecewise-linear interpolant of
    ``fn`` (arb -> arb) at ``knots`` t_0 < ... < t_N: L(x) = f(t_0) + sum_j c_j ReLU(x - t_j),
    constant outside [t_0, t_N]. Computed at 256 bits, each number rounded once to float64."""
    t = [flint.arb(v) for v in knots]
    f = [fn(v) for v in t]
    slopes = [(f[j + 1] - f[j]) / (t[j + 1] - t[j]) for j in range(len(t) - 1)]
    coefs = [slopes[0]] + [slopes[j] - slopes[j - 1] for j in range(1, len(slopes))]
    coefs.append(-slopes[-1])
    return float(f[0].mid()), [float(c.mid()) for c in coefs]


def pl_eval(x: np.ndarray, const: float, coefs: list[float], knots: list[float]) -> np.ndarray:
    """The gadget's value in float64 (for checks): const + sum_j c_j max(x - t_j, 0)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, const)
    for c, t in zip(coefs, knots, strict=True):
        out = out + c * np.maximum(x - t, 0.0)
    return out


def _h(z: Any) -> Any:            # p (1 - p) = sigma(z) sigma(-z) = e^z / (1 + e^z)^2
    e = z.exp()
    return e / ((1 + e) * (1 + e))


def _sig_neg(z: Any) -> Any:      # sigma(-z)
    return 1 / (1 + z.exp())


def _sig_pos(z: Any) -> Any:      # sigma(z)
    return 1 / (1 + (-z).exp())


def _square(v: Any) -> Any:
    return v * v


def step_size_fn(n: int, mu: float, damping: str) -> Callable[[Any], Any]:
    """eta as a function of n lambda^2 (arb -> arb), for the step-size gadget."""
    if damping == "reference":
        return lambda v: 1 / (1 + (v / n).sqrt())
    if damping == "self_concordant":
        def eta(v: Any) -> Any:
            c = 2 * flint.arb(mu).sqrt()
            return c / (c + (v / n).sqrt())
        return eta
    raise ValueError(f"damping must be 'reference' or 'self_concordant', not {damping!r}")


def uniform_knots(lo: float, hi: float, N: int) -> list[float]:
    """N + 1 equally spaced knots on [lo, hi]."""
    return [lo + (hi - lo) * j / N for j in range(N + 1)]


def quadratic_knots(hi: float, N: int) -> list[float]:
    """N + 1 knots hi (j / N)^2 on [0, hi], dense near 0."""
    return [hi * (j * j) / (N * N) for j in range(N + 1)]


class _MLP:
    """Fills one layer's (W_1, W_2) neuron by neuron (column form: neuron m reads row
    combination W_1[m] . h and writes W_2[:, m] * ReLU(.))."""

    def __init__(self, seq: nn.Sequential, r: dict[str, slice]) -> None:
        self.w1, self.w2, self.r, self.m = seq[0].weight, seq[2].weight, r, 0

    def neuron(self, inputs: dict[int, float], out_row: int, coef: float) -> None:
        for row, c in inputs.items():
            self.w1[self.m, row] += c
        self.w2[out_row, self.m] += coef
        self.m += 1

    def gadget(self, inputs: dict[int, float], out_row: int, fn: Callable[[Any], Any],
               knots: list[float], scale: float = 1.0, constant: bool = True,
               gate: tuple[float, float] | None = None) -> None:
        """out_row += scale * L(sum_row c_row h_row), L the PL interpolant of fn at knots.

        ``gate = (sign, M)`` switches the gadget off unless y = sign (y in {-1, +1}): every
        ReLU gets + sign M y - M (zero when y = sign, <= -2M otherwise), and the constant
        f(t_0) is written as f(t_0) ReLU(sign y). Ungated, the constant uses the row ``one``.
        """
        const, coefs = pl_gadget(fn, knots)
        one, yrow = self.r["one"].start, self.r["y"].start
        for c, t in zip(coefs, knots, strict=True):
            inp = dict(inputs)
            inp[one] = inp.get(one, 0.0) - t
            if gate is not None:
                inp[yrow] = inp.get(yrow, 0.0) + gate[0] * gate[1]
                inp[one] -= gate[1]
            self.neuron(inp, out_row, scale * c)
        if constant:
            const_in = {one: 1.0} if gate is None else {yrow: gate[0]}
            self.neuron(const_in, out_row, scale * const)

    def clear(self, block: slice) -> None:
        """block -= block exactly: -ReLU(v) + ReLU(-v) = -v for every row of the block."""
        for row in range(block.start, block.stop):
            self.neuron({row: 1.0}, row, -1.0)
            self.neuron({row: -1.0}, row, 1.0)


def _eye_into(w: torch.Tensor, dst: slice | int, src: slice | int, coef: float = 1.0) -> None:
    """w[dst, src] += coef * I (blocks of equal size; ints are single rows)."""
    dst = slice(dst, dst + 1) if isinstance(dst, int) else dst
    src = slice(src, src + 1) if isinstance(src, int) else src
    size = dst.stop - dst.start
    w[dst, src] += coef * torch.eye(size, dtype=w.dtype)


def _newton_step(model: LinearTransformer, base: int, d: int, n: int, mu: float, N: int, k: int,
                 alpha: float, z_max: float, lam2_max: float, damping: str) -> None:
    """Writes the 11 + 2k layers base, ... of one damped Newton step (module docstring)."""
    r = rows(d)
    V, K, Q = model.WV, model.WK, model.WQ
    X, G, T, I_, A = r["X"], r["G"], r["T"], r["I"], r["A"]
    e1, yrow, one = I_.start, r["y"].start, r["one"].start
    z, s = r["z"].start, r["s"].start
    inner = slice(0, d)          # the d key/query coordinates used by K and Q
    first = slice(0, 1)
    zk = uniform_knots(-z_max, z_max, N)

    def mlp(layer: int) -> _MLP:
        return _MLP(model.mlp[base + layer], r)

    # 1 (Step 1): z = x^T a_i; s = d_i = h(z_i); z <- 0.
    _eye_into(V[base, 0], z, e1)
    _eye_into(K[base, 0], inner, r["x"])
    _eye_into(Q[base, 0], inner, A)
    m = mlp(0)
    m.gadget({z: 1.0}, s, _h, zk)
    m.clear(r["z"])
    # 2: G += n mu S (the mu I term of Step 3); P = (D A)^T by polarisation; s <- 0.
    _eye_into(V[base + 1, 0], G, I_, mu)
    _eye_into(K[base + 1, 0], inner, I_)
    _eye_into(Q[base + 1, 0], inner, I_, float(n))
    m = mlp(1)
    sq = uniform_knots(-2.0, 2.0, N)
    for i in range(d):
        a_i, p_i = A.start + i, r["P"].start + i
        # d a = ((4d + a)^2 - (4d - a)^2) / 16; the two constants f(t_0) cancel, omitted.
        m.gadget({s: 4.0, a_i: 1.0}, p_i, _square, sq, scale=0.0625, constant=False)
        m.gadget({s: 4.0, a_i: -1.0}, p_i, _square, sq, scale=-0.0625, constant=False)
    m.clear(r["s"])
    # 3 (Step 3): G += A^T P^T S; P <- 0.
    _eye_into(V[base + 2, 0], G, A)
    _eye_into(K[base + 2, 0], inner, r["P"])
    _eye_into(Q[base + 2, 0], inner, I_)
    mlp(2).clear(r["P"])
    # 4 (eq. C.11): X += alpha S G_blk^T S = [alpha G^T 0].
    _eye_into(V[base + 3, 0], X, I_, alpha)
    _eye_into(K[base + 3, 0], inner, G)
    _eye_into(Q[base + 3, 0], inner, I_)
    # 5 .. 2k+4 (Lemma 4.1): X <- X (2I - G X), T back to 0.
    for t in range(k):
        a, b = base + 4 + 2 * t, base + 5 + 2 * t
        _eye_into(V[a, 0], T, G)                  # T += G X
        _eye_into(K[a, 0], inner, I_)
        _eye_into(Q[a, 0], inner, X)
        _eye_into(V[b, 0], X, X)                  # X += -X (G X)
        _eye_into(K[b, 0], inner, I_)
        _eye_into(Q[b, 0], inner, T, -1.0)
        _eye_into(V[b, 1], X, X)                  # X += X, T += -T
        _eye_into(V[b, 1], T, T, -1.0)
        _eye_into(K[b, 1], inner, I_)
        _eye_into(Q[b, 1], inner, I_)
    L = base + 4 + 2 * k                          # layer 2k+5 (0-based index 2k+4)
    # 2k+5 (Step 5): z = x^T a_i; s = p_i = sigma(-y_i z_i) (gated gadgets); z <- 0.
    _eye_into(V[L, 0], z, e1)
    _eye_into(K[L, 0], inner, r["x"])
    _eye_into(Q[L, 0], inner, A)
    m = _MLP(model.mlp[L], r)
    big = 4.0 * z_max
    m.gadget({z: 1.0}, s, _sig_neg, zk, gate=(1.0, big))     # y = +1: sigma(-z)
    m.gadget({z: 1.0}, s, _sig_pos, zk, gate=(-1.0, big))    # y = -1: sigma(z)
    m.clear(r["z"])
    # 2k+6: G <- [n mu x 0] (clear G; eq. C.17); s <- y s by o1 + o2 (Step 6).
    _eye_into(V[L + 1, 0], G, G, -1.0)
    _eye_into(K[L + 1, 0], inner, I_)
    _eye_into(Q[L + 1, 0], inner, I_)
    _eye_into(V[L + 1, 1], G, r["x"], mu)
    _eye_into(K[L + 1, 1], first, one)
    _eye_into(Q[L + 1, 1], first, e1)
    m = _MLP(model.mlp[L + 1], r)
    m.neuron({s: 0.5, yrow: 2.0}, s, 1.0)
    m.neuron({s: -0.5, yrow: 2.0}, s, -1.0)
    m.neuron({s: -0.5, yrow: -2.0}, s, 1.0)
    m.neuron({s: 0.5, yrow: -2.0}, s, -1.0)
    m.clear(r["s"])
    # 2k+7 (Step 7): G += -A^T (y p) e_1^T -> [g 0]; s <- 0.
    _eye_into(V[L + 2, 0], G, A, -1.0)
    _eye_into(K[L + 2, 0], first, s)
    _eye_into(Q[L + 2, 0], first, e1)
    _MLP(model.mlp[L + 2], r).clear(r["s"])
    # 2k+8 (Step 8): T += X g.
    _eye_into(V[L + 3, 0], T, X)
    _eye_into(K[L + 3, 0], inner, I_)
    _eye_into(Q[L + 3, 0], inner, G)
    # 2k+9 (Step 8): z = (g^T u) e_1^T; s = eta(z) (eq. C.20); z <- 0.
    _eye_into(V[L + 4, 0], z, e1)
    _eye_into(K[L + 4, 0], inner, G)
    _eye_into(Q[L + 4, 0], inner, T)
    m = _MLP(model.mlp[L + 4], r)
    m.gadget({z: 1.0}, s, step_size_fn(n, mu, damping), quadratic_knots(n * lam2_max, N))
    m.clear(r["z"])
    # 2k+10 (Step 9): T <- eta u e_1^T; s <- 0.
    _eye_into(V[L + 5, 0], T, T)
    _eye_into(K[L + 5, 0], first, s)
    _eye_into(Q[L + 5, 0], first, e1)
    _eye_into(V[L + 5, 1], T, T, -1.0)
    _eye_into(K[L + 5, 1], inner, I_)
    _eye_into(Q[L + 5, 1], inner, I_)
    _MLP(model.mlp[L + 5], r).clear(r["s"])
    # 2k+11 (Step 9, eq. C.22): x -= (eta u) 1^T; X, G, T <- 0.
    _eye_into(V[L + 6, 0], r["x"], T, -1.0)
    _eye_into(K[L + 6, 0], first, e1)
    _eye_into(Q[L + 6, 0], first, one)
    _eye_into(V[L + 6, 1], slice(X.start, T.stop), slice(X.start, T.stop), -1.0)
    _eye_into(K[L + 6, 1], inner, I_)
    _eye_into(Q[L + 6, 1], inner, I_)


def damped_newton(d: int, n: int, mu: float, N: int = 32, k: int = 8, steps: int = 1, *,
                  alpha: float | None = None, z_max: float | None = None,
                  lam2_max: float | None = None, damping: str = "reference",
                  mlp_neurons: int | None = None) -> LinearTransformer:
    """The (11 + 2k) * steps layer, 2-head, width-(7d + 4) LinearTransformer (float64) running
    ``steps`` damped Newton steps on tokens :func:`tokens` (A, y, x0) of n >= d samples.

    N: intervals per ReLU gadget (MLP width 2d(N + 1) + 2); k: Newton–Schulz steps per Hessian
    inversion; alpha, z_max, lam2_max: see the module docstring (defaults from mu and n);
    mlp_neurons: MLP width if larger than needed (zero-padded: the same function, so models
    of several N can share one shape, e.g. one exported program).
    Output: the input format with x replaced by x_steps (read it with :func:`read_iterate`).
    """
    if n < d:
        raise ValueError(f"the construction needs n >= d samples, got n={n}, d={d}")
    if N < 1 or k < 0 or steps < 1:
        raise ValueError(f"need N >= 1, k >= 0, steps >= 1; got N={N}, k={k}, steps={steps}")
    step_size_fn(n, mu, damping)  # validates damping
    z_max = float(default_z_max(mu) if z_max is None else z_max)
    lam2_max = (1.0 + mu * z_max) ** 2 / mu if lam2_max is None else float(lam2_max)
    alpha = default_alpha(n, mu) if alpha is None else float(alpha)
    per = layers_per_step(k)
    neurons = mlp_width(d, N) if mlp_neurons is None else int(mlp_neurons)
    if neurons < mlp_width(d, N):
        raise ValueError(f"mlp_neurons={neurons} < the {mlp_width(d, N)} needed for N={N}")
    model = LinearTransformer(width=width_of(d), depth=per * steps, heads=2,
                              mlp_width=neurons).double()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for t in range(steps):
            _newton_step(model, t * per, d, n, mu, N, k, alpha, z_max, lam2_max, damping)
    model.newton = {"d": d, "n": n, "mu": mu, "N": N, "k": k, "steps": steps,
                    "alpha": alpha, "z_max": z_max, "lam2_max": lam2_max, "damping": damping}
    return model


def tokens(A: np.ndarray, y: np.ndarray, x0: np.ndarray | None = None) -> torch.Tensor:
    """(1, n, 7d + 4) float64 row tokens E = H^T of the input (module docstring), A (n, d),
    labels y (n,) in {-1, +1}, x0 (d,) (default 0)."""
    A = np.asarray(A, dtype=np.float64)
    n, d = A.shape
    if n < d:
        raise ValueError(f"the construction needs n >= d samples, got n={n}, d={d}")
    x0 = np.zeros(d) if x0 is None else np.asarray(x0, dtype=np.float64)
    r = rows(d)
    H = np.zeros((width_of(d), n))
    H[r["I"], :d] = np.eye(d)
    H[r["A"]] = A.T
    H[r["y"]] = np.asarray(y, dtype=np.float64)[None, :]
    H[r["x"]] = x0[:, None]
    H[r["one"]] = 1.0
    return torch.as_tensor(H.T[None].copy(), dtype=torch.float64)


def read_iterate(out: Any, d: int) -> Any:
    """x from a model output (1, n, 7d + 4) (tensor or object array): column 1's x block."""
    return out[0, 0, rows(d)["x"]]


class PerStep(nn.Module):
    """Wraps a :func:`damped_newton` model: one forward pass returns the iterate after every
    Newton step, (batch, steps, d) (one export / evaluation for a whole trace)."""

    def __init__(self, model: LinearTransformer) -> None:
        super().__init__()
        self.model = model
        cfg = model.newton
        self.per, self.x = layers_per_step(cfg["k"]), rows(cfg["d"])["x"]

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        outs = []
        for layer in range(self.model.depth):
            h = self.model.step(h, layer)
            if (layer + 1) % self.per == 0:
                outs.append(h[:, 0, self.x])
        return torch.stack(outs, dim=1)
