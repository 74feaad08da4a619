"""Training on a device (``device = "cuda"`` in a suite, ``--device`` on run / probe).

Without a GPU: a device that is misspelled or absent is a one-line error before any work, and
the device is where a run computes, not what it is (same run ids). With a GPU (skipped
otherwise): a job trains and evaluates its float precisions there and records it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
import torch

from precision.cli.main import main
from precision.devices import DeviceError, resolve_device
from probes.api import probe
from probes.kinds import expand_all
from probes.store.db import Store
from probes.suite import SuiteError, load_suite

HAS_CUDA = torch.cuda.is_available()
ZOO = Path(__file__).resolve().parent.parent / "examples" / "zoo"

SUITE = """
name = "on_device"
precisions = ["float32", "mp30"]
[tasks.multiply]
task = "multiply"
dim = 4
n = 4
[models.baseconv]
family = "baseconv"
tasks = ["multiply"]
depth = 1
width = 4
layernorm = false
test_size = 4
train = { recipe = "paper", steps = 30, batch_size = 16, validation_size = 0 }
"""


def test_spelling_and_availability() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("gpu", "cuda:x", "CPU", ""):
        with pytest.raises(DeviceError, match="unknown device"):
            resolve_device(bad)
    if not HAS_CUDA:
        with pytest.raises(DeviceError, match="not available here"):
            resolve_device("cuda")
    with pytest.raises(DeviceError, match="not available here"):
        resolve_device("cuda:999")


def test_device_is_not_part_of_the_run_ids(tmp_path: Path) -> None:
    path = tmp_path / "on_device.toml"
    path.write_text(SUITE, encoding="utf-8")
    suite = load_suite(str(path), device="cpu")
    on_cpu = list(suite.runs)
    assert suite.settings.device == "cpu"
    # the kinds expand a GPU suite without needing one: same ids, the device carried apart
    # (in the sweep's RunOptions, never in a run)
    on_gpu = expand_all(dataclasses.replace(suite.settings, device="cuda:1"), suite.entries)
    assert [r.ids for r in on_gpu] == [r.ids for r in on_cpu] and on_cpu
    assert [r.config for r in on_gpu] == [r.config for r in on_cpu]
    assert not any(hasattr(r, "device") for r in on_gpu)
    path.write_text('device = "tpu"\n' + SUITE, encoding="utf-8")
    with pytest.raises(SuiteError, match="unknown device 'tpu'"):
        load_suite(str(path))


@pytest.mark.skipif(HAS_CUDA, reason="checks the error a machine without CUDA gives")
def test_cuda_without_a_gpu_is_one_line_and_stores_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "on_device.toml"
    path.write_text(SUITE, encoding="utf-8")
    db = tmp_path / "r.db"
    for argv in (["run", str(path), "--device", "cuda"],
                 ["probe", f"{ZOO}/linear_attention.py:linear_attention", "--suite", str(path),
                  "--device", "cuda"]):
        assert main([*argv, "--db", str(db), "--no-report"]) == 2
        err = capsys.readouterr().err.strip()
        assert "not available here" in err and "\n" not in err and "Traceback" not in err
    assert not db.exists()


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_a_job_trains_on_the_gpu_and_records_it(tmp_path: Path) -> None:
    path = tmp_path / "on_device.toml"
    path.write_text(SUITE, encoding="utf-8")
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--device", "cuda", "--db", str(db), "--no-report"]) == 0
    rows = Store(str(db), read_only=True).runs()
    assert {r["precision"] for r in rows} == {"float32", "mp30"}
    for r in rows:
        assert r["status"] == "ok" and math.isfinite(r["mse"])
        assert r["result"]["provenance"]["device"].startswith("cuda:")
    # a user's module through the engine (its child process spawned: CUDA is live here)
    on_gpu = probe(f"{ZOO}/linear_attention.py:linear_attention", "affine", depth=1, width=8,
                   precisions=("float64",), task_options={"dim": 4, "n": 4},
                   train={"recipe": "engine", "steps": 100, "batch_size": 32,
                          "second_order_steps": 10, "second_order_batch": 8},
                   device="cuda")["float64"]
    assert on_gpu.status == "ok" and on_gpu.total < 1e-12   # 1e-32 on the CPU


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
def test_worker_processes_train_on_the_gpu(tmp_path: Path) -> None:
    """The device check leaves CUDA uninitialised in the parent: forked workers can use it."""
    path = tmp_path / "on_device.toml"
    path.write_text(SUITE.replace("depth = 1", "depth = [1, 2]"), encoding="utf-8")
    db = tmp_path / "r.db"
    assert main(["run", str(path), "--device", "cuda", "--jobs", "2", "--db", str(db),
                 "--no-report", "--no-progress"]) == 0
    rows = Store(str(db), read_only=True).runs()
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows)
    assert {r["result"]["provenance"]["device"][:5] for r in rows} == {"cuda:"}


def test_provenance_names_the_device_only_off_the_cpu() -> None:
    from precision.provenance import provenance, provenance_line

    assert "device" not in provenance("cpu")
    line = provenance_line({**provenance("cpu"), "device": "cuda:0 (GPU, CUDA 12)"})
    assert line.endswith("trained on cuda:0 (GPU, CUDA 12)")
