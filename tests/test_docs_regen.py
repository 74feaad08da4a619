"""tools/regenerate_docs.py: the results tables of docs/ and the README's outputs come from one
script, never from pasting."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from probes.store.db import RunRecord, Store

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("regenerate_docs", ROOT / "tools/regenerate_docs.py")
regen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(regen)

PROV = {"torch": "2.13.0+cpu", "cpu_capability": "AVX2", "blas": "MKL 2024.2", "threads": 1}


def _tiny_store(path: Path) -> None:
    with Store(path) as store:
        for seed, floor in ((0, -14.0), (1, -12.0)):
            store.write_run(RunRecord(
                run_id=f"gd{seed}", suite="solvers", kind="solver", subject="gd",
                task="ls_gauss", precision="float32", status="ok", floor_log10=floor,
                log10_mse=floor, steps=50, floor_index=40 + 2 * seed,
                config={"problem": {"seed": seed}}, result={"provenance": PROV}))
        store.write_run(RunRecord(
            run_id="bc", suite="prims", kind="trained", subject="baseconv", task="multiply",
            precision="float64", status="ok", mse=2.5e-6, log10_mse=-5.6,
            config={"depth": 1, "width": 32, "seed": 0, "model_options": {"layernorm": False},
                    "train": {"recipe": "paper", "steps": 2000, "dtype": "float32"}},
            result={"provenance": {**PROV, "threads": 2}, "train_converged": False,
                    "decomposition": {"approximation": -5.6, "rounding": -30.0}}))


def test_results_page_holds_each_suites_tables_and_provenance(tmp_path):
    db = tmp_path / "tiny.db"
    _tiny_store(db)
    out = tmp_path / "results.md"
    assert regen.main(["results", str(db), "--out", str(out)]) == 0
    text = out.read_text()
    assert "`python tools/regenerate_docs.py results tiny.db`" in text   # no temporary path
    assert "## prims" in text and "## solvers" in text
    # median of the two seeds' floors 1e-14 and 1e-12: their geometric mean, at step 41
    assert "gd      1.0e-13 ±1.0 @41" in text
    assert "baseconv  1      32     no  paper   float32  2000   0     2.5e-06 T" in text
    assert "- torch 2.13.0+cpu, AVX2, MKL 2024.2, 1 thread (2 runs)" in text
    assert "- torch 2.13.0+cpu, AVX2, MKL 2024.2, 2 threads (1 run)" in text
    assert "computed 20" in text and "1 run (ok 1)" in text   # dates, counts
    assert all(line == line.rstrip() for line in text.splitlines())
    again = tmp_path / "again.md"
    regen.main(["results", str(db), "--out", str(again)])
    assert again.read_bytes() == out.read_bytes()    # the store alone decides the bytes


def test_results_page_of_two_stores_names_each(tmp_path):
    """Two stores (a shipped one beside a recomputed one): each suite gets its section with
    the store it comes from; a suite both hold is told apart by the store's name."""
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    _tiny_store(first)
    _tiny_store(second)
    out = tmp_path / "results.md"
    assert regen.main(["results", str(first), str(second), "--out", str(out)]) == 0
    text = out.read_text()
    assert "`python tools/regenerate_docs.py results a.db b.db` from the stores `a.db`, " \
        "`b.db`" in text
    for title in ("prims (a.db)", "solvers (a.db)", "prims (b.db)", "solvers (b.db)"):
        assert f"## {title}" in text
    assert "(store `b.db`), computed" in text


def test_results_page_of_a_missing_store_is_one_line(tmp_path, capsys):
    assert regen.main(["results", str(tmp_path / "nope.db"), "--out",
                       str(tmp_path / "r.md")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no store at" in err
    assert not (tmp_path / "r.md").exists()


README = """# x

<!-- regenerate: precision list precisions; head=2; tail=1 -->
```text
$ precision list precisions
stale output
```

text between

<!-- regenerate: echo second; show=echo 2nd -->
```text
old
```
"""


def test_readme_blocks_are_replaced_by_the_commands_output(tmp_path):
    calls = []

    def fake(command, cwd):
        calls.append((command, cwd))
        return "\n".join(f"line {i}" for i in range(6)) + "\n"

    new = regen.regenerate_blocks(README, tmp_path, run=fake)
    assert [c for c, _ in calls] == ["precision list precisions", "echo second"]
    assert "$ precision list precisions\nline 0\nline 1\n... (3 lines left out)\nline 5\n```" \
        in new
    assert "$ echo 2nd\nline 0\nline 1\nline 2\nline 3\nline 4\nline 5\n```" in new
    assert "stale output" not in new and "text between" in new
    assert regen.regenerate_blocks(new, tmp_path, run=fake) == new   # idempotent


def test_only_regenerates_the_selected_blocks(tmp_path, capsys):
    calls = []

    def fake(command, cwd):
        calls.append(command)
        return "fresh\n"

    new = regen.regenerate_blocks(README, tmp_path, run=fake, only="echo")
    assert calls == ["echo second"]
    assert "stale output" in new and "$ echo 2nd\nfresh\n```" in new
    readme = tmp_path / "README.md"
    readme.write_text(README)
    assert regen.main(["readme", "--file", str(readme), "--only", "nothing such"]) == 1
    assert "contains 'nothing such'" in capsys.readouterr().err
    assert readme.read_text() == README


def test_readme_regeneration_runs_the_real_command(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README.split("text between")[0])
    done = subprocess.run([sys.executable, str(ROOT / "tools/regenerate_docs.py"), "readme",
                           "--file", str(readme)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = readme.read_text()
    assert "$ precision list precisions\nprecisions:\n  bfloat16" in text
    assert "lines left out)" in text and "stale output" not in text


def test_a_failing_command_leaves_the_file(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- regenerate: python -c 'raise SystemExit(3)' -->\n```text\nkeep\n"
                      "```\n")
    assert regen.main(["readme", "--file", str(readme)]) == 1
    assert readme.read_text().endswith("keep\n```\n")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exited 3" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md"]   # no temporary left


def test_the_readme_marks_parse():
    """Every mark in the shipped README names a command and known options."""
    text = (ROOT / "README.md").read_text()
    marks = list(regen.MARK.finditer(text))
    assert marks, "the README has no regenerated outputs"
    for m in marks:
        command, _ = regen._parse_spec(m["spec"])
        assert command.startswith(("precision ", "python "))


@pytest.mark.parametrize("spec", ["precision list; bogus=1", "precision list; head"])
def test_unknown_options_are_refused(spec):
    with pytest.raises(ValueError, match="unknown option"):
        regen._parse_spec(spec)


def test_the_floor_page_is_its_shipped_store():
    """docs/floor_results.md is the shipped store of the floor profile's measured cells,
    rendered: a store or page edited without the other fails here. Every run in it is a run
    of `primitives --profile floor` (the command that completes the store adds the rest),
    computed by a recorded commit."""
    from probes.suite import load_suite

    store_path = ROOT / "reports" / "stores" / "primitives_floor.db"
    with Store(store_path, create=False) as store:
        text = regen.results_markdown(store, "reports/stores/primitives_floor.db",
                                      pending={"primitives": "floor"},
                                      out_label="docs/floor_results.md")
        rows = store.runs()
    assert (ROOT / "docs" / "floor_results.md").read_text() == text
    assert "--pending primitives:floor --out docs/floor_results.md`" in text   # its command
    # never a table of two versions of a task's targets: the stale rows are left out, said
    from reports.data_version import left_out_note, newest_data_rows

    kept, older = newest_data_rows(rows)
    affine = {(r["config"]["depth"], r["config"]["width"], r["subject"],
               str(r["config"]["model_options"])) for r in kept if r["task"] == "affine"}
    table = text.split("task affine:")[1].split("```")[0].split("\ntask ")[0]
    assert sum(line.split()[:1] in (["transformer"], ["baseconv"])
               for line in table.splitlines()) == len(affine)
    assert not older or left_out_note(older)[1:] in text
    from probes.kinds.trained import job_config, record_id

    runs = load_suite("primitives", profile="floor").runs
    ids = {i for r in runs for i in r.ids}
    # a cell trained on its task's earlier targets (Task.target_version) has the id the
    # profile gave it then: its config without the key
    earlier = {record_id({k: v for k, v in job_config(r.spec).items() if k != "target_version"},
                         p) for r in runs for p in r.precisions}
    assert rows and {r["run_id"] for r in rows} <= ids | earlier
    # the page lists what the store lacks, and the command that computes it
    lacking = [r for r in runs if not set(r.ids) <= {row["run_id"] for row in rows}]
    assert f"{len(lacking)} jobs of the profile are not in the store yet" in text
    assert "precision run primitives --profile floor --db reports/stores/primitives_floor.db" \
        in text
    assert all(r["result"]["provenance"].get("code", "").startswith("git ") for r in rows)


def test_the_claims_evidence_command_judges_from_the_shipped_stores(tmp_path, capsys):
    """tools/claims_evidence.py (docs/report.md): the shipped stores merged, the report
    written, every 001 claim printed with its verdicts or what measures it, and the count."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("claims_evidence",
                                                  ROOT / "tools" / "claims_evidence.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    db, out = tmp_path / "evidence.db", tmp_path / "rep"
    assert tool.cli(["--db", str(db), "--out", str(out), "--suites", ""]) == 0
    text = capsys.readouterr().out
    lines = [line for line in text.splitlines() if line.startswith("  001-")]
    assert len(lines) == 14 and (out / "report.md").is_file()
    assert "001-bc-multiply: paper recipe not measured; engine does not hold" in text
    assert text.rstrip().splitlines()[-1].startswith(
        f"{sum('not judged' not in line for line in lines)} of 14 judged")


def test_a_pending_suite_or_profile_that_is_not_there_is_one_line(tmp_path, capsys):
    store = ROOT / "reports" / "stores" / "primitives_floor.db"
    for spec, message in (("bogus:quick", "no store given holds suite bogus"),
                          ("primitives:zzz", "has no profile 'zzz'"), ("primitives", "SUITE:")):
        assert regen.main(["results", str(store), "--out", str(tmp_path / "r.md"),
                           "--pending", spec]) == 1
        assert message in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()
