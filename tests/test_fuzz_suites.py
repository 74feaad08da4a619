"""Fuzz the command line with broken input: mutated shipped suites and damaged store files.

A seeded generator (``random.Random``, so a failure reproduces) mutates the shipped suite
files -- wrong types, missing keys, negative, zero, huge and non-finite numbers, unknown
names, unicode, deleted tables, lists where scalars go and scalars where lists go, keys
renamed to names with '/', '\\', NUL, newlines or 300 characters, raw byte damage of the
file text -- and runs ``precision run`` on each, in this process. Nothing is
computed: the runner's ``compute_records`` is replaced by one that returns ``failed``
records at once, so every mutation exercises the whole path up to and including the store
writes, in well under a second. Every outcome must be exit 0, or exit 2 with one line on
stderr and no traceback; the store that existed before is intact (``PRAGMA
integrity_check``), bit-identical after an exit 2, and holds exactly the new records after
an exit 0, every stored name a valid name (``probes.names``). Random bytes as a store
file (and a real store with damaged pages) go through ``run``, ``results``, ``report`` and
``delete`` the same way.

The counts (exit 0 / exit 2 per kind of input) are printed (``pytest -s``) and written to
``$PRECISION_FUZZ_REPORT`` when that is set; the sizes and the seed can be set from the
environment (below) for a longer run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import random
import shutil
import sqlite3
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import probes.runner
from precision.cli.main import main
from probes.executors import failed_records
from probes.names import MAX_LABEL_CHARS, name_problem
from probes.suite import shipped_suites

#: CI sizes; ``PRECISION_FUZZ_SUITES`` / ``PRECISION_FUZZ_STORES`` / ``PRECISION_FUZZ_SEED``
#: run a longer or different fuzz on demand.
N_SUITE_MUTATIONS = int(os.environ.get("PRECISION_FUZZ_SUITES", 240))
N_STORE_FILES = int(os.environ.get("PRECISION_FUZZ_STORES", 24))
SEED = int(os.environ.get("PRECISION_FUZZ_SEED", 20261123))

WEIRD_STRINGS = ["", "nosuch", "ü∂ñ😀", "../../etc", "a/b", ".", "..", " ", "float31", "mp0",
                 "optimal", "1/L", "gaussian", "x" * 300, "NaN", "-1"]
#: Keys a rename gives a table entry (labels, solver and profile names, ...).
WEIRD_KEYS = ["a/b", "a\\b", "a\x00b", "a\nb", "", " ", "..", "x" * 300, "\U0001F600" * 70]
WEIRD_NUMBERS = [0, -1, -5, 1, 2, 10**18, 2**63 - 1, -(2**63), 1e9, 1e300, -1e300, 0.5, -0.0,
                 1e-320, math.nan, math.inf, -math.inf, 100_000_000, 3.0]


# --- a minimal TOML writer (everything inline; keys quoted) --------------------------------

def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string (no surrogates here)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_value(str(k))} = {_toml_value(x)}"
                               for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(data: dict[str, Any]) -> str:
    return "\n".join(f"{_toml_value(str(k))} = {_toml_value(v)}" for k, v in data.items()) + "\n"


# --- mutations -------------------------------------------------------------------------------

def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path (dict keys and list indices) in ``node``."""
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(prefix + (k,))
            out += _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append(prefix + (i,))
            out += _paths(v, prefix + (i,))
    return out


def _parent(data: Any, path: tuple) -> Any:
    for key in path[:-1]:
        data = data[key]
    return data


def _weird_value(rng: random.Random, old: Any) -> Any:
    choice = rng.randrange(9)
    if choice == 0:
        return rng.choice(WEIRD_STRINGS)
    if choice in (1, 2):
        return rng.choice(WEIRD_NUMBERS)
    if choice == 3:
        return rng.choice([True, False])
    if choice == 4:  # scalar -> list, list -> scalar / empty
        if isinstance(old, list):
            return old[0] if old and rng.random() < 0.7 else []
        return [old]
    if choice == 5:
        return rng.choice([{}, {"nosuch": 1}, {"task": "least_squares"}])
    if choice == 6:  # a number of the wrong sign or size
        if isinstance(old, bool):
            return int(old)
        if isinstance(old, int | float):
            return rng.choice([-old, old * 10**9, float(old), old + 0.5, 0])
        return rng.choice(WEIRD_NUMBERS)
    if choice == 7:
        return [rng.choice(WEIRD_STRINGS), rng.choice(WEIRD_NUMBERS)]
    return rng.choice([[], [[1, 3]], [1.5, -2]])


def mutate(rng: random.Random, data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One to three random mutations of a parsed suite; returns it and their names."""
    names = []
    for _ in range(rng.randint(1, 3)):
        paths = _paths(data)
        if not paths:
            break
        path = rng.choice(paths)
        parent = _parent(data, path)
        key = path[-1]
        op = rng.randrange(6)
        if op == 5 and isinstance(parent, dict) and isinstance(key, str):
            parent[rng.choice(WEIRD_KEYS)] = parent.pop(key)
            names.append("rename-key")
        elif op == 0 and isinstance(parent, dict):
            del parent[key]
            names.append("delete")
        elif op == 1 and isinstance(parent, dict):
            parent[rng.choice(["nosuch", "ünï", key + "_x" if isinstance(key, str) else "k"])] = \
                _weird_value(rng, parent[key])
            names.append("add-key")
        else:
            parent[key] = _weird_value(rng, parent[key])
            names.append("value")
    return data, "+".join(names) or "none"


def damage_text(rng: random.Random, text: str) -> str:
    """Byte-level damage: truncation, a random slice replaced, or unicode injected."""
    op = rng.randrange(3)
    cut = rng.randrange(len(text))
    if op == 0:
        return text[:cut]
    if op == 1:
        junk = "".join(rng.choice("[]{}=\"',.\n#ü0x") for _ in range(rng.randint(1, 12)))
        return text[:cut] + junk + text[cut + rng.randint(0, 20):]
    return text[:cut] + rng.choice(["\u0000", "\ufeff", "😀", "\udcff".encode(
        "utf-8", "surrogatepass").decode("latin-1")]) + text[cut:]


# --- the harness -----------------------------------------------------------------------------

def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _counts(db: Path) -> tuple[str, int, int]:
    con = sqlite3.connect(db)
    try:
        return (con.execute("PRAGMA integrity_check").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM runs").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM series").fetchone()[0])
    finally:
        con.close()


def _bad_names(db: Path) -> list[str]:
    """Stored suite, subject and task names that are not valid names."""
    con = sqlite3.connect(db)
    try:
        names = {n for row in con.execute("SELECT suite, subject, task FROM runs") for n in row}
    finally:
        con.close()
    return sorted(repr(n) for n in names if name_problem(n, MAX_LABEL_CHARS) is not None)


def _not_computed(run: Any, options: Any = None) -> list[Any]:
    """Stand-in for the runner's compute: a record per id, at once (status ``ok``: a sweep
    whose every record failed exits 1 by design, which is not what is fuzzed here)."""
    return [dataclasses.replace(r, status="ok", error=None)
            for r in failed_records(run, "fuzz: not computed")]


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real store (two solvers x one problem x two precisions), checkpointed."""
    folder = tmp_path_factory.mktemp("fuzzbase")
    suite = folder / "base.toml"
    suite.write_text('name = "base"\nprecisions = ["float32", "float64"]\n'
                     '[problems.p]\ntask = "least_squares"\nkind = "gaussian"\ndim = 3\n'
                     'n_samples = 6\n[solvers.gd]\nproblems = ["p"]\nparams = { iters = 20 }\n'
                     '[solvers.ols_qr]\nproblems = ["p"]\n')
    db = folder / "results.db"
    assert main(["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]) == 0
    con = sqlite3.connect(db)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


class Outcomes:
    """Exit codes per kind of input, and every crash (an exception out of ``main`` or a
    malformed error)."""

    def __init__(self) -> None:
        self.codes: Counter[tuple[str, int]] = Counter()
        self.crashes: list[str] = []

    def call(self, kind: str, args: list[str], capsys: pytest.CaptureFixture[str],
             what: str) -> int | None:
        capsys.readouterr()
        try:
            rc = main(args)
        except BaseException as exc:  # noqa: BLE001 -- a crash is what the fuzzer looks for
            self.crashes.append(f"{what}: {type(exc).__name__}: {exc}"[:300])
            capsys.readouterr()
            return None
        err = capsys.readouterr().err.strip()
        self.codes[(kind, rc)] += 1
        if rc not in (0, 2):
            self.crashes.append(f"{what}: exit {rc}: {err[:200]}")
        elif rc == 2 and (not err or "\n" in err or "Traceback" in err):
            self.crashes.append(f"{what}: exit 2 with a malformed error: {err[:300]!r}")
        return rc


def _report(outcomes: Outcomes) -> None:
    lines = [f"{kind}: exit {rc}: {n}" for (kind, rc), n in sorted(outcomes.codes.items())]
    lines.append(f"crashes: {len(outcomes.crashes)}")
    print("\nfuzz counts\n  " + "\n  ".join(lines))
    target = os.environ.get("PRECISION_FUZZ_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def test_mutated_suites_exit_0_or_one_line_2_and_keep_the_store(
        base_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(probes.runner, "compute_records", _not_computed)
    monkeypatch.chdir(tmp_path)
    rng = random.Random(SEED)
    shipped = sorted(shipped_suites().items())
    texts = {name: path.read_text(encoding="utf-8") for name, path in shipped}
    db = tmp_path / "results.db"
    outcomes = Outcomes()
    for i in range(N_SUITE_MUTATIONS):
        name, path = rng.choice(shipped)
        if rng.random() < 0.15:
            kind, text = "suite-bytes", damage_text(rng, texts[name])
            label = f"#{i} {name} bytes"
        else:
            data, ops = mutate(rng, tomllib.loads(texts[name]))
            kind, text, label = "suite-mutation", to_toml(data), f"#{i} {name} {ops}"
        suite = tmp_path / f"m{i}.toml"
        suite.write_bytes(text.encode("utf-8", "surrogatepass"))
        shutil.copy(base_store, db)
        before, (_, runs_before, _) = _digest(db), _counts(db)
        args = ["run", str(suite), "--db", str(db), "--no-progress", "--no-report"]
        extra = rng.random()
        if extra < 0.2:
            args += ["--profile", rng.choice(["quick", "nosuch", ""])]
        elif extra < 0.3:
            args += ["--precisions", rng.choice(["float32", "mp0,float32", "", ",", "ü"])]
        rc = outcomes.call(kind, args, capsys, label)
        integrity, runs_after, _ = _counts(db)
        assert integrity == "ok", label
        if rc == 2:
            assert _digest(db) == before, f"{label}: an exit-2 run changed the store"
        elif rc == 0:
            assert runs_after >= runs_before, label
            assert not _bad_names(db), f"{label}: stored invalid names {_bad_names(db)}"
    _report(outcomes)
    assert not outcomes.crashes, "\n".join(outcomes.crashes)
    assert sum(outcomes.codes.values()) == N_SUITE_MUTATIONS
    assert outcomes.codes[("suite-mutation", 2)] > 0 and \
        outcomes.codes[("suite-mutation", 0)] > 0


def _damaged_store(rng: random.Random, base: Path, target: Path) -> str:
    """Random bytes, a SQLite header then random bytes, or a real store with pages
    overwritten."""
    op = rng.randrange(3)
    if op == 0:
        target.write_bytes(rng.randbytes(rng.choice([0, 1, 100, 4096, 65536])))
        return "random-bytes"
    if op == 1:
        target.write_bytes(b"SQLite format 3\x00" + rng.randbytes(rng.choice([84, 4096, 16384])))
        return "header+random"
    data = bytearray(base.read_bytes())
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(100, len(data))
        n = rng.randint(1, 2048)
        data[at:at + n] = rng.randbytes(min(n, len(data) - at))
    target.write_bytes(bytes(data))
    return "damaged-pages"


def test_damaged_store_files_never_crash_and_are_not_written(
        base_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(probes.runner, "compute_records", _not_computed)
    monkeypatch.chdir(tmp_path)
    rng = random.Random(SEED + 1)
    suite = tmp_path / "tiny.toml"
    suite.write_text('name = "tiny"\nprecisions = ["float32"]\n[problems.p]\n'
                     'task = "least_squares"\nkind = "gaussian"\ndim = 3\nn_samples = 6\n'
                     '[solvers.ols_qr]\nproblems = ["p"]\n')
    outcomes = Outcomes()
    for i in range(N_STORE_FILES):
        db = tmp_path / f"s{i}.db"
        kind = _damaged_store(rng, base_store, db)
        for command in (["results"], ["results", "--format", "json"],
                        ["delete", "--status", "failed", "--dry-run"],
                        ["run", str(suite), "--no-progress", "--no-report"]):
            before = _digest(db)
            rc = outcomes.call(kind, [*command, "--db", str(db)], capsys,
                               f"#{i} {kind} {command[0]}")
            if rc == 2:
                assert _digest(db) == before, f"#{i} {kind} {command}: exit 2 wrote the file"
            for ext in ("-wal", "-shm"):
                Path(f"{db}{ext}").unlink(missing_ok=True)
    _report(outcomes)
    assert not outcomes.crashes, "\n".join(outcomes.crashes)
    assert outcomes.codes[("random-bytes", 2)] > 0
