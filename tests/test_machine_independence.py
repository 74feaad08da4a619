"""The same data and the same mpN digits under every CPU kernel and thread count.

Two subprocesses compute the same small suites and generate the same problem data, each
under different kernel settings: the BLAS kernel (``OPENBLAS_CORETYPE`` Haswell / Prescott),
torch's CPU capability (``ATEN_CPU_CAPABILITY`` the best / ``default``), MKL's code path
(``MKL_CBWR`` AUTO / COMPATIBLE; harmless without MKL), numpy's dispatched SIMD
(``NPY_DISABLE_CPU_FEATURES``) and the thread count (1 / 2, for OpenMP, MKL, OpenBLAS and
torch). Every variable differs between the two, so one pair of processes covers them all.

Demanded: bit-identical arrays from every data generator (solver problems, every trained
task's inputs and float64 training targets, a construction's weights, the studies'
samplers) and bit-identical store rows (every number, config key and series point; not
times, workers or provenance) of a solvers and constructions suite in mp50 and of a
trained least-squares suite evaluated in mp50. The trained jobs train for 0 steps from
weights drawn by numpy (torch's initialisers, like float training, are not
machine-independent: docs/reproducibility.md); the float curves of training and validation
are left out for that reason.

Run as a script (``python tests/test_machine_independence.py OUT``) it is the worker.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent

SOLVERS = """
name = "mi_solvers"
precisions = ["mp50"]
seeds = [0, 1]

[problems.ls_gauss]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 8

[problems.ls_kappa]
task = "least_squares"
kind = "controlled"
dim = 3
n_samples = 8
kappa = 1e4

[problems.ls_cond]
task = "least_squares"
kind = "conditioned"
dim = 3
n_samples = 8
kappa = 100.0

[problems.spd]
task = "inverse"
kind = "spd"
dim = 3
kappa = 100.0

[problems.logistic]
task = "logistic"
kind = "logistic"
dim = 3
n_samples = 10
mu = 0.1
kappa = 10.0

[solvers.ols_qr]
problems = ["ls_gauss", "ls_kappa", "ls_cond"]

[solvers.cg]
problems = ["ls_gauss", "ls_kappa", "ls_cond"]

[solvers.gd]
problems = ["ls_kappa"]
params = { iters = 30 }

[solvers.newton_schulz]
problems = ["spd"]
params = { iters = 8 }

[solvers.newton]
problems = ["logistic"]
params = { iters = 4 }

"""

CONSTRUCTIONS = """
name = "mi_constructions"
precisions = ["mp50"]
seeds = [0]

[problems.ls_gauss]
task = "least_squares"
kind = "gaussian"
dim = 3
n_samples = 8

[constructions.lsa_gdpp]        # weights from the problem's spectrum
problems = ["ls_gauss"]
params = { precondition = 2, gd_steps = 2 }
"""

TRAINED = """
name = "mi_trained"
precisions = ["mp50"]
seeds = [0]

[tasks.ls_fixed_n]
task = "ls_fixed_n"
dim = 2
n = 4

[tasks.eg]
task = "explicit_gradient"
dim = 2
n = 4
k = 2

[models.transformer]
family = "transformer"
tasks = ["ls_fixed_n"]
depth = 1
width = 8
test_size = 4
train = { recipe = "paper", steps = 0, batch_size = 8, validation_size = 0 }

[models.baseconv]
family = "baseconv"
tasks = ["eg"]
depth = 1
width = 8
test_size = 3
iterate = 2
train = { recipe = "paper", steps = 0, batch_size = 8, validation_size = 0 }
"""

#: Series of a trained record that come from float training (not machine-independent).
FLOAT_SERIES = ("train_log10_loss", "val_log10_mse", "lr")
#: Result fields of a trained record that come from float training: the convergence check
#: (float64 Gauss-Newton steps) and the verdict drawn from it.
FLOAT_RESULT = ("check_gain", "grad_norm", "check_drift", "check_curvature", "train_converged")

#: (OPENBLAS_CORETYPE, ATEN_CPU_CAPABILITY or None for the best, MKL_CBWR, threads,
#: NPY_DISABLE_CPU_FEATURES or None). The third repeats the first: another process on the
#: same machine and settings, which must store every number bit for bit, floats included.
SETTINGS = (("Haswell", None, "AUTO", 1, None), ("Prescott", "default", "COMPATIBLE", 2,
                                                 "X86_V3"), ("Haswell", None, "AUTO", 1, None))


def _digest(*arrays: Any) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _numbers(task: Any) -> list[Any]:
    """A task's shapes and hidden parameters (its int and array attributes)."""
    return [np.ravel(v) for v in vars(task).values() if isinstance(v, int | np.ndarray)]


def data_hashes() -> dict[str, str]:
    """A digest of the arrays of every data generator, small and large (a large problem makes
    a threaded BLAS use its threads)."""
    import torch

    from precision import problems
    from precision.constructions import lsa_gdpp
    from precision.tasks import TASKS, make_task

    out: dict[str, str] = {}
    for dim, n in ((3, 8), (48, 400)):
        for name in ("gaussian", "conditioned", "controlled"):
            kw = {} if name == "gaussian" else {"kappa": 1e3}
            p = problems.make_least_squares(name, dim=dim, n_samples=n, seed=2, **kw)
            out[f"{name}{dim}"] = _digest(p.X, p.y, p.w_true, p.X_query)
        out[f"spd{dim}"] = _digest(problems.spd_matrix(dim, 1e4, seed=1))
        lg = problems.logistic_regression(dim, n, seed=3, kappa=10.0)
        out[f"logistic{dim}"] = _digest(lg.X, lg.y, lg.w_true)
    p = problems.noniso_least_squares(seed=4, noise_std=0.1)
    out["noniso"] = _digest(p.X, p.y, p.w_true, p.X_query)
    for op in ("read", "affine", "multiply"):
        pp = problems.primitive_problem(op, seed=5)
        out[f"primitive_{op}"] = _digest(pp.u, *_numbers(pp.task))
    for name in TASKS:
        opts = {"dim": 4, "n": 6} | ({"k": 2} if name in ("ls_feature",
                                                          "explicit_gradient") else {})
        task = make_task(name, seed=6, **opts)
        gen = torch.Generator().manual_seed(7)
        batches = [t.numpy() for _ in range(2)                           # a stream of batches
                   for t in task.sample(5, gen)]                           # inputs and targets
        out[f"task_{name}"] = _digest(*batches, *_numbers(task))
    gd = problems.gaussian_least_squares(4, 12, seed=8)
    out["lsa_gdpp_weights"] = _digest(lsa_gdpp.gdpp(gd.X, 3, 2).w.detach().numpy())
    out.update(study_hashes())
    return out


def study_hashes() -> dict[str, str]:
    """Digests of the studies' data samplers."""
    import torch

    from probes.studies import memformer, newton, noisy_regression_data, population_loss

    out = {}
    b = noisy_regression_data.sample_batch(6, 3, 5, "uniform:2", np.random.default_rng(1))
    out["noisy_regression"] = _digest(b.X, b.y, b.x_query, b.y_query, b.w, b.sigma)
    X, y = newton.regression_prompts(4, 3, 6, torch.Generator().manual_seed(2))
    out["newton_prompts"] = _digest(X.numpy(), y.numpy())
    params = {"d": 3, "n": 5, "data": "non-isotropic", "eigenvalues": [1.0, 0.5, 0.25]}
    root, inv_root, inv = memformer.covariance(params, 3)
    x, t = memformer.sample_instances(params, root, inv_root, 4, np.random.default_rng(4))
    out["memformer"] = _digest(root, inv_root, inv, x.numpy(), t.numpy())
    rp = population_loss.representation_problem(5, d=3, N=4, K=6, m=5, tau=0.1)
    out["representations"] = _digest(rp.tokens, rp.features)
    return out


def worker(out: Path) -> None:
    """Compute the two suites into ``out/store.db`` and the data digests into
    ``out/hashes.json`` (run in a subprocess under one kernel setting)."""
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    from probes.runner import compute_records
    from probes.training.job import Job

    # torch's initialisers draw differently per CPU capability (measured: the same seed gives
    # other initial weights under ATEN_CPU_CAPABILITY=default), and trained weights are not
    # promised machine-independent: the jobs' models get seeded numpy weights instead, so
    # their rows depend only on the task data and the mp evaluation
    build = Job.build

    def seeded_build(self: Job) -> Any:
        task, model = build(self)
        rng = np.random.default_rng(self.seed)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.from_numpy(0.3 * rng.standard_normal(tuple(p.shape))))
        return task, model

    Job.build = seeded_build  # type: ignore[method-assign]
    from probes.store.db import Store
    from probes.suite import load_suite

    (out / "hashes.json").write_text(json.dumps(data_hashes()))
    store = Store(out / "store.db")
    for text in (SOLVERS, CONSTRUCTIONS, TRAINED):
        path = out / "suite.toml"
        path.write_text(text)
        for run in list(load_suite(str(path)).runs):
            store.write_runs(compute_records(run))
    store.close()
    torch_cap = torch.backends.cpu.get_cpu_capability()
    (out / "capability.txt").write_text(torch_cap)


def rows(db: Path, floats: bool = False) -> dict[str, dict[str, Any]]:
    """Every stored number of every row, by run id: the columns (less time and worker), the
    config, the result (less provenance and wall times) and the series (less the float
    training curves and the check's float results, unless ``floats``)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    out: dict[str, dict[str, Any]] = {}
    for row in con.execute("SELECT * FROM runs"):
        r = {k: row[k] for k in row.keys() if k not in ("wall_time", "worker", "created_at")}
        result = json.loads(r.pop("result_json"))
        r["result"] = {k: v for k, v in result.items()
                       if k != "provenance" and not k.endswith("wall_time")
                       and (floats or k not in FLOAT_RESULT)}
        r["config"] = json.loads(r.pop("config_json"))
        r["series"] = {}
        out[row["run_id"]] = r
    for rid, name, step, value in con.execute(
            "SELECT run_id, name, step, value FROM series ORDER BY run_id, name, step"):
        if floats or name not in FLOAT_SERIES:
            out[rid]["series"].setdefault(name, []).append((step, value))
    con.close()
    return out


def differing(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[str]:
    """Run ids whose rows differ in any number (or are missing from one store)."""
    return sorted(rid for rid in a.keys() | b.keys()
                  if rid not in a or rid not in b or json.dumps(a[rid], sort_keys=True)
                  != json.dumps(b[rid], sort_keys=True))


def run_settings(tmp: Path, root: Path = ROOT) -> list[Path]:
    """Run the worker of ``root``'s code under each of :data:`SETTINGS` (concurrently)."""
    procs, outs = [], []
    for k, (core, cap, cbwr, threads, npy) in enumerate(SETTINGS):
        out = tmp / f"setting{k}"
        out.mkdir()
        env = {key: v for key, v in os.environ.items()
               if key not in ("ATEN_CPU_CAPABILITY", "NPY_DISABLE_CPU_FEATURES")}
        env.update(OPENBLAS_CORETYPE=core, MKL_CBWR=cbwr, OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   PYTHONPATH=str(root))
        if cap is not None:
            env["ATEN_CPU_CAPABILITY"] = cap
        if npy is not None:
            env["NPY_DISABLE_CPU_FEATURES"] = npy
        procs.append(subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(out)], env=env, cwd=tmp,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outs.append(out)
    for p in procs:
        log, _ = p.communicate(timeout=300)
        assert p.returncode == 0, log[-3000:]
    return outs


def test_data_and_mp_rows_are_the_same_under_every_kernel_setting(tmp_path):
    a, b, again = run_settings(tmp_path)
    caps = {(a / "capability.txt").read_text(), (b / "capability.txt").read_text()}
    assert "DEFAULT" in caps or "default" in {c.lower() for c in caps}   # the setting took
    ha, hb = (json.loads((d / "hashes.json").read_text()) for d in (a, b))
    assert ha.keys() == hb.keys()
    assert [k for k in ha if ha[k] != hb[k]] == []
    ra, rb = rows(a / "store.db"), rows(b / "store.db")
    kinds = {r["kind"] for r in ra.values()}
    assert kinds == {"solver", "construction", "trained"}
    assert len(ra) == 2 * 9 + 1 + 2 and all(r["precision"] == "mp50" for r in ra.values())
    assert all(r["status"] == "ok" and r["mse"] is not None for r in ra.values())
    assert all(r["config"]["data_version"] >= 2 for r in ra.values())
    assert differing(ra, rb) == []
    # the same settings in another process: every number, the float check and curves too
    full = rows(a / "store.db", floats=True)
    assert any("check_curvature" in r["result"] for r in full.values())
    assert differing(full, rows(again / "store.db", floats=True)) == []


def test_rows_and_data_differ_when_the_data_differ():
    """The comparison can fail: a changed number is a differing row."""
    base = {"r": {"mse": 1.0, "series": {"log10_mse": [(0, -1.0)]}}}
    changed = {"r": {"mse": 1.0, "series": {"log10_mse": [(0, -1.0000000000000002)]}}}
    assert differing(base, changed) == ["r"]
    assert differing(base, {}) == ["r"]
    assert _digest(np.array([0.1 + 0.2])) != _digest(np.array([0.3]))


@pytest.mark.parametrize("name", ["gaussian", "controlled", "conditioned"])
def test_generators_use_no_blas(name, monkeypatch):
    """Problem generation never calls numpy's BLAS/LAPACK entry points."""
    from precision import problems

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("BLAS/LAPACK called in data generation")

    for fn in ("qr", "cholesky", "eigh", "eigvalsh", "svd", "solve", "norm"):
        monkeypatch.setattr(np.linalg, fn, refuse)
    monkeypatch.setattr(np, "dot", refuse)
    monkeypatch.setattr(np, "einsum", refuse)
    monkeypatch.setattr(np, "logspace", refuse)
    kw = {} if name == "gaussian" else {"kappa": 100.0}
    p = problems.make_least_squares(name, dim=4, n_samples=10, seed=0, **kw)
    assert p.X.shape == (10, 4)


if __name__ == "__main__":
    worker(Path(sys.argv[1]))
