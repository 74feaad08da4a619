"""Where every model is built (:func:`build_family`): a built-in family by name, or a user
architecture, a ``MODULE:FACTORY`` spec imported and called like a built-in family.

A factory is any callable ``factory(d_in, d_out, depth, width, **options) -> nn.Module``
whose module maps (batch, n_tokens, d_in) -> (batch, n_tokens, d_out). If it has a
``max_len`` parameter it receives the task's token count. Nothing is registered: the spec
string is the family name in suites and in the store. ``hf:ClassName`` names a Hugging Face
``transformers`` model built from its config (:mod:`probes.hf_models`).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from precision.suggest import did_you_mean
from probes.hf_models import HFModelError, hf_factory, is_hf_spec


def model_options(family: str, options: dict[str, Any], n_tokens: int) -> dict[str, Any]:
    """Family options from a suite's generic ones: ``layernorm`` switches every LayerNorm of a
    Transformer; sequence models get ``max_len`` = the task's token count (BaseConv filters,
    the Transformer's learned positional embedding as in GPT-2, 001 App. D.1)."""
    opts = dict(options)
    if family == "transformer":
        if "layernorm" in opts:
            ln = bool(opts.pop("layernorm"))
            opts.update(ln_attn=ln, ln_mlp=ln, ln_final=ln)
        opts.setdefault("max_len", n_tokens)
    elif family in ("baseconv", "linear_attention"):
        opts.setdefault("max_len", n_tokens)
    return opts


def build_family(family: str | Callable[..., nn.Module], d_in: int, d_out: int, depth: int,
                 width: int, n_tokens: int, options: dict[str, Any] | None = None, *,
                 seed: int | None = None, check: bool = True) -> nn.Module:
    """The one place a model is built: ``family`` (a built-in name of
    :data:`precision.models.MODELS`, a ``MODULE:FACTORY`` / ``hf:`` spec or a callable) for
    (batch, ``n_tokens``, ``d_in``) -> (batch, ``n_tokens``, ``d_out``) inputs, in float64.
    ``seed``: its initial weights drawn from that seed (the global RNG untouched); ``check``:
    a factory's module is run once on a probe input of that shape (:func:`build_from_factory`;
    off to build on the ``meta`` device)."""
    from precision.models import build_model

    opts = dict(options or {})
    with torch.random.fork_rng(devices=[]):
        if seed is not None:
            torch.manual_seed(seed)
        if is_factory_spec(family):
            if not check:
                fn = family if callable(family) else load_factory(family)
                if "max_len" in _parameters(fn):
                    opts.setdefault("max_len", n_tokens)
                return fn(d_in=d_in, d_out=d_out, depth=depth, width=width, **opts).double()
            return build_from_factory(family, d_in, d_out, depth, width, n_tokens, **opts)
        assert isinstance(family, str)
        model = build_model(family, d_in, d_out, depth, width,
                            **model_options(family, opts, n_tokens))
    return model.double()


@functools.lru_cache(maxsize=256)
def _nests(family: str, options_json: str) -> bool:
    from precision.models.containment import nests_by_depth

    try:
        with torch.device("meta"):
            model = build_family(family, 2, 2, 1, 4, 4, json.loads(options_json), check=False)
    except Exception:  # noqa: BLE001 - options the family cannot build: nothing is nested
        return False
    return nests_by_depth(model)


def family_nests_by_depth(family: str, options: dict[str, Any] | None) -> bool:
    """Whether a built-in ``family`` with model ``options`` contains every shallower model
    of the same width and options (:mod:`precision.models.containment`); False for a user
    factory (never imported here) or options it cannot build."""
    if not isinstance(family, str) or is_factory_spec(family):
        return False
    try:
        key = json.dumps(options or {}, sort_keys=True)
    except (TypeError, ValueError):
        return False
    return _nests(family, key)


def _parameters(fn: Callable[..., Any]) -> Any:
    """The parameters of ``fn``'s signature (none when it has no readable signature)."""
    try:
        return inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}


class FactoryError(ValueError):
    """A factory that cannot be imported, raises, or returns the wrong thing (one line)."""


def is_factory_spec(family: Any) -> bool:
    """True for a callable or a ``module:attr`` / ``file.py:attr`` spec (built-in family
    names have no ':')."""
    return callable(family) or ":" in family


def load_factory(spec: str) -> Callable[..., nn.Module]:
    """Import ``module:attr`` (a dotted module importable from the working directory, or a
    ``.py`` file path) and return the callable; ``hf:ClassName`` is a Hugging Face model
    (:mod:`probes.hf_models`)."""
    if is_hf_spec(spec):
        try:
            return hf_factory(spec)
        except HFModelError as exc:
            raise FactoryError(str(exc)) from None
    mod_name, _, attr = spec.rpartition(":")
    if not mod_name or not attr:
        raise FactoryError(f"factory '{spec}' must look like MODULE:FACTORY")
    try:
        if mod_name.endswith(".py"):
            path = Path(mod_name).resolve()
            if not path.is_file():
                raise FactoryError(f"factory file {mod_name} does not exist")
            name = f"precision_user_{path.stem}"
            spec_ = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec_)  # type: ignore[arg-type]
            sys.modules[name] = module
            spec_.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(mod_name)
    except FactoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's, one line
        raise FactoryError(f"cannot import {mod_name} for factory '{spec}': "
                           f"{type(exc).__name__}: {exc}") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        names = [n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n))]
        raise FactoryError(f"{mod_name} has no callable '{attr}'{did_you_mean(attr, names)}")
    return fn


def build_from_factory(spec: str | Callable[..., nn.Module], d_in: int, d_out: int, depth: int,
                       width: int, n_tokens: int, **options: Any) -> nn.Module:
    """Call the factory (a spec string or the callable itself) and check its module on a
    float64 probe input of the task's shape."""
    fn = spec if callable(spec) else load_factory(spec)
    spec = getattr(fn, "__qualname__", str(fn)) if callable(spec) else spec
    kwargs = dict(options)
    if "max_len" in _parameters(fn):
        kwargs.setdefault("max_len", n_tokens)
    try:
        model = fn(d_in=d_in, d_out=d_out, depth=depth, width=width, **kwargs)
    except HFModelError as exc:
        raise FactoryError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the user's factory failing is one line
        raise FactoryError(f"factory '{spec}' raised {type(exc).__name__}: {exc}") from None
    if not isinstance(model, nn.Module):
        raise FactoryError(f"factory '{spec}' returned {type(model).__name__}, not an nn.Module")
    model = model.double()
    probe = torch.zeros(2, n_tokens, d_in, dtype=torch.float64)
    try:
        with torch.no_grad():
            out = model(probe)
    except Exception as exc:  # noqa: BLE001
        raise FactoryError(f"module from '{spec}' fails on input (2, {n_tokens}, {d_in}): "
                           f"{type(exc).__name__}: {exc}") from None
    expected = (2, n_tokens, d_out)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise FactoryError(f"module from '{spec}' returns {got} for input (2, {n_tokens}, "
                           f"{d_in}); expected {expected} (batch, tokens, d_out)")
    return model

