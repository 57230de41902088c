"""Algorithm tasks: learn an algorithm from examples of its input and output.

``pointer_sort`` asks for the positions of the inputs in sorted order (Vinyals,
Fortunato & Jaitly 2015): the answer is a sequence of pointers into the input,
so its vocabulary grows with the input, which a pointer network's output (a
softmax over the input positions) fits by construction.

``copy_bits`` is the Neural Turing Machine's copy task (Graves, Wayne &
Danihelka 2014): a few random binary vectors, a delimiter, then the same
vectors again, in order. Each vector of ``bits`` bits is one token (id
``1 + its value``); ``bit_accuracy`` scores the bits of the recalled vectors
and ``read_follows_write`` checks that the read head walks the slots in the
order the write head filled them.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> b = get_task("pointer_sort", seed=0, vocab=10, length=4).batch(1)
>>> src, ptr = b["source"][0], b["target"][0]
>>> bool((src[ptr][1:] > src[ptr][:-1]).all())
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import BOS, IGNORE, Task, register_metric, register_task

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    from torch import Tensor

__all__ = ["PointerSort", "CopyBits", "bit_accuracy", "read_follows_write"]


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


@register_task("copy_bits")
class CopyBits(Task):
    """NTM copy: ``L`` random binary vectors, a delimiter, then recall them in order.

    ``L`` is drawn per example from ``min_length..max_length``. ``seq``
    [2·max_length + 1] holds the vectors as ids ``1..2**bits`` (id ``1 + v`` for
    the vector whose bits read ``v`` in binary), the delimiter ``2**bits + 1``,
    then blanks (:data:`~attngraph.train.tasks.base.BOS`) to the end. ``target``
    holds the vectors again at the ``L`` steps after the delimiter, and
    :data:`~attngraph.train.tasks.base.IGNORE` elsewhere (the input steps and the
    trailing padding).

    Examples
    --------
    >>> from attngraph.train.tasks.lookup import get_task
    >>> b = get_task("copy_bits", seed=0, bits=4, min_length=3, max_length=3).batch(2)
    >>> tuple(b["seq"].shape), bool((b["target"][:, 4:] == b["seq"][:, :3]).all())
    ((2, 7), True)
    >>> int(b["seq"][0, 3])  # the delimiter, 2**4 + 1
    17
    """

    provides = {"seq": "tokens"}
    area = "algorithm learning"
    metrics = ("bit_accuracy", "read_follows_write", "token_accuracy", "sequence_accuracy")
    defaults = {"bits": 4, "min_length": 2, "max_length": 5}

    @property
    def delimiter(self) -> int:
        """The delimiter's id, after the ``2**bits`` vector ids."""
        return int(2 ** self.opts["bits"] + 1)

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        """Vectors as their bits, the delimiter as ``end``, blanks as ``·``."""
        bits = self.opts["bits"]
        return ["·" if i == BOS else "end" if i == self.delimiter
                else format(i - 1, f"0{bits}b") for i in ids]

    def check(self) -> None:
        o = self.opts
        if not 1 <= o["bits"] <= 8 or not 1 <= o["min_length"] <= o["max_length"]:
            self.fail(f"needs 1 <= bits <= 8 and 1 <= min_length <= max_length (bits "
                      f"{o['bits']}, min_length {o['min_length']}, max_length "
                      f"{o['max_length']})", hint="use e.g. bits: 4, min_length: 2, max_length: 5")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        n = o["max_length"]
        lengths = rng.integers(o["min_length"], n + 1, size=size)
        vecs = rng.integers(0, 2 ** o["bits"], size=(size, n)) + 1
        seq = np.full((size, 2 * n + 1), BOS, dtype=np.int64)
        target = np.full_like(seq, IGNORE)
        for i, length in enumerate(lengths):
            seq[i, :length] = vecs[i, :length]
            seq[i, length] = self.delimiter
            target[i, length + 1:2 * length + 1] = vecs[i, :length]
        return {"seq": seq, "target": target}


@register_metric("bit_accuracy")
def bit_accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                 task: Task) -> float | None:
    """Fraction of the recalled vectors' bits predicted right (ids ``1 + v`` read as bits of ``v``).

    A prediction that is not a vector id (the blank or the delimiter) counts
    as all bits wrong.
    """
    logits = outputs.get("logits")
    if logits is None:
        return None
    target = batch[task.target]
    keep = target != IGNORE
    bits = int(task.opts.get("bits", 4))
    p, t = logits.argmax(-1)[keep] - 1, target[keep] - 1
    valid = (p >= 0) & (p < 2 ** bits)
    right = sum((((p >> i) & 1) == ((t >> i) & 1)) & valid for i in range(bits))
    return float(right.float().mean() / bits)


def _recall_steps(target: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per scored step: its example, its step, and the input step it recalls."""
    import torch

    b, t = (target != IGNORE).nonzero(as_tuple=True)
    first = torch.full((target.shape[0],), target.shape[1], dtype=torch.long)
    first = first.scatter_reduce(0, b, t, "amin")  # the first recall step per example
    return b, t, t - first[b]


@register_metric("read_follows_write")
def read_follows_write(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                       task: Task) -> float | None:
    """Share of recalled vectors read from the slot they were written to, in write order.

    Needs the read weights as output ``weights`` [B, T, S] and the write weights
    as ``write`` [B, T, S]. As in the NTM, a step's read vector enters the
    controller at the next step, so the vector recalled at the i-th step after
    the delimiter is the one read at the step before it (the delimiter for
    i = 0). It counts when that read's largest slot is the write weights'
    largest slot at input step i, and no other input step of the example wrote
    mostly to that slot: a model that writes every vector into one slot (and
    keeps the sequence in its controller) scores 0.
    """
    import torch

    wr, ww = outputs.get("weights"), outputs.get("write")
    target = batch[task.target]
    if wr is None or ww is None or wr.dim() != 3 or ww.shape != wr.shape \
            or wr.shape[:2] != target.shape:
        return None
    b, t, i = _recall_steps(target)
    if len(b) == 0:
        return None
    written = ww.argmax(-1)  # (B, T): the slot each step wrote to most
    slot = written[b, i]
    # the example's input steps 0..L-1, L = its number of recall steps
    length = torch.zeros(target.shape[0], dtype=torch.long).index_add_(0, b, torch.ones_like(b))
    steps = torch.arange(target.shape[1])
    inputs = steps[None, :] < length[b, None]  # (K, T)
    clash = ((written[b] == slot[:, None]) & inputs & (steps[None, :] != i[:, None])).any(-1)
    ok = (wr[b, t - 1].argmax(-1) == slot) & ~clash
    return float(ok.float().mean())
