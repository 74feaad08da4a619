"""Writing a file so that it is either complete or untouched, and never one of its inputs.

:func:`atomic_write` writes to a temporary file in the target's folder and renames it into
place (``os.replace``) only when everything was written and flushed to disk; on any error
(a full disk, a read-only folder, an exception of the caller) the temporary file is removed
and the previous file, if any, is left exactly as it was. :func:`same_file` tells whether two
spellings (a symlink, a relative and an absolute path, ``~``) name one file, so that a command
can refuse an output path that is one of its inputs before it opens anything.

Low level on purpose (only the standard library): the CLI's ``results --out`` and the report
writer both use it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def resolved(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` expanded, made absolute and with symlinks resolved (also when
    the file does not exist yet: its existing parent is resolved)."""
    return Path(path).expanduser().resolve()


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file: the same resolved path, or (both
    existing) the same inode and device, which also catches hard links."""
    try:
        if os.path.samefile(Path(a).expanduser(), Path(b).expanduser()):
            return True
    except OSError:
        pass
    return resolved(a) == resolved(b)


def inside(path: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``other`` or lies beneath it (resolved paths)."""
    p, o = resolved(path), resolved(other)
    return p == o or o in p.parents


@contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` "w" or "wb"); when the
    block ends without an error, flush it to disk and rename it onto ``path``.

    On an error the temporary file is removed, ``path`` is left as it was and the error
    propagates (an ``OSError`` such as ``ENOSPC`` for a full disk). The new file gets the
    usual permissions of a new file (the umask), not the temporary file's 0600.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    target = Path(path).expanduser()
    folder = target.parent
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:40]}.", suffix=".tmp", dir=folder)
    try:
        if mode == "wb":
            f: IO = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
