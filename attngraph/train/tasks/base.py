"""The :class:`Task` base class and the task and metric registries.

Every module that defines tasks or metrics imports this one, and nothing here
imports them back: the built-in tasks (:mod:`~attngraph.train.tasks.sequences`,
:mod:`~attngraph.train.tasks.images`, :mod:`~attngraph.train.tasks.graphs`) and
metrics (:mod:`~attngraph.train.tasks.metrics`) register themselves when imported,
and :mod:`attngraph.train.tasks.lookup` imports them all before offering
:func:`~attngraph.train.tasks.lookup.get_task`, so a lookup always finds them.

:data:`TASKS` and :data:`METRICS` are :class:`attngraph.registry.Registry`
tables: a second entry under a taken name is refused, an unknown name fails
with the sorted known names and a did-you-mean.

Examples
--------
>>> from attngraph.registry import RegistryError
>>> with TASKS.scoped():
...     @register_task("my_task")
...     class MyTask(Task):
...         provides = {"tokens": "tokens"}
...     "my_task" in TASKS
True
>>> "my_task" in TASKS
False
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn, TypeVar

from attngraph.errors import TrainingError, did_you_mean
from attngraph.registry import Registry

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

__all__ = ["IGNORE", "BOS", "TASKS", "METRICS", "Metric", "Task", "register_task",
           "register_metric", "lower_is_better", "SPLITS", "split_name"]

#: Target value meaning "no prediction is scored here" (cross-entropy's ignore_index).
IGNORE = -100
#: Token id reserved as the start symbol of decoders (a loop's ``feed.start``).
BOS = 0

#: The splits a task gives batches of: the training stream and the held-out
#: validation set. ``"test"`` is an alias of ``"valid"`` (the name earlier versions used).
SPLITS = ("train", "valid")
_ALIASES = {"test": "valid"}

#: A metric: ``fn(outputs, batch, task) -> float | None`` (None: not applicable).
Metric = Callable[[Mapping[str, Any], Mapping[str, Any], "Task"], "float | None"]
T = TypeVar("T", bound="type[Task]")
M = TypeVar("M", bound=Callable[..., Any])

#: name -> task class (``train: {task: name}``)
TASKS: Registry[type[Task]] = Registry("task")
#: name -> metric function
METRICS: Registry[Metric] = Registry("metric")


def split_name(split: str) -> str | None:
    """The split ``split`` names (``"train"`` or ``"valid"``), or None for no split.

    >>> split_name("valid"), split_name("test"), split_name("dev")
    ('valid', 'valid', None)
    """
    name = _ALIASES.get(split, split)
    return name if name in SPLITS else None


def register_task(name: str) -> Callable[[T], T]:
    """Register a :class:`Task` subclass under ``name`` (``train: {task: name}``).

    Parameters
    ----------
    name : str
        The task's name; it also becomes the class's ``name``.

    Returns
    -------
    callable
        A class decorator.

    Raises
    ------
    attngraph.registry.RegistryError
        When ``name`` is taken.
    """

    def deco(cls: T) -> T:
        TASKS.register(name, cls)
        cls.name = name
        return cls

    return deco


def register_metric(name: str, *, lower_is_better: bool = False) -> Callable[[M], M]:
    """Register a metric ``fn(outputs, batch, task) -> float | None`` under ``name``.

    Parameters
    ----------
    name : str
        The name a task's ``metrics`` lists.
    lower_is_better : bool
        The metric's direction (a loss or an error), a trait early stopping reads
        (:func:`lower_is_better`) to keep the best weights.

    Returns
    -------
    callable
        A function decorator.

    Raises
    ------
    attngraph.registry.RegistryError
        When ``name`` is taken.
    """
    register = METRICS.register(name)

    def deco(fn: M) -> M:
        fn.lower_is_better = lower_is_better  # type: ignore[attr-defined]
        return register(fn)

    return deco


def lower_is_better(name: str) -> bool:
    """True when a lower value of the registered metric ``name`` is better.

    >>> import attngraph.train.tasks.lookup  # the built-in metrics
    >>> lower_is_better("accuracy"), lower_is_better("trajectory_error")
    (False, True)
    """
    return bool(getattr(METRICS[name], "lower_is_better", False))


class Task:
    """A seeded source of batches.

    Subclasses set ``provides`` (batch field -> spec input type), ``target``,
    ``metrics``, ``defaults`` (the options and their default values), ``area``
    (the application area it stands for, listed by ``attngraph catalog``),
    ``objective`` (what training minimises: ``classify``, ``regress`` or
    ``bernoulli``, see :mod:`attngraph.train.tasks.objectives`) and
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
    area: ClassVar[str] = ""
    objective: ClassVar[str] = "classify"
    defaults: ClassVar[Mapping[str, int | float | bool | str]] = {}

    def __init__(self, *, seed: int = 0, **options: Any) -> None:
        opts: dict[str, Any] = dict(self.defaults)
        opts.update({k: self.option(k, v) for k, v in options.items()})
        self.seed = seed
        self.opts = opts
        self.check()
        self._train_rng: np.random.Generator | None = None

    @classmethod
    def option(cls, name: str, value: Any) -> Any:
        """``value`` as option ``name`` takes it (an int given for a float widened).

        Raises
        ------
        TrainingError
            When the task has no option ``name`` (with a did-you-mean and the
            options it has), or ``value`` is not of the default's type.
        """
        if name not in cls.defaults:
            msg = f"task '{cls.name}' has no option '{name}'"
            known = ", ".join(sorted(cls.defaults)) or "none"
            raise TrainingError(msg, hint=f"{did_you_mean(name, cls.defaults)} "
                                f"(options: {known})")
        want = type(cls.defaults[name])
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            msg = (f"task '{cls.name}': option '{name}' must be {want.__name__}, "
                   f"got {value!r}")
            raise TrainingError(msg, hint=f"give a {want.__name__}, like its default "
                                f"{cls.defaults[name]!r}")
        return value

    def check(self) -> None:
        """Refuse inconsistent options (raise :class:`TrainingError`)."""

    def fail(self, msg: str, hint: str | None = None) -> NoReturn:
        """Raise a :class:`TrainingError` naming this task."""
        text = f"task '{self.name}': {msg}"
        raise TrainingError(text, hint=hint)

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        """``size`` examples of ``split`` (``"train"`` or ``"valid"``) as numpy arrays
        (override); a held-out split is any but ``"train"``."""
        raise NotImplementedError

    def batch(self, size: int, *, split: str = "train") -> dict[str, Tensor]:
        """A batch of ``size`` examples as tensors.

        ``split="train"`` draws the next batch of the seeded training stream;
        ``split="valid"`` always returns the same held-out batch for a seed and
        size (a fixed validation set; ``"test"`` is accepted as its old name).
        :meth:`sample` is called with ``"train"`` or ``"valid"``.
        """
        import numpy as np
        import torch

        name = split_name(split)
        if name is None:
            self.fail(f"split must be 'train' or 'valid', not {split!r}")
        if name == "train":
            if self._train_rng is None:
                self._train_rng = np.random.default_rng([self.seed, 0])
            rng = self._train_rng
        else:
            rng = np.random.default_rng([self.seed, 1])
        data = self.sample(rng, size, name)
        return {k: torch.from_numpy(np.array(v)) for k, v in data.items()}  # owned copies

    def batches(self, size: int) -> Iterator[dict[str, Tensor]]:
        """The training stream, endlessly."""
        while True:
            yield self.batch(size)

    def valid_batches(self, size: int) -> Iterator[dict[str, Tensor]]:
        """The validation set in batches: here the one fixed validation batch of ``size``.

        A task over a file of examples yields all of them (see
        :class:`attngraph.train.data.batches.DataTask`).
        """
        yield self.batch(size, split="valid")

    def test_batches(self, size: int) -> Iterator[dict[str, Tensor]]:
        """:meth:`valid_batches` under the name earlier versions used."""
        return self.valid_batches(size)

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        """How tokens ``ids`` of batch ``field`` are shown (here: the ids)."""
        return [str(i) for i in ids]

    def label_name(self, i: int) -> str:
        """How class ``i`` is shown (here: its number)."""
        return str(i)

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.opts.items())
        return f"{type(self).__name__}(seed={self.seed}, {opts})"
