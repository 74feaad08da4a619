"""What the commands share: the one-line user error, the default store, the checks of options
and paths every command makes the same way, the floor tables and the progress bar of a sweep.
Nothing here computes: it parses, checks and prints."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from precision.text_numbers import MAX_DIGITS, NumberError, is_whole, parse_real, shown
from probes.names import check_name
from probes.store.atomic import expand_user

if TYPE_CHECKING:
    from probes.store.db import RunRecord

EXIT_USAGE = 2
DEFAULT_DB = "results.db"
#: ``--jobs`` may not exceed this many workers per CPU of this machine, nor JOBS_CEILING.
JOBS_PER_CPU, JOBS_CEILING = 4, 256
#: The help of a FACTORY argument.
FACTORY_HELP = "MODULE:FACTORY, path/to/file.py:FACTORY or hf:ClassName"


class UsageError(Exception):
    """A one-line user error (exit 2)."""


def max_jobs() -> int:
    """The largest ``--jobs``: 4 workers per CPU this process may use, at most 256 (each
    worker is a process of ~200 MB; more than that thrashes, it never speeds up)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(JOBS_CEILING, JOBS_PER_CPU * cpus))


def whole(text: str) -> int:
    """An option's whole number (argparse ``type``): ASCII digits, at most 20 of them, a
    leading ``-`` allowed (:mod:`precision.text_numbers`); its range is the command's to
    check, with its own message."""
    if not is_whole(text.removeprefix("-")):
        raise argparse.ArgumentTypeError(f"a whole number in ASCII digits (at most "
                                         f"{MAX_DIGITS}) is needed, not {shown(text)}")
    return int(text)


def real(text: str) -> float:
    """An option's finite real number (argparse ``type``): ``12``, ``0.5``, ``1e-6``, in ASCII
    (:mod:`precision.text_numbers`); its range is the command's to check."""
    try:
        return parse_real(text, "the value")
    except NumberError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_shape_options(args: argparse.Namespace, options: tuple[str, ...],
                        error: type[Exception] = UsageError) -> None:
    """Each of ``options`` (``d_in``, ``tokens``, ...) is a positive whole number."""
    for option in options:
        if getattr(args, option) < 1:
            raise error(f"--{option.replace('_', '-')} must be a positive integer, not "
                        f"{getattr(args, option)}")


def add_db_option(parser: argparse.ArgumentParser, text: str | None = None) -> None:
    """``--db`` (default :data:`DEFAULT_DB`), with the help ``text`` or the usual one."""
    parser.add_argument("--db", default=DEFAULT_DB,
                        help=text or f"SQLite results store (default {DEFAULT_DB})")


def add_shape_options(parser: argparse.ArgumentParser, *, sample: bool = False) -> None:
    """The shape of a factory's module (``--d-in`` ... ``--tokens``); with ``sample``, the
    sample's ``--batch`` and ``--seed`` too."""
    options = [("--d-in", 20, "input features"), ("--d-out", 20, "output features"),
               ("--depth", 2, "depth"), ("--width", 64, "width"), ("--tokens", 40, "tokens N")]
    if sample:
        options += [("--batch", 1, "sequences"), ("--seed", 0, "seed")]
    for flag, default, what in options:
        parser.add_argument(flag, type=whole, default=default,
                            help=f"{what} (default {default})")


def csv_names(text: str | None, option: str) -> list[str] | None:
    """The names of a comma-separated option (each a valid name, :mod:`probes.names`)."""
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError(f"{option}: empty list (give comma-separated names)")
    return [check_name(item, f"{option} name") for item in items]


def nonempty(option: str, value: str | None) -> str | None:
    """``value``, or UsageError when an option was given as the empty string."""
    if value is not None and not value.strip():
        raise UsageError(f"{option} is empty (give a value, or leave the option out)")
    return value


def store_exists(db: str) -> bool:
    """Whether the store file exists; UsageError when its folder cannot be searched."""
    try:
        return expand_user(db).exists()
    except OSError as exc:
        raise UsageError(f"cannot read results store {db}: {exc.strerror or exc}") from None


def refuse_output_over_store(option: str, out: str, db: str, *, folder: bool = False) -> None:
    """UsageError when the output path ``out`` is the store (or one of its SQLite files),
    in any spelling (symlink, relative or absolute, ``~``); with ``folder``, also when the
    store would have to become a folder (``out`` beneath the store file)."""
    from probes.store.atomic import inside, same_file

    store_files = [Path(db)] + [Path(f"{db}{suffix}") for suffix in ("-wal", "-shm", "-journal")]
    for path in store_files:
        try:
            same = same_file(out, path) or (folder and inside(out, path))
        except OSError as exc:   # a symlink loop
            raise UsageError(f"{option} {out}: {exc.strerror or exc}") from None
        if same:
            raise UsageError(f"{option} {out} is the results store {db} itself; refusing "
                             "to overwrite it (give another path)")


def writable_folder(flag: str, value: str | None) -> str | None:
    """``value`` as an absolute folder, created and checked writable now (not after the first
    model has trained); None when not given; a one-line UsageError otherwise."""
    if not value:
        return None
    import tempfile

    from probes.store.atomic import resolved

    try:
        folder = resolved(value)
        is_file = folder.exists() and not folder.is_dir()
    except OSError as exc:   # a symlink loop, a name too long
        raise UsageError(f"{flag} {shown(value)}: {exc.strerror or exc}") from None
    if is_file:
        raise UsageError(f"{flag} {value} is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {value}: cannot create the folder: "
                         f"{exc.strerror or exc}") from None
    try:  # writable: a file can be created in it
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".precision-check-"):
            pass
    except OSError as exc:
        raise UsageError(f"{flag} {value}: cannot write into the folder: "
                         f"{exc.strerror or exc}") from None
    return str(folder)   # travels with each run, to any worker


def _is_terminal(stream: object) -> bool:
    """Whether ``stream`` is an interactive terminal (False for files, pipes, captures)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):   # a closed stream
        return False


class Progress:
    """The progress of a sweep on stderr (nothing when ``shown`` is false or nothing is to
    compute): a bar on a terminal; where stderr is a file or a pipe (a log), one line at
    each tenth of the runs instead of a bar's carriage-return updates. And the weights that
    could not be saved (the first one is a warning at once: a full disk fails every later
    save)."""

    def __init__(self, total: int, shown: bool) -> None:
        self.weights_errors: list[str] = []
        self._bar = None
        self._lines = bool(total and shown) and not _is_terminal(sys.stderr)
        self._next_line = 0   # (lines) the next tenth to report
        if total and shown and not self._lines:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="run", file=sys.stderr, dynamic_ncols=True)

    def __call__(self, done: int, total: int, record: RunRecord) -> None:
        """One run stored (``record``: its first record)."""
        error = record.result.get("weights_error")
        if error:
            self.weights_errors.append(error)
            if len(self.weights_errors) == 1:
                line = f"precision: warning: {error} (the run's results are stored)"
                (self._bar.write if self._bar is not None else print)(line, file=sys.stderr)
        if self._bar is not None:
            self._bar.set_postfix_str(f"{record.subject} {record.precision} {record.task}",
                                      refresh=False)
            self._bar.update(1)
        elif self._lines and (10 * done >= self._next_line * total or done == total):
            print(f"precision: {done}/{total} runs stored", file=sys.stderr, flush=True)
            self._next_line = 10 * done // total + 1

    def close(self) -> None:
        """The bar ends (its line stays on stderr)."""
        if self._bar is not None:
            self._bar.close()
