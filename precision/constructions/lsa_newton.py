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
