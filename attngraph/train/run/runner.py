"""The full training run behind ``attngraph train``: files, checkpoints, resume.

:func:`run` trains a spec on a built-in task, or on the user's data
(``RunConfig.data``: :mod:`attngraph.train.data.batches`); :mod:`attngraph.train.run.record`
writes its directory (``metrics.jsonl`` with ``"split": "valid"`` evaluation lines,
``metrics.csv``, ``checkpoint.pt``, ``summary.json``, the model card ``README.md``,
a data run's ``data.json``: docs/runs.md). It shows progress
(:mod:`attngraph.train.run.progress`) and returns a :class:`RunSummary` (the
validation metrics of the weights kept against the spec's ``train.target``).
Batches come through :func:`attngraph.train.data.batches.train_stream` (a
``DataLoader``); a data run's epochs are seeded permutations, so a resume
continues them exactly too. ``patience`` stops after that many evaluations
without a better first metric and keeps the best evaluation's weights as the
run's model (:mod:`attngraph.train.run.earlystop`); ``device`` and ``bf16`` say where
and how the passes run (:mod:`attngraph.train.engine.device`).

The defaults, the step, the evaluation and the RNG policy are
:mod:`attngraph.train.engine.step`'s (as :func:`attngraph.train.engine.loop.train`'s: the
same settings and seed give the same parameters either way). With ``resume=True``
a run continues from the directory's checkpoint; the model, optimizer, step and
every random state are restored, so N steps straight and N/2 steps then a resume
to N give the same parameters, also after a kill (``kill -9``) mid-way. A resume
trains on to the total asked for (:mod:`attngraph.train.run.resume`): ``--steps`` or
``--epochs`` when given, else the run's own; a total already reached is refused.

Everything that can fail on the spec and the data together runs before the
output directory is touched: the spec's compile, the resource guard, the task's
fit to the inputs (:func:`attngraph.train.run.config.settle`), the checkpoint's
fit to the model and optimiser, and one forward pass with the loss on two
examples (:func:`attngraph.train.engine.step.dry_run`). The steps themselves
are :func:`attngraph.train.engine.loop.step_loop`'s, as the Python API's are.

A run never overwrites another: a fresh run into a directory that holds one
is refused unless ``overwrite`` is set, and then the earlier run is moved aside
to ``OUT.old-<time>`` (:mod:`attngraph.train.store.directory`). Every file is written
whole or not at all; a full disk or a read-only directory, and a damaged
checkpoint or metrics log on resume, give one
:class:`~attngraph.errors.TrainingError` naming the file.

On one rank of a data-parallel job (``world > 1``, started by
:mod:`attngraph.train.run.distributed`) it uses :mod:`attngraph.train.run.ddp`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from attngraph.train.data.batches import DataTask, train_stream
from attngraph.train.engine.device import pick_device, to_device
from attngraph.train.engine.loop import step_loop
from attngraph.train.engine.step import TrainSettings, build, dry_run, evaluate, seeded
from attngraph.train.run import ddp
from attngraph.train.run.config import SMALL, RunConfig, settle, settle_task
from attngraph.train.run.earlystop import Patience
from attngraph.train.run.record import (
    METRICS_FILE,
    SUMMARY_FILE,
    RunRecord,
    RunSummary,
    run_files,
    summary_dict,
)
from attngraph.train.run.resume import DATA, STORED, TOTAL
from attngraph.train.store import checkpoints as ck
from attngraph.train.tasks.lookup import Task, compute_metrics

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph

__all__ = ["RunConfig", "RunSummary", "run", "settle", "summary_dict",
           "METRICS_FILE", "SUMMARY_FILE"]


def _train_info(task: Task, out: Mapping[str, Any], batch: Mapping[str, Any],
                loss: float) -> dict[str, float]:
    """Loss and the task's first applicable metric on the training batch."""
    metrics = compute_metrics(task, out, batch)
    info = {"loss": loss}
    for name in task.metrics:
        if name in metrics:
            info[name] = metrics[name]
            break
    return info


@contextmanager
def _threads(threads: int, model: nn.Module) -> Iterator[None]:
    """Torch's intra-op threads for the run (see :class:`RunConfig`), restored after."""
    import torch

    before = torch.get_num_threads()
    if threads or sum(p.numel() for p in model.parameters()) < SMALL:
        torch.set_num_threads(threads or 1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run(config: RunConfig, *, rank: int = 0, world: int = 1,
        stream: TextIO | None = None) -> RunSummary:
    """Train ``config.spec``; write metrics and checkpoints; return the summary.

    Parameters
    ----------
    config : RunConfig
        The run's settings.
    rank, world : int
        This process's rank and the number of processes (set by
        :mod:`attngraph.train.run.distributed`; the process group must exist when
        ``world > 1``). Each rank trains on its slice of every batch; only rank 0
        writes files and shows progress.
    stream : file, optional
        Where progress goes (default: stderr).

    Returns
    -------
    RunSummary

    Raises
    ------
    TrainingError
        Bad settings, a batch not divisible by ``world``, an output directory
        that holds another run (without ``overwrite``) or cannot be written, a
        file that cannot be written (full disk), or on ``resume`` a checkpoint
        of a different spec or a damaged checkpoint or metrics log.
    """
    wall = time.perf_counter()
    graph, cfg, prior, task = settle_task(config, world, rank)
    model, opt = _model(graph, cfg, task, prior)
    before = float(prior.config.get("seconds", 0.0)) if prior is not None else 0.0
    rec = RunRecord(cfg, graph, task, prior, stream or sys.stderr,
                    lambda: before + time.perf_counter() - wall,
                    _stored(cfg, task)) if rank == 0 else None
    stop = _patience(cfg, task, prior)
    with seeded(cfg.seed), _threads(cfg.threads, model), rec or nullcontext():
        if prior is not None:
            ck.set_rng_state(prior.rng, task)  # checked when loaded
        valid, last = _train(model, opt, graph, task, cfg, prior, rec, stop, rank, world)
        stop.restore(model)  # the run's model: the best weights, when they were kept
    summary = _summary(graph, task, cfg, prior, stop, valid, last, rec, world, model,
                       before + time.perf_counter() - wall)
    if rec is not None:
        rec.finish(summary, cfg, graph, task, stop.patience if stop.active else 0)
    return summary


def _model(graph: Graph, cfg: RunConfig, task: Task, prior: ck.Checkpoint | None
           ) -> tuple[nn.Module, Any]:
    """The model and optimiser, restored on resume, checked by a dry run, on the device."""
    settings = TrainSettings.of(graph, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr)
    device = pick_device(cfg.device)
    model, opt = build(graph, settings, cfg.seed)
    if prior is not None:  # before any file is touched: a misfit fails here
        ck.restore(prior, Path(cfg.out or "") / ck.CHECKPOINT, model, opt)
        for group in opt.param_groups:  # the state's own, but where a fresh run's is given
            group["lr"] = settings.lr
    # one forward and loss on two examples, as step 1 does: a model whose outputs do
    # not fit the task's targets fails here, before the run directory is touched
    dry_run(model, graph, task)
    if device.type != "cpu":
        model.to(device)
        if prior is not None:  # the optimizer's state follows its parameters
            opt.load_state_dict(opt.state_dict())
    return model, opt


def _stored(cfg: RunConfig, task: Task) -> dict[str, Any]:
    """The settings the checkpoint stores (what a resume continues)."""
    stored = {**{k: getattr(cfg, k) for k in STORED}, "task": task.name,
              "options": dict(task.opts), TOTAL: cfg.steps}
    if isinstance(task, DataTask):
        stored["data"] = {k: getattr(cfg, k) for k in DATA}
    return stored


def _train(model: nn.Module, opt: Any, graph: Graph, task: Task, cfg: RunConfig,
           prior: ck.Checkpoint | None, rec: RunRecord | None, stop: Patience,
           rank: int, world: int) -> tuple[dict[str, float], int]:
    """Drive the step loop: log each step, checkpoint, stop early; ``(valid, last)``,
    the last validation metrics and the step they were measured at."""
    start = prior.step if prior is not None else 0
    valid: dict[str, float] = dict(prior.metrics) if prior is not None else {}
    last, total, device = start, cfg.steps or 0, pick_device(cfg.device)
    net = ddp.wrap(model) if world > 1 else model
    batches = (ddp.shard(b, rank, world)
               for b in train_stream(task, cfg.batch or 0, cfg.seed, start))
    for s in step_loop(model, graph, task, opt, batches, start=start, last=total,
                       eval_every=cfg.eval_every, eval_size=cfg.eval_size, net=net,
                       bf16=cfg.bf16):
        info = _train_info(task, s.outputs, to_device(s.batch, device), s.loss)
        if world > 1:
            info = ddp.mean(info)
        if s.valid is not None:
            valid, last = s.valid, s.step
        stopping = s.valid is not None and stop.stop(valid, s.step, model)
        if rec is not None:
            rec.step(s.step, info, valid, s.valid is not None)
            if s.step % cfg.checkpoint_every == 0 or s.step == total or stopping:
                rec.checkpoint(s.step, model, opt, task, valid, stop)
        if stopping:
            break
    if prior is not None and not valid:  # resumed at or past the last step
        valid = evaluate(model, graph, task, cfg.eval_size, bf16=cfg.bf16)
    return valid, last


def _summary(graph: Graph, task: Task, cfg: RunConfig, prior: ck.Checkpoint | None,
             stop: Patience, valid: dict[str, float], last: int, rec: RunRecord | None,
             world: int, model: nn.Module, seconds: float) -> RunSummary:
    """The run's summary: the kept weights' metrics against the spec's target."""
    target = dict(graph.train.target) if graph.train is not None and \
        graph.train.task == task.name else {}
    start = prior.step if prior is not None else 0
    reached = stop.step if stop.step is not None else max(cfg.steps or 0, start)
    kept = stop.best_step is not None and stop.best_step != last
    return RunSummary(
        spec=graph.name, task=task.name, steps=reached,
        metrics=stop.best_metrics if stop.best_step is not None else valid,
        target=target, seconds=seconds, out=str(cfg.out),
        files={k: str(v) for k, v in run_files(cfg).items()}, world=world,
        rank_max_diff=ddp.rank_max_diff(model) if world > 1 else None,
        moved_aside=rec.moved if rec is not None else None, stopped_early=stop.step,
        best_step=stop.best_step, best_metric=stop.metric if stop.best_step is not None else None,
        last_metrics=valid if kept else None, last_step=last if kept else None,
    )


def _patience(cfg: RunConfig, task: Task, prior: ck.Checkpoint | None) -> Patience:
    """Early stopping on the task's first metric; on resume, from where it stood (with
    the run's own patience when none is given)."""
    best = prior.best if prior is not None else None
    patience = cfg.patience or (int(best["patience"]) if best is not None else 0)
    stop = Patience(patience, task.metrics[0] if task.metrics else "")
    if prior is not None:
        stop.resume(best, prior.model)
    return stop
