"""Algorithm tasks: learn an algorithm from examples of its input and output.

``pointer_sort`` asks for the positions of the inputs in sorted order (Vinyals,
Fortunato & Jaitly 2015): the answer is a sequence of pointers into the input,
so its vocabulary grows with the input, which a pointer network's output (a
softmax over the input positions) fits by construction.

Examples
--------
>>> from attngraph.train.tasks import get_task
>>> b = get_task("pointer_sort", seed=0, vocab=10, length=4).batch(1)
>>> src, ptr = b["source"][0], b["target"][0]
>>> bool((src[ptr][1:] > src[ptr][:-1]).all())
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.taskbase import BOS, Task, register_task

if TYPE_CHECKING:
    import numpy as np

__all__ = ["PointerSort"]


@register_task("pointer_sort")
class PointerSort(Task):
    """Sort distinct numbers by pointing: the target is the positions in ascending order.

    ``source`` [N] holds ``length`` distinct ids of ``1..vocab-1`` (their value
    is their order); ``target`` [N] holds positions into ``source``:
    ``source[target[0]]`` is the smallest, ``source[target[-1]]`` the largest.
    """

    provides = {"source": "tokens", "target": "positions"}
    area = "algorithm learning"
    metrics = ("token_accuracy", "sequence_accuracy")
    defaults = {"vocab": 16, "length": 5}

    def check(self) -> None:
        o = self.opts
        if o["length"] < 1 or o["vocab"] - 1 < o["length"]:
            self.fail(f"needs 1 <= length <= vocab - 1 distinct ids (vocab {o['vocab']}, "
                      f"length {o['length']})", hint="raise vocab or lower length")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        order = np.argsort(rng.random((size, o["vocab"] - 1)), axis=1)[:, :o["length"]]
        source = order + BOS + 1  # distinct ids, in random order
        return {"source": source, "target": np.argsort(source, axis=1)}
