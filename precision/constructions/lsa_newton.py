"""Newton–Schulz steps in linear attention (000 Lemma 4.1).

Column form of 000 eq. 3.1a: H <- H + sum_h W_V H (W_K H)^T (W_Q H), H (4d, d) with blocks
(X; A; 0; I). Layer 1 (one head): V copies block 2 to block 3, K reads the identity block,
Q reads X, so block 3 becomes A X. Layer 2 (two heads): head 1 adds -X (A X) to block 1;
head 2 adds X to block 1 and -A X to block 3. Net: X <- 2X - X A X = X (2I - A X) (eq. 3.3)
and block 3 returns to 0, so 2T layers run T steps. In the row-token form of
:class:`~precision.models.linear_attention.LinearTransformer` (E = H^T: d tokens of width 4d)
the same matrices are used unchanged, since (W_V H (W_K H)^T W_Q H)^T = q k^T v with
q = E W_Q^T, k = E W_K^T, v = E W_V^T. (The lemma's statement writes A^T in block 2; its
proof, implemented here, uses A.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from precision.models.linear_attention import LinearTransformer


def _block(d: int, row: int, col: int, sign: float = 1.0) -> torch.Tensor:
    """(4d, 4d) matrix with sign * I_d in block (row, col), zero elsewhere."""
    m = torch.zeros(4 * d, 4 * d, dtype=torch.float64)
    m[row * d:(row + 1) * d, col * d:(col + 1) * d] = sign * torch.eye(d, dtype=torch.float64)
    return m


def newton_schulz(d: int, steps: int) -> LinearTransformer:
    """A 2*steps-layer, 2-head, width-4d linear transformer running ``steps`` Newton–Schulz
    steps on tokens :func:`tokens` (X0, A)."""
    model = LinearTransformer(width=4 * d, depth=2 * steps, heads=2).double()
    with torch.no_grad():
        for p in (model.WQ, model.WK, model.WV):
            p.zero_()
        for t in range(steps):
            first, second = 2 * t, 2 * t + 1
            # Layer 1, head 0: block 3 += A X.
            model.WV[first, 0] = _block(d, 2, 1)
            model.WK[first, 0] = _block(d, 0, 3)
            model.WQ[first, 0] = _block(d, 0, 0)
            # Layer 2, head 0: block 1 += -X (A X).
            model.WV[second, 0] = _block(d, 0, 0)
            model.WK[second, 0] = _block(d, 0, 3)
            model.WQ[second, 0] = _block(d, 0, 2, -1.0)
            # Layer 2, head 1: block 1 += X, block 3 += -A X.
            model.WV[second, 1] = _block(d, 0, 0) + _block(d, 2, 2, -1.0)
            model.WK[second, 1] = _block(d, 0, 3)
            model.WQ[second, 1] = _block(d, 0, 3)
    return model


def tokens(X0: np.ndarray, A: np.ndarray) -> torch.Tensor:
    """(1, d, 4d) row tokens E = H^T of H = (X0; A; 0; I)."""
    d = A.shape[0]
    H = np.concatenate([X0, A, np.zeros((d, d)), np.eye(d)], axis=0)
    return torch.as_tensor(H.T[None].copy(), dtype=torch.float64)


def read_inverse(out: np.ndarray, d: int) -> np.ndarray:
    """X_T from the model output (1, d, 4d): block 1 of H = the first d columns of E, transposed."""
    return out[0, :, :d].T


# --- least squares in 3 + T layers (000 Thm 4.2, App. A.2) ---------------------------------
def _rows(d: int) -> dict[str, slice]:
    """Row blocks of the width-(4d + 3) embedding of Thm 4.2."""
    return {"B1": slice(0, d), "B2": slice(d, 2 * d), "B3": slice(2 * d, 3 * d),
            "B4": slice(3 * d, 4 * d), "a": slice(4 * d, 4 * d + 1),
            "y": slice(4 * d + 1, 4 * d + 2), "out": slice(4 * d + 2, 4 * d + 3)}


def _put(w: torch.Tensor, dst: slice, src: slice, coef: float = 1.0) -> None:
    """w[dst, src] += coef * I (blocks of equal size)."""
    size = dst.stop - dst.start
    w[dst, src] += coef * torch.eye(size, dtype=w.dtype)


def least_squares(d: int, steps: int, eps: float, mu: float = 0.0) -> LinearTransformer:
    """The 3 + T layer, 2-head, width-(4d + 3) linear transformer of 000 Thm 4.2.

    Input (see :func:`ls_tokens`), column form: H = ([I 0]; [I 0]; [I 0]; A^T; [a^T 0]; y^T;
    0) with A (n, d), n >= d. Layer 1 forms X_0 = eps R and R = A^T A (+ mu I for the ridge
    variant of Remark 4.4) in blocks 1-2; layers 2..T+1 run Newton–Schulz on R; layer T+2
    writes y^T A X_T into the last row; layer T+3 turns it into y_hat = y^T A X_T a_test in
    the first entry of the last row. The printed proof selects the wrong blocks in places
    (000's misprints, see papers/README): the Newton layer's W_K must read block 2 ([R 0]),
    and in layer T+2 W_K / W_Q must read A^T (block 4) and X_T (block 1); implemented so.
    """
    width = 4 * d + 3
    r = _rows(d)
    model = LinearTransformer(width=width, depth=steps + 3, heads=2).double()
    with torch.no_grad():
        for p in (model.WQ, model.WK, model.WV):
            p.zero_()
        V, K, Q = model.WV, model.WK, model.WQ
        # Layer 1, head 0: B1 += eps A^T A [I 0], B2 += A^T A [I 0].
        _put(V[0, 0], r["B1"], r["B4"], eps)
        _put(V[0, 0], r["B2"], r["B4"])
        _put(K[0, 0], r["B1"], r["B4"])
        _put(Q[0, 0], r["B1"], r["B1"])
        # Layer 1, head 1: B1 += (eps mu - 1)[I 0], B2 += (mu - 1)[I 0].
        _put(V[0, 1], r["B1"], r["B1"], eps * mu - 1.0)
        _put(V[0, 1], r["B2"], r["B1"], mu - 1.0)
        _put(K[0, 1], r["B1"], r["B1"])
        _put(Q[0, 1], r["B1"], r["B1"])
        for t in range(1, steps + 1):
            # head 0: B1 += -X R X (K reads block 2 = [R 0]; printed: block 1).
            _put(V[t, 0], r["B1"], r["B1"], -1.0)
            _put(K[t, 0], r["B1"], r["B2"])
            _put(Q[t, 0], r["B1"], r["B1"])
            # head 1: B1 += X.
            _put(V[t, 1], r["B1"], r["B1"])
            _put(K[t, 1], r["B1"], r["B3"])
            _put(Q[t, 1], r["B1"], r["B3"])
        last = steps + 1
        # Layer T+2: out += y^T A X_T (K reads A^T, Q reads X_T).
        _put(V[last, 0], r["out"], r["y"])
        _put(K[last, 0], r["B1"], r["B4"])
        _put(Q[last, 0], r["B1"], r["B1"])
        # Layer T+3, head 0: out += (y^T A X_T a) e_1^T; head 1: out -= y^T A X_T [I 0].
        _put(V[last + 1, 0], r["out"], r["out"])
        _put(K[last + 1, 0], slice(0, 1), r["a"])
        _put(Q[last + 1, 0], slice(0, 1), slice(2 * d, 2 * d + 1))
        _put(V[last + 1, 1], r["out"], r["out"], -1.0)
        _put(K[last + 1, 1], r["B1"], r["B3"])
        _put(Q[last + 1, 1], r["B1"], r["B3"])
    return model


def ls_tokens(A: np.ndarray, y: np.ndarray, a_test: np.ndarray) -> torch.Tensor:
    """(1, n, 4d + 3) row tokens of Thm 4.2's input, A (n, d) with n >= d."""
    n, d = A.shape
    if n < d:
        raise ValueError(f"Thm 4.2 needs n >= d samples, got n={n}, d={d}")
    eye = np.zeros((d, n))
    eye[:, :d] = np.eye(d)
    a_row = np.zeros((1, n))
    a_row[0, :d] = a_test
    H = np.concatenate([eye, eye, eye, A.T, a_row, y[None, :], np.zeros((1, n))], axis=0)
    return torch.as_tensor(H.T[None].copy(), dtype=torch.float64)


def ls_prediction(out: np.ndarray, d: int) -> Any:
    """y_hat: the first entry of the last row of H (token 0, last feature)."""
    return out[0, 0, 4 * d + 2]


def newton_schulz_symmetric(d: int, steps: int) -> LinearTransformer:
    """One layer per Newton–Schulz step for *symmetric* A (000 Lemma 4.1, last sentence; the
    Newton layer of the Thm 4.2 proof): tokens H = (X; A; I), width 3d, 2 heads,
    head 0 adds -X A X (K reads A: valid because A^T = A), head 1 adds X."""
    model = LinearTransformer(width=3 * d, depth=steps, heads=2).double()
    rows = {"X": slice(0, d), "A": slice(d, 2 * d), "I": slice(2 * d, 3 * d)}
    with torch.no_grad():
        for p in (model.WQ, model.WK, model.WV):
            p.zero_()
        for t in range(steps):
            _put(model.WV[t, 0], rows["X"], rows["X"], -1.0)
            _put(model.WK[t, 0], rows["X"], rows["A"])
            _put(model.WQ[t, 0], rows["X"], rows["X"])
            _put(model.WV[t, 1], rows["X"], rows["X"])
            _put(model.WK[t, 1], rows["X"], rows["I"])
            _put(model.WQ[t, 1], rows["X"], rows["I"])
    return model


def symmetric_tokens(X0: np.ndarray, A: np.ndarray) -> torch.Tensor:
    """(1, d, 3d) row tokens of H = (X0; A; I) for :func:`newton_schulz_symmetric`."""
    d = A.shape[0]
    H = np.concatenate([X0, A, np.eye(d)], axis=0)
    return torch.as_tensor(H.T[None].copy(), dtype=torch.float64)
