"""TensorBoard scalars of a run, in the run directory, when TensorBoard is installed.

TensorBoard is optional: without it (``torch.utils.tensorboard`` does not
import) :class:`Board` does nothing, silently. The event file
(``events.out.tfevents.*``) lies beside ``metrics.jsonl``, so
``tensorboard --logdir runs`` shows every run by its directory, and a run
directory holds files only. Training figures go under ``train/<name>``,
validation figures under ``valid/<name>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["Board"]


class Board:
    """A TensorBoard writer into ``out``, or nothing when TensorBoard is missing."""

    def __init__(self, out: str | Path) -> None:
        self.writer: Any = None
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # optional: no TensorBoard, no event files
            return
        self.writer = SummaryWriter(log_dir=str(Path(out)))

    def step(self, step: int, train: dict[str, float], valid: dict[str, float]) -> None:
        """Write one step's training and (when evaluated) validation figures."""
        if self.writer is None:
            return
        for split, figures in (("train", train), ("valid", valid)):
            for k, v in figures.items():
                self.writer.add_scalar(f"{split}/{k}", v, step)

    def close(self) -> None:
        """Flush and close the event file."""
        if self.writer is not None:
            self.writer.close()
