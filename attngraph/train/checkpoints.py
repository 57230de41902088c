"""Training checkpoints: atomic, tied to the spec they were trained from.

A checkpoint holds the model and optimizer state, the step, every random state
the run draws from (torch's, and the task's training stream), the spec's hash
and the spec text itself. The hash is the sha256 of the graph's canonical IR
dump (``str(graph)`` without source positions), so editing comments or formatting keeps a checkpoint
usable while any change to the mechanism refuses to load it, with a
:class:`~attngraph.errors.TrainingError` naming both hashes.

Files are written to a temporary file in the same directory and moved into
place with :func:`os.replace`, so a crash mid-write never leaves a torn file.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import TrainingError

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.taskbase import Task

__all__ = [
    "CHECKPOINT", "Checkpoint", "spec_hash", "save_checkpoint", "load_checkpoint",
    "rng_state", "set_rng_state",
]

#: File name of a run's checkpoint inside its output directory.
CHECKPOINT = "checkpoint.pt"
_FORMAT = 1
_POSITION = re.compile(r"\s+@\d+:\d+$", re.MULTILINE)


def spec_hash(graph: Graph) -> str:
    """sha256 (hex) of the graph's canonical IR dump.

    Examples
    --------
    >>> from attngraph.pipeline import load_spec
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


def rng_state(task: Task | None = None) -> dict[str, Any]:
    """Every random state a training run draws from: torch's and the task's stream."""
    import torch

    state: dict[str, Any] = {"torch": torch.get_rng_state()}
    # The task's training stream is a numpy Generator made on the first batch.
    gen = getattr(task, "_train_rng", None) if task is not None else None
    state["task"] = gen.bit_generator.state if gen is not None else None
    return state


def set_rng_state(state: dict[str, Any], task: Task | None = None) -> None:
    """Restore what :func:`rng_state` captured."""
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    if task is not None and state.get("task") is not None:
        gen = np.random.default_rng()
        gen.bit_generator.state = state["task"]
        task._train_rng = gen  # noqa: SLF001 - Task has no public state API yet


def save_checkpoint(path: str | Path, ckpt: Checkpoint) -> Path:
    """Write ``ckpt`` to ``path`` atomically (temporary file, then :func:`os.replace`)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"format": _FORMAT, **ckpt.__dict__}
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, graph: Graph | None = None) -> Checkpoint:
    """Read a checkpoint; with ``graph``, refuse one trained from another spec.

    Raises
    ------
    TrainingError
        When the file is missing or unreadable, or its spec hash differs from
        ``graph``'s (the message names both hashes and both spec files).
    """
    import torch

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    if not path.is_file():
        msg = f"no checkpoint at {path}"
        raise TrainingError(msg, hint="train first: attngraph train SPEC --out DIR")
    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # torch raises many types for a damaged file
        msg = f"cannot read checkpoint {path}: {exc}"
        raise TrainingError(msg, hint="the file is damaged; train again") from exc
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        msg = f"{path} is not an attngraph checkpoint (format {_FORMAT})"
        raise TrainingError(msg)
    data.pop("format")
    ckpt = Checkpoint(**data)
    if graph is not None:
        want = spec_hash(graph)
        if want != ckpt.spec_hash:
            msg = (f"checkpoint {path} was trained from a different spec: its spec hash "
                   f"is {ckpt.spec_hash[:16]}… ({ckpt.spec_file}), the spec given "
                   f"({graph.file}) hashes to {want[:16]}…")
            raise TrainingError(msg, hint="use the spec the run was trained from (its text "
                                "is stored in the checkpoint), or train into a new --out "
                                "directory instead of --resume")
    return ckpt
