"""Built-in training tasks: looking them up, and feeding their batches to a spec.

A task makes batches as dicts of tensors. ``Task.provides`` says which batch
fields feed which *input type* of a spec (``tokens``, ``image``, ``graph``,
``labels``...); :func:`bind_inputs` matches them to a spec's own input names
(same name first, else the one field of that type). ``Task.target`` names the
field the spec's ``logits`` output is trained against; targets use
:data:`IGNORE` (-100) where there is nothing to predict (a recall task's
non-answer steps, unlabelled graph nodes). Masks and graph adjacency travel as
``<field>_mask`` / ``<field>_adjacency``, as :func:`attngraph.compile`'d modules
take them.

Conventions shared with the spec language: token id 0 is reserved as the start
symbol (BOS) of decoders, the id a loop's ``feed: {start: 0}`` gives at the first
step; sources and targets of the sequence tasks never contain it.

Nothing downloads: data is generated from the seed, or read from data shipped
inside a package (scikit-learn's 8×8 digits, networkx's karate club).

This module imports every built-in task module and the metrics, so that
:func:`get_task` and :func:`compute_metrics` always find them; the
:class:`~attngraph.train.taskbase.Task` base class and the registries live in
:mod:`attngraph.train.taskbase` (re-exported here), the tasks in
``task_sequences``, ``task_images`` and ``task_graphs``, the metrics in
:mod:`attngraph.train.metrics`.

Examples
--------
>>> from attngraph.train.tasks import get_task
>>> task = get_task("reversal", seed=0, vocab=10, length=5)
>>> b = task.batch(4)
>>> bool((b["target"] == b["source"].flip(-1)).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attngraph.errors import TrainingError
from attngraph.registry import RegistryError

# the built-in tasks and metrics register themselves on import
from attngraph.train import metrics, task_graphs, task_images, task_sequences  # noqa: F401
from attngraph.train.taskbase import (
    BOS,
    IGNORE,
    METRICS,
    TASKS,
    Task,
    register_metric,
    register_task,
)

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph

__all__ = [
    "IGNORE", "BOS", "TASKS", "METRICS", "Task", "register_task", "register_metric",
    "get_task", "task_for", "bind_inputs", "compute_metrics",
]


def task_for(graph: Graph, name: str | None, seed: int,
             options: Mapping[str, Any] | None = None) -> Task:
    """The task ``name`` (default: the spec's), with the spec's options when it is its task.

    Parameters
    ----------
    graph : Graph
        The spec; its ``train:`` section names the default task and its options.
    name : str or None
        A registered task name; None for the spec's task.
    seed : int
        The task's seed.
    options : mapping, optional
        Task options overriding the spec's ``train.options``.

    Returns
    -------
    Task
        Made by :func:`get_task`, with the spec's options under the caller's.

    Raises
    ------
    TrainingError
        No task given and none in the spec, an unknown task or bad options.
    """
    ts = graph.train
    name = name or (ts.task if ts is not None else None)
    if name is None:
        msg = f"{graph.file}: no task given and the spec has no 'train:' section"
        raise TrainingError(msg, hint="pass --task NAME, or add train: {task: <name>}")
    opts = dict(ts.options) if ts is not None and ts.task == name else {}
    opts.update(options or {})
    return get_task(name, seed=seed, **opts)


def get_task(name: str, *, seed: int = 0, **options: Any) -> Task:
    """Make the registered task ``name``.

    Parameters
    ----------
    name : str
        A name in :data:`TASKS` (the built-in tasks are always registered).
    seed : int
        The task's seed.
    **options
        Task options (see the task's ``defaults``).

    Returns
    -------
    Task

    Raises
    ------
    TrainingError
        For an unknown name (with the known names and a did-you-mean) or options.
    """
    try:
        cls = TASKS[name]
    except RegistryError as exc:  # a task name is a training setting
        raise TrainingError(exc.message, hint=exc.hint) from None
    return cls(seed=seed, **options)


def _field_for(task: Task, name: str, typ: str) -> str:
    same = [f for f, t in task.provides.items() if t == typ]
    if name in same:
        return name
    if len(same) == 1:
        return same[0]
    offered = ", ".join(f"{f} ({t})" for f, t in task.provides.items()) or "nothing"
    if not same:
        msg = f"task '{task.name}' gives no '{typ}' data for input '{name}'"
        raise TrainingError(msg,
                            hint=f"it provides: {offered}")
    msg = (
        f"task '{task.name}' gives several '{typ}' fields; input "
                        f"'{name}' matches none by name"
    )
    raise TrainingError(msg, hint="rename it to one of: "
                        + ", ".join(same))


def bind_inputs(graph: Graph, task: Task, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Keyword arguments for ``model(**kw)``: the batch fields under the spec's names.

    Also checks the data fits the spec (ids below ``vocab``, image and feature
    sizes), so a task run with options that disagree with the spec's dims fails
    here with a clear message rather than deep inside the model.

    Parameters
    ----------
    graph : Graph
        The spec whose inputs are fed.
    task : Task
        The task the batch comes from (its ``provides`` types the fields).
    batch : mapping
        A batch of ``task``.

    Returns
    -------
    dict
        Spec input name (and ``<name>_mask`` / ``<name>_adjacency``) -> tensor.

    Raises
    ------
    TrainingError
        When the task gives no (or no unambiguous) field for an input, or the
        data does not fit the spec.
    """
    kw: dict[str, Tensor] = {}
    for node in graph.inputs:
        typ = node.spec.type
        f = _field_for(task, node.id, typ)
        x = batch[f]
        _check_fits(task, node, f, x)
        kw[node.id] = x
        for port in ("mask", "adjacency"):
            if f"{f}_{port}" in batch and port in node.types:
                kw[f"{node.id}_{port}"] = batch[f"{f}_{port}"]
    return kw


def _check_fits(task: Task, node: Any, f: str, x: Tensor) -> None:
    s = node.spec
    t = node.types[""]
    where = f"task '{task.name}' field '{f}' for input '{node.id}'"
    if s.type == "tokens" and s.vocab is not None and int(x.max()) >= int(s.vocab):
        msg = f"{where}: ids up to {int(x.max())}, but vocab is {s.vocab}"
        raise TrainingError(msg,
                            hint="make the spec's vocab larger or the task's vocab smaller")
    fixed = [d for d in t.dims if isinstance(d, int)]
    got = [int(d) for d, w in zip(x.shape[1:], t.dims, strict=False) if isinstance(w, int)]
    if x.dim() - 1 != t.rank or fixed != got:
        msg = (
            f"{where}: data of shape {tuple(x.shape[1:])} does not fit "
                            f"{t}"
        )
        raise TrainingError(msg, hint="set the task's options to the spec's dims")


def compute_metrics(task: Task, outputs: Mapping[str, Any],
                    batch: Mapping[str, Any]) -> dict[str, float]:
    """Every metric the task declares that applies to these outputs.

    Parameters
    ----------
    task : Task
        Its ``metrics`` name the metrics (looked up in :data:`METRICS`).
    outputs : mapping
        A model's outputs on ``batch``.
    batch : mapping
        A batch of ``task``.

    Returns
    -------
    dict
        Metric name -> value, for each metric that applies (does not return None).
    """
    res = {}
    for name in task.metrics:
        v = METRICS[name](outputs, batch, task)
        if v is not None:
            res[name] = v
    return res
