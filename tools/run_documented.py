"""CI's second tier: every concrete command README.md and docs/*.md show, run as written at its
documented size, each checked for its exit code and a fragment of its output.

The commands come from :mod:`documented_commands` in reading order (README first, then
docs/*.md by name), so a command that reads a store (``precision report --db quick.db``) runs
after the one that fills it. They run one after another, verbatim, in one scratch folder that
holds links to the repository's ``examples``, ``reports`` and ``tools`` (so the paths the docs
use resolve, and nothing the commands write lands in the repository).

Each command is one of:

* **run** (:data:`EXPECT`): exit 0 and the fragment in its output (stdout and stderr);
* **not run** (:data:`NOT_RUN`): it needs a GPU, a Dask scheduler, or GPU- or CPU-hours;
  the reason is printed, and its quick form, where the docs have one, runs instead;
* **mention**: ``precision run`` or a synopsis with placeholders (``precision report --out
  DIR``): not runnable as written; ``tests/test_docs_commands.py`` checks each against the
  parser.

A concrete command in none of the tables fails the tier (say what it must print, or why it
cannot run here). Each command has a wall-time safety stop (``--timeout``), reported as such.

Usage: python tools/run_documented.py [--list] [--only TEXT] [--workdir DIR] [--timeout S]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from documented_commands import PRECISION, ROOT, TOOLS, documented, is_synopsis  # noqa: E402

#: Concrete commands run here, with a fragment their output must hold.
EXPECT: dict[str, str] = {
    # README.md
    "precision run solvers --jobs 2": "store: results.db",
    "precision list suites": "primitives",
    "precision probe examples/gated_mixer.py:gated_mixer --suite primitives --profile quick "
    "--tasks multiply --db quick.db --jobs 2": "gated_mixer",
    "precision run solvers --profile quick --solvers gd,cg,ols_normal,ols_qr --db quick.db":
        "ols_qr",
    "precision report --db quick.db --out quick-report": "quick-report/report.md",
    "python tools/regenerate_docs.py readme": "wrote",
    # architecture.md
    "precision list": "suites",
    # cli.md
    "precision --help": "usage: precision",
    "precision run solvers": "store: results.db",
    "precision run solvers --profile quick": "store: results.db",
    "precision run solvers --precisions float32,mp100 --solvers gd,cg": "mp100",
    "precision run primitives --profile quick --lengths 10,20,40 --jobs 2": "length",
    "precision delete --suite solvers --status failed --dry-run": "nothing deleted (--dry-run)",
    "precision delete --suite solvers --status failed": "from results.db",
    "precision delete --status failed": "from results.db",
    "precision run primitives --profile quick --jobs 2": "store: results.db",
    "precision run primitives --profile quick --executor dask --jobs 2": "store: results.db",
    "precision run primitives --profile quick --save-weights weights/": "store: results.db",
    # formats.md
    "precision evaluate examples/gated_mixer.py:gated_mixer --precisions float8_e4m3,"
    "mxfp4_e2m1,int4_g32,tf32": "mxfp4_e2m1",
    "precision list precisions": "float8_e4m3",
    "precision gradient examples/gated_mixer.py:gated_mixer --precisions float32,bfloat16,"
    "float8_e4m3": "(all)",
    "precision run solvers --profile quick --precisions float32,float8_e4m3:sr+seed=1":
        "float8_e4m3:sr+seed=1",
    # precision_assignment.md
    "precision localize transformer --precision bfloat16 --target 2e-3": "keep",
    "precision localize hf:LlamaModel --precision bfloat16 --target 1e-3": "keep",
    "precision results": "floor MSE",
    # probing.md
    "precision ops examples/gated_mixer.py:gated_mixer": "mp",
    "precision evaluate hf:LlamaModel --width 32 --depth 1": "LlamaRMSNorm",
    "precision ops hf:LlamaModel --width 32 --depth 1": "mp",
    "precision probe examples/gated_mixer.py:gated_mixer --suite primitives --profile quick "
    "--tasks multiply --jobs 2": "gated_mixer",
    "precision probe examples/zoo/llama.py:llama --suite primitives --profile quick --tasks "
    "multiply --precisions float32,bfloat16,float16,float64 --lengths 16,64,256,1024": "length",
    "precision probe hf:BloomModel --suite primitives --profile quick --tasks multiply":
        "BloomModel",
    "precision probe hf:LlamaModel --suite examples/llama_lengths.toml --db lengths.db "
    "--no-report": "length",
    # report.md
    "precision list claims": "published claims",
    "python tools/claims_evidence.py --db evidence.db --out report/evidence": "of 14 judged",
    # floor_results.md
    "python tools/regenerate_docs.py results reports/stores/primitives_floor.db --pending "
    "primitives:floor --out docs/floor_results.md": "wrote docs/floor_results.md",
    "python tools/regenerate_docs.py readme --file docs/precision_assignment.md": "wrote",
    "python tools/regenerate_docs.py results reports/stores/primitives_floor.db --out "
    "docs/floor_results.md --pending primitives:floor": "wrote docs/floor_results.md",
}

#: Concrete commands not run here: (why, the quick form run instead or None).
NOT_RUN: dict[str, tuple[str, str | None]] = {
    "precision run primitives --device cuda": ("needs a CUDA GPU", None),
    "precision run primitives --profile floor --device cuda --jobs 14 --checkpoints ck "
    "--slice 540 --db gpu.db": ("needs a CUDA GPU, and GPU-hours", None),
    "precision run primitives --executor dask --address tcp://host:8786":
        ("needs a Dask scheduler listening at host:8786; the LocalCluster command "
         "(--executor dask --jobs 2) runs instead", None),
    "precision run train_length":
        ("the paper's budget (1e8 training steps a cell): GPU-days",
         "precision run train_length --profile quick"),
    "precision run train_length --slice 540":
        ("the paper's budget, paused every 9 minutes: GPU-days (its quick form above)", None),
    "precision run primitives --profile floor --db reports/stores/primitives_floor.db":
        ("the shipped store's pending cells: CPU-hours each (docs/floor_results.md lists "
         "them)", None),
    "python tools/regenerate_docs.py results quick-studies.db":
        ("quick-studies.db is not shipped; tests/test_results_page.py recomputes the page's "
         "cells from the code", None),
}


def plan() -> list[tuple[str, str, str, str | None]]:
    """(file, command, what: run / not run / mention, the reason or fragment) in order."""
    rows = []
    for where, command in documented(f"{PRECISION}|{TOOLS}"):
        if command in EXPECT:
            rows.append((where, command, "run", EXPECT[command]))
        elif command in NOT_RUN:
            rows.append((where, command, "not run", NOT_RUN[command][0]))
        elif is_synopsis(command) or len(shlex.split(command)) <= 2 or command == \
                "python -m precision":
            rows.append((where, command, "mention", None))
        else:
            rows.append((where, command, "unknown", None))
    return rows


def prepare(workdir: Path) -> None:
    """Links to the repository's folders the documented commands name, and a copy of the docs
    (a page regenerated with ``--file`` / ``--out`` is written to the copy)."""
    for name in ("examples", "reports", "tools"):
        link = workdir / name
        if not link.exists():
            link.symlink_to(ROOT / name, target_is_directory=True)
    (workdir / "docs").mkdir(exist_ok=True)
    for page in (ROOT / "docs").glob("*.md"):
        (workdir / "docs" / page.name).write_text(page.read_text(encoding="utf-8"),
                                                  encoding="utf-8")


def run_one(command: str, workdir: Path, timeout: float) -> tuple[int | None, str, float]:
    """(exit code or None when the safety stop fired, output, seconds) of ``command``."""
    words = shlex.split(command)
    if words[0] == "precision":
        words = [sys.executable, "-m", "precision", *words[1:]]
    elif words[0] == "python":
        words = [sys.executable, *words[1:]]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    t0 = time.perf_counter()
    try:
        done = subprocess.run(words, cwd=workdir, capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired as stop:
        out = (stop.stdout or b"").decode() if isinstance(stop.stdout, bytes) else \
            (stop.stdout or "")
        return None, out, time.perf_counter() - t0
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - t0


def extra_check(command: str, workdir: Path) -> str | None:
    """A check beyond the fragment for commands that write a page the repository ships: the
    page written must be the shipped one (None: it is, or there is no such check)."""
    words = shlex.split(command)
    if command.startswith("python tools/regenerate_docs.py results") and "--out" in words:
        out = Path(words[words.index("--out") + 1])
        if (workdir / out).read_text() != (ROOT / out).read_text():
            return f"{out} as regenerated differs from the shipped one: run the command again"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--list", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--only", metavar="TEXT", help="run only the commands containing TEXT")
    ap.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--timeout", type=float, default=1200.0,
                    help="safety stop per command, seconds (reported as such)")
    args = ap.parse_args(argv)
    rows = plan()
    unknown = [(w, c) for w, c, what, _ in rows if what == "unknown"]
    for where, command in unknown:
        print(f"{where}: '{command}' is in neither EXPECT nor NOT_RUN of "
              "tools/run_documented.py: say what it prints, or why it cannot run here")
    if unknown:
        return 1
    if args.list:
        for where, command, what, note in rows:
            print(f"{what:8s} {where:24s} {command}" + (f"   [{note}]" if note else ""))
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="documented-"))
    workdir.mkdir(parents=True, exist_ok=True)
    prepare(workdir)
    todo = [(w, c, note) for w, c, what, note in rows if what == "run"]
    todo += [(w, NOT_RUN[c][1], EXPECT.get(NOT_RUN[c][1] or "", "store: results.db"))
             for w, c, what, _ in rows if what == "not run" and NOT_RUN[c][1]]
    if args.only:
        todo = [t for t in todo if args.only in t[1]]
    failed, total = 0, time.perf_counter()
    print(f"documented commands: {len(todo)} to run in {workdir}; "
          f"{sum(what == 'not run' for _, _, what, _ in rows)} not run; "
          f"{sum(what == 'mention' for _, _, what, _ in rows)} mentions", flush=True)
    for where, command, fragment in todo:
        code, out, seconds = run_one(command, workdir, args.timeout)
        problem = ("stopped by the safety stop" if code is None else
                   f"exit {code}" if code != 0 else
                   f"output lacks {fragment!r}" if fragment not in out else
                   extra_check(command, workdir))
        failed += problem is not None
        print(f"{'FAIL' if problem else 'ok  '} {seconds:7.1f} s  {where:24s} {command}"
              + (f"\n     {problem}; last lines:\n" + "\n".join(
                  "       " + line for line in out.splitlines()[-15:]) if problem else ""),
              flush=True)
    for where, command, what, note in rows:
        if what == "not run":
            print(f"not run            {where:24s} {command}: {note}")
    print(f"{len(todo) - failed} of {len(todo)} documented commands passed in "
          f"{time.perf_counter() - total:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
