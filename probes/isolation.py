"""User code in a child process: an exception, an exit, a crash or a hang costs one run.

:func:`call_isolated` runs ``fn(*args)`` in a child process and returns its value, or raises
:class:`ChildFailure` with a status and one line: ``failed`` with the exception's last line
(``RuntimeError: boom``), ``exited with code N`` (``os._exit``, ``sys.exit``) or ``killed by
signal SIGSEGV`` (a crash), or ``timeout`` when it ran past its time limit (the child and
anything it started are then killed). The runner uses it for every run of a user's model
factory (:data:`DEFAULT_USER_TIME_LIMIT` unless a limit is given) and for any run with an
explicit ``time_limit``; built-in runs without a limit compute in their process.

The child is forked (Linux: no re-import, nothing to pickle; a ``spawn`` child elsewhere),
ignores Ctrl-C (its parent decides what stops: it kills the child), sits in its own process
group (so a kill reaches what the user's code started) and dies with its parent
(:func:`die_with_parent`), as the workers of a local pool do.
"""

from __future__ import annotations

import ctypes
import faulthandler
import multiprocessing
import os
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

#: Seconds a run of user code (a model factory, its forward and training) may take unless a
#: suite's ``time_limit`` or ``--time-limit`` says otherwise.
DEFAULT_USER_TIME_LIMIT = 3600.0

_PR_SET_PDEATHSIG = 1


class ChildFailure(Exception):
    """Isolated code that did not return: ``status`` ``failed`` or ``timeout``, ``message``
    one line."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def one_line(exc: BaseException) -> str:
    """An exception as the last line of its traceback: ``Type: first line of message``."""
    if isinstance(exc, SystemExit):
        code = exc.code if exc.code is not None else 0
        return f"exited with code {code} (sys.exit)"
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def exit_reason(code: int | None) -> str:
    """A dead child's exit code in words: ``exited with code 3``, ``killed by signal
    SIGSEGV``."""
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by signal {name}"
    return f"exited with code {code}"


def die_with_parent(parent_pid: int) -> None:
    """Make this process die when ``parent_pid`` (its parent) does: Linux's
    ``PR_SET_PDEATHSIG`` (SIGKILL from the kernel, even when the parent was killed with -9),
    or elsewhere a watchdog thread that exits once the parent pid changes."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:   # the parent died before the line above
        os._exit(1)
    if not armed:
        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os._exit(1)

        threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def process_context() -> Any:
    """The start method of child and worker processes: ``fork`` on Linux (no re-import),
    ``spawn`` elsewhere and in a process that has initialised CUDA (a forked child cannot use
    it: the parent of a GPU run that computed in-process first, or a worker after a GPU run)."""
    methods = multiprocessing.get_all_start_methods()
    torch = sys.modules.get("torch")
    cuda_live = torch is not None and torch.cuda.is_initialized()
    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") and
                                       "fork" in methods and not cuda_live else "spawn")


def _child_main(conn: Any, parent_pid: int, fn: Callable[..., Any], args: tuple,
                kwargs: dict[str, Any]) -> None:
    """What the child runs: ``fn(*args, **kwargs)``, its value or its exception's line sent
    back (pickled: this child's own data, to its parent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    faulthandler.disable()   # a crash is one line from the parent, not a dump of stacks
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    die_with_parent(parent_pid)
    try:
        payload: tuple[str, Any] = ("ok", fn(*args, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - anything the user's code raises is one line
        payload = ("error", one_line(exc))
    try:  # plain pickle: no shared-memory handles that die with this process
        data = pickle.dumps(payload)
    except Exception as exc:  # noqa: BLE001 - e.g. a value that does not pickle
        data = pickle.dumps(("error", f"cannot return the result: {one_line(exc)}"))
    conn.send_bytes(data)
    conn.close()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)   # not the user's atexit handlers or non-daemon threads


def _kill(proc: Any) -> None:
    """SIGKILL the child's process group (what it started too), then the child; reap it."""
    if proc.pid is None:
        return
    if proc.exitcode is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.join(5)


def call_isolated(fn: Callable[..., Any], *args: Any, time_limit: float | None = None,
                  **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` computed in a child process; its value, or :class:`ChildFailure`
    (``failed``: its exception, exit or crash; ``timeout``: past ``time_limit`` seconds,
    None = no limit). An interrupt of this process (Ctrl-C) kills the child and propagates."""
    ctx = process_context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(send, os.getpid(), fn, args, kwargs),
                       name="precision-isolated", daemon=False)
    try:
        proc.start()
        send.close()
        try:
            os.setpgid(proc.pid, proc.pid)   # also from here: no race with a kill below
        except OSError:
            pass
        if not recv.poll(time_limit):
            raise ChildFailure("timeout", f"timed out after {time_limit:g} s (the time "
                                          "limit: --time-limit or the suite's time_limit)")
        try:
            status, value = pickle.loads(recv.recv_bytes())
        except (EOFError, OSError):
            proc.join(5)
            raise ChildFailure("failed", exit_reason(proc.exitcode)) from None
        except Exception as exc:  # noqa: BLE001 - a result that does not unpickle here
            raise ChildFailure("failed", f"cannot read the result: {one_line(exc)}") from None
        if status != "ok":
            raise ChildFailure("failed", str(value))
        return value
    finally:
        _kill(proc)
        recv.close()
