"""``attngraph train``, ``attend`` and ``catalog`` from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GA = str(ROOT / "specs" / "global_attention.yaml")


@pytest.fixture(scope="session")
def train_ga(cli) -> Callable[..., object]:
    """``train_ga(out, *extra)``: global attention trained from the command line, 6
    steps of 8 into ``out``, with the ``extra`` options."""

    def run(out: Path, *extra: object) -> object:
        return cli("train", GA, "--steps", "6", "--batch", "8",
                   "--out", out, *extra)

    return run


def test_describe_diff_render_and_compile_read_a_runs_spec(tmp_path: Path, train_ga, cli) -> None:
    """A run directory (its spec held by its checkpoint alone) is a SPEC for describe,
    diff, render and compile; a directory that is no run is one error with a hint."""
    train_ga(tmp_path / "run", "--quiet")
    res = cli("compile", tmp_path / "run", code=0)
    assert res.output.startswith(f"{tmp_path / 'run'}: global_attention")
    res = cli("describe", tmp_path / "run", code=0)
    assert res.output.startswith(f"global_attention ({GA}): 1 attention site")
    assert "same: " in cli("diff", tmp_path / "run", GA, code=0).output
    cli("render", tmp_path / "run", "-o", tmp_path / "ga.svg", code=0)
    assert (tmp_path / "ga.svg").stat().st_size > 0
    (tmp_path / "empty").mkdir()
    res = cli("describe", tmp_path / "empty", code=1)
    assert "neither a spec file nor a run" in res.output and "hint:" in res.output


def test_train_writes_metrics_checkpoint_and_summary(tmp_path: Path, train_ga) -> None:
    """A run leaves one JSON line per step plus validation lines, a checkpoint, summary.json,
    and prints a summary comparing final metrics with the spec's targets and naming
    the files."""
    res = train_ga(tmp_path / "run")
    assert res.exit_code == 0, res.output
    lines = [json.loads(ln) for ln in (tmp_path / "run" / "metrics.jsonl").read_text()
             .splitlines()]
    train = [ln for ln in lines if ln["split"] == "train"]
    test = [ln for ln in lines if ln["split"] == "valid"]
    assert [ln["step"] for ln in train] == [1, 2, 3, 4, 5, 6]
    assert all("loss" in ln and "accuracy" in ln for ln in train)
    assert test and test[-1]["step"] == 6 and 0.0 <= test[-1]["accuracy"] <= 1.0
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    assert "global_attention on needle: 6 steps" in res.stdout
    assert "target >= 0.95" in res.stdout
    assert str(tmp_path / "run" / "metrics.jsonl") in res.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"] == {k: v for k, v in test[-1].items()
                                  if k not in ("step", "split")}
    assert summary["target"] == {"accuracy": 0.95, "attention_peak": 0.8}
    assert summary["reached"] == all(summary["metrics"][k] >= v
                                     for k, v in summary["target"].items())


def test_progress_lines_without_a_terminal(tmp_path: Path, train_ga) -> None:
    """Not on a TTY there is no bar but a 'step k/N' line every few steps, with loss."""
    res = train_ga(tmp_path / "run")
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("step ")]
    assert lines and lines[-1].startswith("step 6/6")
    assert all("loss" in ln for ln in lines)
    assert "it/s" not in res.stderr  # no tqdm bar


def test_resume_continues_to_the_new_total(tmp_path: Path, cli, train_ga) -> None:
    """--resume with a larger --steps continues from the checkpoint's step, not from 0."""
    assert train_ga(tmp_path / "run").exit_code == 0
    res = cli("train", GA, "--steps", "9", "--out",
              tmp_path / "run", "--resume", "--quiet", code=0)
    steps = [json.loads(ln)["step"] for ln in (tmp_path / "run" / "metrics.jsonl")
             .read_text().splitlines() if '"train"' in ln]
    assert steps == list(range(1, 10))
    assert "step 7/9" in res.stderr and "step 1/9" not in res.stderr


def test_resume_with_another_spec_exits_1_with_hashes(tmp_path: Path, cli, train_ga) -> None:
    """Resuming a run with an edited mechanism prints a located error and exits 1."""
    assert train_ga(tmp_path / "run").exit_code == 0
    other = tmp_path / "other.yaml"
    other.write_text(Path(GA).read_text().replace("d: 32", "d: 8"))
    res = cli("train", other, "--out", tmp_path / "run",
              "--resume", code=1)
    assert "different spec" in res.stderr and "spec hash" in res.stderr


def test_unknown_task_suggests_a_name(tmp_path: Path, train_ga) -> None:
    """A misspelt task exits 1 with a did-you-mean."""
    res = train_ga(tmp_path / "run", "--task", "needel")
    assert res.exit_code == 1
    assert "unknown task 'needel'" in res.stderr and "needle" in res.stderr


def test_batch_not_divisible_by_processes_is_refused(tmp_path: Path, cli) -> None:
    """--nproc that does not divide the batch is a TrainingError before any process starts."""
    res = cli("train", GA, "--steps", "2", "--batch", "5", "--nproc",
              "2", "--out", tmp_path / "run", code=1)
    assert "does not split evenly" in res.stderr


def test_attend_draws_a_picture_of_the_run(tmp_path: Path, cli, train_ga) -> None:
    """attend loads the run's checkpoint and writes a PNG of the words' weights."""
    assert train_ga(tmp_path / "run").exit_code == 0
    out = tmp_path / "att.png"
    res = cli("attend", tmp_path / "run", "--example", "3",
              "-o", out, code=0)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "(words)" in res.stdout


def test_attend_without_checkpoint_exits_1(tmp_path: Path, cli) -> None:
    """attend on a directory without a run says so and exits 1."""
    res = cli("attend", tmp_path)
    assert res.exit_code == 1 and "no checkpoint" in res.stderr


def test_catalog_lists_every_spec_with_its_task(cli) -> None:
    """catalog prints one line per spec in specs/: name first, task last."""
    res = cli("catalog", "--dir", ROOT / "specs", code=0)
    names = sorted(p.stem for p in (ROOT / "specs").glob("*.yaml"))
    lines = res.stdout.splitlines()
    assert [ln.split()[0] for ln in lines] == names
    ga = next(ln for ln in lines if ln.startswith("global_attention "))
    assert ga.split()[-1] == "needle" and "soft/content/global" in ga


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal (a pty with a width) progress is a tqdm bar with loss and accuracy;
    --quiet turns it into plain step lines."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    from attngraph.train.run.runner import RunConfig, run

    def progress(quiet: bool) -> str:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        os.set_blocking(master, False)
        with os.fdopen(slave, "w") as term:
            run(RunConfig(spec=GA, steps=3, batch=4, eval_size=8, quiet=quiet,
                          out=str(tmp_path / f"q{quiet}")), stream=term)
        chunks = []
        try:
            while chunk := os.read(master, 65536):
                chunks.append(chunk)
        except OSError:  # drained (EAGAIN), or EIO once the slave is closed
            pass
        os.close(master)
        return b"".join(chunks).decode("utf-8", "replace")

    bar = progress(quiet=False)
    assert "3/3" in bar and "loss=" in bar and "acc=" in bar
    assert "step 3/3" not in bar
    lines = progress(quiet=True)
    assert "step 3/3" in lines and "loss=" not in lines


class _Touch:
    """Unpickling this creates the marker file (as any code in a pickle could run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, ...]:
        return (open, (str(self.marker), "w"))


def test_a_crafted_or_damaged_checkpoint_exits_1_naming_it(tmp_path: Path, cli, train_ga) -> None:
    """train --resume and attend on a checkpoint.pt that holds a crafted pickle, an
    empty config or half its bytes print one error at the file with a hint and exit 1:
    no traceback, the marker the pickle would create is absent, the files unchanged."""
    import torch

    assert train_ga(tmp_path / "run").exit_code == 0
    path = tmp_path / "run" / "checkpoint.pt"
    good = torch.load(path, weights_only=True)
    whole = path.read_bytes()
    marker = tmp_path / "pwned"
    damaged = {"crafted": lambda: torch.save({**good, "model": _Touch(marker)}, path),
               "empty config": lambda: torch.save({**good, "config": {}}, path),
               "truncated": lambda: path.write_bytes(whole[:len(whole) // 2])}
    for what, damage in damaged.items():
        damage()
        before = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()}
        for args in (["train", GA, "--steps", "9", "--out", str(tmp_path / "run"),
                      "--resume"], ["attend", str(tmp_path / "run")]):
            res = cli(*args)
            assert res.exit_code == 1 and isinstance(res.exception, SystemExit), what
            assert "Traceback" not in res.output, what
            assert res.stderr.startswith(f"{path}: error: "), (what, res.stderr)
            assert res.stderr.count("error:") == 1 and "\nhint: " in res.stderr, what
            assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir()} == before
        assert not marker.exists()


def test_resume_refuses_a_setting_it_would_not_use(tmp_path: Path, cli, train_ga) -> None:
    """A resume goes on with the run's own learning rate and batch: the same ones given
    again are fine, another is refused at its option (it used to be dropped silently),
    and the run is untouched."""
    assert train_ga(tmp_path / "run").exit_code == 0
    before = (tmp_path / "run" / "checkpoint.pt").read_bytes()
    for flag, value in (("--lr", "0.5"), ("--batch", "4"), ("--eval-every", "2")):
        res = cli("train", GA, "--steps", "9", "--out", tmp_path / "run", "--resume",
                  flag, value, code=1)
        said = f"{flag}: error: {flag} {value}: a resume goes on with the run's own"
        assert said in res.stderr, res.stderr
        assert f"hint: leave out {flag}" in res.stderr
    assert (tmp_path / "run" / "checkpoint.pt").read_bytes() == before
    cli("train", GA, "--steps", "9", "--batch", "8", "--out", tmp_path / "run", "--resume",
        "--quiet", code=0)
