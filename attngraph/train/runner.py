"""The full training run behind ``attngraph train``: files, checkpoints, resume.

:func:`run` trains a spec on a built-in task, or on the user's data
(``RunConfig.data``: :mod:`attngraph.train.dataset`); :mod:`attngraph.train.runlog`
writes its directory (``metrics.jsonl`` with ``"split": "valid"`` evaluation lines,
``metrics.csv``, ``checkpoint.pt``, ``summary.json``, the model card ``README.md``,
a data run's ``data.json``: docs/runs.md). It shows progress
(:mod:`attngraph.train.progress`) and returns a :class:`RunSummary` (the
validation metrics of the weights kept against the spec's ``train.target``).
Batches come through :func:`attngraph.train.dataset.train_stream` (a
``DataLoader``); a data run's epochs are seeded permutations, so a resume
continues them exactly too. ``patience`` stops after that many evaluations
without a better first metric and keeps the best evaluation's weights as the
run's model (:mod:`attngraph.train.earlystop`); ``device`` and ``bf16`` say where
and how the passes run (:mod:`attngraph.train.device`).

The defaults, the step, the evaluation and the RNG policy are
:mod:`attngraph.train.trainer`'s (as :func:`attngraph.train.loop.train`'s: the
same settings and seed give the same parameters either way). With ``resume=True``
a run continues from the directory's checkpoint; the model, optimizer, step and
every random state are restored, so N steps straight and N/2 steps then a resume
to N give the same parameters, also after a kill (``kill -9``) mid-way. A resume
trains on to the total asked for (:mod:`attngraph.train.resume`): ``--steps`` or
``--epochs`` when given, else the run's own; a total already reached is refused.

Everything that can fail on the spec and the data together runs before the
output directory is touched: the spec's compile, the resource guard, the task's
fit to the inputs, the checkpoint's fit to the model and optimiser, and one
forward pass with the loss on two examples (:func:`attngraph.train.trainer.dry_run`).

A run never overwrites another: a fresh run into a directory that holds one
is refused unless ``overwrite`` is set, and then the earlier run is moved aside
to ``OUT.old-<time>`` (:mod:`attngraph.train.rundir`). Every file is written
whole or not at all; a full disk or a read-only directory, and a damaged
checkpoint or metrics log on resume, give one
:class:`~attngraph.errors.TrainingError` naming the file.

On one rank of a data-parallel job (``world > 1``, started by
:mod:`attngraph.train.distributed`) it uses :mod:`attngraph.train.ddp`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from attngraph.errors import AttnGraphError, SourceLoc, TrainingError
from attngraph.train import checkpoints as ck
from attngraph.train import ddp, rundir
from attngraph.train.dataset import DataTask, load_encoding, steps_per_epoch, train_stream
from attngraph.train.dataset import data_task as make_data_task
from attngraph.train.device import pick_device, to_device
from attngraph.train.earlystop import Patience
from attngraph.train.resume import DATA, STORED, TOTAL, check_total, resumed
from attngraph.train.runlog import (
    METRICS_FILE,
    SUMMARY_FILE,
    RunRecord,
    RunSummary,
    run_files,
    summary_dict,
)
from attngraph.train.seeds import SEED_HINT, seed_problem
from attngraph.train.speclocs import spec_loc
from attngraph.train.tasks import Task, compute_metrics, task_for
from attngraph.train.trainer import (
    TrainSettings,
    build,
    check_fits,
    dry_run,
    evaluate,
    seeded,
    train_step,
)

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph

__all__ = ["RunConfig", "RunSummary", "run", "settle", "summary_dict",
           "METRICS_FILE", "SUMMARY_FILE"]

#: Parameter count under which a run uses one torch thread by default.
SMALL = 1_000_000


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run; ``None`` means the spec's ``train:`` value.

    Unset ``steps``, ``batch`` and ``lr`` are resolved by
    :meth:`attngraph.train.trainer.TrainSettings.of` (the spec's, else the
    defaults). ``eval_every``, ``checkpoint_every`` and ``log_every`` of 0 mean
    "a fifth (a tenth for log lines) of the steps"; evaluation and a checkpoint
    also always happen at the last step. ``threads`` of 0 means one torch thread
    for models under :data:`SMALL` parameters (intra-op threads only add
    overhead at that size, and many when the cores are busy), else torch's default.
    ``overwrite`` lets a fresh run start in a directory that holds another run,
    which is first moved aside to ``OUT.old-<time>``.
    """

    spec: str
    task: str | None = None
    steps: int | None = None
    batch: int | None = None
    lr: float | None = None
    seed: int = 0
    out: str | None = None
    resume: bool = False
    overwrite: bool = False
    quiet: bool = False
    eval_every: int = 0
    eval_size: int = 256
    checkpoint_every: int = 0
    log_every: int = 0
    threads: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    #: the user's data (see :mod:`attngraph.train.dataset`) instead of a built-in task
    data: str | None = None
    valid: str | None = None
    valid_fraction: float = 0.1
    fields: dict[str, str] = field(default_factory=dict)
    tokenize: str = "word"
    #: passes over the training data (sets steps; evaluation every epoch by default)
    epochs: int | None = None
    #: stop after this many evaluations without a better first metric, keeping the
    #: best evaluation's weights (0: never; a resume keeps the run's own)
    patience: int = 0
    device: str = "cpu"
    bf16: bool = False
    #: draw the trained model's attention into ``OUT/attention.png`` at the end
    #: (the model card shows it); ``attngraph train`` does
    picture: bool = False


def _resolve(cfg: RunConfig, graph: Graph) -> RunConfig:
    """Fill the unset settings: steps, batch, lr as training does everywhere, the rest here."""
    s = TrainSettings.of(graph, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr)
    every = max(1, s.steps // 5)
    return replace(
        cfg, steps=s.steps, batch=s.batch, lr=s.lr,
        out=cfg.out or str(Path("runs") / graph.name),
        eval_every=cfg.eval_every or every,
        checkpoint_every=cfg.checkpoint_every or every,
        log_every=cfg.log_every or max(1, s.steps // 10),
    )


def _train_info(task: Task, out: dict[str, Any], batch: dict[str, Any],
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


def settle(config: RunConfig, world: int = 1, *, rank: int = 0) -> tuple[Graph, RunConfig, Any]:
    """Check a run before it starts: ``(graph, settings filled in, checkpoint or None)``.

    Loads the spec, and on ``resume`` the checkpoint (refusing another spec's or
    a damaged one) whose stored settings then win over ``config``'s except
    ``steps``; makes the task once to check its options, and that its data fits
    the spec (:func:`attngraph.train.trainer.check_fits`); checks the batch splits
    over ``world``. On rank 0 (the one that writes files), also refuses an
    output directory that holds another run (without ``overwrite``) or cannot be
    written (:func:`attngraph.train.rundir.check`). Nothing is written. Errors in
    the spec's settings point at them in the spec.

    Parameters
    ----------
    config : RunConfig
        The settings given.
    world : int
        Number of processes the batch is split over.
    rank : int
        This process's rank; only rank 0 checks the output directory (the other
        ranks start while rank 0 writes there).

    Returns
    -------
    tuple
        ``(graph, config with every setting filled in, Checkpoint or None)``.

    Raises
    ------
    TrainingError
        As :func:`run` does, before anything is trained.
    """
    graph, cfg, prior, _ = _settle(config, world, rank)
    return graph, cfg, prior


def _settle(config: RunConfig, world: int, rank: int) -> tuple[Graph, RunConfig, Any, Task]:
    """:func:`settle`, and the task it made."""
    from attngraph.pipeline import check_resources
    from attngraph.train.autosize import sized_spec
    from attngraph.train.imported import is_imported

    problem = seed_problem(config.seed)
    if problem is not None:
        raise TrainingError(problem, SourceLoc("--seed"), SEED_HINT)
    # the resource guard runs below, at the batch and length this run will use
    graph = sized_spec(config)  # `auto` dims decided by the data (train/autosize.py)
    out_dir = Path(config.out or Path("runs") / graph.name)
    if rank == 0:
        rundir.check(out_dir, resume=config.resume, overwrite=config.overwrite)
    prior, given = None, config
    if config.resume:
        # every file of the run a resume reads or writes is its own regular file: a
        # run that could not write its summary at the end is refused before step one
        rundir.check_own(out_dir, write=rank == 0)
        prior = ck.load_checkpoint(out_dir / ck.CHECKPOINT, graph)
        config = resumed(config, prior)
    data_task: DataTask | None = None
    per: int | None = None
    if config.data is not None:
        if world > 1:
            msg = "training on --data runs in one process for now"
            raise TrainingError(msg, SourceLoc(config.data), "leave out --nproc")
        enc = load_encoding(out_dir, graph) if prior is not None else None
        data_task = make_data_task(graph, config.data, valid=config.valid,
                                   valid_fraction=config.valid_fraction, seed=config.seed,
                                   fields=dict(config.fields), mode=config.tokenize, enc=enc)
        per = steps_per_epoch(data_task, TrainSettings.of(graph, batch=config.batch).batch)
        if config.epochs:
            config = replace(config, steps=config.epochs * per,
                             eval_every=config.eval_every or per,
                             checkpoint_every=config.checkpoint_every or per)
    cfg = _resolve(replace(config, out=str(out_dir)), graph)
    if prior is not None:
        check_total(cfg, prior, graph, given=given, per_epoch=per)
    if (cfg.batch or 0) % world:
        msg = f"batch {cfg.batch} does not split evenly over {world} processes"
        raise TrainingError(msg, _batch_loc(graph, config, out_dir),
                            f"use a batch that is a multiple of {world}")
    # fail before spawning ranks, and before the output directory is touched
    with _stored(prior, out_dir):  # a resume's task and options are the checkpoint's
        task = data_task or task_for(graph, cfg.task, cfg.seed, cfg.options)
    length = (max(data_task.train.lengths.values(), default=None) if data_task is not None
              else task.opts.get("length"))
    length = length if isinstance(length, int) and length > 0 else None
    # the evaluation's batch too: a built-in task's validation batch is made whole
    evals = min(cfg.eval_size, len(data_task.valid)) if data_task is not None else cfg.eval_size
    # a run of `attngraph import` (a model that exists) may pass the parameter limit
    large = prior is not None and is_imported(out_dir)
    with _stored(prior, out_dir):  # and a resume's batch sizes are the checkpoint's
        check_resources(graph, batch=cfg.batch, length=length, allow_large=large)
        if evals > (cfg.batch or 0):
            check_resources(graph, batch=evals, length=length, allow_large=large)
    check_fits(graph, task)
    return graph, cfg, prior, task


@contextmanager
def _stored(prior: ck.Checkpoint | None, out_dir: Path) -> Iterator[None]:
    """On resume, an error of the settings the checkpoint stores, located at it."""
    try:
        yield
    except AttnGraphError as exc:
        if prior is None:
            raise
        first = exc.diagnostics[0]
        msg = f"this checkpoint's stored settings do not make a run: {first.message}"
        raise TrainingError(msg, SourceLoc(str(out_dir / ck.CHECKPOINT)),
                            "the file is damaged or was edited: train again (--overwrite "
                            "moves this run aside)") from None


def _batch_loc(graph: Graph, config: RunConfig, out_dir: Path) -> SourceLoc:
    """Where the batch size came from: the checkpoint, the caller, or the spec."""
    if config.resume:
        return SourceLoc(file=str(out_dir / ck.CHECKPOINT))
    if config.batch:
        return SourceLoc(file=graph.file)
    return spec_loc(graph, "train", "batch")


def run(config: RunConfig, *, rank: int = 0, world: int = 1,
        stream: TextIO | None = None) -> RunSummary:
    """Train ``config.spec``; write metrics and checkpoints; return the summary.

    Parameters
    ----------
    config : RunConfig
        The run's settings.
    rank, world : int
        This process's rank and the number of processes (set by
        :mod:`attngraph.train.distributed`; the process group must exist when
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
    graph, cfg, prior, task = _settle(config, world, rank)
    settings = TrainSettings.of(graph, steps=cfg.steps, batch=cfg.batch, lr=cfg.lr)
    device = pick_device(cfg.device)
    model, opt = build(graph, settings, cfg.seed)
    if prior is not None:  # before any file is touched: a misfit fails here
        ck.restore(prior, Path(cfg.out or "") / ck.CHECKPOINT, model, opt)
    # one forward and loss on two examples, as step 1 does: a model whose outputs do
    # not fit the task's targets fails here, before the run directory is touched
    dry_run(model, graph, task)
    if device.type != "cpu":
        model.to(device)
        if prior is not None:  # the optimizer's state follows its parameters
            opt.load_state_dict(opt.state_dict())
    stop = _patience(cfg, task, prior)
    start = prior.step if prior is not None else 0
    before = float(prior.config.get("seconds", 0.0)) if prior is not None else 0.0
    valid: dict[str, float] = dict(prior.metrics) if prior is not None else {}
    last = start
    stored = {**{k: getattr(cfg, k) for k in STORED}, "task": task.name,
              "options": dict(task.opts), TOTAL: settings.steps}
    if isinstance(task, DataTask):
        stored["data"] = {k: getattr(cfg, k) for k in DATA}
    rec = RunRecord(cfg, graph, task, prior, stream or sys.stderr,
                    lambda: before + time.perf_counter() - wall, stored) if rank == 0 else None
    with seeded(cfg.seed), _threads(cfg.threads, model), rec or nullcontext():
        if prior is not None:
            ck.set_rng_state(prior.rng, task)  # checked when loaded
        net = ddp.wrap(model) if world > 1 else model
        batches = train_stream(task, settings.batch, cfg.seed, start)
        for step in range(start + 1, settings.steps + 1):
            b = ddp.shard(next(batches), rank, world)
            done = train_step(model, graph, task, b, opt, net=net, bf16=cfg.bf16)
            info = _train_info(task, done.outputs, to_device(b, device), done.loss)
            if world > 1:
                info = ddp.mean(info)
            evaluated = step % cfg.eval_every == 0 or step == settings.steps
            if evaluated:
                valid, last = evaluate(model, graph, task, cfg.eval_size, bf16=cfg.bf16), step
            stopping = evaluated and stop.stop(valid, step, model)
            if rec is not None:
                rec.step(step, info, valid, evaluated)
                if step % cfg.checkpoint_every == 0 or step == settings.steps or stopping:
                    rec.checkpoint(step, model, opt, task, valid, stop)
            if stopping:
                break
        if prior is not None and not valid:  # resumed at or past the last step
            valid = evaluate(model, graph, task, cfg.eval_size, bf16=cfg.bf16)
        stop.restore(model)  # the run's model: the best weights, when they were kept
    target = dict(graph.train.target) if graph.train is not None and \
        graph.train.task == task.name else {}
    reached = stop.step if stop.step is not None else max(settings.steps, start)
    kept = stop.best_step is not None and stop.best_step != last
    summary = RunSummary(
        spec=graph.name, task=task.name, steps=reached,
        metrics=stop.best_metrics if stop.best_step is not None else valid,
        target=target, seconds=before + time.perf_counter() - wall, out=str(cfg.out),
        files={k: str(v) for k, v in run_files(cfg).items()}, world=world,
        rank_max_diff=ddp.rank_max_diff(model) if world > 1 else None,
        moved_aside=rec.moved if rec is not None else None, stopped_early=stop.step,
        best_step=stop.best_step, best_metric=stop.metric if stop.best_step is not None else None,
        last_metrics=valid if kept else None, last_step=last if kept else None,
    )
    if rec is not None:
        rec.finish(summary, cfg, graph, task, stop.patience if stop.active else 0)
    return summary


def _patience(cfg: RunConfig, task: Task, prior: ck.Checkpoint | None) -> Patience:
    """Early stopping on the task's first metric; on resume, from where it stood (with
    the run's own patience when none is given)."""
    best = prior.best if prior is not None else None
    patience = cfg.patience or (int(best["patience"]) if best is not None else 0)
    stop = Patience(patience, task.metrics[0] if task.metrics else "")
    if prior is not None:
        stop.resume(best, prior.model)
    return stop
