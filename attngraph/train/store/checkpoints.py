"""Training checkpoints: atomic, tied to the spec they were trained from, data only.

A checkpoint holds the model and optimizer state, the step, every random state
the run draws from (torch's, and the task's training stream), the spec's hash
and the spec text itself. The hash is the sha256 of the graph's canonical IR
dump (``str(graph)`` without source positions), so editing comments or formatting keeps a checkpoint
usable while any change to the mechanism refuses to load it, with a
:class:`~attngraph.errors.TrainingError` naming both hashes.

Everything in it is tensors or plain data (numbers, text, lists, dicts: the
numpy stream's state is its plain dict, the settings and metrics are
JSON-like), so it is read with ``torch.load(weights_only=True)``: a file
holding any other Python object is refused without running anything. What is
read is checked whole against what a run needs, declaratively
(:mod:`attngraph.train.store.checkpoint_data`: every entry's type, each setting's type and
range, the random states, a seed in :mod:`attngraph.train.store.seeds`' range, no
parameter holding NaN or infinity), and :func:`restore` checks names and shapes
against the model and the optimiser state against the optimiser built for it
(:mod:`attngraph.train.store.optimizer_state`), so a damaged file gives one TrainingError
naming it.

Files are written whole through :func:`attngraph.train.store.directory.atomic_write`,
so a crash mid-write never leaves a torn file.
"""

from __future__ import annotations

import hashlib
import io
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import check_regular
from attngraph.train.store import checkpoint_data
from attngraph.train.store.directory import atomic_write, run_file, write_error
from attngraph.train.store.optimizer_state import optimizer_problems

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.train.tasks.base import Task

__all__ = [
    "CHECKPOINT", "CONFIG", "Checkpoint", "spec_hash", "save_checkpoint",
    "load_checkpoint", "restore", "rng_state", "set_rng_state",
]

#: File name of a run's checkpoint inside its output directory.
CHECKPOINT = "checkpoint.pt"
#: The run settings a checkpoint stores (name -> what it must be), which win on resume.
CONFIG: dict[str, str] = {
    "task": "text", "batch": "count", "lr": "positive", "seed": "seed",
    "options": "mapping", "eval_every": "count", "eval_size": "count",
    "checkpoint_every": "count",
}
_FORMAT = checkpoint_data.FORMAT
_POSITION = re.compile(r"\s+@\d+:\d+$", re.MULTILINE)
_DAMAGED = ("the file is damaged or was not written by attngraph train: train again "
            "(--overwrite moves this run aside)")


def spec_hash(graph: Graph) -> str:
    """sha256 (hex) of the graph's canonical IR dump.

    Examples
    --------
    >>> from attngraph.frontend import load_spec
    >>> h = spec_hash(load_spec("specs/global_attention.yaml"))
    >>> len(h), h == spec_hash(load_spec("specs/global_attention.yaml"))
    (64, True)
    """
    text = _POSITION.sub("", str(graph))  # source positions move with comments
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Checkpoint:
    """The contents of a checkpoint file (see :func:`save_checkpoint`)."""

    step: int
    model: dict[str, Any]
    optimizer: dict[str, Any]
    rng: dict[str, Any]
    spec_hash: str
    spec_text: str
    spec_file: str
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    #: the weights at ``step`` that ``--resume`` trains on from, when ``model`` holds
    #: another step's (the best kept by early stopping, :mod:`attngraph.train.run.earlystop`)
    resume_model: dict[str, Any] | None = None
    #: which step ``model``'s weights come from, and its validation figures
    #: (:meth:`attngraph.train.run.earlystop.Patience.state`), or None
    best: dict[str, Any] | None = None

    def training_weights(self) -> dict[str, Any]:
        """The weights training goes on from: ``resume_model`` when set, else ``model``."""
        return self.resume_model if self.resume_model is not None else self.model


def rng_state(task: Task | None = None) -> dict[str, Any]:
    """Every random state a training run draws from: torch's and the task's stream.

    torch's is its state tensor; the task's numpy stream is its state dict
    (text and integers), both readable with ``weights_only=True``.
    """
    import torch

    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    # The task's training stream is a numpy Generator made on the first batch.
    gen = getattr(task, "_train_rng", None) if task is not None else None
    state["task"] = _plain(gen.bit_generator.state) if gen is not None else None
    return state


def set_rng_state(state: dict[str, Any], task: Task | None = None) -> None:
    """Restore what :func:`rng_state` captured."""
    import torch

    torch.set_rng_state(state["torch"])
    if task is not None and state.get("task") is not None:
        task._train_rng = checkpoint_data.numpy_generator(state["task"])  # noqa: SLF001 - no public API yet


def _plain(value: Any) -> Any:
    """``value`` as plain data (numpy scalars as numbers, tuples as lists)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    msg = f"a checkpoint stores plain data only, not {type(value).__name__}"
    raise TypeError(msg)


def save_checkpoint(path: str | Path, ckpt: Checkpoint) -> Path:
    """Write ``ckpt`` to ``path`` atomically (temporary file, then :func:`os.replace`).

    Raises
    ------
    TrainingError
        When the file cannot be written (full disk, read-only directory); the
        previous checkpoint is then intact and no temporary file is left.
    """
    import torch

    path = Path(path)
    payload = {"format": _FORMAT, **ckpt.__dict__, "config": _plain(ckpt.config),
               "metrics": _plain(ckpt.metrics), "best": _plain(ckpt.best),
               "rng": {**ckpt.rng, "task": _plain(ckpt.rng.get("task"))}}
    buf = io.BytesIO()
    torch.save(payload, buf)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(path, exc) from None
    atomic_write(path, buf.getvalue(), mode=0o600)
    return path


def _error(path: Path, msg: str, hint: str = _DAMAGED) -> TrainingError:
    return TrainingError(msg, SourceLoc(file=str(path)), hint)


def _read(path: Path) -> Any:
    """``torch.load(weights_only=True)`` of ``path``, every failure a TrainingError."""
    import pickle

    import torch

    try:
        with warnings.catch_warnings():  # torch warns about a foreign pickle protocol
            warnings.simplefilter("ignore")
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        # torch's message advises weights_only=False: pass on only what was found
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        if found is None:
            msg = "cannot read this checkpoint: it is truncated or not a checkpoint file"
            raise _error(path, msg) from None
        msg = ("refused to load this checkpoint: it holds a Python object besides tensors "
               f"and plain data (a reference to {found[1]}), and loading it could run code")
        raise _error(path, msg, "attngraph writes only tensors and plain data: do not trust "
                     "this file; train again (--overwrite moves this run aside)") from None
    except OSError as exc:
        if isinstance(exc, PermissionError | IsADirectoryError):
            msg = f"cannot read this checkpoint: {exc.strerror}"
            raise _error(path, msg, "check the file's permissions") from None
        msg = "cannot read this checkpoint: it is truncated or not a checkpoint file"
        raise _error(path, msg) from None
    except Exception:  # torch raises many types (EOFError, KeyError...) for a damaged file
        msg = "cannot read this checkpoint: it is truncated or not a checkpoint file"
        raise _error(path, msg) from None


def _check(path: Path, data: Any) -> Checkpoint:
    """The checkpoint in ``data``, or a TrainingError naming what is wrong
    (:mod:`attngraph.train.store.checkpoint_data`)."""
    problem = checkpoint_data.problems(data)
    if problem is not None:
        raise _error(path, problem)
    bad = checkpoint_data.nonfinite(data["model"]) or \
        checkpoint_data.nonfinite(data.get("resume_model") or {})
    if bad is not None:
        name, what = bad
        msg = f"this checkpoint's parameter {name} holds {what}: the model would predict NaN"
        raise _error(path, msg, "the run's training diverged (train again, e.g. with a "
                     "smaller --lr), or the file is damaged (train again; --overwrite moves "
                     "this run aside)")
    return Checkpoint(**{f: data[f] for f in Checkpoint.__dataclass_fields__ if f in data})


def load_checkpoint(path: str | Path, graph: Graph | None = None) -> Checkpoint:
    """Read a checkpoint; with ``graph``, refuse one trained from another spec.

    The file is read with ``torch.load(weights_only=True)``: nothing in it runs.

    Raises
    ------
    TrainingError
        Located at the file: when it is missing, unreadable, truncated, holds
        objects other than tensors and plain data, lacks a key or a setting a
        run needs or holds one of another type or out of range, holds a
        parameter with NaN or infinity, or its spec hash differs from
        ``graph``'s (the message then names both hashes and both spec files).
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.exists() and not path.is_symlink():
        msg = f"no checkpoint at {path}"
        raise _error(path, msg, "train first: attngraph train SPEC --out DIR")
    check_regular(path, run_file(CHECKPOINT))  # a FIFO would hang torch.load
    ckpt = _check(path, _read(path))
    if graph is not None:
        want = spec_hash(graph)
        if want != ckpt.spec_hash:
            msg = (f"this checkpoint was trained from a different spec: its spec hash "
                   f"is {ckpt.spec_hash[:16]}… ({ckpt.spec_file}), the spec given "
                   f"({graph.file}) hashes to {want[:16]}…")
            raise _error(path, msg, "use the spec the run was trained from (its text "
                         "is stored in the checkpoint), or train into a new --out "
                         "directory instead of --resume")
    return ckpt


def _shape(t: Any) -> str:
    return "(" + ", ".join(str(n) for n in t.shape) + ")"


def _misfit(weights: dict[str, Any], model: nn.Module) -> list[str]:
    """What in ``weights`` does not fit ``model``: names, shapes."""
    want = model.state_dict()
    found = [f"missing {k}" for k in want if k not in weights]
    found += [f"unexpected {k}" for k in weights if k not in want]
    found += [f"{k} has shape {_shape(v)} here, {_shape(want[k])} in the model"
              for k, v in weights.items() if k in want and v.shape != want[k].shape]
    return found


def _listed(found: list[str]) -> str:
    more = f"; and {len(found) - 4} more" if len(found) > 4 else ""
    return "; ".join(found[:4]) + more


def restore(ckpt: Checkpoint, path: str | Path, model: nn.Module, opt: Any = None) -> None:
    """Load ``ckpt``'s parameters into ``model`` (and its optimizer state into ``opt``).

    Without ``opt`` the model is the run's (``ckpt.model``: with early stopping,
    the best step's weights); with ``opt`` training goes on, from the weights of
    the checkpoint's step (:meth:`Checkpoint.training_weights`).

    Raises
    ------
    TrainingError
        Located at ``path``, naming each missing, unexpected or wrongly shaped
        entry, when the checkpoint does not fit the model; naming what is wrong
        when its optimizer state does not fit ``opt``
        (:func:`~attngraph.train.store.optimizer_state.optimizer_problems`: keys, kinds,
        ranges, shapes, dtypes, NaN).
    """
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    weights = ckpt.training_weights() if opt is not None else ckpt.model
    found = _misfit(ckpt.model, model) + (_misfit(weights, model)
                                          if weights is not ckpt.model else [])
    if found:
        raise _error(path, f"this checkpoint does not fit the spec's model: {_listed(found)}")
    found = optimizer_problems(ckpt.optimizer, opt) if opt is not None else []
    if found:
        msg = f"this checkpoint's optimizer state is damaged: {_listed(found)}"
        raise _error(path, msg, "the parameters may be intact, but training cannot go on "
                     "from this state: drop --resume and train afresh (--overwrite moves "
                     "this run aside)")
    try:
        model.load_state_dict(weights)
        if opt is not None:
            opt.load_state_dict(ckpt.optimizer)
    except (RuntimeError, ValueError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _error(path, f"this checkpoint does not fit the spec's model: {first}") from None
