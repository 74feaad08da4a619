"""What a command may delete or overwrite: only files inside the folders it owns.

A folder a command writes into (a report folder's ``figures/``, ``tables/``, ``data/``; the
weights and checkpoint folders) is *owned* when it is a real folder (not a symlink) whose
resolved path lies inside the resolved root the user named. A sub-folder that is a symlink,
or resolves outside its root, is refused before anything is written or removed
(:class:`NotOwnedError`, one line): the user may have linked it to a folder of their own
files, and a clean-up must never reach them.

A clean-up removes only the files its own manifest lists, each one checked here to be a
regular file (not a link, not a folder) directly inside an owned folder
(:func:`remove_owned`).

A write in progress lives in a temporary file named for the host and process that write it
(:func:`temporary_name`); a write killed before its rename leaves that file behind, and the
next writer of the same target removes the leftovers of writers that no longer run
(:func:`remove_stale_temporaries`). A temporary file of a process still running, or of
another host (a Dask worker elsewhere writing to a shared folder), is never touched.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import stat
from collections.abc import Iterable
from pathlib import Path


class NotOwnedError(OSError):
    """A folder or file a command would write or delete through that it does not own."""


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"


def owned_subfolder(root: Path, name: str) -> Path:
    """``root/name`` created when missing and checked to be a real folder inside ``root``
    (both resolved); :class:`NotOwnedError` when it is a symlink, not a folder, or resolves
    outside ``root``. Returns the unresolved path (what messages show)."""
    root = Path(root)
    sub = root / name
    if sub.is_symlink():
        raise NotOwnedError(errno.EPERM, f"it is a symlink (to {os.readlink(sub)}); this "
                            "command writes and cleans up only inside its own folder: remove "
                            "the link or choose another folder", str(sub))
    sub.mkdir(parents=True, exist_ok=True)
    if not stat.S_ISDIR(os.lstat(sub).st_mode):
        raise NotOwnedError(errno.ENOTDIR, "it is not a folder", str(sub))
    real_root, real_sub = root.resolve(), sub.resolve()
    if real_sub.parent != real_root:
        raise NotOwnedError(errno.EPERM, f"it resolves to {real_sub}, outside {real_root}",
                            str(sub))
    return sub


def is_owned_file(path: Path, folders: Iterable[Path]) -> bool:
    """Whether ``path`` is a regular file (not a symlink) whose folder, resolved, is one of
    ``folders`` (resolved): what a clean-up may remove."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    if not stat.S_ISREG(mode):
        return False
    allowed = {Path(f).resolve() for f in folders}
    return path.parent.resolve() in allowed and path.name not in ("", ".", "..")


def remove_owned(paths: Iterable[Path], folders: Iterable[Path],
                 keep: set[Path] | frozenset[Path] = frozenset()) -> list[Path]:
    """Remove each of ``paths`` that :func:`is_owned_file` allows (a regular file directly
    inside one of ``folders``) and whose resolved path is not in ``keep``; returns what was
    removed. Anything else (a link, a folder, a file elsewhere) is left alone."""
    folders = list(folders)
    removed = []
    for path in paths:
        path = Path(path)
        if not is_owned_file(path, folders) or path.resolve() in keep:
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        removed.append(path)
    return removed


#: ``.<target name>.tmp.<host>.<pid>``: a write in progress (see the module docstring).
_TEMP = re.compile(r"\.(?P<name>.+)\.tmp\.(?P<host>[A-Za-z0-9-]+)\.(?P<pid>[0-9]{1,10})")
#: The names earlier versions gave them: ``<stem>.tmp<pid>`` (weights) and
#: ``<name>.tmp<pid>`` (checkpoints), without a host (taken as this one's).
_LEGACY = re.compile(r"(?P<name>.+)\.tmp(?P<pid>[0-9]{1,10})")


def temporary_name(target: Path) -> Path:
    """The temporary file a write of ``target`` goes through before its rename."""
    target = Path(target)
    return target.with_name(f".{target.name[:120]}.tmp.{_host()}.{os.getpid()}")


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True   # someone else's process (or a pid out of range: leave it)
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files of earlier writes of ``target`` (:func:`temporary_name`)
    whose writer, on this host, no longer runs: a killed write's leftover. Returns them."""
    target = Path(target)
    folder = target.parent
    stale = []
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return []
    host, me = _host(), os.getpid()
    for name in names:
        m = _TEMP.fullmatch(name)
        if m is None:
            m = _LEGACY.fullmatch(name)
            if m is None or m["name"] not in (target.name, target.stem):
                continue
        elif m["name"] != target.name[:120] or m["host"] != host:
            continue
        pid = int(m["pid"])
        if pid != me and not _running(pid):
            stale.append(folder / name)
    return remove_owned(stale, [folder])
