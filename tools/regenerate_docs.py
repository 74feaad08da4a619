"""Regenerate the numbers in the documentation: nothing in docs/ or the README is pasted by hand.

    python tools/regenerate_docs.py results STORE [STORE ...] [--out docs/results.md]
        [--pending SUITE:PROFILE]
    python tools/regenerate_docs.py readme [--file README.md] [--only TEXT]

``results`` writes ``docs/results.md`` from results stores: per store and suite, the tables
that ``precision run`` prints (solver floors, trained-model test MSE, study metrics), headed
by where the runs were computed (torch version, CPU capability, BLAS, threads, the code's
commit, with run counts) and the dates of the runs; with ``--pending SUITE:PROFILE``, the
profile's cells the store lacks and the command that computes them. Its bytes depend only
on the stores (and the shipped suites).

``readme`` re-runs every command the README (or ``--file``) marks as regenerated and puts
its real output in the code block under the mark::

    <!-- regenerate: precision run solvers --profile quick --no-progress; head=20; tail=3 -->
    ```text
    $ precision run solvers --profile quick
    ...the output, replaced...
    ```

The commands of one file run in order in one fresh temporary folder (a later command sees
the stores of the earlier ones; ``examples/`` is linked into it); ``precision`` runs as
``python -m precision`` of this checkout. ``head=N`` / ``tail=M`` keep the first N /
last M lines of the output with a line saying how many were left out; ``show=TEXT`` is the
command line shown after ``$`` (by default the command itself, without ``--no-progress``).
A command that fails stops the tool (exit 1) and leaves the file unchanged. ``--only TEXT``
re-runs only the marks whose command contains TEXT (e.g. ``--only 'run solvers'``) and keeps
the other blocks as they are; a selected command that reads a store an unselected one
writes finds it empty, so select those together.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import Counter
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # run as a script from anywhere: this checkout's packages
    sys.path.insert(0, str(ROOT))

from precision.provenance import provenance_line  # noqa: E402
from probes.store.db import Store  # noqa: E402
from reports.data_version import left_out_note, newest_data_rows  # noqa: E402
from reports.files import write_text  # noqa: E402
from reports.model_table import model_tables  # noqa: E402
from reports.solver_table import solver_tables  # noqa: E402
from reports.study_table import study_tables  # noqa: E402

COMMAND = "python tools/regenerate_docs.py"
#: Folders of this checkout that the README's commands name by relative path; they are linked
#: into the temporary folder the commands run in.
EXAMPLE_FOLDERS = ("examples",)


# ---------------------------------------------------------------------------- results.md


def _where(rows: list[dict[str, Any]]) -> list[str]:
    """One line per machine configuration the runs were computed with, with run counts."""
    lines = Counter()
    for r in rows:
        p = (r.get("result") or {}).get("provenance")
        lines[provenance_line(p) if isinstance(p, dict) else "not recorded"] += 1
    return [f"{line} ({n} run{'s' if n != 1 else ''})" for line, n in sorted(lines.items())]


def _dates(rows: list[dict[str, Any]]) -> str:
    days = sorted({str(r.get("created_at") or "")[:10] for r in rows} - {""})
    if not days:
        return "unknown"
    return days[0] if days[0] == days[-1] else f"{days[0]} .. {days[-1]}"


def pending_lines(rows: list[dict[str, Any]], suite: str, profile: str, store_label: str
                  ) -> list[str]:
    """The jobs of ``suite --profile PROFILE`` that ``rows`` (the store's runs of the suite)
    do not hold yet, one line each, and the commands that compute them (Markdown)."""
    from probes.suite import load_suite

    have = {r["run_id"] for r in rows}
    missing = [r for r in load_suite(suite, profile=profile).runs
               if not set(r.ids) <= have]
    command = f"precision run {suite} --profile {profile} --db {store_label}"
    head = [f"### Pending cells of `{suite} --profile {profile}`", ""]
    if not missing:
        return head + ["None: the store holds every cell of the profile.", ""]
    lines = []
    for r in sorted(missing, key=lambda r: (r.spec.depth, r.spec.width, r.label, r.subject,
                                            r.spec.seed, str(r.spec.model_options))):
        job = r.spec
        ln = job.model_options.get("layernorm")
        lines.append(f"- {r.subject}{'' if ln is None else (', LN' if ln else ', no LN')} on "
                     f"{job.task}, depth {job.depth}, width {job.width}, seed {job.seed}")
    return head + [f"{len(missing)} job{'s' if len(missing) != 1 else ''} of the profile are "
                   "not in the store yet (each stores one record per precision). This command "
                   "computes them (a job already stored is never recomputed; with "
                   "`--checkpoints DIR` a killed run goes on where it stopped):", "",
                   f"    {command} --jobs 2 --checkpoints ck",
                   "", "On a lent GPU, in slices of the loan:", "",
                   f"    {command} --device cuda --jobs 14 --checkpoints ck --slice 540", "",
                   *lines, ""]


def results_markdown(store: Store | list[tuple[Store, str]], store_label: str = "",
                     pending: dict[str, str] | None = None, out_label: str = "") -> str:
    """The text of ``docs/results.md`` for ``store`` (``store_label``: how it is named in the
    text, e.g. the path given on the command line), or for several (store, label) pairs: each
    suite of each store gets its section (headed ``suite (store)`` where two stores hold the
    suite). ``pending``: suite -> profile whose cells the store should hold; the section
    lists the ones it lacks and the command that computes them (:func:`pending_lines`).
    ``out_label``: the page's path where it is not the default ``docs/results.md`` (the
    command the page names writes it there again)."""
    stores = store if isinstance(store, list) else [(store, store_label)]
    pending = pending or {}
    held = {suite for st, _ in stores for suite in st.suites()}
    for suite in sorted(set(pending) - held):
        raise ValueError(f"--pending {suite}: no store given holds suite {suite} (its cells "
                         "are listed under the suite's section)")
    labels = " ".join(label for _, label in stores) + "".join(
        f" --pending {s}:{p}" for s, p in sorted(pending.items())) + (
        f" --out {out_label}" if out_label else "")
    names = ", ".join(f"`{Path(label).name}`" for _, label in stores)
    out = ["# Results", "",
           f"Generated by `{COMMAND} results {labels}` from the store"
           f"{'s' if len(stores) > 1 else ''} {names}; do not edit by hand: run the command "
           "again.", "",
           "Float32 / float64 digits depend on the machine (its CPU kernels, BLAS and threads, "
           "listed per suite below); see [reproducibility.md](reproducibility.md) for what "
           "does not.", ""]
    sections = [(st, label, suite) for st, label in stores for suite in st.suites()]
    if not sections:
        return "\n".join(out + ["The store holds no runs.", ""])
    count = Counter(suite for _, _, suite in sections)
    titles = [suite if count[suite] == 1 else f"{suite} ({Path(label).name})"
              for _, label, suite in sections]
    out += ["Suites: " + ", ".join(f"[{t}](#{_anchor(t)})" for t in titles) + ".", ""]
    for (st, label, suite), title in zip(sections, titles, strict=True):
        rows = st.runs(suite=suite)
        statuses = Counter(r["status"] for r in rows)
        source = f" (store `{Path(label).name}`)" if len(stores) > 1 else ""
        out += [f"## {title}", "",
                f"{len(rows)} run{'s' if len(rows) != 1 else ''} ("
                + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items()))
                + f"){source}, computed {_dates(rows)} with:", ""]
        out += [f"- {line}" for line in _where(rows)] + [""]
        shown, older = newest_data_rows(rows)   # never a table of two problem versions
        if older:
            out += [left_out_note(older)[0].upper() + left_out_note(older)[1:] + ".", ""]
        for block in (solver_tables(shown), model_tables(shown), study_tables(shown)):
            if block:
                out += ["```text", *(line.rstrip() for line in block.splitlines()), "```", ""]
        if suite in pending:
            out += pending_lines(rows, suite, pending[suite], label)
    return "\n".join(out)


def _anchor(title: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^a-z0-9_ -]", "", title.lower()).replace(" ", "-")


def write_results(store_paths: Path | list[Path], out: Path,
                  pending: dict[str, str] | None = None) -> Path:
    """Write ``out`` from the stores at ``store_paths`` (opened read-only); ``pending``: see
    :func:`results_markdown`."""
    paths = store_paths if isinstance(store_paths, list) else [store_paths]
    with ExitStack() as opened:
        stores = []
        for path in paths:
            rel = os.path.relpath(path)
            label = rel if not rel.startswith("..") else Path(path).name   # no /tmp/... paths
            stores.append((opened.enter_context(Store(path, create=False)), label))
        text = results_markdown(stores, pending=pending, out_label=_out_label(Path(out)))
    write_text(out, text)
    return out


def _out_label(out: Path) -> str:
    """How the page's command names its ``--out``: as typed when relative (the page is then
    rewritten by the same command from the same folder), relative to the repository when an
    absolute path inside it, nothing for the default ``docs/results.md`` or a path outside
    the repository (a scratch page)."""
    if out.resolve() == (ROOT / "docs" / "results.md").resolve():
        return ""
    if not out.is_absolute():
        return str(out)
    rel = os.path.relpath(out, ROOT)
    return "" if rel.startswith("..") else rel


# ---------------------------------------------------------------------------- README blocks

MARK = re.compile(r"^<!-- regenerate: (?P<spec>.*?) -->\n```(?P<lang>\w*)\n(?P<body>.*?)^```$",
                  re.M | re.S)


def _parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    command, *options = [part.strip() for part in spec.split(";")]
    opts = {}
    for opt in options:
        key, sep, value = opt.partition("=")
        if not sep or key not in ("head", "tail", "show"):
            raise ValueError(f"unknown option {opt!r} in <!-- regenerate: {spec} -->")
        opts[key] = value
    return command, opts


def _run(command: str, cwd: Path) -> str:
    """Run one documented command in ``cwd``; its stdout and stderr, in order."""
    argv = shlex.split(command)
    if argv and argv[0] == "precision":
        argv = [sys.executable, "-m", "precision", *argv[1:]]
    elif argv and argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]), "COLUMNS": "100"}
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if done.returncode != 0:
        tail = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"`{command}` exited {done.returncode}: {tail[0]}")
    return done.stdout


def _abridge(text: str, opts: dict[str, str]) -> str:
    lines = [line.rstrip() for line in text.rstrip("\n").splitlines()]
    head, tail = int(opts.get("head", 0) or 0), int(opts.get("tail", 0) or 0)
    if (head or tail) and head + tail < len(lines):
        left = len(lines) - head - tail
        lines = lines[:head] + [f"... ({left} lines left out)"] + (lines[-tail:] if tail else [])
    return "\n".join(lines)


def regenerate_blocks(text: str, cwd: Path, run=_run, only: str | None = None) -> str:
    """``text`` with every marked block's output replaced by a fresh run in ``cwd`` (with
    ``only``: the blocks whose command contains it; the others are kept, not run)."""
    def replace(m: re.Match[str]) -> str:
        command, opts = _parse_spec(m["spec"])
        if only is not None and only not in command:
            return m[0]
        shown = opts.get("show") or command.replace(" --no-progress", "")
        output = _abridge(run(command, cwd), opts)
        return (f"<!-- regenerate: {m['spec']} -->\n```{m['lang']}\n$ {shown}\n"
                f"{output}\n```")

    return MARK.sub(replace, text)


def write_readme(path: Path, only: str | None = None) -> Path:
    """Regenerate the marked blocks of ``path`` (with ``only``: those whose command contains
    it) in a fresh temporary folder."""
    text = path.read_text(encoding="utf-8")
    if only is not None and not any(only in _parse_spec(m["spec"])[0]
                                    for m in MARK.finditer(text)):
        raise ValueError(f"no <!-- regenerate: ... --> command in {path} contains {only!r}")
    with tempfile.TemporaryDirectory(prefix="regenerate-docs-") as tmp:
        for shared in EXAMPLE_FOLDERS:   # commands name examples/... as from the repo root
            (Path(tmp) / shared).symlink_to(ROOT / shared, target_is_directory=True)
        new = regenerate_blocks(text, Path(tmp), only=only)
    write_text(path, new)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    res = sub.add_parser("results", help="write docs/results.md from a store")
    res.add_argument("store", type=Path, nargs="+")
    res.add_argument("--out", type=Path, default=ROOT / "docs" / "results.md")
    res.add_argument("--pending", action="append", default=[], metavar="SUITE:PROFILE",
                     help="list the cells of SUITE --profile PROFILE the store lacks, with "
                          "the command that computes them")
    rd = sub.add_parser("readme", help="re-run the README's marked commands")
    rd.add_argument("--file", type=Path, default=ROOT / "README.md")
    rd.add_argument("--only", metavar="TEXT",
                    help="re-run only the marks whose command contains TEXT")
    args = parser.parse_args(argv)
    try:
        if args.what == "results":
            for path in args.store:
                if not path.is_file():
                    raise FileNotFoundError(f"no store at {path}")
            pending = {}
            for spec in args.pending:
                suite, sep, profile = spec.partition(":")
                if not (sep and suite and profile):
                    raise ValueError(f"--pending {spec!r}: spell SUITE:PROFILE")
                pending[suite] = profile
            done = write_results(list(args.store), args.out, pending)
        else:
            done = write_readme(args.file, args.only)
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"regenerate_docs: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {done}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
