"""Parse once, typed inside: a precision spelling is parsed once per command and a suite
expanded once; no signature inside the packages takes ``Precision | str`` except the Python
API's edges; the precision grammar round-trips through its canonical spelling."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import precision.precisions as pp
import probes.suite as ps
from precision.cli.main import main
from precision.precisions import Precision, PrecisionError, parse_precision, parse_spelling

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("precision", "probes", "reports")
#: The Python API's entry points: they accept a spelling and convert it (``as_precision``).
EDGES = {("precision/evaluate.py", "evaluate"), ("precision/evaluate.py", "evaluate_exact"),
         ("precision/evaluate.py", "evaluate_method"), ("precision/gradient.py", "gradient"),
         ("precision/evaluate.py", "error_decomposition"),
         ("precision/lengths.py", "evaluate_lengths"),
         ("precision/solvers/measure.py", "run_solver"),
         ("precision/constructions/measure.py", "run_construction"),
         ("precision/precisions.py", "as_precision")}

TINY = """
name = "tiny"
precisions = ["fp32", "mp30"]
seeds = [0]
[tasks.mul]
task = "multiply"
dim = 4
n = 6
[models.tf]
family = "transformer"
tasks = ["mul"]
depth = 1
width = [8]
train = { recipe = "paper", steps = 5, batch_size = 4 }
test_size = 4
"""


def _counts(argv: list[str]) -> tuple[int, int]:
    """(precision parses, suite expansions) of one in-process command."""
    pp._PARSED.clear()
    parses, expansions = pp.PARSE_COUNT, ps.EXPANSIONS
    assert main(argv) == 0
    return pp.PARSE_COUNT - parses, ps.EXPANSIONS - expansions


def test_run_and_probe_parse_each_precision_once_and_expand_once(tmp_path):
    suite = tmp_path / "tiny.toml"
    suite.write_text(TINY)
    common = ["--db", str(tmp_path / "r.db"), "--no-progress", "--no-report"]
    # before this design: 28 parses and 3 expansions (run), 14 and 5 (probe)
    assert _counts(["run", str(suite), *common]) == (2, 1)
    factory = str(ROOT / "examples" / "gated_mixer.py") + ":gated_mixer"
    assert _counts(["probe", factory, "--suite", str(suite), *common]) == (2, 1)


def _annotation_mixes(node: ast.expr | None) -> bool:
    """True for an annotation ``Precision | str`` (either order, possibly inside more)."""
    if node is None:
        return False
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    text = ast.unparse(node)
    return {"Precision", "str"} <= names and "|" in text and "dict" not in text


def test_no_signature_inside_takes_precision_or_str():
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    args = [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]
                    if any(_annotation_mixes(a.annotation) for a in args) and \
                            (rel, node.name) not in EDGES:
                        found.append(f"{rel}:{node.lineno} {node.name}")
    assert not found, f"signatures that take Precision | str inside: {found}"


@pytest.mark.parametrize("text,canonical", [
    ("float32", "float32"), ("FP32", "float32"), (" bf16 ", "bfloat16"), ("mp50", "mp50"),
    ("float16+acc=fp32", "float16+acc=float32"),
    ("float32:rz", "float32:rz"),
    ("bfloat16:sr+seed=7", "bfloat16:sr+seed=7"),
    ("bfloat16:sr+seed=3+acc=float64", "bfloat16:sr+acc=float64+seed=3"),
    ("float64+casts=promote", "float64+casts=promote"),
    ("float32+mod[blocks.*.mlp]=bf16+mod[*attn*]=float64:rd",
     "float32+mod[blocks.*.mlp]=bfloat16+mod[*attn*]=float64:rd"),
])
def test_spelling_round_trips(text, canonical):
    p = parse_spelling(text)
    assert p.name == canonical and "/" not in p.name
    assert parse_spelling(p.name) == p


@pytest.mark.parametrize("text,message", [
    ("float8", "unknown precision"), ("mp0", "unknown precision"),
    ("float32:up", "unknown rounding"), ("float32+acc=mp", "unknown precision"),
    ("float32+casts=drop", "unknown cast policy"), ("float32+x=1", "unknown precision option"),
    ("float32+seed=3", "only for stochastic rounding"),
    ("float32+acc=float64+acc=float64", "given twice"),
])
def test_bad_spellings_are_one_line(text, message):
    with pytest.raises(PrecisionError, match=message.replace("+", r"\+")) as info:
        parse_spelling(text)
    assert "\n" not in str(info.value)


def test_options_not_computed_yet_are_refused_not_ignored():
    assert parse_precision("fp64") == Precision("float64")
    for text in ("float32+mod[mlp]=mxfp8_e4m3", "mp50+mod[mlp]=float8_e4m3"):
        with pytest.raises(PrecisionError, match="yet: per-module assignments"):
            parse_precision(text)
    with pytest.raises(PrecisionError, match="no wider carrier"):
        parse_precision("float64+casts=promote+acc=float64")
    for text in ("float32:rz", "float16+acc=float32"):  # simulated formats (docs/formats.md)
        assert parse_precision(text).is_simulated


def test_cast_policies_are_computed_and_keep_is_the_default():
    assert parse_precision("float64+casts=keep") == parse_precision("float64")
    assert parse_precision("fp64+casts=keep").name == "float64"
    promoted = parse_precision("mp50+casts=promote")
    assert promoted.casts == "promote" and promoted.name == "mp50+casts=promote"
    assert promoted != parse_precision("mp50")
