"""Real architectures from the ecosystem (Hugging Face ``transformers``, built from tiny configs
with no download) through the interpreter and the cast policies.

transformers is the ``[hf]`` extra, which the README's install and CI install: these tests run
in CI and fail there without it, never skip. Every model is exported once (cached per model and
input shape by ``evaluate``), so float64 / mp50 / mp100 under both cast policies cost one
export each.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import transformers  # noqa: F401 - the [hf] extra must be installed (no skip)

from precision.evaluate import error_decomposition, evaluate_exact
from precision.islands import island_report
from precision.metrics import error_summary
from precision.precisions import parse_precision
from probes.hf_models import build_hf

D_IN, D_OUT, DEPTH, WIDTH, TOKENS = 3, 2, 1, 16, 5

#: (spec, options, has float32 islands that move a float64 output by >= 1e-9).
MODELS = [
    ("hf:LlamaModel", {}, True),
    ("hf:LlamaModel", {"attn_implementation": "sdpa"}, True),
    ("hf:MistralModel", {}, True),
    ("hf:Qwen2Model", {}, True),
    ("hf:GemmaModel", {}, True),
    ("hf:Phi3Model", {}, True),
    ("hf:GPT2Model", {}, False),
    ("hf:GPT2Model", {"inputs": "ids"}, False),
    ("hf:GPTNeoXModel", {}, False),
    ("hf:OPTModel", {}, False),
    ("hf:BloomModel", {}, False),
    ("hf:FalconModel", {"alibi": True}, False),
    ("hf:T5EncoderModel", {}, True),
    ("hf:MambaModel", {}, True),
]


def _build(spec: str, options: dict) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = build_hf(spec, D_IN, D_OUT, DEPTH, WIDTH, max_len=TOKENS, **options)
    gen = torch.Generator().manual_seed(1)
    if options.get("inputs") == "ids":
        return model, torch.randint(0, 64, (2, TOKENS), generator=gen)
    return model, torch.randn(2, TOKENS, D_IN, dtype=torch.float64, generator=gen)


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return error_summary(a, b).relative


@pytest.mark.parametrize("spec,options,islands", MODELS,
                         ids=[f"{s[3:]}-{'-'.join(map(str, o.values())) or 'default'}"
                              for s, o, _ in MODELS])
def test_real_model_runs_in_every_precision_and_promote_agrees(spec, options, islands):
    model, x = _build(spec, options)
    f64 = evaluate_exact(model, x, "float64", casts="promote")
    mp50 = evaluate_exact(model, x, "mp50", casts="promote")
    assert f64.shape == (2, TOKENS, D_OUT)
    # the model without its casts: float64 and mp50 compute the same function
    assert _relative(f64, mp50) < 1e-12
    kept64 = evaluate_exact(model, x, "float64")
    kept50 = evaluate_exact(model, x, "mp50")
    # keep: both round the model's islands to float32; they agree to float32's rounding
    assert _relative(kept64, kept50) < 1e-5
    moved = _relative(kept50, mp50)
    if islands:
        assert moved >= 1e-9   # mpN rounds the float32 islands under keep
    else:
        assert moved < 1e-9


@pytest.mark.parametrize("spec", ["hf:LlamaModel", "hf:BloomModel"])
def test_mp50_agrees_with_mp100(spec):
    model, x = _build(spec, {})
    assert _relative(evaluate_exact(model, x, "mp50+casts=promote"),
                     evaluate_exact(model, x, "mp100+casts=promote")) < 1e-45
    assert _relative(evaluate_exact(model, x, "mp50"), evaluate_exact(model, x, "mp100")) < 1e-45


def test_llama_keep_differs_from_promote_and_is_attributed_to_named_modules():
    model, x = _build("hf:LlamaModel", {})
    kept = evaluate_exact(model, x, "float64")
    promoted = evaluate_exact(model, x, "float64", casts="promote")
    assert _relative(kept, promoted) >= 1e-9
    report = island_report(model, x, parse_precision("float64"))
    assert report.total is not None and report.total.relative >= 1e-9
    modules = [i.module for i in report.islands]
    assert any("RMSNorm" in m for m in modules) and any("Rotary" in m for m in modules)
    # the islands' effects, each alone, are what the casts cost (largest first)
    assert report.islands[0].effect.relative >= 1e-9
    assert report.islands[0].effect.relative <= 10 * report.total.relative
    assert "RMSNorm" in "\n".join(report.lines())
    parts = error_decomposition(model, x, np.zeros((2, TOKENS, D_OUT)), "float64")
    # the truth is the promoted model: float64's rounding is its casts' effect
    assert parts["casts"].relative >= 1e-9
    assert parts["rounding"].relative == pytest.approx(parts["casts"].relative, rel=1e-3)


def test_a_model_without_casts_has_no_casts_part():
    model, x = _build("hf:GPT2Model", {})
    parts = error_decomposition(model, x, np.zeros((2, TOKENS, D_OUT)), "float64")
    assert "casts" not in parts and parts["rounding"].relative < 1e-12
