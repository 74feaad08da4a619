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
"""

from __future__ import annotations

import numpy as np
import torch

from precision.models.baseconv import BaseConv, BaseConvConfig


def _layout(d: int) -> dict[str, slice]:
    sizes = [("x", d), ("y", 1), ("w", d), ("q", d), ("pb", d), ("ph", d * d), ("b", d),
             ("h", d * d), ("s", d), ("t", d * d), ("r", d), ("o", 1)]
    out, start = {}, 0
    for name, size in sizes:
        out[name] = slice(start, start + size)
        start += size
    return out


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
