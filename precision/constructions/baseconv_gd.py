"""Gradient descent on least squares in a causal BaseConv (001 App. C.2.2).

Tokens (rows): the N context tokens carry (x_i, y_i), the last token carries (w_0, x_q).
Layer 1 forms per-token products y_i x_i and flt(x_i x_i^T) (MULTIPLY), layer 2 sums them
causally with an all-ones long filter, so the last token holds b = sum y_i x_i and
flt(H) = sum flt(x_i x_i^T) (eq. 46). Each further layer is one GD step at the last token,
  w <- w + (eta/N) (b - H w)        (w - eta grad of L_N, eq. 44-46),
with H w formed as flt(H) ⊙ flt(1 w^T) summed by W_out; the per-position gate bias restricts
the step to the last token (the 0 ... 0 1 gate pattern of App. C.2.2). A final layer writes
w^T x_q. Layers use the outer residual, so each writes only its increments; the channel
layout (x, y, w, x_q, products, sums, scratch) is ours — the paper stacks the same blocks.

:func:`gradient_descent_noncausal` is the O(D)-state construction of 001 App. C.2.1 on a
non-causal BaseConv (two-sided long filter, ``causal=False``), using eq. 45 instead of eq. 46:
every token carries the current w; one GD step is the paper's three layers,
  1. r_i = w^T x_i - y_i            (gate w ⊙ conv x, summed by W_out; minus y_i),
  2. g_i = r_i x_i                  (gate r ⊙ conv x),
  3. w <- w - (eta/N) sum_i g_i     (all-ones two-sided filter: every token gets the sum),
and layer 3 also clears r and g (adds -r, -g: exact), so the next step starts from zeros.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from precision.constructions.layout import blocks
from precision.models.baseconv import BaseConv, BaseConvConfig


def _layout(d: int) -> dict[str, slice]:
    sizes = [("x", d), ("y", 1), ("w", d), ("q", d), ("pb", d), ("ph", d * d), ("b", d),
             ("h", d * d), ("s", d), ("t", d * d), ("r", d), ("o", 1)]
    return blocks(sizes)


def width(d: int) -> int:
    """Channels of the construction: 7d + 3d^2 + 2."""
    return _layout(d)["o"].stop


def gradient_descent(d: int, n: int, step: float, iters: int) -> BaseConv:
    """A BaseConv of 3 + ``iters`` layers running ``iters`` GD steps with step ``step`` on
    f(w) = (1/2n) ||X w - y||^2 for n context tokens; input :func:`tokens`, output channel 0
    of the last token = w_iters^T x_q."""
    lay = _layout(d)
    wdt = width(d)
    model = BaseConv(BaseConvConfig(d_in=3 * d + 1, d_out=1, depth=iters + 3, width=wdt,
                                    max_len=n + 1, residual="outer")).double()
    last = n  # 0-based position of the last token

    def ch(block: str, k: int = 0) -> int:
        return lay[block].start + k

    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.inp.weight[: 3 * d + 1, : 3 * d + 1] = torch.eye(3 * d + 1, dtype=torch.float64)
        model.out.weight[0, ch("o")] = 1.0
        layers = model.layers
        # Layer 1: pb_a = y * x_a, ph_ab = x_a * x_b (per token).
        L = layers[0]
        for a in range(d):
            L.w_gate.weight[ch("pb", a), ch("y")] = 1.0
            L.w_in.weight[ch("pb", a), ch("x", a)] = 1.0
            for b in range(d):
                L.w_gate.weight[ch("ph", a * d + b), ch("x", a)] = 1.0
                L.w_in.weight[ch("ph", a * d + b), ch("x", b)] = 1.0
        for c in range(lay["pb"].start, lay["ph"].stop):
            L.filter[c, 0] = 1.0
            L.w_out.weight[c, c] = 1.0
        # Layer 2: b, h = causal sums of pb, ph (all-ones long filter, gate = 1).
        L = layers[1]
        for k in range(d + d * d):
            src, dst = lay["pb"].start + k, lay["b"].start + k
            L.w_in.weight[dst, src] = 1.0
            L.b_gate[:, dst] = 1.0
            L.filter[dst, :] = 1.0
            L.w_out.weight[dst, dst] = 1.0
        # GD layers: w += (step/n) (b - H w), at the last token only.
        for it in range(iters):
            L = layers[2 + it]
            for a in range(d):
                L.w_in.weight[ch("s", a), ch("b", a)] = 1.0
                L.b_gate[last, ch("s", a)] = 1.0
                L.filter[ch("s", a), 0] = 1.0
                L.w_out.weight[ch("w", a), ch("s", a)] = step / n
                for b in range(d):
                    t = ch("t", a * d + b)
                    L.w_in.weight[t, ch("h", a * d + b)] = 1.0
                    L.w_gate.weight[t, ch("w", b)] = 1.0
                    L.filter[t, 0] = 1.0
                    L.w_out.weight[ch("w", a), t] = -step / n
        # Final layer: o = sum_a x_q,a w_a.
        L = layers[2 + iters]
        for a in range(d):
            L.w_gate.weight[ch("r", a), ch("q", a)] = 1.0
            L.w_in.weight[ch("r", a), ch("w", a)] = 1.0
            L.filter[ch("r", a), 0] = 1.0
            L.w_out.weight[ch("o"), ch("r", a)] = 1.0
    return model


def tokens(X: np.ndarray, y: np.ndarray, x_query: np.ndarray,
           w0: np.ndarray | None = None) -> torch.Tensor:
    """(1, n + 1, 3d + 1): rows (x_i, y_i, 0, 0), then (0, 0, w_0, x_q)."""
    n, d = X.shape
    rows = np.zeros((n + 1, 3 * d + 1))
    rows[:n, :d] = X
    rows[:n, d] = y
    rows[n, d + 1: 2 * d + 1] = np.zeros(d) if w0 is None else w0
    rows[n, 2 * d + 1:] = x_query
    return torch.as_tensor(rows[None], dtype=torch.float64)


# --- non-causal, O(D) state (001 App. C.2.1) ---------------------------------------------

def _layout_noncausal(d: int) -> dict[str, slice]:
    sizes = [("x", d), ("y", 1), ("w", d), ("q", d), ("r", 1), ("g", d), ("s", d), ("o", 1)]
    return blocks(sizes)


def width_noncausal(d: int) -> int:
    """Channels of the non-causal construction: 5d + 3 (O(D), against 7d + 3d^2 + 2)."""
    return _layout_noncausal(d)["o"].stop


def exact_step(step: float, n: int) -> float:
    """The step :func:`gradient_descent_noncausal` runs: n c, with c = step / n rounded to 24
    significant bits. Then the layer weight c is exact in float32, float64 and mpN, and n c is
    exact in float64 (n < 2^29), so GD run with the returned step is the model's algorithm in
    every precision (a weight fl(step / n) would run a step perturbed by ~1e-16, visible in
    mp50)."""
    if not (isinstance(n, int) and 1 <= n < 2 ** 29):
        raise ValueError(f"n must be an integer in [1, 2^29), got {n!r}")
    c = float(step) / n
    if c == 0.0 or not math.isfinite(c):
        return c * n
    m, e = math.frexp(c)
    return math.ldexp(round(m * 2 ** 24), e - 24) * n


def gradient_descent_noncausal(d: int, n: int, step: float, iters: int) -> BaseConv:
    """A non-causal BaseConv of 3 ``iters`` + 1 layers running ``iters`` GD steps on
    f(w) = (1/2n) ||X w - y||^2 for n context tokens (001 App. C.2.1), with step
    :func:`exact_step` (``step``, n); input :func:`tokens_noncausal`, output channel 0 of the
    last token = w_iters^T x_q. Width 5d + 3."""
    if iters < 0:
        raise ValueError(f"iters must be >= 0, got {iters}")
    lay = _layout_noncausal(d)
    coef = exact_step(step, n) / n  # exact: the 24-bit c of exact_step
    model = BaseConv(BaseConvConfig(d_in=3 * d + 1, d_out=1, depth=3 * iters + 1,
                                    width=width_noncausal(d), max_len=n + 1, residual="outer",
                                    causal=False)).double()
    lag0 = n  # filter index of lag 0 (max_len - 1)

    def ch(block: str, k: int = 0) -> int:
        return lay[block].start + k

    def delta(layer: torch.nn.Module, slot: int) -> None:
        layer.filter[slot, lag0] = 1.0

    def product(L: torch.nn.Module, slot: int, gate: int, inp: int, out: int) -> None:
        """Inner slot = (channel gate) * (channel inp) at every token, added to channel out."""
        L.w_gate.weight[slot, gate] = 1.0
        L.w_in.weight[slot, inp] = 1.0
        delta(L, slot)
        L.w_out.weight[out, slot] = 1.0

    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.inp.weight[: 3 * d + 1, : 3 * d + 1] = torch.eye(3 * d + 1, dtype=torch.float64)
        model.out.weight[0, ch("o")] = 1.0
        for it in range(iters):
            # Layer 1: r += sum_a w_a x_a - y   (inner slots s_a = w_a x_a, slot r = y).
            L = model.layers[3 * it]
            for a in range(d):
                product(L, ch("s", a), ch("w", a), ch("x", a), ch("r"))
            L.b_gate[:, ch("r")] = 1.0
            L.w_in.weight[ch("r"), ch("y")] = 1.0
            delta(L, ch("r"))
            L.w_out.weight[ch("r"), ch("r")] = -1.0
            # Layer 2: g_a += r x_a.
            L = model.layers[3 * it + 1]
            for a in range(d):
                product(L, ch("g", a), ch("r"), ch("x", a), ch("g", a))
            # Layer 3: w_a += -(eta/n) sum_t g_a[t] at every token (all-ones two-sided
            # filter, slots s); g and r are cleared (slots g, r carry them: += -g, -r).
            L = model.layers[3 * it + 2]
            for a in range(d):
                L.b_gate[:, ch("s", a)] = 1.0
                L.w_in.weight[ch("s", a), ch("g", a)] = 1.0
                L.filter[ch("s", a), :] = 1.0
                L.w_out.weight[ch("w", a), ch("s", a)] = -coef
                L.b_gate[:, ch("g", a)] = 1.0
                L.w_in.weight[ch("g", a), ch("g", a)] = 1.0
                delta(L, ch("g", a))
                L.w_out.weight[ch("g", a), ch("g", a)] = -1.0
            L.b_gate[:, ch("r")] = 1.0
            L.w_in.weight[ch("r"), ch("r")] = 1.0
            delta(L, ch("r"))
            L.w_out.weight[ch("r"), ch("r")] = -1.0
        # Final layer: o = sum_a x_q,a w_a at the last token (x_q is zero elsewhere).
        L = model.layers[3 * iters]
        for a in range(d):
            product(L, ch("s", a), ch("q", a), ch("w", a), ch("o"))
    return model


def tokens_noncausal(X: np.ndarray, y: np.ndarray, x_query: np.ndarray,
                     w0: np.ndarray | None = None) -> torch.Tensor:
    """(1, n + 1, 3d + 1), the embedding of 001 App. C.2.1: rows (x_i, y_i, w_0, 0), then
    (0, 0, w_0, x_q) — w_0 in every token."""
    n, d = X.shape
    rows = np.zeros((n + 1, 3 * d + 1))
    rows[:n, :d] = X
    rows[:n, d] = y
    rows[:, d + 1: 2 * d + 1] = np.zeros(d) if w0 is None else w0
    rows[n, 2 * d + 1:] = x_query
    return torch.as_tensor(rows[None], dtype=torch.float64)
