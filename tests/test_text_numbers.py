"""Numbers that arrive as text: ASCII digits only, bounded length, one message shape, in the
precision grammar, the command line's options and the suite loader (one line, exit 2, never
a traceback; another script's digits never make a second name of a format)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from precision.cli.main import main
from precision.precisions import PrecisionError, parse_precision
from precision.text_numbers import (
    MAX_DIGITS,
    NumberError,
    is_whole,
    parse_real,
    parse_whole,
    shown,
)

FUZZ = settings(max_examples=300, derandomize=True, deadline=None)
LONG = "9" * 5000   # past Python's 4300-digit int() limit


@pytest.mark.parametrize("text", ["²", "٥", "５", " 5", "5 ", "+5", "-5", "5_0", "", "0x5",
                                  "1" * (MAX_DIGITS + 1), LONG, "5\x00"])
def test_whole_numbers_are_ascii_digits_and_bounded(text):
    with pytest.raises(NumberError, match=r"^the count must be a whole number .*, not '"):
        parse_whole(text, "the count")
    assert not is_whole(text)


def test_whole_number_ranges_and_values():
    assert parse_whole("007", "x") == 7 and parse_whole("1" * MAX_DIGITS, "x") == int("1" * 20)
    with pytest.raises(NumberError, match=r"in \[1, 3\], not '4'"):
        parse_whole("4", "x", lo=1, hi=3)
    assert parse_real("1e-6", "x") == 1e-6 and parse_real(".5", "x", positive=True) == 0.5
    for bad in ("1e999", "nan", "inf", "٥", "1,5", "", "-1e-3x"):
        with pytest.raises(NumberError):
            parse_real(bad, "x")
    with pytest.raises(NumberError, match="positive"):
        parse_real("0", "x", positive=True)
    assert shown("a\u202eb") == "'a\\u202eb'" and "(5000 characters)" in shown(LONG)


@pytest.mark.parametrize("spelling,message", [
    ("bfloat16:sr+seed=²", "the seed must be a whole number in [0, 4294967295] in ASCII"),
    ("bfloat16:sr+seed=4294967296", "the seed must be a whole number in [0, 4294967295], not"),
    ("mp" + LONG, "unknown precision 'mp9999"),
    ("mp" + LONG, "the N of mpN must be a whole number in [1, 2000] in ASCII digits"),
    ("mp2001", "the N of mpN must be a whole number in [1, 2000], not '2001'"),
    ("mp٥٠", "unknown precision 'mp\\u0665\\u0660'"),
    ("e٥m2", "unknown precision 'e\\u0665m2'"),
    ("e" + LONG + "m3", "unknown precision 'e9999"),
    ("int4_g" + "1" * 50, "unknown precision 'int4_g111"),
])
def test_the_grammar_refuses_numbers_in_one_line(spelling, message):
    with pytest.raises(PrecisionError) as info:
        parse_precision(spelling)
    text = str(info.value)
    assert message in text and "\n" not in text and len(text) < 1500


@FUZZ
@given(st.text(alphabet=st.sampled_from("e٥m2mp0123456789_g+:=sr²int4abfloat16 "), max_size=24))
def test_any_spelling_is_a_precision_or_one_error(text):
    """A precision or PrecisionError, nothing else; what is accepted is spelled in ASCII and
    parses back to itself."""
    try:
        p = parse_precision(text)
    except PrecisionError as exc:
        assert "\n" not in str(exc)
        return
    assert p.name.isascii() and parse_precision(p.name) == p


@FUZZ
@given(st.text(max_size=30))
def test_parse_whole_agrees_with_the_ascii_rule(text):
    try:
        value = parse_whole(text, "x")
    except NumberError:
        assert not (text.isascii() and text.isdigit() and len(text) <= MAX_DIGITS)
        return
    assert text.isascii() and text.isdigit() and value == int(text)


@pytest.mark.parametrize("argv,message", [
    (["run", "solvers", "--lengths", "²"], "--lengths: give comma-separated positive"),
    (["run", "solvers", "--jobs", "²"], "argument --jobs: a whole number in ASCII digits"),
    (["run", "solvers", "--jobs", LONG], "argument --jobs: a whole number in ASCII digits"),
    (["run", "solvers", "--time-limit", "1e999"], "argument --time-limit: the value must be"),
    (["run", "solvers", "--precisions", "bfloat16:sr+seed=²"], "the seed must be a whole"),
    (["results", "--precision", "e" + LONG + "m3"], "unknown precision 'e9999"),
    (["delete", "--precision", "e" + LONG + "m3"], "unknown precision 'e9999"),
    (["ops", "examples/gated_mixer.py:gated_mixer", "--tokens", "0"],
     "--tokens must be a positive integer, not 0"),
    (["ops", "examples/gated_mixer.py:gated_mixer", "--width", "٥"],
     "argument --width: a whole number in ASCII digits"),
    (["localize", "examples/gated_mixer.py:gated_mixer", "--precision", "bfloat16",
      "--reference", "mp" + LONG], "the N of mpN must be"),
])
def test_the_command_line_refuses_numbers_in_one_line(argv, message, tmp_path, capsys,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main([*argv] + (["--db", str(tmp_path / "r.db")] if argv[0] != "ops" else []))
    except SystemExit as exc:   # argparse's own exit
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err, err[-400:]
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("line,message", [
    ("seeds = [" + LONG + "]", "has more digits than Python reads"),
    ("seeds = [" + "9" * 300 + "]", "a whole number has at most 20 digits"),
])
def test_a_suite_with_a_huge_number_is_one_line(line, message, tmp_path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_text(f'name = "s"\nprecisions = ["float32"]\n{line}\n'
                     '[problems.p]\nproblem = "ls_gauss"\n')
    assert main(["run", str(suite), "--db", str(tmp_path / "r.db"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
