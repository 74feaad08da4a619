"""What the toolkit writes onto: a regular file is replaced atomically; a character device
(``/dev/null``) or a FIFO some process reads is written in place, as a shell's ``>`` would;
a FIFO nobody reads, a socket or a folder is refused in one line -- never replaced by a
regular file; a path through a symlink loop is one line, exit 2. Names that would show
reversed or hide characters (bidi overrides, zero-width characters) are refused at entry,
and a name holding HTML shows as text in ``report.md`` as in ``report.html``."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from precision.cli.main import main
from probes.names import name_problem
from probes.store.db import RunRecord, Store


@pytest.fixture
def store(tmp_path) -> Path:
    db = tmp_path / "r.db"
    with Store(db) as s:
        s.write_run(RunRecord(run_id="r1", suite="s", kind="solver", subject="gd",
                              task="<img src=x onerror=alert(1)>", precision="float32",
                              status="ok", log10_mse=-3.0, config={"seed": 0}, result={}))
    return db


def _one_line_2(capsys, code: int, *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert all(f in err for f in fragments), err
    return err


def test_a_fifo_nobody_reads_is_refused_and_kept(store, tmp_path, capsys):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    code = main(["results", "--db", str(store), "--out", str(fifo)])
    _one_line_2(capsys, code, "it is a FIFO that no process reads", "is unchanged")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_with_a_reader_is_written_in_place(store, tmp_path, capsys):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # the reader is there first
    done = threading.Event()

    def read() -> None:   # until the writer has written and closed (EOF after data)
        while not done.wait(0.01):
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if chunk:
                got.append(chunk)
            elif got:
                break
        os.close(fd)

    reader = threading.Thread(target=read)
    reader.start()
    assert main(["results", "--db", str(store), "--out", str(fifo), "--format", "csv"]) == 0
    reader.join(timeout=60)
    done.set()
    assert b"r1" in b"".join(got) and stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_character_device_is_written_in_place(store, capsys):
    before = os.stat(os.devnull)
    assert main(["results", "--db", str(store), "--out", os.devnull]) == 0
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_socket_or_a_folder_is_refused(store, tmp_path, capsys):
    path = tmp_path / "s.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        code = main(["results", "--db", str(store), "--out", str(path)])
        _one_line_2(capsys, code, "it is a socket; refusing to write onto it")
        assert stat.S_ISSOCK(os.stat(path).st_mode)


@pytest.mark.parametrize("argv", [
    ["results", "--out", "{loop}"], ["results", "--out", "{loop}/x.csv"],
    ["report", "--out", "{loop}"],
    ["run", "solvers", "--profile", "quick", "--solvers", "gd", "--save-weights", "{loop}"],
    ["run", "solvers", "--profile", "quick", "--solvers", "gd", "--checkpoints", "{loop}"],
])
def test_a_symlink_loop_is_one_line(store, tmp_path, capsys, argv):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    before = store.read_bytes()
    code = main([a.format(loop=loop) for a in argv] + ["--db", str(store)])
    _one_line_2(capsys, code, "Too many levels of symbolic links")
    assert store.read_bytes() == before


@pytest.mark.parametrize("name", ["ab\u202ecd", "a\u2066b", "x\u200by", "\ufeffname",
                                  "a\u200db"])
def test_invisible_format_characters_are_refused_in_names(name):
    assert "invisible format character U+" in name_problem(name)


def test_a_suite_label_with_a_right_to_left_override_is_refused(tmp_path, capsys):
    suite = tmp_path / "s.toml"
    suite.write_text('name = "s"\nprecisions = ["float32"]\nseeds = [0]\n'
                     '[problems."evil\u202egpj.exe"]\ntask = "least_squares"\n'
                     'kind = "gaussian"\ndim = 2\nn_samples = 4\n'
                     '[solvers.gd]\nproblems = ["evil\u202egpj.exe"]\n', encoding="utf-8")
    code = main(["run", str(suite), "--db", str(tmp_path / "r.db"), "--no-progress"])
    _one_line_2(capsys, code, "U+202E (RIGHT-TO-LEFT OVERRIDE)")
    assert not (tmp_path / "r.db").exists()


def test_html_in_a_name_is_text_in_both_reports(store, tmp_path):
    assert main(["report", "--db", str(store), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    page = (tmp_path / "rep" / "report.html").read_text()
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "<img src=x" not in page
