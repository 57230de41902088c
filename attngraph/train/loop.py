"""A minimal training loop: ``train(spec, task, steps, ...) -> TrainResult``.

The loss is cross-entropy between the spec's ``logits`` output and the task's
target (:data:`~attngraph.train.tasks.IGNORE` entries skipped). A spec with
``reinforce`` policies (hard attention) also gets the REINFORCE term, with the
per-example reward "every scored prediction right" (1 or 0), through
:func:`attngraph.lower.hard.model_reinforce_loss`. Metrics are measured in eval
mode (greedy decoding for decoder loops) on the task's fixed test batch.
Training seeds torch's global RNG as well (inside ``fork_rng``), so that a
policy's samples and dropout masks, and hence the figures reached, do not depend
on what ran before in the process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import TrainingError
from attngraph.ir.graph import Graph
from attngraph.train.tasks import IGNORE, Task, bind_inputs, compute_metrics, task_for

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["TrainResult", "train", "task_loss", "reward_of"]


@dataclass
class TrainResult:
    """What :func:`train` returns.

    ``metrics`` are the final test metrics (plus ``loss``, the mean training
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


def _logits_target(outputs: dict[str, Tensor], target: Tensor) -> tuple[Tensor, Tensor]:
    logits = outputs.get("logits")
    if logits is None:
        msg = "training needs the spec to declare an output named 'logits'"
        raise TrainingError(msg, hint="add outputs: {logits: <node>}")
    if logits.dim() == target.dim() + 2 and logits.shape[1] == 1:  # one query: [B, 1, C]
        logits = logits.squeeze(1)
    if logits.shape[:-1] != target.shape:
        msg = (f"output 'logits' has shape {tuple(logits.shape)}, but the task's "
               f"targets are {tuple(target.shape)}")
        raise TrainingError(msg, hint="logits must be [..., classes] over the targets' axes")
    return logits, target


def task_loss(outputs: dict[str, Tensor], target: Tensor) -> Tensor:
    """Cross-entropy of ``logits`` against ``target``, skipping IGNORE entries."""
    import torch.nn.functional as F

    logits, target = _logits_target(outputs, target)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=IGNORE)


def reward_of(outputs: dict[str, Tensor], target: Tensor) -> Tensor:
    """Per-example reward: 1.0 when every scored prediction is right, else 0.0."""
    logits, target = _logits_target(outputs, target)
    ok = (logits.argmax(-1) == target) | (target == IGNORE)
    return ok.reshape(ok.shape[0], -1).all(-1).float()


def _load(spec: Graph | str | Path) -> Graph:
    if isinstance(spec, Graph):
        return spec
    from attngraph.pipeline import load_spec

    return load_spec(spec)


def evaluate(model: nn.Module, graph: Graph, task: Task, size: int) -> dict[str, float]:
    """Test metrics of ``model`` on the task's fixed test batch (eval mode)."""
    import torch

    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            batch = task.batch(size, split="test")
            out = model(**bind_inputs(graph, task, batch))
            return compute_metrics(task, out, batch)
    finally:
        model.train(was)


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
    """Train a spec on a built-in task.

    Parameters
    ----------
    spec : Graph, str or Path
        An inferred graph or a spec file.
    task : Task or str, optional
        A task, or its registered name; default: the spec's ``train.task``.
    steps, batch, lr : optional
        Default to the spec's ``train:`` section (then 300, 32, 1e-3).
    seed : int
        Seeds the parameters and the task's data.
    eval_every : int
        Evaluate every this many steps (0: only at the end).
    eval_size : int
        Size of the fixed test batch.
    options : dict, optional
        Task options overriding the spec's ``train.options``.
    callback : callable, optional
        ``callback(step, info)`` after every step with ``loss`` (and metrics on
        evaluation steps).

    Returns
    -------
    TrainResult
    """
    import torch

    from attngraph.lower import compile

    graph = _load(spec)
    ts = graph.train
    if task is None or isinstance(task, str):
        task = task_for(graph, task, seed, options)
    steps = steps or (ts.steps if ts is not None else 300)
    batch = batch or (ts.batch if ts is not None else 32)
    lr = lr or (ts.lr if ts is not None else 1e-3)
    model = compile(graph, seed=seed)
    opt_name = ts.optimizer if ts is not None else "adam"
    opt_cls = torch.optim.Adam if opt_name == "adam" else torch.optim.SGD
    opt = opt_cls(model.parameters(), lr=lr)
    start = time.perf_counter()
    losses: list[float] = []
    history: list[dict[str, float]] = []
    model.train()
    # sampling inside the model (policies, dropout) draws from torch's global RNG:
    # seed it too, so a run's figures do not depend on what ran before it
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        _steps(model, graph, task, opt, steps, batch, eval_every, eval_size,
               losses, history, callback)
    metrics = evaluate(model, graph, task, eval_size)
    tail = losses[-max(1, steps // 10):]
    metrics["loss"] = sum(tail) / len(tail)
    history.append({"step": float(steps), **metrics})
    return TrainResult(model=model, task=task, metrics=metrics, history=history,
                       seconds=time.perf_counter() - start)


def _steps(model: nn.Module, graph: Graph, task: Task, opt: Any, steps: int, batch: int,
           eval_every: int, eval_size: int, losses: list[float],
           history: list[dict[str, float]],
           callback: Callable[[int, dict[str, float]], None] | None) -> None:
    """The optimisation steps of :func:`train` (appends to ``losses``/``history``)."""
    from attngraph.lower.hard import model_reinforce_loss

    for step in range(1, steps + 1):
        b = task.batch(batch)
        out = model(**bind_inputs(graph, task, b))
        target = b[task.target]
        loss = task_loss(out, target)
        loss = loss + model_reinforce_loss(model, reward_of(out, target))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        info = {"loss": float(loss.detach())}
        losses.append(info["loss"])
        if eval_every and step % eval_every == 0 and step < steps:
            info.update(evaluate(model, graph, task, eval_size))
            history.append({"step": float(step), **info})
        if callback is not None:
            callback(step, info)
