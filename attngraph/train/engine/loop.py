"""The one step loop, and the Python API of training: ``train(spec, task, steps, ...)``.

:func:`step_loop` drives the loop every way to train runs: it draws the next batch,
takes the step (:func:`~attngraph.train.engine.step.train_step`) and evaluates on
schedule (every ``eval_every`` steps and at the last), yielding a
:class:`Stepped` per step. The caller decides what a step leaves behind and when
to stop: :func:`train` (the Python API, below) keeps the losses and the history
in memory; the CLI's run (:func:`attngraph.train.run.runner.run`) logs, writes
checkpoints, averages over ranks and stops early.

:mod:`attngraph.train.engine.step` holds what they share besides: the defaults
(:class:`~attngraph.train.engine.step.TrainSettings`), the step (cross-entropy on
``logits`` plus the REINFORCE term for hard attention), the evaluation and the
RNG policy (training runs on a forked copy of torch's RNG, seeded from ``seed``,
so the figures reached do not depend on what ran before and the caller's RNG is
left as it was). ``task_loss``, ``reward_of`` and ``evaluate`` are re-exported
from there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.ir.graph import Graph
from attngraph.train.data.batches import train_stream
from attngraph.train.engine.step import (
    TrainSettings,
    build,
    evaluate,
    reward_of,
    seeded,
    task_loss,
    train_step,
)
from attngraph.train.tasks.lookup import Task, task_for

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["Stepped", "step_loop", "TrainResult", "train", "task_loss", "reward_of", "evaluate"]


@dataclass(frozen=True)
class Stepped:
    """One step of :func:`step_loop`: its number, the training loss, the model's outputs
    and the batch it trained on, and the validation metrics when it evaluated."""

    step: int
    loss: float
    outputs: Mapping[str, Tensor]
    batch: Mapping[str, Tensor]
    valid: dict[str, float] | None = None


def step_loop(model: nn.Module, graph: Graph, task: Task, opt: Any,
              batches: Iterator[Mapping[str, Tensor]], *, start: int, last: int,
              eval_every: int, eval_size: int, net: nn.Module | None = None,
              bf16: bool = False) -> Iterator[Stepped]:
    """Train steps ``start + 1 .. last``, one batch of ``batches`` each.

    Evaluates (:func:`~attngraph.train.engine.step.evaluate`, on ``eval_size``
    validation examples) after every ``eval_every``-th step and after the last;
    ``net`` is the module the forward runs through (a data-parallel wrapper of
    ``model``), ``bf16`` autocasts. Run it inside
    :func:`~attngraph.train.engine.step.seeded`; stop early by leaving the loop.
    """
    for step in range(start + 1, last + 1):
        batch = next(batches)
        done = train_step(model, graph, task, batch, opt, net=net, bf16=bf16)
        valid = None
        if step % eval_every == 0 or step == last:
            valid = evaluate(model, graph, task, eval_size, bf16=bf16)
        yield Stepped(step, done.loss, done.outputs, batch, valid)


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
    from attngraph.frontend import load_spec

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
        :class:`~attngraph.train.data.batches.DataTask` (from
        :func:`~attngraph.train.data.batches.data_task`) trains on a data file.
    steps, batch, lr : optional
        Default to the spec's ``train:`` section, then to
        :class:`~attngraph.train.engine.step.TrainSettings`'s defaults.
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
    batches = train_stream(task, settings.batch, seed)  # a DataLoader, as the CLI's run
    with seeded(seed):
        loop = step_loop(model, graph, task, opt, batches, start=0, last=settings.steps,
                         eval_every=eval_every or settings.steps, eval_size=eval_size)
        metrics, history = _kept(loop, settings.steps, callback)
    return TrainResult(model=model, task=task, metrics=metrics, history=history,
                       seconds=time.perf_counter() - start)


def _kept(loop: Iterator[Stepped], last: int,
          callback: Callable[[int, dict[str, float]], None] | None,
          ) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Run ``loop`` to ``last``; ``(metrics, history)`` as :class:`TrainResult` holds
    them: the last evaluation with the mean loss of the last 10% of steps, and every
    evaluation."""
    losses: list[float] = []
    history: list[dict[str, float]] = []
    metrics: dict[str, float] = {}
    for s in loop:
        info = {"loss": s.loss}
        losses.append(s.loss)
        if s.valid is not None and s.step < last:
            info.update(s.valid)
            history.append({"step": float(s.step), **info})
        elif s.valid is not None:
            metrics = s.valid
        if callback is not None:
            callback(s.step, info)
    tail = losses[-max(1, last // 10):]
    metrics["loss"] = sum(tail) / len(tail)
    history.append({"step": float(last), **metrics})
    return metrics, history

