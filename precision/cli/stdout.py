"""Standard output that cannot be written (a full disk, ``> /dev/full``, an I/O error) is an
error caught where it is written, not a traceback at exit: :class:`CheckedStdout` turns write
and flush errors into :class:`StdoutError`, which the command prints as one line."""

from __future__ import annotations

import sys
from typing import IO


class StdoutError(Exception):
    """Standard output cannot be written (a full disk, /dev/full, an I/O error)."""


class CheckedStdout:
    """Standard output whose write and flush errors become :class:`StdoutError` (a broken
    pipe stays ``BrokenPipeError``: the reader left, which is not an error).

    ``keep_going`` (a sweep: :func:`keep_going`): a broken pipe drops this and every later
    write instead (the stream's descriptor then points at /dev/null), so the work goes on
    and is stored when the reader left early (``precision run ... | head -2`` stopped a
    sweep after two runs with exit 0). ``checked``: other write errors become
    :class:`StdoutError` (False for standard error: its own errors have nowhere to go)."""

    def __init__(self, stream: IO[str], *, checked: bool = True) -> None:
        self._stream = stream
        self._checked = checked
        self.keep_going = False
        self.dropped = False

    def _drop(self) -> None:
        self.dropped = True
        _to_devnull(self._stream)

    def write(self, text: str) -> int:
        if self.dropped:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            if not self.keep_going:
                raise
            self._drop()
            return len(text)
        except OSError as exc:
            if not self._checked:
                raise
            raise StdoutError(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        if self.dropped:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            if not self.keep_going:
                raise
            self._drop()
        except OSError as exc:
            if not self._checked:
                raise
            raise StdoutError(exc.strerror or str(exc)) from None


def keep_going() -> None:
    """From now on a closed standard output or error (its reader left) drops what is written
    to it instead of ending the command: a sweep's work goes on and is stored. Standard error
    is wrapped here for it (standard output already is, by ``main``)."""
    if not isinstance(sys.stderr, CheckedStdout):
        sys.stderr = CheckedStdout(sys.stderr, checked=False)  # type: ignore[assignment]
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, CheckedStdout):
            stream.keep_going = True


def _to_devnull(stream: IO[str]) -> None:
    """Point ``stream``'s file descriptor at /dev/null (what is buffered is discarded)."""
    import os

    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def drop_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's final flush of what
    could not be written does not fail again (and print a traceback) at exit."""
    _to_devnull(sys.stdout)


def encode_with_replacement(*streams: object) -> None:
    """Streams whose encoding cannot hold a character (ASCII under ``LC_ALL=C`` or
    ``PYTHONIOENCODING=ascii``) write it as a backslash escape (``\\u00fc``) instead of
    raising ``UnicodeEncodeError`` after the work is done; a stream that is not a text file
    (a test's capture) is left as it is."""
    for stream in streams:
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):   # closed or detached: nothing to write to
                pass
