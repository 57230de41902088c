"""Built-in training tasks: a registry of seeded, in-process data sets.

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

Examples
--------
>>> from attngraph.train.tasks import get_task
>>> task = get_task("reversal", seed=0, vocab=10, length=5)
>>> b = task.batch(4)
>>> bool((b["target"] == b["source"].flip(-1)).all())
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

from attngraph.errors import TrainingError, did_you_mean

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

    from attngraph.ir.graph import Graph

__all__ = [
    "IGNORE", "BOS", "TASKS", "METRICS", "Task", "register_task", "register_metric",
    "get_task", "task_for", "bind_inputs", "compute_metrics",
]

#: Target value meaning "no prediction is scored here" (cross-entropy's ignore_index).
IGNORE = -100
#: Token id reserved as the start symbol of decoders (a loop's ``feed.start``).
BOS = 0

T = TypeVar("T", bound="type[Task]")
#: name -> task class
TASKS: dict[str, type[Task]] = {}
#: name -> ``fn(outputs, batch, task) -> float | None`` (None: not applicable)
METRICS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any], Task], float | None]] = {}


def register_task(name: str) -> Callable[[T], T]:
    """Register a :class:`Task` subclass under ``name`` (``train: {task: name}``)."""

    def deco(cls: T) -> T:
        cls.name = name
        TASKS[name] = cls
        return cls

    return deco


def register_metric(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric ``fn(outputs, batch, task) -> float | None``."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        METRICS[name] = fn
        return fn

    return deco


class Task:
    """A seeded source of batches.

    Subclasses set ``provides`` (batch field -> spec input type), ``target``,
    ``metrics``, ``defaults`` (the options and their default values) and
    implement :meth:`sample`.

    Parameters
    ----------
    seed : int
        The same seed gives the same batches, in the same order.
    **options
        Task options (see ``defaults``); unknown names are an error.
    """

    name: ClassVar[str] = ""
    provides: ClassVar[Mapping[str, str]] = {}
    target: ClassVar[str] = "target"
    metrics: ClassVar[tuple[str, ...]] = ("accuracy",)
    defaults: ClassVar[Mapping[str, int | float | bool | str]] = {}

    def __init__(self, *, seed: int = 0, **options: Any) -> None:
        opts: dict[str, Any] = dict(self.defaults)
        for k, v in options.items():
            if k not in self.defaults:
                msg = f"task '{self.name}' has no option '{k}'"
                known = ", ".join(sorted(self.defaults)) or "none"
                raise TrainingError(msg, hint=f"{did_you_mean(k, self.defaults)} "
                                    f"(options: {known})")
            want = type(self.defaults[k])
            if want is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            if not isinstance(v, want) or (want is int and isinstance(v, bool)):
                msg = f"task '{self.name}': option '{k}' must be {want.__name__}, got {v!r}"
                raise TrainingError(msg)
            opts[k] = v
        self.seed = seed
        self.opts = opts
        self.check()
        self._train_rng: np.random.Generator | None = None

    def check(self) -> None:
        """Refuse inconsistent options (raise :class:`TrainingError`)."""

    def fail(self, msg: str, hint: str | None = None) -> NoReturn:
        """Raise a :class:`TrainingError` naming this task."""
        text = f"task '{self.name}': {msg}"
        raise TrainingError(text, hint=hint)

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        """``size`` examples as numpy arrays (override)."""
        raise NotImplementedError

    def batch(self, size: int, *, split: str = "train") -> dict[str, Tensor]:
        """A batch of ``size`` examples as tensors.

        ``split="train"`` draws the next batch of the seeded training stream;
        ``split="test"`` always returns the same held-out batch for a seed and
        size (a fixed test set).
        """
        import numpy as np
        import torch

        if split not in ("train", "test"):
            self.fail(f"split must be 'train' or 'test', not {split!r}")
        if split == "train":
            if self._train_rng is None:
                self._train_rng = np.random.default_rng([self.seed, 0])
            rng = self._train_rng
        else:
            rng = np.random.default_rng([self.seed, 1])
        data = self.sample(rng, size, split)
        return {k: torch.from_numpy(np.array(v)) for k, v in data.items()}  # owned copies

    def batches(self, size: int) -> Iterator[dict[str, Tensor]]:
        """The training stream, endlessly."""
        while True:
            yield self.batch(size)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.opts.items())
        return f"{type(self).__name__}(seed={self.seed}, {opts})"


def task_for(graph: Graph, name: str | None, seed: int,
             options: Mapping[str, Any] | None = None) -> Task:
    """The task ``name`` (default: the spec's), with the spec's options when it is its task."""
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

    Raises
    ------
    TrainingError
        For an unknown name (with the known names and a did-you-mean) or options.
    """
    cls = TASKS.get(name)
    if cls is None:
        known = ", ".join(sorted(TASKS))
        msg = f"unknown task '{name}'"
        raise TrainingError(msg,
                            hint=f"{did_you_mean(name, TASKS)} (tasks: {known})")
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
    """Every metric the task declares that applies to these outputs."""
    res = {}
    for name in task.metrics:
        v = METRICS[name](outputs, batch, task)
        if v is not None:
            res[name] = v
    return res


def _pred_target(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                 task: Task) -> tuple[Tensor, Tensor] | None:
    logits = outputs.get("logits")
    if logits is None:
        return None
    target = batch[task.target]
    if logits.dim() == target.dim() + 2:  # a single query axis: [B, 1, C]
        logits = logits.reshape(*target.shape, logits.shape[-1])
    return logits.argmax(-1), target


@register_metric("accuracy")
def accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any], task: Task) -> float | None:
    """Fraction of scored targets (not :data:`IGNORE`) predicted right."""
    pt = _pred_target(outputs, batch, task)
    if pt is None:
        return None
    pred, target = pt
    keep = target != IGNORE
    return float((pred[keep] == target[keep]).float().mean())


register_metric("token_accuracy")(accuracy)


@register_metric("sequence_accuracy")
def sequence_accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                      task: Task) -> float | None:
    """Fraction of examples with every scored target right."""
    pt = _pred_target(outputs, batch, task)
    if pt is None:
        return None
    pred, target = pt
    ok = (pred == target) | (target == IGNORE)
    return float(ok.reshape(ok.shape[0], -1).all(-1).float().mean())


@register_metric("attention_peak")
def attention_peak(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                   task: Task) -> float | None:
    """Fraction of examples whose attention weights peak on the needle position.

    Reads the spec's ``pooling`` output when it has one (the attention that picks
    items for the class), else ``attention``; heads and queries are averaged.
    """
    att = outputs.get("pooling", outputs.get("attention"))
    pos = batch.get("needle_pos")
    if att is None or pos is None:
        return None
    att = att.reshape(att.shape[0], -1, att.shape[-1]).mean(1)  # heads/queries averaged
    return float((att.argmax(-1) == pos).float().mean())


@register_metric("alignment")
def alignment(outputs: Mapping[str, Any], batch: Mapping[str, Any],
              task: Task) -> float | None:
    """Fraction of target steps whose attention peaks on the source token they copy.

    Reads ``attention`` [T, N] (heads averaged) and the task's ``source_pos``.
    """
    att = outputs.get("attention")
    pos = batch.get("source_pos")
    if att is None or pos is None or att.shape[-2:] != (pos.shape[-1], att.shape[-1]):
        return None
    if att.dim() == 4:  # (B, h, T, N)
        att = att.mean(1)
    return float((att.argmax(-1) == pos).float().mean())


# the built-in tasks register themselves on import
from attngraph.train import task_graphs, task_images, task_sequences  # noqa: E402,F401
