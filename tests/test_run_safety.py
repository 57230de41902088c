"""Training runs never lose or expose data: no run is overwritten without --overwrite
(and then it is moved aside, not deleted), a full disk or a read-only directory is
one error naming the file with no temporary file left, a damaged or torn metrics
log is reported or (a torn last line) dropped, and a run killed with SIGKILL
resumes to the same bits as a straight run."""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from attngraph.errors import TrainingError
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store import checkpoints as ck
from attngraph.train.store import directory as rundir

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"


def _cfg(out: Path, steps: int, **kw: Any) -> RunConfig:
    settings: dict[str, Any] = {"batch": 8, "eval_every": 3, "checkpoint_every": 2,
                                "eval_size": 16, "quiet": True, **kw}
    return RunConfig(spec=str(settings.pop("spec", GA)), steps=steps, out=str(out),
                     **settings)


def _files(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (relative name -> bytes)."""
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _temporaries(d: Path) -> list[str]:
    return [str(p) for p in d.rglob("*") if p.name.endswith(".tmp")]


def _other_spec(tmp_path: Path) -> Path:
    other = tmp_path / "other.yaml"
    other.write_text(GA.read_text().replace("d: 32", "d: 16"))
    return other


def _failed_cleanly(res: Result, where: Path) -> str:
    """Assert the CLI printed one located error (no traceback) and exited 1; its text."""
    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert res.stderr.count(": error: ") == 1, res.stderr
    assert f"{where}: error: " in res.stderr and "\nhint: " in res.stderr, res.stderr
    return res.stderr


# --- an existing run is never overwritten ----------------------------------------------

def test_another_spec_into_an_existing_run_is_refused_and_touches_nothing(
        tmp_path: Path) -> None:
    """Training another spec (or the same one) into a directory that holds a run,
    without --resume or --overwrite, is a TrainingError at the directory; every file
    of the earlier run keeps its bytes."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    before = _files(out)
    for spec in (_other_spec(tmp_path), GA):
        with pytest.raises(TrainingError, match="already holds a run") as err:
            run(_cfg(out, 2, spec=spec))
        assert err.value.loc.file == str(out)
        assert err.value.hint and "--resume" in err.value.hint \
            and "--overwrite" in err.value.hint
        assert _files(out) == before


def test_the_cli_refuses_an_existing_run_with_one_error(tmp_path: Path, cli) -> None:
    """`attngraph train OTHER --out RUN` over a run exits 1 with one located error."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    before = _files(out)
    res = cli("train", _other_spec(tmp_path), "--steps", "2", "--out", out)
    assert "already holds a run" in _failed_cleanly(res, out)
    assert _files(out) == before


def test_overwrite_moves_the_earlier_run_aside_and_says_where(tmp_path: Path, cli) -> None:
    """--overwrite renames the earlier run's directory to OUT.old-<time> with every file
    as it was (a picture drawn from it too), trains afresh in OUT, and prints where the
    earlier run went; a second --overwrite picks another free name."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    (out / "attention_0.png").write_bytes(b"a picture of the earlier run")
    before = _files(out)
    res = cli("train", _other_spec(tmp_path), "--steps", "2", "--batch", "8", "--out",
              out, "--overwrite", "--quiet", code=0)
    moved = [p for p in tmp_path.iterdir() if p.name.startswith("run.old-")]
    assert len(moved) == 1 and _files(moved[0]) == before
    assert f"moved to {moved[0]}" in res.stdout
    assert f"moved the earlier run in {out} to {moved[0]}" in res.stderr
    assert ck.load_checkpoint(out).spec_file.endswith("other.yaml")
    assert not (out / "attention_0.png").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["moved_aside"] == str(moved[0])
    res = cli("train", GA, "--steps", "2", "--batch", "8", "--out", out, "--overwrite",
              "--quiet", code=0)
    assert len([p for p in tmp_path.iterdir() if p.name.startswith("run.old-")]) == 2


def test_resume_and_overwrite_together_are_refused(tmp_path: Path, cli) -> None:
    """--resume continues a run, --overwrite moves it aside: both at once is an error."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    before = _files(out)
    res = cli("train", GA, "--out", out, "--resume", "--overwrite")
    assert "--resume" in _failed_cleanly(res, out)
    assert _files(out) == before


def test_overwrite_never_moves_the_current_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """--out . --overwrite inside a run is refused (moving the working directory would
    leave the new run writing into the old one)."""
    run(_cfg(tmp_path, 2))
    before = _files(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingError, match="current directory"):
        run(_cfg(Path("."), 2, overwrite=True))
    assert _files(tmp_path) == before


# --- a read-only or full directory -----------------------------------------------------

@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_refused_before_training(tmp_path: Path, cli) -> None:
    """An --out under a directory without write permission is refused up front."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        res = cli("train", GA, "--steps", "2", "--out", locked / "run")
        assert "cannot write in this directory" in _failed_cleanly(res, locked)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def _refuse_under(monkeypatch: pytest.MonkeyPatch, where: Path, err: int) -> None:
    """Make every os.open/os.mkdir that creates something under ``where`` fail with ``err``."""
    real_open, real_mkdir = os.open, os.mkdir

    def refused(path: Any) -> bool:
        return Path(path).resolve().is_relative_to(where.resolve())

    def fake_open(path: Any, flags: int, *a: Any, **k: Any) -> int:
        if flags & os.O_CREAT and refused(path):
            raise OSError(err, os.strerror(err), str(path))
        return real_open(path, flags, *a, **k)

    def fake_mkdir(path: Any, *a: Any, **k: Any) -> None:
        if refused(path):
            raise OSError(err, os.strerror(err), str(path))
        real_mkdir(path, *a, **k)

    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "mkdir", fake_mkdir)


@pytest.mark.parametrize("err", [errno.EROFS, errno.EACCES], ids=["read-only-fs", "denied"])
def test_an_unwritable_directory_is_refused_before_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, err: int, cli) -> None:
    """A directory where no file can be created (read-only file system, no permission;
    simulated, as root writes anywhere) is one error at the directory, before any
    training; nothing is left in it, for a fresh run and for a resume."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    before = _files(out)
    _refuse_under(monkeypatch, tmp_path, err)
    res = cli("train", GA, "--steps", "2", "--out", tmp_path / "new")
    text = _failed_cleanly(res, tmp_path)
    assert os.strerror(err).lower() in text.lower() or "read-only" in text
    assert not (tmp_path / "new").exists()
    res = cli("train", GA, "--steps", "4", "--out", out, "--resume")
    _failed_cleanly(res, out)
    assert _files(out) == before and not _temporaries(tmp_path)


def _full_disk(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Make os.write fail with ENOSPC for files whose name contains ``name``."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        if name in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)


needs_proc = pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")


@needs_proc
@pytest.mark.parametrize("name", ["metrics.jsonl", ck.CHECKPOINT, "summary.json"])
def test_a_full_disk_is_one_error_naming_the_file_and_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, cli) -> None:
    """ENOSPC while writing the metrics log, a checkpoint or the summary stops the run
    with one error naming that file and a hint; no temporary file is left."""
    out = tmp_path / "run"
    _full_disk(monkeypatch, name)
    res = cli("train", GA, "--steps", "4", "--batch", "8", "--out", out, "--quiet")
    text = _failed_cleanly(res, out / name)
    assert "no space left" in text and "free some space" in text
    assert not _temporaries(tmp_path)


@needs_proc
def test_a_full_disk_at_a_checkpoint_keeps_the_last_one_and_resumes_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """When a checkpoint cannot be written the previous one keeps its bytes; once there
    is space, --resume reaches the straight run's bits."""
    run(_cfg(tmp_path / "straight", 6))
    out = tmp_path / "run"
    run(_cfg(out, 2))
    before = (out / ck.CHECKPOINT).read_bytes()
    with monkeypatch.context() as m:
        _full_disk(m, ck.CHECKPOINT)
        with pytest.raises(TrainingError, match="no space left") as err:
            run(_cfg(out, 6, resume=True))
    assert err.value.loc.file == str(out / ck.CHECKPOINT)
    assert (out / ck.CHECKPOINT).read_bytes() == before and not _temporaries(tmp_path)
    run(_cfg(out, 6, resume=True))
    _same_run(tmp_path / "straight", out)


@needs_proc
def test_a_full_disk_while_resuming_leaves_the_log_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """ENOSPC while a resume rewrites the metrics log (dropping lines past the
    checkpoint) is one error naming the log, which keeps its bytes; no
    metrics.jsonl.tmp (nor any temporary) is left."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    with (out / "metrics.jsonl").open("a") as fh:  # a step logged, then killed
        fh.write(json.dumps({"step": 3, "split": "train", "loss": 1.0}) + "\n")
    before = _files(out)
    _full_disk(monkeypatch, "metrics.jsonl")
    res = cli("train", GA, "--steps", "4", "--out", out, "--resume", "--quiet")
    assert "no space left" in _failed_cleanly(res, out / "metrics.jsonl")
    assert _files(out) == before and not _temporaries(tmp_path)


# --- a damaged or torn metrics log -----------------------------------------------------

def _train_lines(d: Path) -> list[str]:
    return [ln for ln in (d / "metrics.jsonl").read_text().splitlines() if '"train"' in ln]


def _same_run(a: Path, b: Path) -> None:
    """Assert two runs end with the same bits and log each training step once, alike."""
    import torch

    x, y = ck.load_checkpoint(a), ck.load_checkpoint(b)
    assert x.step == y.step
    for k, v in x.model.items():
        assert torch.equal(v, y.model[k]), k
    for i, st in x.optimizer["state"].items():
        for name, v in st.items():
            assert torch.equal(v, y.optimizer["state"][i][name]), (i, name)
    assert torch.equal(x.rng["torch"], y.rng["torch"]) and x.rng["task"] == y.rng["task"]
    assert _train_lines(a) == _train_lines(b)
    steps = [json.loads(ln)["step"] for ln in _train_lines(b)]
    assert steps == list(range(1, x.step + 1))


def test_a_torn_last_line_is_dropped_with_a_note_and_the_resume_is_exact(
        tmp_path: Path) -> None:
    """A last log line cut off mid-write (what SIGKILL during a write leaves) lies past
    the checkpoint: a resume drops it with a note naming the log and its line, and
    reaches the straight run's bits with every step logged once."""
    run(_cfg(tmp_path / "straight", 6))
    out = tmp_path / "run"
    run(_cfg(out, 4))
    n = len((out / "metrics.jsonl").read_text().splitlines())
    with (out / "metrics.jsonl").open("a") as fh:
        fh.write(json.dumps({"step": 5, "split": "train", "loss": 1.0}) + "\n")
        fh.write('{"step": 6, "split": "tr')
    note = io.StringIO()
    run(_cfg(out, 6, resume=True), stream=note)
    assert f"{out / 'metrics.jsonl'}:{n + 2}: note: dropped a torn last line" \
        in note.getvalue()
    _same_run(tmp_path / "straight", out)


@pytest.mark.parametrize(("line", "says"), [
    ("not json at all", "is not JSON"),
    ('["a", "list"]', "is not a step's record"),
    ('{"split": "train", "loss": 1.0}', "is not a step's record"),
], ids=["garbage", "not-an-object", "no-step"])
def test_a_damaged_log_line_is_one_error_at_its_line(tmp_path: Path, line: str,
                                                     says: str, cli) -> None:
    """A line of the metrics log (other than a torn last one) that is not a step's
    JSON object is one error at FILE:LINE with the line shown and a hint; the resume
    touches no file."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    log = out / "metrics.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = line
    log.write_text("\n".join(lines) + "\n")
    before = _files(out)
    res = cli("train", GA, "--steps", "4", "--out", out, "--resume", "--quiet")
    text = _failed_cleanly(res, Path(f"{log}:2:1"))
    assert says in text and f"| {line}" in text
    assert _files(out) == before


# --- kill -9 -------------------------------------------------------------------------

_CHILD = """
import sys, time
import attngraph.train.engine.loop as loop
import attngraph.train.run.runner as r
step = loop.train_step
def slow(*a, **k):
    time.sleep(0.03)  # time for the parent to kill a run mid-way
    return step(*a, **k)
loop.train_step = slow
r.run(r.RunConfig(spec=sys.argv[1], steps=int(sys.argv[2]), out=sys.argv[3], batch=8,
                  eval_every=3, checkpoint_every=2, eval_size=16, quiet=True))
"""


def test_kill_9_mid_run_then_resume_is_exact(tmp_path: Path) -> None:
    """A run killed with SIGKILL part-way (after a checkpoint, with steps logged past
    it) resumes with --resume to the straight run's bits: parameters, optimizer and
    random states equal, every step logged once with the same figures, and no
    temporary file left."""
    steps = 40
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(GA), str(steps), str(out)],
                             env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    log = out / "metrics.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and child.poll() is None:
            if log.exists() and len(_train_lines(out)) >= 11:
                break
            time.sleep(0.01)
        assert child.poll() is None, child.stderr.read() if child.stderr else ""
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL
    killed_at = ck.load_checkpoint(out).step
    assert 0 < killed_at < len(_train_lines(out)) < steps
    run(_cfg(tmp_path / "straight", steps))
    run(_cfg(out, steps, resume=True))
    _same_run(tmp_path / "straight", out)
    assert (out / "metrics.jsonl").read_text() == \
        (tmp_path / "straight" / "metrics.jsonl").read_text()
    assert not _temporaries(tmp_path)


def test_prepare_removes_what_a_killed_write_left(tmp_path: Path) -> None:
    """The temporary files of a write cut off by a kill are removed when the run
    resumes; other files in the directory are left alone."""
    run(_cfg(tmp_path, 2))
    (tmp_path / ".checkpoint.pt.123.abcd.tmp").write_bytes(b"half a checkpoint")
    (tmp_path / "metrics.jsonl.tmp").write_text("left by an older version\n")
    (tmp_path / "notes.tmp").write_text("the user's own\n")
    rundir.prepare(tmp_path, resume=True, overwrite=False)
    assert sorted(p.name for p in tmp_path.glob("*.tmp")) == ["notes.tmp"]


@pytest.mark.slow  # two spawned processes import torch: ~30 s on 2 busy cores
def test_a_rank_reports_a_damaged_log_at_its_line_on_resume_with_two_processes(
        tmp_path: Path, cli) -> None:
    """With --nproc 2 the error rank 0 meets (a damaged metrics log on resume) reaches
    the command line with its location, FILE:LINE, not as a bare message."""
    out = tmp_path / "run"
    run(_cfg(out, 2))
    log = out / "metrics.jsonl"
    lines = log.read_text().splitlines()
    lines[0] = "oops"
    log.write_text("\n".join(lines) + "\n")
    res = cli("train", GA, "--steps", "4", "--out", out, "--resume", "--nproc", "2",
              "--quiet")
    assert "is not JSON" in _failed_cleanly(res, Path(f"{log}:1:1"))
