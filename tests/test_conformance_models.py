"""The conformance matrix, models: every zoo model (each ``examples/zoo/<name>.py`` that
defines the factory ``<name>``, found at collection, so a new zoo file joins without a line
here) and a few Hugging Face architectures (``hf:`` specs from tiny configs, as
bench/bench_mp_forward.py and tests/test_real_models.py build them), evaluated on a seeded
input in float64, mp50 and mp100 through :func:`precision.evaluate.evaluate` with
``casts="promote"``: every float cast computed in the evaluation precision (the truth a model
is measured against). Under the default ``keep``, a model's float32 islands (Llama's RMSNorm,
Mamba's) round its output in every precision: mp50 and mp100 then agree exactly and float64
differs from them by ~2e-8, which measures the islands, not the precision.

Bounds (relative Frobenius error, ``error_summary(...).relative``):

* mp50 vs mp100 <= :data:`MP_AGREE` (1e-40: 40 of mp50's 50 digits). mp50 rounds each op to
  ~1e-50 relative and a small network's conditioning costs a few digits at most (measured
  here: 1e-51 to 4e-51), so losing 10 digits means an op lost its precision (1685864's radii lowered
  products to a handful of digits). arb's results do not depend on the CPU's kernels.
* float64 vs mp50 <= :data:`F64_AGREE` (1e-12): float64's own rounding (1.1e-16) times the
  conditioning of a depth-1 width-8 network and the dimension factors of its sums (measured:
  1e-16 to 3e-16), with 4 decades for other kernels' summation orders; and >=
  :data:`F64_ROUNDS` (1e-20): float64 does round (a float64 that ran exactly, or in mp50,
  would not).

The gradient rows (:func:`precision.gradient.gradient`: dL/dparameter of the MSE against a
seeded target, every parameter's entries concatenated) meet the same bounds: the backward is
traced to ATen and interpreted as the forward is, so mp50's gradient agrees with mp100's to
~1e-50 (measured: 5e-51 to 1.2e-50) and float64's autograd is off by its rounding times the
backward's conditioning (measured: 9e-17 to 2.9e-16).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

from precision.evaluate import evaluate_exact
from precision.metrics import error_summary
from probes.factory import load_factory

ZOO_DIR = Path(__file__).resolve().parents[1] / "examples" / "zoo"
#: Every zoo file with a factory of its own name (the zoo's convention, examples/zoo).
ZOO = sorted(p.stem for p in ZOO_DIR.glob("*.py")
             if re.search(rf"^def {re.escape(p.stem)}\(", p.read_text(), re.M))
#: A few real architectures: RoPE attention with float32 islands, learned positions and
#: LayerNorm, a selective state-space scan.
HF = ["hf:LlamaModel", "hf:GPT2Model", "hf:MambaModel"]

D_IN, D_OUT, DEPTH, WIDTH, TOKENS = 3, 2, 1, 8, 6
MP_AGREE = 1e-40
F64_AGREE = 1e-12
F64_ROUNDS = 1e-20


def _relative(a, b) -> float:
    return error_summary(a, b).relative


def _check(model: torch.nn.Module) -> None:
    x = torch.randn(2, TOKENS, D_IN, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1))
    out = {p: evaluate_exact(model, x, p, casts="promote") for p in ("float64", "mp50", "mp100")}
    assert out["mp50"].shape == (2, TOKENS, D_OUT)
    mp, f64 = _relative(out["mp50"], out["mp100"]), _relative(out["float64"], out["mp50"])
    print(f"mp50 vs mp100 {mp:.2e}, float64 vs mp50 {f64:.2e}")
    assert mp <= MP_AGREE, f"mp50 vs mp100: {mp:.2e} > {MP_AGREE:g}"
    assert F64_ROUNDS <= f64 <= F64_AGREE, f"float64 vs mp50: {f64:.2e}"


def _check_gradient(model: torch.nn.Module) -> None:
    import numpy as np

    from precision.gradient import gradient

    x = torch.randn(2, TOKENS, D_IN, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(1))
    target = torch.randn(2, TOKENS, D_OUT, dtype=torch.float64,
                         generator=torch.Generator().manual_seed(2))

    def flat(precision: str) -> np.ndarray:
        g = gradient(model, x, target, precision)
        return np.concatenate([np.asarray(v.numpy() if isinstance(v, torch.Tensor) else v,
                                          dtype=object).reshape(-1) for v in g.values()])

    f64, mp50, mp100 = (flat(f"{p}+casts=promote") for p in ("float64", "mp50", "mp100"))
    mp, fl = _relative(mp50, mp100), _relative(f64.astype(float), mp50)
    print(f"gradient: mp50 vs mp100 {mp:.2e}, float64 vs mp50 {fl:.2e}")
    assert mp <= MP_AGREE, f"gradient, mp50 vs mp100: {mp:.2e} > {MP_AGREE:g}"
    assert F64_ROUNDS <= fl <= F64_AGREE, f"gradient, float64 vs mp50: {fl:.2e}"


def test_the_zoo_is_found():
    assert len(ZOO) >= 7 and "backbone" not in ZOO


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_conforms(name):
    torch.manual_seed(0)
    factory = load_factory(f"{ZOO_DIR / name}.py:{name}")
    model = factory(D_IN, D_OUT, DEPTH, WIDTH, max_len=TOKENS).double().eval()
    _check(model)
    _check_gradient(model)


@pytest.mark.parametrize("spec", HF)
def test_hf_model_conforms(spec):
    pytest.importorskip("transformers")
    from probes.hf_models import build_hf

    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_hf(spec, D_IN, D_OUT, DEPTH, WIDTH, max_len=TOKENS)
    _check(model.double().eval())
    _check_gradient(model)
