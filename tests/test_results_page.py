"""docs/results.md and the README's solver output agree with the code of the commit that
shows them.

Both are written by ``tools/regenerate_docs.py`` from real runs, but nothing re-ran them when
the code changed: commit 1685864 made heavy ball and Nesterov floor at 1e-1 in mp30 while
docs/results.md went on showing 6.9e-62. Here a cheap, representative slice of the pages'
solver tables is computed again by the code path that made them and compared cell by cell.

Where the numbers come from. docs/results.md's header names its store, ``quick-studies.db``;
its ``## solvers`` section is ``precision run solvers --profile quick --db quick-studies.db``
as of commit c9b7817, when the quick profile was float32 and mp30 on seeds 0 and 1. The
profile has gained float8_e4m3 and mxfp8_e4m3 since, so the same runs are now
``--profile quick --precisions float32,mp30`` (the test checks that they are the profile's
runs, id for id). The README's block is ``precision run solvers --profile quick --solvers
gd,cg,ols_normal,ols_qr``: the same runs again, in more formats. A run is computed as the
serial sweep of ``precision run`` computes it (``probes.runner.compute_records``, the
records written to a store) and rendered as the page is (``results_markdown`` of that store).

The slice (~32 s of CPU here; gd on ls_gauss is 13 s of it):

- docs/results.md: every solver and problem of the ``## solvers`` section in both its
  precisions, except the three long iterations: gd on ls_kappa1e2 (mp30 reaches its floor
  at step 3380; ~23 s for two seeds and two precisions) and pgd on ls_gauss and
  ls_kappa1e2 (7000 steps, ~35 s). So heavy ball, Nesterov, gd and cg on ls_gauss, heavy
  ball, Nesterov and cg on ls_kappa1e2, the direct solvers, Newton-Schulz and Newton.
- README: the rows cg, ols_normal and ols_qr of its three problems and gd of ls_gauss, in
  mp30 and float32 (not gd on ls_kappa1e2, for the reason above; not the float8_e4m3 and
  mxfp8_e4m3 columns: simulated formats computed through torch's float kernels, so at best
  bounded like float32's, and the whole command takes ~85 s here).

How cells are compared. An mpN cell is computed in arb, integer software: the same digits on
every machine given the seeded problems (docs/reproducibility.md), so it must be the same
text, digit for digit (``6.9e-62 ±0.5 @111``). A float32 cell is a sample of a rounding
process whose summation order depends on the CPU's kernels, BLAS and threads, so only what
holds on any kernel is demanded: see :func:`float_cells_agree`.
"""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

from probes.runner import compute_records
from probes.store.db import Store
from probes.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regenerate_docs", ROOT / "tools/regenerate_docs.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

#: The precisions of docs/results.md's solver tables (the quick profile's when it was made).
PAGE_PRECISIONS = ("float32", "mp30")
#: (solver, problem) pairs left out of the recomputation: their iterations are long.
LONG = {("gd", "ls_kappa1e2"), ("pgd", "ls_gauss"), ("pgd", "ls_kappa1e2")}
#: The README's solver command (its ``<!-- regenerate: ... -->`` mark starts with this).
README_COMMAND = "precision run solvers --profile quick --solvers gd,cg,ols_normal,ols_qr"
#: A float cell's floor may differ from the page's by this many decades plus the two cells'
#: spreads (see :func:`float_cells_agree`).
FLOAT_DECADES = 1.0

Cells = dict[tuple[str, str, str], str]   # (problem, solver, precision) -> cell text

TITLE = re.compile(r"^problem (?P<problem>\S+): floor MSE")
CELL = re.compile(r"^(?P<floor>[-+.\de]+)(?: ±(?P<spread>[\d.]+))?(?: @(?P<step>\d+))?"
                  r"(?P<rest>.*)$")


def floor_tables(text: str) -> Cells:
    """Every cell of the floor tables in ``text`` (as ``precision run`` prints them: a title
    ``problem P: floor MSE ...``, a header, a rule of dashes, one row per solver; columns
    are left-aligned, so the rule's dash runs give each column's span)."""
    lines = text.splitlines()
    cells: Cells = {}
    for i, line in enumerate(lines):
        title = TITLE.match(line)
        if not title:
            continue
        head, rule = lines[i + 1], lines[i + 2]
        starts = [m.start() for m in re.finditer(r"-+", rule)]
        spans = list(zip(starts, [*starts[1:], None], strict=True))
        names = [head[a:b].strip() for a, b in spans]
        assert names[0] == "solver", f"not a floor table header: {head!r}"
        for row in lines[i + 3:]:
            if not row.strip():
                break
            values = [row[a:b].strip() for a, b in spans]
            for precision, cell in zip(names[1:], values[1:], strict=True):
                if cell:
                    cells[(title["problem"], values[0], precision)] = cell
    return cells


def section(page: str, suite: str) -> str:
    """The ``## suite`` section of a page written by ``regenerate_docs.py results``."""
    parts = page.split(f"\n## {suite}\n", 1)
    assert len(parts) == 2, f"no '## {suite}' section"
    return parts[1].split("\n## ", 1)[0]


def readme_block(readme: str, command: str) -> str:
    """The output under the README's ``<!-- regenerate: COMMAND ... -->`` mark."""
    found = [m["body"] for m in regen.MARK.finditer(readme)
             if regen._parse_spec(m["spec"])[0].startswith(command)]
    assert len(found) == 1, f"{len(found)} README blocks regenerated by `{command}`"
    return found[0]


def float_cells_agree(shown: str, computed: str) -> bool:
    """Whether a float cell ``computed`` here agrees with ``shown`` on a page, within what
    holds whatever CPU kernels computed either:

    - the floor within ``FLOAT_DECADES`` (1) decade plus both cells' spreads (``±d``). A
      float floor is one sample of a rounding process; another kernel sums in another order
      and draws another sample. The spread over the seeds measures how far such samples lie
      apart on one machine, and a decade more covers the kernels' own scatter (floors of
      different machines in this repository's history: README and docs/results.md, 1.0e-13
      vs 5.1e-14, 7.6e-15 vs 3.0e-15, 3.3e-04 vs 5.7e-04). A wrong computation misses by
      far more: the broken mp products gave 1.3e-01 where 6.9e-62 was right, and a float
      solver whose update is wrong stalls decades above its rounding level.
    - the step reached within a factor 2 (and 3 steps, for floors reached in a few): a floor
      a few times higher or lower is reached a few steps earlier or later at the same linear
      rate (gd on ls_kappa1e2 gains a decade per ~56 steps), while a changed rate or step
      size moves it by far more.
    - the same words after the numbers (``falling``, ``failed k/n``, the invariant flag
      ``!``) and the same shape: a floor or none, a step or none.
    """
    a, b = CELL.match(shown), CELL.match(computed)
    if not a or not b:   # no number ("failed 2/2", "-"): the words must be the same
        return shown == computed
    if a["rest"].split() != b["rest"].split() or (a["step"] is None) != (b["step"] is None):
        return False
    fa, fb = float(a["floor"]), float(b["floor"])
    if fa <= 0 or fb <= 0:
        return fa == fb
    spread = float(a["spread"] or 0) + float(b["spread"] or 0)
    if abs(math.log10(fa) - math.log10(fb)) > FLOAT_DECADES + spread:
        return False
    if a["step"] is not None:
        sa, sb = int(a["step"]), int(b["step"])
        if max(sa, sb) > 2 * min(sa, sb) + 3:
            return False
    return True


def disagreements(shown: Cells, computed: Cells, keys) -> list[str]:
    """One line per cell of ``keys`` whose shown text the computation does not reproduce
    (mpN: the same text; float: :func:`float_cells_agree`)."""
    bad = []
    for key in sorted(keys):
        problem, solver, precision = key
        page, now = shown.get(key), computed.get(key)
        same = page == now if precision.startswith("mp") or page is None or now is None \
            else float_cells_agree(page, now)
        if not same:
            bad.append(f"{problem} {solver} {precision}: shown {page!r}, computed {now!r}")
    return bad


@pytest.fixture(scope="module")
def recomputed(tmp_path_factory) -> tuple[Cells, set[str]]:
    """The slice computed now, as docs/results.md renders it, and the ids of its runs."""
    suite = load_suite("solvers", "quick", precisions=list(PAGE_PRECISIONS))
    runs = [r for r in suite.runs if (r.subject, r.label) not in LONG]
    db = tmp_path_factory.mktemp("recomputed") / "quick-studies.db"
    with Store(db) as store:
        for run in runs:
            store.write_runs(compute_records(run))
        text = regen.results_markdown(store, db.name)
    return floor_tables(section(text, "solvers")), {r.run_id for r in runs}


def test_the_pages_runs_are_the_quick_profiles():
    """docs/results.md's solver tables hold every (problem, solver, precision) of the quick
    profile in float32 and mp30 (no row or column missing, none extra), and those runs are
    the profile's own, id for id: overriding the precisions changes no run."""
    page = floor_tables(section((ROOT / "docs/results.md").read_text(), "solvers"))
    override = load_suite("solvers", "quick", precisions=list(PAGE_PRECISIONS)).runs
    profile = {r.run_id for r in load_suite("solvers", "quick").runs}
    assert {r.run_id for r in override} <= profile
    assert set(page) == {(r.label, r.subject, str(r.precision)) for r in override}


def test_the_results_page_agrees_with_a_recomputation(recomputed):
    """docs/results.md's solver cells computed again: the mp30 cells digit for digit, the
    float32 cells within bounds that hold on any CPU (module docstring). Covers heavy ball,
    Nesterov, gd and cg on ls_gauss in both precisions, the page's cell 6.9e-62 ±0.5 @111
    among them, and every other cell but the long iterations (``LONG``)."""
    computed, _ = recomputed
    shown = floor_tables(section((ROOT / "docs/results.md").read_text(), "solvers"))
    keys = {k for k in shown if (k[1], k[0]) not in LONG}
    for solver in ("heavy_ball", "nesterov", "gd", "cg"):
        for precision in PAGE_PRECISIONS:
            assert ("ls_gauss", solver, precision) in keys & set(computed)
    assert len(keys) == len(shown) - 2 * len(LONG) and keys <= set(computed)
    bad = disagreements(shown, computed, keys)
    assert not bad, ("docs/results.md shows numbers this code does not compute; regenerate "
                     "it (python tools/regenerate_docs.py results STORE):\n" + "\n".join(bad))


def test_the_readme_solver_output_agrees_with_a_recomputation(recomputed):
    """The README's ``precision run solvers --profile quick --solvers gd,cg,ols_normal,ols_qr``
    output computed again, in its mp30 (digit for digit) and float32 (within bounds) columns:
    the rows cg, ols_normal and ols_qr of ls_gauss, ls_kappa1e2 and ls_kappa1e6 and gd of
    ls_gauss (module docstring)."""
    computed, ids = recomputed
    readme = (ROOT / "README.md").read_text()
    shown = floor_tables(readme_block(readme, README_COMMAND))
    solvers = README_COMMAND.split("--solvers ")[1].split()[0].split(",")
    suite = load_suite("solvers", "quick", solvers=solvers)
    assert {(r.label, r.subject, str(r.precision)) for r in suite.runs} == set(shown)
    keys = {k for k in shown if k[2] in PAGE_PRECISIONS and (k[1], k[0]) not in LONG}
    assert len(keys) == 2 * 10
    # the README's runs of these cells are the ones computed, id for id
    assert {r.run_id for r in suite.runs if (r.label, r.subject, str(r.precision)) in keys} \
        <= ids
    bad = disagreements(shown, computed, keys)
    assert not bad, ("the README shows solver numbers this code does not compute; regenerate "
                      "it (python tools/regenerate_docs.py readme):\n" + "\n".join(bad))


@pytest.mark.parametrize("shown, computed, agree", [
    ("6.9e-62 ±0.5 @111", "6.9e-62 ±0.5 @111", True),
    ("1.8e-15 ±0.0 @35", "1.2e-14 ±0.2 @40", True),        # 0.8 decades, 5 steps
    ("1.8e-15 ±0.0 @35", "3.0e-14 ±0.0 @35", False),       # 1.2 decades
    ("5.7e-04 ±0.5", "4.0e-02 ±0.5", True),                 # 1.8 decades, spreads 1.0
    ("1.8e-15 ±0.0 @35", "1.3e-01 ±0.1 @3 !", False),      # the broken mp products
    ("8.9e-14 ±0.1 @38", "8.9e-14 ±0.1 @90", False),       # step beyond 2x + 3
    ("5.1e-14 ±0.5 @5", "5.1e-14 ±0.5 @12", True),
    ("5.1e-14 ±0.5 @5", "5.1e-14 ±0.5", False),            # a step appears or goes
    ("2.0e-13 ±0.1 @600", "2.0e-13 ±0.1 @600 falling 1/2", False),
    ("failed 2/2", "failed 2/2", True),
    ("failed 2/2", "1.0e-02 ±0.1", False),
])
def test_float_cells_agree(shown, computed, agree):
    assert float_cells_agree(shown, computed) is agree


def test_floor_tables_read_a_cell_by_its_column():
    text = ("problem p: floor MSE (@ step reached, median of 2 seeds)\n"
            "solver      float8_e4m3      mxfp8_e4m3          mp30\n"
            "----------  ---------------  ------------------  ---------------\n"
            "ols_normal  failed 2/2       1.6e+03 failed 1/2  5.1e-52 ±1.2\n"
            "gd          9.1e-03 ±0.1 @8                      8.0e-62 ±0.6 @293\n\n"
            "cells: ...\n")
    assert floor_tables(text) == {
        ("p", "ols_normal", "float8_e4m3"): "failed 2/2",
        ("p", "ols_normal", "mxfp8_e4m3"): "1.6e+03 failed 1/2",
        ("p", "ols_normal", "mp30"): "5.1e-52 ±1.2",
        ("p", "gd", "float8_e4m3"): "9.1e-03 ±0.1 @8",
        ("p", "gd", "mp30"): "8.0e-62 ±0.6 @293"}
