"""A run's settings, and their check before anything is written.

:class:`RunConfig` holds the settings of one run of ``attngraph train`` (``None``:
the spec's ``train:`` value). :func:`settle` checks them before the run starts,
and before the output directory is touched: the seed, the spec's compile with
its ``auto`` sizes decided by the data (:mod:`attngraph.train.run.sized`),
the output directory (:func:`attngraph.train.store.directory.check`), on resume
the checkpoint and its stored settings (:mod:`attngraph.train.run.resume`), the
data and the task, the resource guard at the batch and length the run will use
(:func:`attngraph.guard.check_resources`) and the task's fit to the spec. An
error in a setting the spec gives points at it in the spec's ``train:`` section
(:meth:`attngraph.ir.graph.Graph.where`); one the checkpoint stores, at the
checkpoint. :func:`attngraph.train.run.runner.run` trains what it settles.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import (
    AttnGraphError,
    SourceLoc,
    TrainingError,
    count_problem,
    flag_problem,
)
from attngraph.train.data.batches import DataTask, load_encoding, steps_per_epoch
from attngraph.train.data.batches import data_task as make_data_task
from attngraph.train.engine.step import TrainSettings, check_fits
from attngraph.train.run.resume import check_total, resumed
from attngraph.train.store import checkpoints as ck
from attngraph.train.store import directory as rundir
from attngraph.train.store.seeds import SEED_HINT, seed_problem
from attngraph.train.tasks.lookup import Task, task_for

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["RunConfig", "SMALL", "settle", "settle_task"]

#: Parameter count under which a run uses one torch thread by default.
SMALL = 1_000_000


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run; ``None`` means the spec's ``train:`` value.

    Unset ``steps``, ``batch`` and ``lr`` are resolved by
    :meth:`attngraph.train.engine.step.TrainSettings.of` (the spec's, else the
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
    #: the user's data (see :mod:`attngraph.train.data.batches`) instead of a built-in task
    data: str | None = None
    valid: str | None = None
    valid_fraction: float = 0.1
    fields: dict[str, str] = field(default_factory=dict)
    tokenize: str = "word"
    #: an imported model reads a text longer than its positions by its first tokens
    truncate: bool = False
    #: an imported language model reads its records joined, in blocks of this many tokens
    blocks: int | None = None
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


#: the settings a run counts with, and the least each may be (as the command line
#: takes them; None, where a setting may be None, is the spec's or the default)
_COUNTS = {"steps": 1, "batch": 1, "epochs": 1, "blocks": 2, "patience": 0, "eval_every": 0,
           "eval_size": 1, "checkpoint_every": 0, "log_every": 0, "threads": 0}


#: the settings that are switches
_SWITCHES = ("resume", "overwrite", "quiet", "truncate", "bf16", "picture")


def _check_given(cfg: RunConfig) -> None:
    """Refuse a setting of the wrong type or out of range, naming it (what the command
    line's option types refuse; the Python workflow passes values unchecked)."""
    import math

    for name, low in _COUNTS.items():
        v = getattr(cfg, name)
        if v is None and name in ("steps", "batch", "epochs", "blocks"):
            continue
        msg = count_problem(name, v, low)
        if msg is not None:
            raise TrainingError(msg, SourceLoc(name), f"give {name}={max(low, 1)} or more")
    lr = cfg.lr
    if lr is not None and (isinstance(lr, bool) or not isinstance(lr, (int, float))
                           or not math.isfinite(lr) or lr <= 0):
        msg = f"lr must be a number > 0, not {lr!r:.40}"
        raise TrainingError(msg, SourceLoc("lr"), "give e.g. lr=1e-3, or leave it to the spec")
    bad = flag_problem(**{name: getattr(cfg, name) for name in _SWITCHES})
    if bad is not None:
        raise TrainingError(bad[1], SourceLoc(bad[0]), f"give {bad[0]}=True or False")
    f = cfg.valid_fraction
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f < 1:
        msg = f"valid_fraction must be a number between 0 and 1, not {f!r:.40}"
        raise TrainingError(msg, SourceLoc("valid_fraction"), "give e.g. 0.1")


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


def settle(config: RunConfig, world: int = 1, *, rank: int = 0) -> tuple[Graph, RunConfig, Any]:
    """Check a run before it starts: ``(graph, settings filled in, checkpoint or None)``.

    Loads the spec, and on ``resume`` the checkpoint (refusing another spec's or
    a damaged one) whose stored settings then win over ``config``'s except
    ``steps``; makes the task once to check its options, and that its data fits
    the spec (:func:`attngraph.train.engine.step.check_fits`); checks the batch splits
    over ``world``. On rank 0 (the one that writes files), also refuses an
    output directory that holds another run (without ``overwrite``) or cannot be
    written (:func:`attngraph.train.store.directory.check`). Nothing is written. Errors in
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
    graph, cfg, prior, _ = settle_task(config, world, rank)
    return graph, cfg, prior


def settle_task(config: RunConfig, world: int, rank: int) -> tuple[Graph, RunConfig, Any, Task]:
    """:func:`settle`, and the task it made: ``(graph, config, checkpoint or None, task)``."""
    from attngraph.train.run.sized import sized_spec

    problem = seed_problem(config.seed)
    if problem is not None:
        raise TrainingError(problem, SourceLoc("--seed"), SEED_HINT)
    _check_given(config)
    # the resource guard runs below, at the batch and length this run will use
    graph = sized_spec(config)  # `auto` dims decided by the data (train/run/sized.py)
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
    config, data_task, per = _data(config, graph, out_dir, prior, world)
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
    _guard(graph, cfg, task, data_task, prior, out_dir)
    check_fits(graph, task)
    return graph, cfg, prior, task


def _data(config: RunConfig, graph: Graph, out_dir: Path, prior: ck.Checkpoint | None,
          world: int) -> tuple[RunConfig, DataTask | None, int | None]:
    """A data run's task and steps per epoch (``epochs`` made steps); else nothing."""
    if config.data is None:
        return config, None, None
    if world > 1:
        msg = "training on --data runs in one process for now"
        raise TrainingError(msg, SourceLoc(config.data), "leave out --nproc")
    from attngraph.train.store.imported import is_imported

    data_task: DataTask
    if prior is not None and is_imported(out_dir):  # the model's own tokenizer reads it
        from attngraph.train.data.tokenized import tokenized_task

        if config.tokenize != "word":
            msg = "an imported model reads text with its own tokenizer, not by --tokenize"
            raise TrainingError(msg, SourceLoc("--tokenize"), "leave out --tokenize")
        stored = config.options.get("labels") if prior.config.get("data") else None
        data_task = tokenized_task(graph, out_dir, config.data, valid=config.valid,
                                   valid_fraction=config.valid_fraction, seed=config.seed,
                                   fields=dict(config.fields),
                                   labels=stored if isinstance(stored, list) else None,
                                   truncate=config.truncate, blocks=config.blocks)
    else:
        from attngraph.train.data.tokenized import only_imports

        only_imports(config.truncate, config.blocks)
        enc = load_encoding(out_dir, graph) if prior is not None else None
        data_task = make_data_task(graph, config.data, valid=config.valid,
                                   valid_fraction=config.valid_fraction, seed=config.seed,
                                   fields=dict(config.fields), mode=config.tokenize, enc=enc)
    per = steps_per_epoch(data_task, TrainSettings.of(graph, batch=config.batch).batch)
    if config.epochs:
        config = replace(config, steps=config.epochs * per,
                         eval_every=config.eval_every or per,
                         checkpoint_every=config.checkpoint_every or per)
    return config, data_task, per


def _guard(graph: Graph, cfg: RunConfig, task: Task, data_task: DataTask | None,
           prior: ck.Checkpoint | None, out_dir: Path) -> None:
    """The resource guard at the batch, length and evaluation batch this run uses."""
    from attngraph.guard import check_resources
    from attngraph.train.store.imported import is_imported

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
    return graph.where("train", "batch")

