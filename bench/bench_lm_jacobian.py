"""Bench: the Levenberg-Marquardt phase's dense Jacobian, per sample vs whole batch.

``probes.training.recipes`` forms J (M residuals x P parameters) as ``vmap`` over the batch of
``jacrev`` of one sample's residuals (``_sample_jacobian``); the baseline is the whole-batch
``jacrev``/``jacfwd`` it replaced (``_batch_jacobian``), which pushes one batch-sized
tangent per Jacobian row. Both run here on the same models and batches; the script prints
each time (best of ``--repeat``), the ratio, and max |J_batch - J_sample| / max |J_batch|.

Models: the 002 LSA Full (2 layers, d = 10, n = 20: 484 parameters, query residual only),
a 2-layer width-16 softmax Transformer and a 2-layer width-8 BaseConv with LayerNorm on
MULTIPLY-shaped data (D = 4, N = 8, residuals (N, 2) per sample).

Usage: python bench/bench_lm_jacobian.py [--batch 128] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch.func import functional_call

from precision.models import build_model
from precision.models.linear_attention import LSA
from probes.training.levenberg_marquardt import (
    _batch_jacobian,
    _Flat,
    _Predictor,
    _sample_jacobian,
)


def _best(fn: Callable[[], torch.Tensor], repeat: int) -> tuple[float, torch.Tensor]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def case(name: str, model: torch.nn.Module, predict, x: torch.Tensor, y: torch.Tensor,
         repeat: int) -> None:
    wrapper, flat = _Predictor(model.double(), predict), _Flat(model)
    theta = flat.get()

    def res(th: torch.Tensor) -> torch.Tensor:
        return (functional_call(wrapper, flat.as_dict(th), (x,)) - y).flatten()

    def res_one(th: torch.Tensor, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return (functional_call(wrapper, flat.as_dict(th), (xb[None],)) - yb[None]).flatten()

    r = res(theta)
    _sample_jacobian(res_one, theta, x[:2], y[:2])          # vmap's one-time set-up
    t_batch, jb = _best(lambda: _batch_jacobian(res, theta, r), repeat)
    t_sample, js = _best(lambda: _sample_jacobian(res_one, theta, x, y), repeat)
    dev = float((jb - js).abs().max() / jb.abs().max())
    print(f"{name:<28} J {tuple(jb.shape)!s:<14} batch {t_batch:8.3f} s   "
          f"per-sample {t_sample:7.3f} s   ratio {t_batch / t_sample:7.1f}x   "
          f"max rel diff {dev:.1e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    B = args.batch
    e = torch.randn(B, 21, 11, dtype=torch.float64)
    e[:, -1, -1] = 0.0
    case("LSA Full, 2 layers", LSA(10, depth=2, param="full", init_scale=0.05),
         lambda m, t: m(t)[:, -1, 0], e, torch.randn(B, dtype=torch.float64), args.repeat)
    x = torch.randn(B, 8, 4, dtype=torch.float64)
    y = x[..., :2] * x[..., 2:]
    case("Transformer 2 x 16", build_model("transformer", 4, 2, depth=2, width=16, max_len=8),
         lambda m, t: m(t), x, y, args.repeat)
    case("BaseConv 2 x 8, LayerNorm",
         build_model("baseconv", 4, 2, depth=2, width=8, max_len=8, layernorm=True),
         lambda m, t: m(t), x, y, args.repeat)


if __name__ == "__main__":
    main()
