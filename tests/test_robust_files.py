"""Issue 25, a run's stored files and every written file: read by the one reader
(:mod:`attngraph.fileio`), written by the one writer.

A run's ``data.json``, its metrics log on ``--resume`` and ``compare``'s
``summary.json`` are refused with one located error when damaged (a 5,000-digit
integer, 5,000 brackets, a FIFO, a JSON list), never a ValueError, RecursionError,
AttributeError or a hang. ``--resume`` removes only the temporary files the writer
made, never the user's own ``*.tmp``. ``predict -o``, ``export -o``, ``render -o``
and ``schema -o`` write whole or not at all: a disk that fills up mid-write leaves
the previous file as it was and no temporary file.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from robust_support import refused as _refused

from attngraph.errors import AttnGraphError
from attngraph.fileio import write_file
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store import directory as rundir

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
DIGITS = "7" * 5000
DEEP = "[" * 5000 + "]" * 5000


def _located(exc: AttnGraphError, file: Path, line: int, col: int, start: str) -> None:
    """Assert the first diagnostic's place and message start, and that it has a hint."""
    d = exc.diagnostics[0]
    assert (d.loc.file, d.loc.line, d.loc.col) == (str(file), line, col), d.format()
    assert d.message.startswith(start), d.message
    assert d.hint, d.format()


def _release(fifo: Path) -> None:
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.fixture(scope="module")
def data_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A data run trained for 2 steps on a small JSONL, and that file."""
    d = tmp_path_factory.mktemp("data_run")
    data = d / "texts.jsonl"
    rows = [{"text": f"{w} the a of", "label": w} for w in ("goal", "bread", "chip") * 6]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    run(RunConfig(spec=str(GA), data=str(data), valid=str(data), steps=2, batch=8,
                  eval_size=8, out=str(d / "run"), quiet=True))
    yield d / "run", data


@pytest.fixture()
def task_run(tmp_path: Path) -> Path:
    """A built-in task run of 2 steps (a checkpoint and a metrics log)."""
    out = tmp_path / "run"
    run(RunConfig(spec=str(GA), steps=2, batch=8, eval_every=1, checkpoint_every=2,
                  eval_size=16, out=str(out), quiet=True))
    return out


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "copy"))


# --- a run's data.json ---------------------------------------------------------------

@pytest.mark.parametrize(("text", "col", "start"), [
    ('{"format": 1, "kind": ' + DIGITS + "}\n", 23, "integer 777777777777...7777"),
    ('{"format": 1, "kind": ' + DEEP + "}\n", 86, "this run's data.json nests deeper"),
    ('{"format": 1, "kind": NaN}\n', 23, "NaN is not a finite number"),
    ('{"format": 1,, "kind": 2}\n', 14, "this run's data.json is not JSON"),
], ids=["5000-digits", "5000-deep", "nan", "syntax"])
def test_a_damaged_data_json_is_one_located_error(data_run: tuple[Path, Path], tmp_path: Path,
                                                  text: str, col: int, start: str, cli) -> None:
    """A run's data.json holding a 5,000-digit integer, 5,000 brackets, NaN or a syntax
    error is one TrainingError at its line and column (load_run, and predict exits 1)."""
    from attngraph import load_run

    run_dir = _copy(data_run[0], tmp_path)
    (run_dir / "data.json").write_text(text, encoding="utf-8")
    _located(_refused(lambda: load_run(run_dir)), run_dir / "data.json", 1, col, start)
    res = cli("predict", run_dir, "--data", data_run[1])
    assert res.exit_code == 1 and f"{run_dir / 'data.json'}:1:{col}: error: " in res.stderr
    assert "Traceback" not in res.output


@needs_fifo
@pytest.mark.parametrize("name", ["data.json", "checkpoint.pt"])
def test_a_fifo_in_a_run_directory_is_refused_without_hanging(
        data_run: tuple[Path, Path], tmp_path: Path, name: str) -> None:
    """A named pipe in place of a run's data.json or checkpoint is refused (never opened
    for reading), naming the file."""
    from attngraph import load_run

    run_dir = _copy(data_run[0], tmp_path)
    (run_dir / name).unlink()
    os.mkfifo(run_dir / name)
    try:
        exc = _refused(lambda: load_run(run_dir))
    finally:
        _release(run_dir / name)
    assert exc.loc.file == str(run_dir / name)
    assert exc.message == f"{run_dir / name} is a FIFO (named pipe), not a run's {name}"


# --- the metrics log on --resume -------------------------------------------------------

@pytest.mark.parametrize(("line", "col", "start"), [
    ('{"step": 2, "split": "train", "loss": ' + DIGITS + "}", 39,
     "integer 777777777777...7777"),
    ('{"step": 2, "split": "train", "loss": ' + DEEP + "}", 102,
     "this line nests deeper than 64 levels"),
], ids=["5000-digits", "5000-deep"])
def test_a_damaged_metrics_log_on_resume_is_located(task_run: Path, line: str, col: int,
                                                    start: str) -> None:
    """A metrics log line holding a 5,000-digit integer or 5,000 brackets is one error at
    its line and column on --resume; the run's files keep their bytes."""
    log = task_run / "metrics.jsonl"
    lines = log.read_text().split("\n")
    lines[1] = line
    log.write_text("\n".join(lines))
    before = {p.name: p.read_bytes() for p in task_run.iterdir()}
    exc = _refused(lambda: run(RunConfig(spec=str(GA), steps=4, batch=8, out=str(task_run),
                                         resume=True, quiet=True)))
    _located(exc, log, 2, col, start)
    assert {p.name: p.read_bytes() for p in task_run.iterdir()} == before


def test_a_nan_loss_in_the_metrics_log_does_not_block_resume(task_run: Path) -> None:
    """NaN and Infinity as Python writes them in the run's own log are read back."""
    log = task_run / "metrics.jsonl"
    text = log.read_text()
    log.write_text(text.replace('"loss": ', '"loss": NaN, "was": ', 1))
    kept = rundir.read_metrics(log, 2)
    assert "NaN" in kept.text and kept.note is None


def test_resume_keeps_the_users_own_tmp_files(task_run: Path) -> None:
    """--resume removes what a killed write of a run file left (named by the writer), and
    no other *.tmp: the user's data.json.tmp or notes.tmp stay."""
    mine = ["data.json.tmp", "checkpoint.pt.mine.tmp", ".summary.json.backup.tmp",
            "notes.tmp", ".notes.txt.1.ab.tmp"]
    for name in mine:
        (task_run / name).write_text("the user's own\n")
    (task_run / ".checkpoint.pt.4242.0badc0de.tmp").write_bytes(b"half a checkpoint")
    run(RunConfig(spec=str(GA), steps=3, batch=8, out=str(task_run), resume=True, quiet=True))
    assert sorted(p.name for p in task_run.glob("*.tmp")) == sorted(mine)
    assert all((task_run / n).read_text() == "the user's own\n" for n in mine)


# --- compare's summary.json ------------------------------------------------------------

@pytest.mark.parametrize(("summary", "start"), [
    ("[1, 2]", "this run's summary.json is damaged"),
    ('{"steps": "many"}', "this run's summary.json is damaged"),
    ('{"steps": ' + DIGITS + "}", "integer 777777777777...7777"),
    (DEEP, "this run's summary.json nests deeper"),
    ("", "this run's summary.json is empty"),
], ids=["list", "text-steps", "5000-digits", "5000-deep", "empty"])
def test_a_damaged_summary_is_one_error(tmp_path: Path, summary: str, start: str) -> None:
    """compare reads a seed's summary.json: a list, a wrong type, a 5,000-digit integer,
    5,000 brackets or nothing is one TrainingError at the file, not AttributeError."""
    from attngraph.train.report.compare import read_run

    (tmp_path / "metrics.jsonl").write_text(
        '{"step": 1, "split": "train", "loss": 1.0}\n'
        '{"step": 1, "split": "test", "accuracy": 0.5}\n')
    (tmp_path / "summary.json").write_text(summary)
    exc = _refused(lambda: read_run(tmp_path, 0))
    assert exc.loc.file == str(tmp_path / "summary.json") and exc.hint
    assert exc.message.startswith(start), exc.message


# --- the one writer --------------------------------------------------------------------

def _disk_fills_up(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    """Make every write of ``target`` (or of a temporary file for it) fail with ENOSPC
    part-way: os.write, and Path.write_text/write_bytes after writing half."""
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    real_write = os.write

    def write(fd: int, data: Any) -> int:
        if target.name in os.readlink(f"/proc/self/fd/{fd}"):
            raise full
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    for method in ("write_text", "write_bytes"):
        real = getattr(Path, method)

        def half(self: Path, data: Any, *a: Any, _real: Any = real, **k: Any) -> int:
            if self.name != target.name:
                return int(_real(self, data, *a, **k))
            _real(self, data[: len(data) // 2], *a, **k)
            raise full

        monkeypatch.setattr(Path, method, half)


def _outputs(tmp_path: Path, data_run: tuple[Path, Path]) -> dict[str, list[str]]:
    """command name -> its arguments before ``-o``."""
    return {
        "schema": ["schema"],
        "render": ["render", str(GA), "--format", "json"],
        "export": ["export", str(GA), "--format", "python"],
        "predict": ["predict", str(data_run[0]), "--data", str(data_run[1])],
    }


@needs_proc
@pytest.mark.parametrize("command", ["schema", "render", "export", "predict"])
def test_a_full_disk_leaves_the_previous_output_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data_run: tuple[Path, Path],
        command: str, cli) -> None:
    """predict -o, export -o, render -o and schema -o over a previous output: when the
    disk fills up mid-write the command exits 1 with one error at the file, the previous
    file keeps its bytes and no temporary file is left; with room, the file is replaced."""
    args = _outputs(tmp_path, data_run)[command]
    out = tmp_path / "out" / "result.txt"
    out.parent.mkdir()
    out.write_text("the previous good output\n")
    with monkeypatch.context() as m:
        _disk_fills_up(m, out)
        res = cli(*args, "-o", out)
    assert res.exit_code == 1, res.output
    assert f"{out}: error: cannot write" in res.stderr and "Traceback" not in res.output
    assert out.read_text() == "the previous good output\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["result.txt"]
    res = cli(*args, "-o", out, code=0)
    assert out.read_text() != "the previous good output\n"


def test_the_writer_never_removes_a_file_it_did_not_make(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file already there under the temporary name the writer draws is neither
    overwritten nor removed: the write fails (O_EXCL) and both files keep their bytes."""
    import secrets

    monkeypatch.setattr(secrets, "token_hex", lambda n: "0badc0de")
    target = tmp_path / "out.json"
    target.write_text("old\n")
    theirs = tmp_path / f".out.json.{os.getpid()}.0badc0de.tmp"
    theirs.write_text("someone else's\n")
    with pytest.raises(AttnGraphError, match="cannot write"):
        write_file(target, "new\n")
    assert target.read_text() == "old\n" and theirs.read_text() == "someone else's\n"


def test_the_writer_keeps_links_and_permissions(tmp_path: Path) -> None:
    """A symbolic link is written through (it stays a link); a file keeps its mode."""
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    real.chmod(0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    write_file(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


@needs_fifo
def test_the_writer_writes_into_a_fifo_and_refuses_one_nobody_reads(tmp_path: Path) -> None:
    """-o naming a FIFO writes into it (it stays a FIFO); a FIFO nothing reads is one
    error, not a hang."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    _refused(lambda: write_file(fifo, "x\n"), AttnGraphError)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    for _ in range(200):  # the reader's open shows up as a FIFO with a reader
        try:
            write_file(fifo, "hello\n")
            break
        except AttnGraphError:
            threading.Event().wait(0.01)
    reader.join(10)
    assert got == [b"hello\n"] and stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.parametrize("name", ["a\0b.csv", "img/\0dog/4.png"])
def test_a_path_holding_a_nul_is_one_error(name: str) -> None:
    """A path with a NUL (an image named in a data file) names no file: one error with a
    hint, the NUL shown escaped, not a ValueError from os.stat."""
    from attngraph.fileio.files import DATA, check_regular

    exc = _refused(lambda: check_regular(name, DATA), AttnGraphError)
    assert "NUL character" in exc.message and exc.hint
    assert "\0" not in exc.format()


@pytest.mark.parametrize("fmt", ["1", 1.0, True, [1], "tensor"])
def test_a_checkpoint_format_of_another_type_is_not_a_checkpoint(fmt: Any) -> None:
    """The format entry is compared as an int only: a tensor, a string, a float or a
    bool there is 'not an attngraph checkpoint', never an ambiguous tensor truth."""
    import torch

    from attngraph.train.store.checkpoint_data import problems

    value = torch.tensor([]) if fmt == "tensor" else fmt
    assert "not an attngraph checkpoint" in (problems({"format": value}) or "")
