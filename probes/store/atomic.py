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

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from probes.store.owned import remove_stale_temporaries, temporary_name


def expand_user(path: str | os.PathLike[str]) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded; a user without a home folder
    (``~nosuchuser/x.db``) is ``FileNotFoundError`` naming it, not pathlib's bare
    ``RuntimeError``, so every command reports it in one line like any missing folder."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = str(path).split(os.sep, 1)[0]
        raise FileNotFoundError(errno.ENOENT, f"no home folder for {user!r}",
                                str(path)) from None


def resolved(path: str | os.PathLike[str]) -> Path:
    """``path`` with ``~`` expanded, made absolute and with symlinks resolved (also when
    the file does not exist yet: its existing parent is resolved). A symlink loop is an
    ``OSError`` (ELOOP), as opening the path would be, not pathlib's ``RuntimeError``."""
    expanded = expand_user(path)
    try:
        return expanded.resolve()
    except RuntimeError:   # pathlib's "Symlink loop from ..."
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path)) from None


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """Whether ``a`` and ``b`` name the same file: the same resolved path, or (both
    existing) the same inode and device, which also catches hard links. ``OSError`` when a
    path cannot be resolved (a symlink loop)."""
    try:
        if os.path.samefile(expand_user(a), expand_user(b)):
            return True
    except OSError:
        pass
    return resolved(a) == resolved(b)


def inside(path: str | os.PathLike[str], other: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is ``other`` or lies beneath it (resolved paths)."""
    p, o = resolved(path), resolved(other)
    return p == o or o in p.parents


def _special_file(target: Path) -> int | None:
    """A descriptor open for writing on ``target`` when it exists and is a character device
    (``/dev/null``, a terminal) or a FIFO some process reads (``/dev/stdout`` onto a pipe):
    those are written in place, as a shell's ``>`` would. None when it does not exist or is
    a regular file (replaced atomically). ``OSError`` for anything else -- a folder, a block
    device, a socket, a FIFO nobody reads (opening it would block) -- so the command refuses
    it in one line and never replaces it."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a folder (give a file name)", str(target))
    if stat.S_ISCHR(st.st_mode):
        return os.open(target, os.O_WRONLY | os.O_TRUNC)
    if stat.S_ISFIFO(st.st_mode):
        try:
            fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                raise OSError(errno.ENXIO, "it is a FIFO that no process reads (writing "
                              "would block); start its reader first", str(target)) from None
            raise
        os.set_blocking(fd, True)
        return fd
    kind = "a block device" if stat.S_ISBLK(st.st_mode) else \
        "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file"
    raise OSError(errno.EINVAL, f"it is {kind}; refusing to write onto it", str(target))


@contextmanager
def atomic_write(path: str | os.PathLike[str], mode: str = "w", *, encoding: str | None = "utf-8",
                 newline: str | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing (``mode`` "w" or "wb"); when the
    block ends without an error, flush it to disk and rename it onto ``path``.

    On an error the temporary file is removed, ``path`` is left as it was and the error
    propagates (an ``OSError`` such as ``ENOSPC`` for a full disk). The new file gets the
    usual permissions of a new file (the umask), not the temporary file's 0600. The
    temporary file is named for this host and process (:func:`~probes.store.owned.
    temporary_name`): a write killed before its rename leaves it, and the next write of the
    same path removes it (:func:`~probes.store.owned.remove_stale_temporaries`).
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    target = expand_user(path)
    existing = _special_file(target)
    if existing is not None:   # a device or a pipe: written in place, never replaced
        with os.fdopen(existing, mode, **({} if mode == "wb" else
                                           {"encoding": encoding, "newline": newline})) as f:
            yield f
            f.flush()
        return
    remove_stale_temporaries(target)   # what a killed earlier write of it left
    tmp = temporary_name(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:   # this process's own leftover: never in use
        os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
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
