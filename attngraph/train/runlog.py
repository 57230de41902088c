"""Rank 0's record of a training run: its files, its summary, and when to stop early.

:class:`RunRecord` prepares a run's directory and writes ``metrics.jsonl``
(:data:`METRICS_FILE`), the checkpoints, a data run's ``data.json``,
TensorBoard scalars when TensorBoard is installed (:mod:`attngraph.train.board`),
and at the end ``summary.json`` (:data:`SUMMARY_FILE`, a :class:`RunSummary`).
:class:`Patience` is early stopping on the validation figures.
:func:`attngraph.train.runner.run` drives them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from attngraph.source import MAX_BYTES
from attngraph.spectext import read_text
from attngraph.train import checkpoints as ck
from attngraph.train import rundir
from attngraph.train.board import Board
from attngraph.train.dataset import DataTask, save_encoding
from attngraph.train.progress import Progress

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.train.runner import RunConfig
    from attngraph.train.taskbase import Task

__all__ = ["METRICS_FILE", "SUMMARY_FILE", "RunSummary", "RunRecord", "Patience",
           "run_files", "summary_dict"]

#: File name of the metrics log inside a run's output directory.
METRICS_FILE = "metrics.jsonl"
#: File name of the final summary (JSON) inside a run's output directory.
SUMMARY_FILE = "summary.json"


@dataclass
class RunSummary:
    """What a run reached, and where its files are."""

    spec: str
    task: str
    steps: int
    metrics: dict[str, float]
    target: dict[str, float]
    seconds: float
    out: str
    files: dict[str, str]
    world: int = 1
    rank_max_diff: float | None = None
    moved_aside: str | None = None
    stopped_early: int | None = None

    @property
    def reached(self) -> bool:
        """True when every target metric is at least its value."""
        return all(self.metrics.get(k, float("-inf")) >= v for k, v in self.target.items())

    def format(self) -> str:
        """A few lines: metrics against targets, time, files."""
        lines = [f"{self.spec} on {self.task}: {self.steps} steps in {self.seconds:.1f} s"
                 + (f" on {self.world} processes" if self.world > 1 else "")]
        for k, v in sorted(self.metrics.items()):
            want = self.target.get(k)
            mark = "" if want is None else (f"  target >= {want:g} "
                                            + ("reached" if v >= want else "NOT reached"))
            lines.append(f"  {k:<18} {v:.4f}{mark}")
        lines.extend(f"  {k:<18} (missing)  target >= {v:g} NOT reached"
                     for k, v in sorted(self.target.items()) if k not in self.metrics)
        if self.stopped_early is not None:
            lines.append(f"  stopped early at step {self.stopped_early}: no better validation "
                         "figure for --patience evaluations")
        if self.rank_max_diff is not None:
            lines.append(f"  ranks in sync      max |Δparameter| = {self.rank_max_diff:.2e}")
        lines.extend(f"{k + ':':<11} {v}" for k, v in self.files.items())
        if self.moved_aside is not None:
            lines.append(f"the earlier run in {self.out} was moved to {self.moved_aside}")
        return "\n".join(lines)


def run_files(cfg: RunConfig) -> dict[str, Path]:
    """Where a run's metrics log, checkpoint and summary are."""
    out = Path(cfg.out or "")
    return {"metrics": out / METRICS_FILE, "checkpoint": out / ck.CHECKPOINT,
            "summary": out / SUMMARY_FILE}


class RunRecord:
    """Rank 0's side of a run: the metrics log, the checkpoints, the progress display.

    Opening it prepares the output directory (:func:`attngraph.train.rundir.prepare`:
    an earlier run moved aside on ``overwrite``, a killed run's temporary files
    removed); a resume keeps the log's lines up to the checkpoint's step. Notes
    (where an earlier run went, a torn log line dropped) go to ``stream``.
    """

    def __init__(self, cfg: RunConfig, graph: Graph, task: Task, prior: ck.Checkpoint | None,
                 stream: TextIO, seconds: Callable[[], float], stored: dict[str, Any]) -> None:
        self.files = run_files(cfg)
        out = Path(cfg.out or "")
        self.spec = (ck.spec_hash(graph), read_text(str(cfg.spec), MAX_BYTES),
                     str(cfg.spec))  # before the spec may move aside with an earlier run
        # read (and check) the log before anything is changed
        kept = rundir.read_metrics(self.files["metrics"], prior.step) if prior else None
        moved = rundir.prepare(out, resume=prior is not None, overwrite=cfg.overwrite)
        self.moved = str(moved) if moved is not None else None
        if moved is not None:
            stream.write(f"moved the earlier run in {out} to {moved}\n")
        if kept is not None and kept.note:
            stream.write(kept.note + "\n")
        if kept is not None and kept.changed:
            rundir.atomic_write(self.files["metrics"], kept.text.encode("utf-8"))
        self.seconds = seconds
        self.stored = stored
        if isinstance(task, DataTask):
            save_encoding(out, task.enc)
        self.log = rundir.Log(self.files["metrics"])
        self.board = Board(out)
        self.progress = Progress(graph.name, cfg.steps or 0, prior.step if prior else 0,
                                 cfg.log_every, cfg.quiet, stream)

    def __enter__(self) -> RunRecord:
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.close()
        self.progress.close()
        self.board.close()

    def step(self, step: int, info: dict[str, float], test: dict[str, float],
             evaluated: bool) -> None:
        """Log a step's training figures, and its test figures when it evaluated."""
        lines = json.dumps({"step": step, "split": "train", **info}) + "\n"
        if evaluated:
            lines += json.dumps({"step": step, "split": "test", **test}) + "\n"
        self.log.write(lines)  # one write: a kill leaves at most the last line torn
        self.board.step(step, info, test if evaluated else {})
        self.progress.step(step, {**info, **{f"test_{k}": v for k, v in test.items()}})

    def checkpoint(self, step: int, model: nn.Module, opt: Any, task: Task,
                   test: dict[str, float]) -> None:
        """Save the run's state after ``step`` (call inside the run's RNG context)."""
        spec_hash, spec_text, spec_file = self.spec
        ck.save_checkpoint(self.files["checkpoint"], ck.Checkpoint(
            step=step, model=model.state_dict(), optimizer=opt.state_dict(),
            rng=ck.rng_state(task), spec_hash=spec_hash, spec_text=spec_text,
            spec_file=spec_file, config={**self.stored, "seconds": self.seconds()},
            metrics=test))

    def summary(self, summary: RunSummary) -> None:
        """Write ``summary.json`` (atomically)."""
        text = json.dumps(summary_dict(summary), indent=2) + "\n"
        rundir.atomic_write(self.files["summary"], text.encode("utf-8"))


class Patience:
    """Early stopping: stop after ``patience`` evaluations without a better ``metric``."""

    def __init__(self, patience: int, metric: str) -> None:
        self.patience, self.metric = patience, metric
        self.best = float("-inf")
        self.bad = 0
        self.step: int | None = None

    def stop(self, test: dict[str, float], step: int) -> bool:
        """Count the evaluation at ``step``; True when training should stop there."""
        if not self.patience or self.metric not in test:
            return False
        if test[self.metric] > self.best:
            self.best, self.bad = test[self.metric], 0
            return False
        self.bad += 1
        if self.bad >= self.patience:
            self.step = step
            return True
        return False


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain data (what ``summary.json`` holds), with ``reached``."""
    return {**asdict(summary), "reached": summary.reached}
