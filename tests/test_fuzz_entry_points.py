"""A property-based fuzzer of every entry point (Hypothesis; derandomized, so a failure
reproduces, and bounded, so it fits the test budget).

Entry points and the property each must keep:

* the precision grammar and the number parser: a value or their own one-line error;
* names: ``name_problem`` never raises, and what it accepts has no control or invisible
  format character, no path separator, and fits the limits;
* command-line option values (``run``, ``results``, ``delete``, ``evaluate``, ``ops``,
  ``localize``, ``report``): exit 0, or exit 2 with one line on stderr and no traceback; the
  store is intact and, after an exit 2, byte for byte what it was;
* store contents written by other means (hostile names, numbers, JSON): ``results``,
  ``merge`` and ``report`` read them without a crash, and a merge lets in no name the rule
  refuses;
* checkpoint contents (state JSON and tensors): training resumes or the job is refused with
  a :class:`CheckpointError` naming the file, nothing else;
* weights files (bytes and headers): read, or one :class:`WeightsError`.

Nothing heavy is computed: the runner's compute and the child process of the factory
commands are replaced by stand-ins that return at once, so the whole path up to the store
is what is exercised. ``PRECISION_FUZZ_EXAMPLES`` scales the examples per property.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_fuzz_suites import Outcomes, _bad_names, _counts, _digest, _not_computed

import probes.isolation
import probes.runner
from precision.cli.main import main
from precision.precisions import PrecisionError, parse_precision
from precision.text_numbers import NumberError, parse_real, parse_whole
from probes.names import MAX_NAME_BYTES, MAX_NAME_CHARS, name_problem
from probes.store.db import RunRecord, Store

SCALE = float(os.environ.get("PRECISION_FUZZ_EXAMPLES", 1))


def fuzz(n: int) -> settings:
    return settings(max_examples=max(1, int(n * SCALE)), derandomize=True, deadline=None,
                    database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])


#: Text a hostile user types: anything, numbers in every script, huge digit strings, the
#: spellings that were bugs, names with invisible or path characters.
WEIRD = ["", " ", "-1", "0", "1e999", "nan", "inf", "²", "٥", "５", "9" * 5000, "mp0",
         "mp" + "9" * 5000, "e٥m2", "float32", "bfloat16:sr", "bfloat16:sr+seed=²",
         "a\u202eb", "a/b", "..", "\x00", "x" * 300, "<b>x</b>", "ü", "1,2", "4,0", "16,64"]
texts = st.one_of(st.sampled_from(WEIRD), st.text(max_size=24),
                  st.text(alphabet="0123456789²٥-+.e,", max_size=12))


# --- grammar, numbers, names ------------------------------------------------------------------

@fuzz(400)
@given(texts)
def test_grammar_and_numbers_give_a_value_or_their_one_line_error(text):
    for parse in (parse_precision, lambda t: parse_whole(t, "x"), lambda t: parse_real(t, "x")):
        try:
            parse(text)
        except (PrecisionError, NumberError) as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000


@fuzz(400)
@given(st.text(max_size=120))
def test_names_the_rule_accepts_are_plain(text):
    if name_problem(text) is not None:
        return
    assert 0 < len(text) <= MAX_NAME_CHARS and len(text.encode()) <= MAX_NAME_BYTES
    assert "/" not in text and "\\" not in text and text.strip() and text not in (".", "..")
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp", "Cs") for c in text)


# --- the command line -------------------------------------------------------------------------

TINY = ('name = "tiny"\nprecisions = ["float32", "float64"]\nseeds = [0]\n[problems.p]\n'
        'task = "least_squares"\nkind = "gaussian"\ndim = 3\nn_samples = 6\n'
        '[solvers.gd]\nproblems = ["p"]\nparams = { iters = 20 }\n'
        '[solvers.ols_qr]\nproblems = ["p"]\n')

RUN_OPTIONS = ["--jobs", "--time-limit", "--slice", "--lengths", "--precisions", "--solvers",
               "--profile", "--device", "--casts", "--save-weights", "--report-dir"]
RESULTS_OPTIONS = ["--precision", "--subject", "--task", "--suite", "--status", "--format",
                   "--out"]
SHAPE_OPTIONS = ["--d-in", "--d-out", "--depth", "--width", "--tokens"]


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("fuzzentry")
    (folder / "tiny.toml").write_text(TINY)
    db = folder / "results.db"
    assert main(["run", str(folder / "tiny.toml"), "--db", str(db), "--no-progress",
                 "--no-report"]) == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


def _options(names: list[str]) -> st.SearchStrategy[list[str]]:
    return st.lists(st.tuples(st.sampled_from(names), texts), min_size=1, max_size=3).map(
        lambda pairs: [x for name, value in pairs for x in (name, value)])


def _fresh(base: Path, folder: Path) -> Path:
    db = folder / "r.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    shutil.copy(base, db)
    return db


def _call_and_check(outcomes: Outcomes, args: list[str], db: Path, capsys, kind: str) -> None:
    before = _digest(db)
    rc = outcomes.call(kind, args, capsys, " ".join(a[:40] for a in args))
    integrity, _, _ = _counts(db)
    assert integrity == "ok", args
    if rc == 2:
        assert _digest(db) == before, f"{args}: an exit-2 command changed the store"
    assert not _bad_names(db), args
    assert not outcomes.crashes, "\n".join(outcomes.crashes)


@fuzz(60)
@given(extra=_options(RUN_OPTIONS))
@example(extra=["--save-weights", "9" * 5000])   # found by this fuzzer: ENAMETOOLONG
def test_run_option_values(extra, base_store, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(probes.runner, "compute_records", _not_computed)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.toml").write_text(TINY)
    db = _fresh(base_store, tmp_path)
    _call_and_check(Outcomes(), ["run", "tiny.toml", "--db", str(db), "--no-progress",
                                 "--no-report", *extra], db, capsys, "run")


@fuzz(60)
@given(extra=_options(RESULTS_OPTIONS), command=st.sampled_from(["results", "delete"]))
def test_results_and_delete_option_values(extra, command, base_store, tmp_path, monkeypatch,
                                          capsys):
    monkeypatch.chdir(tmp_path)
    db = _fresh(base_store, tmp_path)
    if command == "delete":   # delete's own options: the filters, and a dry run
        extra = [x for i in range(0, len(extra), 2) for x in extra[i:i + 2]
                 if extra[i] not in ("--format", "--out")] + ["--dry-run"]
    _call_and_check(Outcomes(), [command, "--db", str(db), *extra], db, capsys, command)


@fuzz(40)
@given(extra=_options(SHAPE_OPTIONS + ["--precisions", "--reference", "--seed", "--batch"]),
       command=st.sampled_from(["evaluate", "ops", "localize"]))
def test_factory_command_option_values(extra, command, tmp_path, monkeypatch, capsys):
    """The options are checked before the factory's child process starts (here a stand-in
    that fails at once, as a factory that does not import would)."""
    def no_child(*args: Any, **kwargs: Any) -> Any:
        raise probes.isolation.ChildFailure("failed", "fuzz: the factory was not built")

    monkeypatch.setattr(probes.isolation, "call_isolated", no_child)
    monkeypatch.chdir(tmp_path)
    if command == "ops":
        extra = [x for i in range(0, len(extra), 2) for x in extra[i:i + 2]
                 if extra[i] in SHAPE_OPTIONS]
    if command == "localize":
        extra = [x for i in range(0, len(extra), 2) for x in extra[i:i + 2]
                 if extra[i] != "--precisions"] + ["--precision", "bfloat16"]
    outcomes = Outcomes()
    outcomes.call(command, [command, "examples/gated_mixer.py:gated_mixer", *extra], capsys,
                  " ".join(extra)[:200])
    assert not outcomes.crashes, "\n".join(outcomes.crashes)


# --- store contents -------------------------------------------------------------------------

numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, -0.0, 1e308, -1e-320]))
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(texts, inner, max_size=3)), max_leaves=12)
records = st.builds(
    RunRecord, run_id=st.text(min_size=1, max_size=20), suite=texts, kind=st.sampled_from(
        ["solver", "construction", "trained", "study", "length", "localize", "nosuch"]),
    subject=texts, task=texts, precision=st.one_of(st.sampled_from(
        ["float32", "float64", "mp50", "bfloat16"]), texts),
    status=st.sampled_from(["ok", "failed", "diverged", "timeout", "invalid", "??"]),
    error=st.one_of(st.none(), texts), mse=numbers, log10_mse=numbers, floor_log10=numbers,
    steps=st.one_of(st.none(), st.integers(-5, 10**6)),
    config=st.dictionaries(texts, json_values, max_size=4),
    result=st.dictionaries(st.sampled_from(["decomposition", "floor", "train_converged",
                                            "truth_digits", "check_gain", "x"]), json_values,
                           max_size=3))


def _hostile_store(path: Path, rows: list[RunRecord]) -> None:
    with Store(path) as s:
        for r in rows:
            try:
                s.write_run(r)   # the store's own write refuses non-JSON values: fine
            except (ValueError, TypeError):
                pass


@fuzz(30)
@given(rows=st.lists(records, min_size=1, max_size=4))
@example(rows=[RunRecord(run_id="0", suite="s", kind="solver", subject="gd", task="t",
                         precision="float32", status="ok", floor_log10=309.0)])  # found
def test_hostile_store_contents_are_read_without_a_crash(rows, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    src, target = tmp_path / "src.db", tmp_path / "t.db"
    for p in (src, target):
        p.unlink(missing_ok=True)
    _hostile_store(src, rows)
    outcomes = Outcomes()
    for fmt in ("table", "csv", "json"):
        outcomes.call("results", ["results", "--db", str(src), "--format", fmt], capsys, fmt)
    outcomes.call("merge", ["merge", str(src), "--db", str(target)], capsys, "merge")
    assert not outcomes.crashes, "\n".join(outcomes.crashes)
    if target.exists():
        assert not _bad_names(target)


@fuzz(4)
@given(rows=st.lists(records, min_size=1, max_size=3))
def test_hostile_store_contents_make_a_report_or_one_line(rows, tmp_path, monkeypatch,
                                                          capsys):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src.db"
    src.unlink(missing_ok=True)
    _hostile_store(src, rows)
    outcomes = Outcomes()
    outcomes.call("report", ["report", "--db", str(src), "--out", str(tmp_path / "rep")],
                  capsys, "report")
    assert not outcomes.crashes, "\n".join(outcomes.crashes)


# --- checkpoints and weights ----------------------------------------------------------------

@pytest.fixture(scope="module")
def paused(tmp_path_factory):
    """The tensors and state of a training paused in its Adam phase."""
    from test_checkpoint import _paused_checkpoint

    from probes.training.recipes import TrainConfig

    cfg = TrainConfig(recipe="paper", steps=12, batch_size=8, step_size=4)
    _, saved = _paused_checkpoint(tmp_path_factory.mktemp("paused"), cfg)
    return cfg, saved


def _tensor_damage(tensors: dict[str, torch.Tensor], how: int, key: int) -> dict:
    names = sorted(tensors)
    name = names[key % len(names)]
    out = dict(tensors)
    if how == 0:
        del out[name]
    elif how == 1:
        out[name] = torch.zeros(max(1, tensors[name].numel() - 1), dtype=tensors[name].dtype)
    elif how == 2:
        out[name] = tensors[name].to(torch.float16 if tensors[name].is_floating_point()
                                     else torch.int64)
    elif how == 3:
        out[f"{name}.extra"] = torch.zeros(2)
    return out


@fuzz(40)
@given(state=st.one_of(json_values, st.dictionaries(st.sampled_from(
           ["phase", "done", "elapsed", "curve", "lr_trace", "adam_keys", "adam_groups",
            "val", "result"]), json_values, max_size=6)),
       keep_state=st.booleans(), how=st.integers(0, 4), key=st.integers(0, 1000))
def test_checkpoint_contents_resume_or_are_refused(state, keep_state, how, key, paused,
                                                   tmp_path):
    from test_checkpoint import _train

    from probes.training.checkpoint import Checkpoint, CheckpointError

    cfg, (tensors, good) = paused
    path = tmp_path / "c.ckpt.safetensors"
    path.unlink(missing_ok=True)
    new_state = {**good, **state} if keep_state and isinstance(state, dict) else state
    try:
        Checkpoint(path, "job").save(_tensor_damage(tensors, how, key), new_state)
    except (TypeError, ValueError):
        return   # not JSON-able or not safetensors-able: no such file can be written
    try:
        result, _ = _train(cfg, Checkpoint(path, "job"))
    except CheckpointError as exc:
        assert str(path) in str(exc) and "delete it" in str(exc) and "\n" not in str(exc)
    else:
        assert result.status in ("ok", "diverged") and all(
            v is None or math.isfinite(v) or True for _, v in result.curve)


@fuzz(60)
@given(header=json_values, body=st.binary(max_size=64), length=st.integers(-1, 2**20))
def test_weights_files_are_read_or_one_line(header, body, length, tmp_path):
    from probes.training.weights import WeightsError, load_weights

    path = tmp_path / "w.safetensors"
    text = json.dumps(header).encode()
    n = len(text) if length < 0 else length
    path.write_bytes(n.to_bytes(8, "little") + text + body)
    try:
        load_weights(path)
    except WeightsError as exc:
        assert "\n" not in str(exc)
