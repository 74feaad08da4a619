"""Hugging Face ``transformers`` models as factories: ``hf:ClassName`` (e.g. ``hf:LlamaModel``,
``hf:BloomModel``, ``hf:GPT2Model``, ``hf:MambaModel``, ``hf:T5EncoderModel``) or
``hf:ConfigName`` (``hf:LlamaConfig``: the config's base model), built from the class's
config with no download (random initialisation, seeded by the caller).

Sizes from the factory's (d_in, d_out, depth, width), the rule docs/probing.md states:

* hidden size (``hidden_size``; GPT-2's ``n_embd``, T5's ``d_model``, ...) = ``width``,
* layers (``num_hidden_layers``; ``n_layer``, ``num_layers``) = ``depth``,
* attention heads = ``width // 8`` (head dimension 8) when 8 divides ``width``, else 1;
  key/value heads (grouped-query attention) = heads // 2 (at least 1); ``head_dim`` =
  width / heads,
* intermediate (MLP) size = 4 * ``width`` (``intermediate_size``, ``n_inner``, ``ffn_dim``,
  ``d_ff``, ``ffn_hidden_size``; Mamba keeps its ``expand`` = 2),
* vocabulary = 64, positions = the task's token count (at least 64),
* dropout off (every config field with ``dropout`` or ``pdrop`` in its name is 0), no cache,
* special token ids (``pad_token_id``, ...) outside the vocabulary are None,
* Mamba-2: ``head_dim`` 8, ``num_heads`` = expand * width / 8, one group.

Other options of the spec's model entry: ``attn_implementation`` (``"eager"``, the default:
attention written out in ops, which every class has; or ``"sdpa"`` where the class has it),
``inputs`` (``"embeds"``, the default: the model is fed ``inputs_embeds``; or ``"ids"``:
token ids, the module's input a (batch, tokens) integer tensor), and any config field
(``alibi=True`` for a Falcon with ALiBi). The module is :class:`HFSequenceModel`: the same
wrapping as a zoo backbone, ``Linear(d_in, width)``, the model, its last hidden state,
``Linear(width, d_out)``; (batch, tokens, d_in) -> (batch, tokens, d_out).
"""

from __future__ import annotations

import importlib
from typing import Any

import torch
from torch import nn


class HFModelError(ValueError):
    """An ``hf:`` spec that cannot be built: transformers missing, an unknown class, option
    or config field, a config the library refuses (one line)."""

#: The prefix of a Hugging Face model spec.
PREFIX = "hf:"
#: The rule's fixed sizes (module docstring).
HEAD_DIM = 8
VOCAB = 64
MIN_POSITIONS = 64
_INTERMEDIATE = ("intermediate_size", "n_inner", "ffn_dim", "d_ff", "ffn_hidden_size")
_POSITIONS = ("max_position_embeddings", "n_positions")
_INPUTS = ("embeds", "ids")


def is_hf_spec(spec: Any) -> bool:
    """True for an ``hf:Name`` spec."""
    return isinstance(spec, str) and spec.startswith(PREFIX)


def _transformers() -> Any:
    try:
        return importlib.import_module("transformers")
    except ImportError:
        raise HFModelError("hf: models need the optional dependency transformers: "
                           "pip install -e '.[hf]'") from None


def model_and_config_classes(spec: str) -> tuple[Any, Any]:
    """The model class (None for a config spec: the config's base model) and config class
    of ``hf:Name``."""
    name = spec[len(PREFIX):]
    if not name.isidentifier():
        raise HFModelError(f"'{spec}' must look like hf:ClassName (e.g. hf:LlamaModel)")
    tf = _transformers()
    cls = getattr(tf, name, None)
    if isinstance(cls, type) and name.endswith("Config"):
        return None, cls
    config_class = getattr(cls, "config_class", None) if isinstance(cls, type) else None
    if config_class is None or not issubclass(cls, nn.Module):
        raise HFModelError(f"transformers {tf.__version__} has no model or config class "
                           f"'{name}' (e.g. hf:LlamaModel, hf:GPT2Model, hf:LlamaConfig)")
    return cls, config_class


def config_for(config_class: Any, depth: int, width: int, n_tokens: int,
               **fields: Any) -> Any:
    """The config of the module docstring's rule, ``fields`` set over it."""
    defaults = config_class()
    has = set(defaults.to_dict()) | set(getattr(defaults, "attribute_map", {}))
    heads = width // HEAD_DIM if width % HEAD_DIM == 0 else 1
    sizes: dict[str, Any] = {"hidden_size": width, "num_hidden_layers": depth,
                             "num_attention_heads": heads, "vocab_size": VOCAB,
                             "use_cache": False}
    if "num_key_value_heads" in has:
        sizes["num_key_value_heads"] = max(1, heads // 2)
    if "head_dim" in has:
        sizes["head_dim"] = width // heads
    if "d_kv" in has:  # T5
        sizes["d_kv"] = width // heads
    if "num_heads" in has and "expand" in has:  # Mamba-2: its heads tile expand * width
        sizes.update(num_heads=defaults.expand * width // HEAD_DIM, head_dim=HEAD_DIM,
                     n_groups=1)
    if "expand" not in has:
        sizes.update({k: 4 * width for k in _INTERMEDIATE if k in has})
    sizes.update({k: max(n_tokens, MIN_POSITIONS) for k in _POSITIONS if k in has})
    sizes.update({k: 0.0 for k, v in defaults.to_dict().items()
                  if ("dropout" in k or "pdrop" in k) and isinstance(v, float)})
    sizes.update({k: None for k, v in defaults.to_dict().items()
                  if k.endswith("_token_id") and isinstance(v, int) and v >= VOCAB})
    unknown = sorted(set(fields) - has)
    if unknown:
        raise HFModelError(f"{config_class.__name__} has no field '{unknown[0]}'")
    try:
        return config_class(**{**sizes, **fields})
    except Exception as exc:  # noqa: BLE001 - a config refusing the sizes is one line
        raise HFModelError(f"{config_class.__name__} refuses depth {depth}, width {width}: "
                           f"{type(exc).__name__}: {exc}") from None


class HFSequenceModel(nn.Module):
    """``Linear(d_in, width)`` -> a transformers model (its last hidden state) ->
    ``Linear(width, d_out)``: (batch, tokens, d_in) -> (batch, tokens, d_out). With
    ``inputs="ids"`` there is no input projection: (batch, tokens) token ids. The last
    hidden state enters the output projection in that projection's dtype: a model that
    keeps its residual stream in float32 (Mamba's ``residual_in_fp32``) returns float32
    from a bfloat16 copy, which the projection's bfloat16 weights cannot multiply."""

    def __init__(self, model: nn.Module, d_in: int, d_out: int, width: int,
                 inputs: str = "embeds") -> None:
        super().__init__()
        self.inputs = inputs
        self.inp = nn.Linear(d_in, width) if inputs == "embeds" else nn.Identity()
        self.model = model
        self.out = nn.Linear(width, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.inputs == "ids":
            hidden = self.model(input_ids=x)
        else:
            hidden = self.model(inputs_embeds=self.inp(x))
        return self.out(hidden.last_hidden_state.to(self.out.weight.dtype))


def build_hf(spec: str, d_in: int, d_out: int, depth: int, width: int, *,
             max_len: int = MIN_POSITIONS, attn_implementation: str = "eager",
             inputs: str = "embeds", **fields: Any) -> HFSequenceModel:
    """The module of ``hf:Name`` (module docstring), float64, in evaluation mode.

    Raises:
        HFModelError: transformers missing, an unknown class, option or config field (one
            line).
    """
    if attn_implementation not in ("sdpa", "eager"):
        raise HFModelError(f"attn_implementation must be 'sdpa' or 'eager', not "
                           f"{attn_implementation!r}")
    if inputs not in _INPUTS:
        raise HFModelError(f"inputs must be one of {', '.join(_INPUTS)}, not {inputs!r}")
    cls, config_class = model_and_config_classes(spec)
    config = config_for(config_class, depth, width, max_len, **fields)
    config._attn_implementation = attn_implementation
    try:
        if cls is None:
            model = _transformers().AutoModel.from_config(config)
        else:
            model = cls(config)
    except Exception as exc:  # noqa: BLE001 - the library refusing the config is one line
        raise HFModelError(f"{spec} cannot be built at depth {depth}, width {width}: "
                           f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    return HFSequenceModel(model, d_in, d_out, width, inputs).double().eval()


def hf_factory(spec: str) -> Any:
    """A factory ``(d_in, d_out, depth, width, max_len=..., **options) -> nn.Module`` for
    ``hf:Name`` (checked now: transformers importable, the class known)."""
    model_and_config_classes(spec)

    def factory(d_in: int, d_out: int, depth: int, width: int, max_len: int = MIN_POSITIONS,
                **options: Any) -> nn.Module:
        return build_hf(spec, d_in, d_out, depth, width, max_len=max_len, **options)

    factory.__qualname__ = spec
    return factory
