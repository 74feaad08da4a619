"""Where an eager forward pass failed: the module and the ATen op.

A float precision runs a copy of the user's module eagerly (cast to the dtype, or under a
simulated format's per-op rounding). When that raises -- a model that casts to float32 inside
and then multiplies by bfloat16 weights, an op with no kernel for the dtype -- PyTorch's
message names neither the module nor the op. :func:`call_naming_failure` runs the forward;
on an exception it runs it again with module hooks (the innermost module running when it
raises), then under a dispatch mode that records the ATen op whose kernel raised, and raises
:class:`ForwardFailure` whose one line names both (as the interpreter's errors name the graph
node). A rerun that fails differently names nothing it saw: the original error stands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

T = TypeVar("T")


class ForwardFailure(RuntimeError):
    """An eager forward that raised: ``module`` (its path, '' for the top module), ``op``
    (the ATen op whose kernel raised, '' when the failure was outside one or could not be
    told), and the original error's one line."""

    def __init__(self, module: str, op: str, error: BaseException) -> None:
        text = (str(error).strip().splitlines() or [""])[0]
        where = f"in module '{module}'" if module else "in the top module"
        at = f" at {op}" if op else ""
        super().__init__(f"{where}{at}: {type(error).__name__}: {text}")
        self.module, self.op = module, op


class _FailedOp(TorchDispatchMode):
    """Records the ATen op whose kernel raised (None when the failure was outside one)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: str | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        try:
            return func(*args, **(kwargs or {}))
        except Exception:
            if self.failed is None:
                self.failed = str(getattr(func, "overloadpacket", func).__name__)
            raise


def _same(a: BaseException, b: BaseException) -> bool:
    return type(a) is type(b) and str(a) == str(b)


def _module_of(model: nn.Module, forward: Callable[[], Any], error: BaseException,
               mode: _FailedOp | None = None) -> str | None:
    """The innermost module running when ``forward()`` raises ``error`` again (hooks push
    and pop each module's path), under ``mode`` when given; None when it does not raise the
    same error this time."""
    stack: list[str] = []
    handles = []
    for path, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(
            lambda _m, _a, path=path: stack.append(path)))
        handles.append(module.register_forward_hook(
            lambda _m, _a, _o, path=path: stack.remove(path) if path in stack else None))
    try:
        if mode is None:
            forward()
        else:
            with mode:
                forward()
    except Exception as again:  # noqa: BLE001 - the failure, now located
        return (stack[-1] if stack else "") if _same(again, error) else None
    finally:
        for h in handles:
            h.remove()
    return None


def call_naming_failure(model: nn.Module, forward: Callable[[], T]) -> T:
    """``forward()`` (a forward pass of ``model``); :class:`ForwardFailure` naming the module
    and op when it raises (module docstring). Call it inside the contexts the forward needs
    (no_grad, a cast or rounding mode): the second run happens there too."""
    try:
        return forward()
    except Exception as exc:  # noqa: BLE001 - re-raised with where it happened
        module = _module_of(model, forward, exc)
        if module is None:   # not the same failure twice: as it was
            raise
        recorder = _FailedOp()   # the op, only where the run under the recorder agrees
        op = recorder.failed if _module_of(model, forward, exc, recorder) == module else None
        raise ForwardFailure(module, op or "", exc) from exc
