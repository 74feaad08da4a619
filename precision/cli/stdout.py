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
    pipe stays ``BrokenPipeError``: the reader left, which is not an error)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise StdoutError(exc.strerror or str(exc)) from None

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def drop_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's final flush of what
    could not be written does not fail again (and print a traceback) at exit."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (captured by a test): nothing is flushed at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


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
