"""Float literals of an exported graph: the ones that stand for an exact value, computed in
the working precision, and the ones taken as given (their float64 value is the truth's).

An exported graph holds the Python floats the model's code computed as literals: the scale of
attention is ``mul(q, 0.3535533905932738)`` (``q / math.sqrt(8)``, ``nn.MultiheadAttention``,
Hugging Face's ``scaling = head_dim ** -0.5``), or, for a ``scaled_dot_product_attention``
without ``scale=``, ``mul(q, 0.5946035575013605)`` and ``mul(k, 0.5946035575013605)``: torch
splits 1/sqrt(E) as sqrt(1/sqrt(E)) = E^(-1/4) on q and on k, computed in float64. Read as
given, such a literal makes an ``mpN`` truth differ from the model's mathematics by ~1e-16
relative however many digits N has (a TransformerEncoderLayer: 1e-17 in mp50 while mp50 and
mp100 agree to 1e-51).

The rule (:func:`recognise`): a finite float literal ``v`` is taken as the exact value
``+-k^p``, p in {1/2, -1/2, 1/4, -1/4}, k an integer 2 <= k <= 2^16 whose root is irrational
(k not a perfect square), when ``|v - (+-k^p)| <= 2^-52 * k^p``: within two roundings of it.
That covers every float64 chain torch or a model uses for these scales (measured over all k
<= 2^16: ``1/math.sqrt(k)`` and torch's ``sqrt(1/sqrt(k))`` are up to 1.64 * 2^-53 off, one
correctly rounded value up to 2^-53 = 1.1e-16). It is recognised where it is an operand of
``+ - * /`` with a tensor (:data:`EXACT_OPS`) or the fill value of ``full`` / ``scalar_tensor``
/ ``full_like`` / ``new_full`` / ``fill``, and replaced there by k^p rounded to the working
precision. Why it is safe: a dyadic literal (0.125 = 1/sqrt(64), 0.5, 2.0) is never changed
(k^p irrational); a literal within 2^-52 of an irrational k^p is one of the 3 to 5 float64
values around it, about a million floats in all, spread over the 16 binades of [2^-8, 2^8] of
2^52 floats each, so an arbitrary float there coincides with probability ~1e-11; and no
decimal a user types with at most 10 significant digits coincides (checked over every k and
p: the first is 8.7941415274 ~ 5981^(1/4), 11 digits). A constant that coincides is
computed as that k^p: within 2.2e-16 of its float64 value, which the float precisions round
to anyway. Not recognised: other irrationals
(sqrt(2/pi) of the tanh GELU written as a literal, log(16)), and a literal at any other
position (a layer norm's eps, a ``where`` fill).

Every other float literal of the graph is taken as given, its float64 value exact in mpN;
:func:`literal_lines` lists those (``precision ops`` / ``precision evaluate``) except the ones
exact as written (:func:`exact_as_written`: the shortest decimal that round-trips is the
float's exact value, 0.5, 2.0, 1/1024; a non-finite value; a short dyadic such as 2^-60; a
float dtype's max, min, tiny or eps, which name a float, not a decimal): 1e-05 is listed
(its float64 value is not 1/100000), 0.5 is not.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import flint
import torch

from precision.backends.mp_backend import workprec

aten = torch.ops.aten

#: Largest k of a recognised k^p.
MAX_K = 2**16
#: Relative distance within which a float literal is taken as k^p: two float64 roundings.
TOLERANCE = 2.0**-52

#: A float of at most this many significant bits is exact as written (a power of two).
SHORT_BITS = 12

#: Ops whose float literal operands are recognised -> the positions (index or keyword) read.
#: Arithmetic ops only where the other operand is a tensor (a graph node).
_ARITHMETIC = (aten.add.Tensor, aten.add.Scalar, aten.sub.Tensor, aten.sub.Scalar,
               aten.rsub.Tensor, aten.rsub.Scalar, aten.mul.Tensor, aten.mul.Scalar,
               aten.div.Tensor, aten.div.Scalar)
EXACT_OPS: dict[Any, tuple[int | str, ...]] = {
    **{op: (0, 1) for op in _ARITHMETIC},
    aten.full.default: (1, "fill_value"),
    aten.scalar_tensor.default: (0, "s"),
    aten.full_like.default: (1, "fill_value"),
    aten.new_full.default: (2, "fill_value"),
    aten.fill.Scalar: (1, "value"),
}

_FLOAT_EXTREMES = frozenset(
    s * float(v) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    for v in (torch.finfo(d).max, torch.finfo(d).tiny, torch.finfo(d).eps) for s in (1, -1))


@functools.lru_cache(maxsize=256)
def _root_value(sign: int, k: int, root: int, inverse: bool, prec: int) -> flint.arb:
    """``sign * k^(+-1/root)`` rounded to ``prec`` bits (computed with 32 guard bits)."""
    with workprec(prec + 32):
        t = flint.arb(k).sqrt() if root == 2 else flint.arb(k).root(root)
        if inverse:
            t = 1 / t
    with workprec(prec):
        return (+(t if sign > 0 else -t)).mid()


@dataclass(frozen=True)
class ExactConstant:
    """The exact value ``sign * k^(1/root)`` (``k^(-1/root)`` when ``inverse``) a float
    literal ``literal`` stands for."""

    literal: float
    sign: int
    k: int
    root: int
    inverse: bool

    def __str__(self) -> str:
        s = "-" if self.sign < 0 else ""
        if self.root == 2:
            return f"{s}1/sqrt({self.k})" if self.inverse else f"{s}sqrt({self.k})"
        return f"{s}{self.k}^({'-' if self.inverse else ''}1/{self.root})"

    def value(self, prec: int) -> flint.arb:
        """The exact value rounded to ``prec`` bits (an arb midpoint, no radius)."""
        return _root_value(self.sign, self.k, self.root, self.inverse, prec)

    def matches(self) -> bool:
        """Whether the literal is within :data:`TOLERANCE` (relative) of the exact value."""
        with workprec(128):
            t = abs(self.value(128))
            return bool(abs(flint.arb(abs(self.literal)) - t) <= t * TOLERANCE)


def recognise(v: Any) -> ExactConstant | None:
    """The exact value ``+-k^p`` (module docstring) the float ``v`` stands for, or None."""
    if not isinstance(v, float) or not math.isfinite(v) or v == 0.0:
        return None
    a = abs(v)
    if not 2.0**-9 < a < 2.0**9:  # beyond every k^(+-1/2), k <= 2^16 (and no overflow below)
        return None
    for root in (2, 4):
        for inverse in (False, True):
            with_root = (1.0 / a if inverse else a) ** root
            if not 1.5 <= with_root < MAX_K + 0.5:
                continue
            k = round(with_root)
            if math.isqrt(k) ** 2 == k:  # rational, or sqrt(isqrt(k)) found at root 2
                continue
            c = ExactConstant(v, 1 if v > 0 else -1, k, root, inverse)
            if c.matches():
                return c
    return None


def exact_args(node: torch.fx.Node) -> dict[int | str, ExactConstant]:
    """Position (index or keyword) -> the exact value, for each float literal argument of
    ``node`` that :func:`recognise` takes as exact (at the positions :data:`EXACT_OPS` names;
    an arithmetic operand only where the other operand is a graph node)."""
    positions = EXACT_OPS.get(node.target) if node.op == "call_function" else None
    if not positions:
        return {}
    out: dict[int | str, ExactConstant] = {}
    for pos in positions:
        if isinstance(pos, int):
            if pos >= len(node.args):
                continue
            v = node.args[pos]
            if node.target in _ARITHMETIC and not isinstance(
                    node.args[1 - pos] if len(node.args) > 1 else None, torch.fx.Node):
                continue
        else:
            if pos not in node.kwargs:
                continue
            v = node.kwargs[pos]
        if type(v) is float and (c := recognise(v)) is not None:
            out[pos] = c
    return out


def exact_as_written(v: float) -> bool:
    """Whether a float literal is exactly the number one writes for it: non-finite, a float
    dtype's max / tiny / eps (or their negatives), a float of at most :data:`SHORT_BITS`
    significant bits (2^-60), or a float whose shortest round-trip decimal (``repr``) is its
    exact value (0.5, 2.0, 0.0009765625; not 0.1, not 1e-05)."""
    if not math.isfinite(v) or v in _FLOAT_EXTREMES:
        return True
    if math.frexp(v)[0] * 2**SHORT_BITS == int(math.frexp(v)[0] * 2**SHORT_BITS):
        return True  # a short dyadic: 2^-60, 3 * 2^-20
    return Fraction(v) == Fraction(repr(v))


@dataclass(frozen=True)
class Literal:
    """A float literal of a graph node: its value, the op and node reading it, the module
    path it came from; ``exact``: the exact value it is computed as, None if taken as given."""

    value: float
    op: str
    node: str
    module: str
    exact: ExactConstant | None = None


def _floats(arg: Any) -> Iterator[float]:
    if type(arg) is float:
        yield arg
    elif isinstance(arg, list | tuple):
        for a in arg:
            yield from _floats(a)


def node_literals(node: torch.fx.Node, op: str, module: str) -> list[Literal]:
    """The float literals of ``node`` that matter to the truth: those computed exactly
    (:func:`exact_args`) and those taken as given that are not :func:`exact_as_written`."""
    exact = exact_args(node)
    out = [Literal(c.literal, op, node.name, module, c) for c in exact.values()]
    for pos, arg in [*enumerate(node.args), *node.kwargs.items()]:
        if pos in exact:
            continue
        out += [Literal(v, op, node.name, module) for v in _floats(arg)
                if not exact_as_written(v)]
    return out


def literal_lines(literals: list[Literal]) -> list[str]:
    """The literals grouped by (value, op), with a count and the first node and module: one
    line per exact value computed, one per value taken as given (or a line saying none is)."""
    exact: dict[tuple[str, str, float], list[Literal]] = {}
    given: dict[tuple[float, str], list[Literal]] = {}
    for lit in literals:
        if lit.exact is not None:
            exact.setdefault((str(lit.exact), lit.op, lit.value), []).append(lit)
        else:
            given.setdefault((lit.value, lit.op), []).append(lit)

    def where(group: list[Literal]) -> str:
        first = group[0]
        n = f"{len(group)} uses, first " if len(group) > 1 else ""
        return f"{n}node {first.node} in {first.module}"

    lines = []
    if exact:
        lines.append("float literals computed exactly in mpN (recognised as +-k^(1/2), "
                     "+-k^(1/4) or their inverses):")
        lines += [f"  {name} for {value!r}  {op}  ({where(g)})"
                  for (name, op, value), g in exact.items()]
    if given:
        lines.append("float literals taken as given (the mpN truth uses their float64 "
                     "values):")
        lines += [f"  {value!r}  {op}  ({where(g)})" for (value, op), g in given.items()]
    else:
        lines.append("float literals: none taken as given (the others are exact as written)")
    return lines
