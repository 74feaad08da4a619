"""Every stored run says where it was computed, and the report shows it."""

import torch

from precision.cli.main import main
from precision.provenance import provenance, provenance_line
from probes.store.db import Store

SUITE = """
name = "tiny"
precisions = ["float32", "mp30"]
[problems.p]
task = "least_squares"
kind = "gaussian"
dim = 2
n_samples = 4
[solvers.ols_qr]
problems = ["p"]
"""


def test_provenance_names_torch_kernels_blas_and_threads(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    p = provenance()
    assert p["torch"] == torch.__version__
    assert p["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert p["threads"] == torch.get_num_threads() and p["blas"]
    assert p["env"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert "ATEN_CPU_CAPABILITY=avx2" in provenance_line(p)


def test_stored_runs_carry_provenance_and_the_report_shows_it(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(SUITE)
    db = tmp_path / "r.db"
    rc = main(["run", str(suite), "--db", str(db), "--no-progress",
               "--report-dir", str(tmp_path / "rep")])
    assert rc == 0
    with Store(db) as store:
        rows = store.runs()
    assert len(rows) == 2
    for r in rows:
        assert r["result"]["provenance"]["cpu_capability"] == \
            torch.backends.cpu.get_cpu_capability()
    md = (tmp_path / "rep" / "tiny" / "report.md").read_text()
    assert f"Computed with: torch {torch.__version__}" in md and "(2 runs)" in md


def test_provenance_names_the_code_that_computed() -> None:
    """Every run records which code computed it: the git commit of a checkout (marked when
    tracked files differ from it) or the installed package's version; report lines show it."""
    import re

    from precision.provenance import code_version, provenance, provenance_line

    code = provenance()["code"]
    assert code == code_version()
    assert re.fullmatch(r"git [0-9a-f]{12}(\+changes)?|precision \S+|unknown", code), code
    assert provenance_line({"torch": "2", "threads": 1, "code": "git abc"}).endswith(
        "code git abc")


def test_a_sweeps_workers_name_the_code_their_driver_started_with(monkeypatch) -> None:
    """A commit made during a long sweep was named by the records its workers wrote after it
    (each read the checkout when it first asked): the driver's code is pinned in each worker."""
    import precision.provenance as prov
    from probes.executors import worker_init

    monkeypatch.setattr(prov, "_PINNED", [])
    monkeypatch.setattr("probes.executors.die_with_parent", lambda pid: None)
    monkeypatch.setattr("signal.signal", lambda *a: None)
    worker_init(1, "git 0123456789ab")
    assert prov.code_version() == "git 0123456789ab"
    assert prov.provenance()["code"] == "git 0123456789ab"
