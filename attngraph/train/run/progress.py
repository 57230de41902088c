"""Progress of a training run on rank 0: a tqdm bar on a terminal, else lines.

:func:`attngraph.train.run.runner.run` shows a bar with the loss and short metric
names (``acc``, ``valid_acc``...) when its stream is a terminal with a width and
the run is not ``quiet``; otherwise it prints ``step N/TOTAL  loss ...`` every
``every`` steps and at the last one.
"""

from __future__ import annotations

import os
from typing import TextIO

__all__ = ["Progress"]

_SHORT = {"accuracy": "acc", "token_accuracy": "tok_acc", "sequence_accuracy": "seq_acc",
          "attention_peak": "peak", "alignment": "align"}
_VALID = "valid_"


def _short(name: str) -> str:
    """The bar's short name of a figure (``valid_accuracy`` -> ``valid_acc``)."""
    base = name.removeprefix(_VALID)
    return name[:len(name) - len(base)] + _SHORT.get(base, base)


def _width(stream: TextIO) -> int:
    """Columns of the terminal behind ``stream``; 0 when it is none (or has no width)."""
    try:
        if not stream.isatty():
            return 0
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


class Progress:
    """Progress display of one run.

    Parameters
    ----------
    name : str
        Shown before the bar.
    total, start : int
        The last step, and the step the run starts after (non-zero on resume).
    every : int
        Print a line every this many steps when there is no bar.
    quiet : bool
        Never show a bar.
    stream : file
        Where progress goes.
    """

    def __init__(self, name: str, total: int, start: int, every: int, quiet: bool,
                 stream: TextIO) -> None:
        from tqdm import tqdm

        self.every = every
        self.total = total
        self.stream = stream
        self.bar_on = not quiet and _width(stream) > 0
        self.bar = tqdm(total=total, initial=start, file=stream, desc=name,
                        disable=not self.bar_on, dynamic_ncols=True, leave=True)

    def step(self, step: int, info: dict[str, float]) -> None:
        """Show the figures of ``step``."""
        shown = {k: f"{v:.3f}" for k, v in info.items() if k != "step"}
        if self.bar_on:
            short = {_short(k): v for k, v in shown.items()}
            self.bar.set_postfix(short, refresh=False)
            self.bar.update(1)
        elif step % self.every == 0 or step == self.total:
            text = "  ".join(f"{k} {v}" for k, v in shown.items())
            print(f"step {step}/{self.total}  {text}", file=self.stream, flush=True)

    def close(self) -> None:
        """End the bar (a no-op without one)."""
        self.bar.close()
