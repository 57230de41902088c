"""Rank 0's record of a training run: its files and its summary.

:class:`RunRecord` prepares a run's directory and writes ``metrics.jsonl``
(:data:`METRICS_FILE`: one JSON line per step, ``"split": "train"``, and one per
evaluation, ``"split": "valid"``), the same lines as rows of ``metrics.csv``
(:mod:`attngraph.train.store.metrics_csv`), the checkpoints, a data run's ``data.json``,
TensorBoard scalars when TensorBoard is installed (:mod:`attngraph.train.store.board`),
and at the end ``summary.json`` (:data:`SUMMARY_FILE`, a :class:`RunSummary`) and
the model card ``README.md`` (:mod:`attngraph.train.run.modelcard`).
:class:`~attngraph.train.run.earlystop.Patience` is early stopping on the validation
figures. :func:`attngraph.train.run.runner.run` drives them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from attngraph.source import MAX_BYTES
from attngraph.spectext import read_text
from attngraph.train.data.autosize import stored_text
from attngraph.train.data.batches import DataTask
from attngraph.train.run import modelcard
from attngraph.train.run.earlystop import Patience
from attngraph.train.run.modelcard import CARD_FILE
from attngraph.train.run.progress import Progress
from attngraph.train.store import checkpoints as ck
from attngraph.train.store import directory as rundir
from attngraph.train.store.board import Board
from attngraph.train.store.metrics_csv import CSV_FILE, CsvLog

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.train.run.config import RunConfig
    from attngraph.train.tasks.base import Task

__all__ = ["METRICS_FILE", "SUMMARY_FILE", "CSV_FILE", "RunSummary", "RunRecord",
           "Patience", "run_files", "summary_dict"]

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
    #: the step whose weights the run kept (early stopping keeps the best), or None
    #: when they are the last step's; ``metrics`` are that step's validation figures
    best_step: int | None = None
    #: the metric early stopping watched, when ``best_step`` is set
    best_metric: str | None = None
    #: the last evaluation's figures, when ``best_step`` is another step
    last_metrics: dict[str, float] | None = None
    #: the last evaluated step, when ``best_step`` is another step
    last_step: int | None = None

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
        lines.extend(self._kept())
        if self.rank_max_diff is not None:
            lines.append(f"  ranks in sync      max |Δparameter| = {self.rank_max_diff:.2e}")
        lines.extend(f"{k + ':':<11} {v}" for k, v in self.files.items())
        if self.moved_aside is not None:
            lines.append(f"the earlier run in {self.out} was moved to {self.moved_aside}")
        return "\n".join(lines)

    def _kept(self) -> list[str]:
        """Which step's weights the run kept, when early stopping kept the best."""
        if self.best_step is None or self.best_metric is None:
            return []
        m = self.best_metric
        said = f"  kept the weights of step {self.best_step}, the best validation {m}"
        if m in self.metrics:
            said += f" ({self.metrics[m]:.4f})"
        if self.last_metrics is not None and m in self.last_metrics:
            said += (f"; the last evaluation, step {self.last_step}, had "
                     f"{self.last_metrics[m]:.4f}")
        return [said]


def run_files(cfg: RunConfig) -> dict[str, Path]:
    """Where a run's metrics log and table, checkpoint, summary and model card are."""
    out = Path(cfg.out or "")
    return {"metrics": out / METRICS_FILE, "table": out / CSV_FILE,
            "checkpoint": out / ck.CHECKPOINT, "summary": out / SUMMARY_FILE,
            "card": out / CARD_FILE}


class RunRecord:
    """Rank 0's side of a run: the metrics log, the checkpoints, the progress display.

    Opening it prepares the output directory (:func:`attngraph.train.store.directory.prepare`:
    an earlier run moved aside on ``overwrite``, a killed run's temporary files
    removed); a resume keeps the log's lines up to the checkpoint's step. Notes
    (where an earlier run went, a torn log line dropped) go to ``stream``.
    """

    def __init__(self, cfg: RunConfig, graph: Graph, task: Task, prior: ck.Checkpoint | None,
                 stream: TextIO, seconds: Callable[[], float], stored: dict[str, Any]) -> None:
        self.files = run_files(cfg)
        out = Path(cfg.out or "")
        text = read_text(str(cfg.spec), MAX_BYTES)
        self.spec = (ck.spec_hash(graph), stored_text(text, cfg.spec, graph),  # `auto` sized
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
        self.stream = stream
        if isinstance(task, DataTask):
            task.save(out)
        self.log = rundir.Log(self.files["metrics"])
        self.csv = CsvLog(self.files["table"], task.metrics, kept.text if kept else "")
        self.board = Board(out)
        self.progress = Progress(graph.name, cfg.steps or 0, prior.step if prior else 0,
                                 cfg.log_every, cfg.quiet, stream)

    def __enter__(self) -> RunRecord:
        return self

    def __exit__(self, *exc: object) -> None:
        self.log.close()
        self.csv.close()
        self.progress.close()
        self.board.close()

    def step(self, step: int, info: dict[str, float], valid: dict[str, float],
             evaluated: bool) -> None:
        """Log a step's training figures, and its validation figures when it evaluated."""
        records = [{"step": step, "split": "train", **info}]
        if evaluated:
            records.append({"step": step, "split": "valid", **valid})
        # one write: a kill leaves at most the last line torn
        self.log.write("".join(json.dumps(r) + "\n" for r in records))
        self.csv.write(records)
        self.board.step(step, info, valid if evaluated else {})
        self.progress.step(step, {**info, **{f"valid_{k}": v for k, v in valid.items()}})

    def checkpoint(self, step: int, model: nn.Module, opt: Any, task: Task,
                   valid: dict[str, float], stop: Patience) -> None:
        """Save the run's state after ``step`` (call inside the run's RNG context): the
        run's model (the best weights so far, with early stopping) and what
        ``--resume`` goes on from."""
        spec_hash, spec_text, spec_file = self.spec
        weights, resume_model = stop.weights_for(step, model)
        ck.save_checkpoint(self.files["checkpoint"], ck.Checkpoint(
            step=step, model=weights, optimizer=opt.state_dict(),
            rng=ck.rng_state(task), spec_hash=spec_hash, spec_text=spec_text,
            spec_file=spec_file, config={**self.stored, "seconds": self.seconds()},
            metrics=valid, resume_model=resume_model, best=stop.state()))

    def summary(self, summary: RunSummary) -> None:
        """Write ``summary.json`` (atomically)."""
        text = json.dumps(summary_dict(summary), indent=2) + "\n"
        rundir.atomic_write(self.files["summary"], text.encode("utf-8"))

    def finish(self, summary: RunSummary, cfg: RunConfig, graph: Graph, task: Task,
               patience: int) -> None:
        """Write ``summary.json``; draw the attention picture when ``cfg.picture``; write
        the model card (:mod:`attngraph.train.run.modelcard`)."""
        self.summary(summary)
        note = None
        if cfg.picture:
            note = _draw(Path(cfg.out or ""), cfg)
        text = modelcard.card(summary, cfg, graph, task, patience=patience, note=note)
        modelcard.write_card(Path(cfg.out or ""), text, self.stream)


def _draw(out: Path, cfg: RunConfig) -> str | None:
    """Draw example 0 of the validation data into ``out/attention.png``; None when
    drawn, else why not (a spec without an attention output)."""
    from attngraph.errors import AttnGraphError
    from attngraph.train.pictures.attend import attend_run

    where = cfg.valid or cfg.data
    try:
        attend_run(out, example=0, out=out / modelcard.PICTURE, data=where)
    except AttnGraphError as exc:
        return f"No attention picture: {exc.diagnostics[0].message}."
    return None


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain data (what ``summary.json`` holds), with ``reached``."""
    return {**asdict(summary), "reached": summary.reached}
