"""The Python API of training: ``train(spec, task, steps, ...) -> TrainResult``.

A thin loop over :mod:`attngraph.train.trainer`, which holds what every way
to train shares: the defaults (:class:`~attngraph.train.trainer.TrainSettings`),
the step (:func:`~attngraph.train.trainer.train_step`: cross-entropy on
``logits`` plus the REINFORCE term for hard attention), the evaluation and
the RNG policy (training runs on a forked copy of torch's RNG, seeded from
``seed``, so the figures reached do not depend on what ran before and the
caller's RNG is left as it was). ``task_loss``, ``reward_of`` and ``evaluate``
are re-exported from there. The CLI's run, with files and checkpoints, is
:func:`attngraph.train.runner.run`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.ir.graph import Graph
from attngraph.train.dataset import train_stream
from attngraph.train.tasks import Task, task_for
from attngraph.train.trainer import (
    TrainSettings,
    build,
    evaluate,
    reward_of,
    seeded,
    task_loss,
    train_step,
)

if TYPE_CHECKING:
    from torch import nn

__all__ = ["TrainResult", "train", "task_loss", "reward_of", "evaluate"]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    ``metrics`` are the final validation metrics (plus ``loss``, the mean training
    loss of the last 10% of steps); ``history`` has one dict per evaluation.
    """

    model: nn.Module
    task: Task
    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0

    def reached(self, target: dict[str, float]) -> bool:
        """True when every metric in ``target`` is at least its value."""
        return all(self.metrics.get(k, float("-inf")) >= v for k, v in target.items())


def _load(spec: Graph | str | Path) -> Graph:
    if isinstance(spec, Graph):
        return spec
    from attngraph.pipeline import load_spec

    return load_spec(spec)


def train(
    spec: Graph | str | Path,
    task: Task | str | None = None,
    steps: int | None = None,
    *,
    batch: int | None = None,
    lr: float | None = None,
    seed: int = 0,
    eval_every: int = 0,
    eval_size: int = 256,
    options: dict[str, Any] | None = None,
    callback: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainResult:
    """Train a spec on a built-in task or a data file's task.

    Parameters
    ----------
    spec : Graph, str or Path
        An inferred graph or a spec file.
    task : Task or str, optional
        A task, or its registered name; default: the spec's ``train.task``. A
        :class:`~attngraph.train.dataset.DataTask` (from
        :func:`~attngraph.train.dataset.data_task`) trains on a data file.
    steps, batch, lr : optional
        Default to the spec's ``train:`` section, then to
        :class:`~attngraph.train.trainer.TrainSettings`'s defaults.
    seed : int
        Seeds the parameters, the task's data and the sampling during training.
    eval_every : int
        Evaluate every this many steps (0: only at the end).
    eval_size : int
        Size of the fixed validation batch.
    options : dict, optional
        Task options overriding the spec's ``train.options``.
    callback : callable, optional
        ``callback(step, info)`` after every step with ``loss`` (and metrics on
        evaluation steps).

    Returns
    -------
    TrainResult
    """
    graph = _load(spec)
    if task is None or isinstance(task, str):
        task = task_for(graph, task, seed, options)
    settings = TrainSettings.of(graph, steps=steps, batch=batch, lr=lr)
    model, opt = build(graph, settings, seed)
    start = time.perf_counter()
    losses: list[float] = []
    history: list[dict[str, float]] = []
    batches = train_stream(task, settings.batch, seed)  # a DataLoader, as the CLI's run
    with seeded(seed):
        for step in range(1, settings.steps + 1):
            info = {"loss": train_step(model, graph, task, next(batches), opt).loss}
            losses.append(info["loss"])
            if eval_every and step % eval_every == 0 and step < settings.steps:
                info.update(evaluate(model, graph, task, eval_size))
                history.append({"step": float(step), **info})
            if callback is not None:
                callback(step, info)
        metrics = evaluate(model, graph, task, eval_size)
    tail = losses[-max(1, settings.steps // 10):]
    metrics["loss"] = sum(tail) / len(tail)
    history.append({"step": float(settings.steps), **metrics})
    return TrainResult(model=model, task=task, metrics=metrics, history=history,
                       seconds=time.perf_counter() - start)
