"""Ctrl-C and SIGTERM of ``run`` / ``probe``: the first one stops the sweep (the executor
kills its workers), later ones are ignored, and the command ends with one line saying how
many runs are stored and how to resume (exit 130, or 143 for SIGTERM)."""

from __future__ import annotations

import sys


class Stop(KeyboardInterrupt):
    """Ctrl-C or SIGTERM of a ``run`` / ``probe`` (``signum``: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class StopSignals:
    """While ``run`` / ``probe`` computes, the first Ctrl-C or SIGTERM raises :class:`Stop`
    (the executor then kills its workers) and every later one is ignored, so a second Ctrl-C
    during the shutdown prints no traceback."""

    def __init__(self) -> None:
        self._old: dict[int, object] = {}
        self._fired = False

    def install(self) -> None:
        import signal
        import threading

        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._old[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        import signal

        for s in self._old:
            signal.signal(s, signal.SIG_IGN)
        self._fired = True
        raise Stop(signum)

    def restore(self) -> None:
        """The handlers as they were, unless a stop fired (the process is exiting: the
        signals stay ignored through its shutdown)."""
        import signal

        if self._fired:
            return
        for signum, handler in self._old.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._old.clear()


def interrupted(exc: KeyboardInterrupt) -> int:
    """The one line of a stopped command and its exit code: 130 for Ctrl-C, 143 for
    SIGTERM (128 + the signal)."""
    import signal

    signum = getattr(exc, "signum", signal.SIGINT)
    what = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
    stored = getattr(exc, "stored", None)
    if stored is not None:
        done = (f"{stored} of {exc.todo} runs stored in "  # type: ignore[attr-defined]
                f"{getattr(exc, 'db', 'the store')}")
    else:
        done = "finished runs are stored"
    print(f"precision: {what}; {done}, re-run the same command to resume", file=sys.stderr)
    return 128 + int(signum)
