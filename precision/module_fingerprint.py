"""What determines a module's output, as two digests: its structure and its values.

A result computed from a module (an exported program, a certified digit count) may be reused
only while what determined it is unchanged. Object identity is not that: a user replaces
``model[1] = nn.ReLU()`` or edits a weight in place and passes the same object again.

- :func:`structure_key` digests everything ``torch.export`` bakes into a graph: each
  sub-module's path and class, the code of its ``forward`` (an instance's own included) and
  of its hooks, its plain attributes (numbers, strings, flags such as ``training``; tensors
  that are not parameters or buffers by value, since export lifts them as constants), and
  each parameter's and buffer's name, dtype and shape. A cached program is valid for a module
  whose structure key equals the one it was exported from (the interpreter reads the
  parameter values at each call).
- :func:`values_digest` digests every parameter and buffer value (bytes, dtype, shape).

An attribute the digest cannot read exactly (an object without a stable ``repr``) makes two
digests differ, never agree wrongly: a cache then misses, which costs time, not a number.
"""

from __future__ import annotations

import hashlib
import types
from typing import Any

import torch

#: Attributes of ``nn.Module`` digested by their own rule (or not at all).
_OWN = {"_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
        "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
        "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
        "_forward_hooks_always_called", "_state_dict_hooks", "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"}
_HOOKS = ("_forward_hooks", "_forward_pre_hooks")


def _tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of ``t``'s values (any dtype, any layout, any device)."""
    flat = t.detach().reshape(-1).contiguous().cpu()
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def _describe(value: Any, depth: int = 0) -> str:
    """A text that is equal for two attribute values only if they are equal (see module
    docstring: an unreadable value gives a text of its identity)."""
    if depth > 6:
        return f"<deep {type(value).__qualname__} {id(value)}>"
    if value is None or isinstance(value, bool | int | float | complex | str | bytes):
        return f"{type(value).__name__}:{value!r}"
    if isinstance(value, torch.Tensor):
        digest = hashlib.sha256(_tensor_bytes(value)).hexdigest()
        return f"tensor:{value.dtype}:{tuple(value.shape)}:{digest}"
    if isinstance(value, torch.dtype | torch.device | torch.Size):
        return f"{type(value).__name__}:{value}"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(map(repr, value)) if isinstance(value, set | frozenset) else \
            [_describe(v, depth + 1) for v in value]
        return f"{type(value).__name__}[{','.join(items)}]"
    if isinstance(value, dict):
        return "dict{" + ",".join(f"{k!r}:{_describe(v, depth + 1)}"
                                  for k, v in value.items()) + "}"
    if isinstance(value, types.FunctionType | types.MethodType):
        return _code(value, depth + 1)
    if isinstance(value, torch.nn.Module):   # a module held outside _modules: by identity
        return f"module:{type(value).__qualname__}:{id(value)}"
    text = repr(value)
    if " at 0x" in text:
        return f"{type(value).__qualname__}:{id(value)}"
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


def _code(fn: Any, depth: int = 0) -> str:
    """The code of a function or method: bytecode, constants, names and closure values
    (a closure's own functions to a few levels, then by identity)."""
    fn = getattr(fn, "__func__", fn)
    code = getattr(fn, "__code__", None)
    if code is None or depth > 4:
        return f"callable:{type(fn).__qualname__}:{id(fn)}"
    parts = [code.co_code.hex(), repr(code.co_consts), repr(code.co_names),
             repr(getattr(fn, "__defaults__", None))]
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            parts.append(_describe(cell.cell_contents, depth + 1))
        except ValueError:   # an empty cell
            parts.append("<empty>")
    return "code:" + hashlib.sha256("|".join(parts).encode("utf-8", "replace")).hexdigest()


def structure_key(model: torch.nn.Module) -> str:
    """Digest of everything but the parameter and buffer values (module docstring)."""
    h = hashlib.sha256()
    for path, mod in model.named_modules(remove_duplicate=False):
        cls = type(mod)
        h.update(f"\0{path}\0{cls.__module__}.{cls.__qualname__}\0".encode())
        forward = mod.__dict__.get("forward", cls.forward)
        h.update(_code(forward).encode())
        for hooks in _HOOKS:
            for fn in getattr(mod, hooks, {}).values():
                h.update(_code(fn).encode())
        for key, value in sorted(vars(mod).items()):
            if key not in _OWN:
                h.update(f"{key}={_describe(value)};".encode("utf-8", "replace"))
        for kind in ("_parameters", "_buffers"):
            for name, t in getattr(mod, kind, {}).items():
                what = "None" if t is None else f"{t.dtype}:{tuple(t.shape)}"
                h.update(f"{kind}.{name}:{what};".encode())
        for name in sorted(getattr(mod, "_non_persistent_buffers_set", ())):
            t = mod._buffers.get(name)   # not in state_dict: exported as a constant
            if t is not None:
                h.update(hashlib.sha256(_tensor_bytes(t)).digest())
    return h.hexdigest()


def values_digest(model: torch.nn.Module) -> str:
    """Digest of every parameter and buffer value (name, dtype, shape and bytes)."""
    h = hashlib.sha256()
    for name, t in model.state_dict(keep_vars=True).items():
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(_tensor_bytes(t))
    return h.hexdigest()
