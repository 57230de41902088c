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
:class:`~attngraph.train.tasks.base.Task` base class and the registries live in
:mod:`attngraph.train.tasks.base` (re-exported here), the tasks in
the other modules of :mod:`attngraph.train.tasks` (``sequences``, ``images``,
``graphs``, ``language``, ``speech``, ``algorithms``, ``captions``, ``objects``,
``drawing``, ``handwriting``), the metrics in
:mod:`attngraph.train.tasks.metrics` and beside the tasks that define them.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> task = get_task("reversal", seed=0, vocab=10, length=5)
>>> b = task.batch(4)
>>> bool((b["target"] == b["source"].flip(-1)).all())
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError, did_you_mean
from attngraph.registry import RegistryError

# the built-in tasks and metrics register themselves on import
from attngraph.train.tasks import (  # noqa: F401
    algorithms,
    captions,
    drawing,
    graphs,
    handwriting,
    images,
    language,
    metrics,
    objects,
    sequences,
    speech,
)
from attngraph.train.tasks.base import (
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

    from attngraph.ir.graph import Graph, Node

__all__ = [
    "IGNORE", "BOS", "TASKS", "METRICS", "Task", "register_task", "register_metric", "task_lines",
    "get_task", "task_for", "bind_inputs", "compute_metrics",
]


def task_for(graph: Graph, name: str | None, seed: int,
             options: Mapping[str, Any] | None = None) -> Task:
    """The task ``name`` (default: the spec's), with the spec's options when it is its task.

    Errors point into the spec: an unknown task, option or target metric of
    the spec's ``train:`` section at that entry, a missing ``train:`` section at
    the spec's start. What the caller gave (another task, options that differ
    from the spec's) is not in the spec, so those errors name just its file.

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
        No task given and none in the spec, an unknown task, bad options, a
        task listing an unregistered metric, or a ``train.target`` naming a
        metric the task does not measure.
    """
    ts = graph.train
    name = name or (ts.task if ts is not None else None)
    if name is None:
        msg = "no task given and the spec has no 'train:' section"
        raise TrainingError(msg, graph.where(),
                            "pass --task NAME, or add train: {task: <name>}")
    own = ts is not None and ts.task == name  # the spec's task: its train: section applies
    file = SourceLoc(graph.file)
    at_task = graph.where("train", "task") if own else file
    try:
        cls = TASKS[name]
    except RegistryError as exc:  # a task name is a training setting
        raise TrainingError(exc.message, at_task, exc.hint) from None
    spec_opts = dict(ts.options) if own and ts is not None else {}
    opts = {**spec_opts, **(options or {})}
    from_spec = {k for k, v in spec_opts.items() if opts[k] == v}
    _check_options(graph, cls, opts, from_spec, file)
    _check_metrics(graph, cls, at_task, own)
    try:
        return cls(seed=seed, **opts)
    except TrainingError as exc:  # options that do not fit together
        if set(opts) - from_spec:
            loc = file
        elif spec_opts:
            loc = graph.where("train", "options")
        else:
            loc = at_task
        raise TrainingError(exc.message, loc, exc.hint or _fit_hint(cls)) from None


def _check_options(graph: Graph, cls: type[Task], opts: Mapping[str, Any],
                   from_spec: set[str], file: SourceLoc) -> None:
    """Refuse an option ``cls`` does not take or a value it refuses: at the spec's
    entry when the spec gave it (``from_spec``), else at the file."""
    for k, v in opts.items():
        try:
            cls.option(k, v)
        except TrainingError as exc:
            loc = (graph.where("train", "options", k, key=k not in cls.defaults)
                   if k in from_spec else file)
            raise TrainingError(exc.message, loc, exc.hint) from None


def _fit_hint(cls: type[Task]) -> str:
    """The hint of options that do not fit together: the task's defaults."""
    defaults = ", ".join(f"{k}: {v!r}" for k, v in cls.defaults.items())
    return f"choose options that fit together (defaults: {defaults})"


def _check_metrics(graph: Graph, cls: type[Task], at_task: SourceLoc, own: bool) -> None:
    """Refuse a task listing an unregistered metric, and target metrics it lacks."""
    for m in cls.metrics:
        if m not in METRICS:
            msg = f"task '{cls.name}' lists the metric '{m}', which is not registered"
            hint = (f"{did_you_mean(m, METRICS)}; fix the task's metrics, or register "
                    "the metric with @register_metric")
            raise TrainingError(msg, at_task, hint)
    if not own or graph.train is None:
        return
    for m in graph.train.target:
        if m not in cls.metrics:
            msg = f"train.target names the metric '{m}', which task '{cls.name}' does not measure"
            close = did_you_mean(m, cls.metrics)
            measures = f"task '{cls.name}' measures: {', '.join(cls.metrics) or 'nothing'}"
            hint = f"{close} ({measures})" if close.startswith("did") else measures
            raise TrainingError(msg, graph.where("train", "target", m, key=True), hint)


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


def _field_for(graph: Graph, task: Task, node: Node[Any]) -> str:
    """The batch field feeding input ``node``: same name first, else the one of its type."""
    name, typ = node.id, node.spec.type
    same = [f for f, t in task.provides.items() if t == typ]
    if name in same:
        return name
    if len(same) == 1:
        return same[0]
    offered = ", ".join(f"{f} ({t})" for f, t in task.provides.items()) or "nothing"
    if not same:
        msg = f"task '{task.name}' gives no '{typ}' data for input '{name}'"
        raise TrainingError(msg, node.where("type"),
                            f"it provides: {offered}; train this spec on another task "
                            "(--task)")
    msg = (f"task '{task.name}' gives several '{typ}' fields; input '{name}' matches "
           "none by name")
    raise TrainingError(msg, graph.where("inputs", name, key=True),
                        "rename it to one of: " + ", ".join(same))


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
        f = _field_for(graph, task, node)
        x = batch[f]
        _check_fits(task, node, f, x)
        kw[node.id] = x
        for port in ("mask", "adjacency"):
            if f"{f}_{port}" in batch and port in node.types:
                kw[f"{node.id}_{port}"] = batch[f"{f}_{port}"]
    return kw


def _check_fits(task: Task, node: Node[Any], f: str, x: Tensor) -> None:
    """Refuse data that does not fit input ``node``, located at the input in the spec."""
    s = node.spec
    t = node.types[""]
    where = f"task '{task.name}' field '{f}' for input '{node.id}'"
    if s.type == "tokens" and s.vocab is not None and int(x.max()) >= int(s.vocab):
        msg = f"{where}: ids up to {int(x.max())}, but vocab is {s.vocab}"
        raise TrainingError(msg, node.where("vocab"),
                            "make the spec's vocab larger or the task's vocab smaller")
    fixed = [d for d in t.dims if isinstance(d, int)]
    got = [int(d) for d, w in zip(x.shape[1:], t.dims, strict=False) if isinstance(w, int)]
    if x.dim() - 1 != t.rank or fixed != got:
        msg = f"{where}: data of shape {tuple(x.shape[1:])} does not fit {t}"
        raise TrainingError(msg, node.loc, "set the task's options to the spec's dims")


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


def task_lines() -> dict[str, str]:
    """Every registered task with the first line of its docstring (for the schema)."""
    return {n: ((TASKS[n].__doc__ or "").strip().splitlines() or [""])[0]
            for n in TASKS.names()}
