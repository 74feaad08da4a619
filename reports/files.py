"""Where a report's files go, what they are called, and how they are written.

A report folder holds ``report.md``, ``report.html`` and ``tables.tex`` at its top and three
sub-folders: ``figures/`` (each figure as PNG and SVG), ``tables/`` (one CSV per table) and
``data/`` (the stored numbers, one row per run). File names are built from labels that come
from the store (suite, problem, solver and model names), which may hold anything a store has
ever accepted: ``/``, NUL, spaces, unicode, hundreds of bytes. :func:`slug` turns any label
into a short, lowercase, hyphenated ASCII name; :class:`FileNames` keeps the names of one
report unique (two labels that read the same after sanitising get a short hash of the
original), so a report never fails on a name in the store.

Every file is written by :func:`atomic_write`: into a temporary file beside the target, then
renamed into place, so a full disk or a killed process leaves the previous file (or none),
never a truncated one. A build lists what it wrote (:data:`MANIFEST`) and removes from
figures/, tables/ and data/ what the previous build wrote and this one did not
(:func:`remove_unwritten`), so a report of another store never shows this one's figures, and
nothing the user put there is touched.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from probes.store.atomic import atomic_write as results_atomic_write
from probes.store.owned import owned_subfolder, remove_owned

FIGURES, TABLES, DATA = "figures", "tables", "data"
#: The kinds of file a build writes into its sub-folders (others there are left alone).
OWNED_SUFFIXES = (".png", ".svg", ".csv")

#: Longest file stem (before the extension); longer ones are cut and end in a short hash.
MAX_STEM = 80
_HASH = 8


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH]


def slug(*parts: object) -> str:
    """A file stem a person can read from ``parts`` (joined by ``-``): ASCII lowercase letters,
    digits and single hyphens, at most :data:`MAX_STEM` characters.

    Accents are dropped (``é`` -> ``e``), ``+`` reads ``plus``, every other character that is
    not a letter or a digit becomes a hyphen. A stem that would be longer, or that would be
    empty, ends in a hash of the original text.
    """
    raw = "-".join(str(p) for p in parts)
    text = unicodedata.normalize("NFKD", raw.replace("+", "-plus-"))
    text = text.encode("ascii", "ignore").decode("ascii").lower()
    stem = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    if not stem:
        return "x-" + _digest(raw)
    if len(stem) > MAX_STEM:
        stem = stem[:MAX_STEM - _HASH - 1].rstrip("-") + "-" + _digest(raw)
    return stem


class FileNames:
    """Unique stems within one report: the same key gives the same stem; a different key
    whose :func:`slug` is taken gets the slug plus a hash of the key."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[object, ...], str] = {}
        self._taken: set[str] = set()

    def stem(self, *parts: object) -> str:
        """The stem of the file named by ``parts``."""
        key = tuple(str(p) for p in parts)
        if key in self._by_key:
            return self._by_key[key]
        stem = slug(*parts)
        if stem in self._taken:
            base = stem[:MAX_STEM - _HASH - 1].rstrip("-")
            stem = f"{base}-{_digest(repr(key))}"
            n = 2
            while stem in self._taken:   # a hash collision: practically never, still unique
                stem = f"{base}-{_digest(repr(key) + str(n))}"
                n += 1
        self._taken.add(stem)
        self._by_key[key] = stem
        return stem


#: The paths written since each open :func:`recording` began (innermost last).
_RECORDING: list[set[Path]] = []


@contextlib.contextmanager
def recording() -> Iterator[set[Path]]:
    """The set of every path :func:`atomic_write` writes inside the ``with`` block (resolved),
    filled as they are written: what a report build wrote, so that what it did not write can
    be told from it."""
    written: set[Path] = set()
    _RECORDING.append(written)
    try:
        yield written
    finally:
        _RECORDING.remove(written)


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> Path:
    """Write ``path`` through ``write(file)`` with :func:`probes.store.atomic.atomic_write`: a
    temporary file in the same folder renamed into place, so on any error the previous
    ``path`` (if any) is untouched and the error propagates."""
    path = Path(path)
    with results_atomic_write(path, "wb") as fh:
        write(fh)
    for written in _RECORDING:
        written.add(path.resolve())
    return path


#: The report folder's list of the files its last build wrote (relative paths, one a line).
MANIFEST = ".report-files"


def owned_subfolders(folder: Path) -> list[Path]:
    """The report's figures/, tables/ and data/ inside ``folder``, created when missing;
    :class:`~probes.store.owned.NotOwnedError` (an ``OSError``) when one is a symlink or
    resolves outside ``folder``: the build then writes and removes nothing there."""
    return [owned_subfolder(folder, sub) for sub in (FIGURES, TABLES, DATA)]


def built_before(folder: Path) -> list[Path]:
    """The files an earlier build wrote into ``folder``'s figures/, tables/ and data/: those
    its :data:`MANIFEST` lists; in a report folder from before the manifest (``report.md``
    there, no manifest), the files of :data:`OWNED_SUFFIXES` there; else none. Call it
    before the build writes anything."""
    folder = Path(folder)
    manifest = folder / MANIFEST
    if manifest.is_file():
        return [folder / line for line in manifest.read_text(encoding="utf-8").splitlines()
                if line.split("/")[0] in (FIGURES, TABLES, DATA) and ".." not in line]
    if (folder / "report.md").is_file():
        return [p for sub in (FIGURES, TABLES, DATA) for p in sorted((folder / sub).glob("*"))
                if p.suffix in OWNED_SUFFIXES]
    return []


def remove_unwritten(folder: Path, earlier: list[Path], written: set[Path]) -> list[Path]:
    """Remove the files an earlier build wrote (``earlier``, :func:`built_before`) that this
    one (``written``, its :func:`recording`) did not: the figures of runs or stores this
    report does not show. Nothing else is touched: a file the user put there, a folder, a
    link, anything outside the report's own sub-folders (:mod:`probes.store.owned`).
    Writes this build's :data:`MANIFEST`; returns what was removed."""
    folder = Path(folder)
    removed = remove_owned(earlier, owned_subfolders(folder), keep=written)
    root = folder.resolve()
    mine = sorted(p.relative_to(root).as_posix() for p in written if p.is_relative_to(root))
    write_text(folder / MANIFEST, "".join(f"{line}\n" for line in mine))
    return removed


def write_bytes(path: Path, data: bytes) -> Path:
    """``path`` holds ``data``, written atomically."""
    return atomic_write(path, lambda fh: fh.write(data))


def write_text(path: Path, text: str) -> Path:
    """``path`` holds ``text`` (UTF-8), written atomically."""
    return write_bytes(path, text.encode("utf-8"))
