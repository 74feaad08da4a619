"""Model families as plain PyTorch modules, one file each.

Every model maps (batch, N, d_in) -> (batch, N, d_out). :data:`MODELS` builds a family by
name from ``(d_in, d_out, depth, width, **options)``; for the in-context regression models
(LSA, RestrictedLSA, Memformer) d_in = d + 1 tokens and d_out = 1 (read-out -y).

| family           | file                      | paper / equation        |
|------------------|---------------------------|-------------------------|
| transformer      | transformer.py            | 001 eq. 1 (GPT-2 block) |
| baseconv         | baseconv.py               | 001 eq. 2               |
| lsa              | linear_attention.py       | 002 eq. 1-3, 8-11       |
| lsa_restricted   | linear_attention.py       | 003 eq. 2.5-2.8         |
| linear_tf        | linear_attention.py       | 000 eq. 3.1             |
| memformer        | memformer.py              | 003 eq. 3.1-3.2, 3.4    |
| softmax_icl      | softmax_icl.py            | 004 eq. 2-6             |
| linear_attention | plain_linear_attention.py | 001 eq. 21 (App. B.3)   |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from precision.models.baseconv import BaseConv, BaseConvConfig
from precision.models.linear_attention import LSA, LinearTransformer, RestrictedLSA
from precision.models.memformer import Memformer
from precision.models.plain_linear_attention import PlainLinearAttention
from precision.models.softmax_icl import SoftmaxICL
from precision.models.transformer import Transformer, TransformerConfig


def _transformer(d_in: int, d_out: int, depth: int, width: int, **kw: Any) -> nn.Module:
    return Transformer(TransformerConfig(d_in=d_in, d_out=d_out, depth=depth, width=width, **kw))


def _baseconv(d_in: int, d_out: int, depth: int, width: int, **kw: Any) -> nn.Module:
    return BaseConv(BaseConvConfig(d_in=d_in, d_out=d_out, depth=depth, width=width, **kw))


def _icl(cls: type) -> Callable[..., nn.Module]:
    def build(d_in: int, d_out: int, depth: int, width: int = 0, **kw: Any) -> nn.Module:
        if d_out != 1:
            raise ValueError(f"{cls.__name__} predicts one value per token (d_out = 1)")
        return cls(d=d_in - 1, depth=depth, **kw)

    return build


def _linear_tf(d_in: int, d_out: int, depth: int, width: int = 0, **kw: Any) -> nn.Module:
    if d_in != d_out:
        raise ValueError("linear_tf keeps the token width: d_in must equal d_out")
    return LinearTransformer(width=d_in, depth=depth, **kw)


def _plain_linear_attention(d_in: int, d_out: int, depth: int, width: int = 0, **kw: Any
                            ) -> nn.Module:
    if d_in != d_out or width not in (0, d_in):
        raise ValueError(f"linear_attention keeps the token width: d_in = d_out = width "
                         f"(got {d_in}, {d_out}, {width})")
    return PlainLinearAttention(d=d_in, depth=depth, **kw)


def _softmax_icl(d_in: int, d_out: int, depth: int = 1, width: int = 0, **kw: Any) -> nn.Module:
    if depth != 1 or d_out != 1:
        raise ValueError("softmax_icl is one layer with one output per token")
    return SoftmaxICL(d=d_in - 1, **kw)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "transformer": _transformer,
    "baseconv": _baseconv,
    "lsa": _icl(LSA),
    "lsa_restricted": _icl(RestrictedLSA),
    "linear_tf": _linear_tf,
    "memformer": _icl(Memformer),
    "softmax_icl": _softmax_icl,
    "linear_attention": _plain_linear_attention,
}


def build_model(name: str, d_in: int, d_out: int, depth: int, width: int, **kw: Any
                ) -> nn.Module:
    """Build model family ``name``; ``ValueError`` listing the families for unknown names."""
    if name not in MODELS:
        raise ValueError(f"unknown model '{name}'; choose from: {', '.join(sorted(MODELS))}")
    return MODELS[name](d_in, d_out, depth, width, **kw)


__all__ = ["MODELS", "build_model"]
