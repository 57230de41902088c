"""Sequence tasks: needle documents, reversal, copy, sorting, associative recall."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import BOS, IGNORE, Task, register_task

if TYPE_CHECKING:
    import numpy as np


@register_task("needle")
class Needle(Task):
    """Documents of noise words in which one informative word sets the class.

    Ids ``1..classes`` are the needle words (class ``c`` is word ``c + 1``); ids
    ``classes+1..vocab-1`` are noise. Each document has exactly one needle, at a
    random position, or always at ``needle_at`` when that is >= 0 (for
    location-based attention). ``needle_pos`` says where it is, to check that
    the attention peaks there.
    """

    provides = {"tokens": "tokens"}
    metrics = ("accuracy", "attention_peak")
    area = "document classification"
    defaults = {"vocab": 32, "classes": 4, "length": 12, "needle_at": -1}

    def check(self) -> None:
        o = self.opts
        if o["classes"] < 2 or o["vocab"] < o["classes"] + 3:
            self.fail(f"needs vocab >= classes + 3 and classes >= 2 (vocab {o['vocab']}, "
                      f"classes {o['classes']})")
        if o["length"] < 1 or o["needle_at"] >= o["length"]:
            self.fail(f"needle_at {o['needle_at']} is outside documents of length "
                      f"{o['length']}")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        n, c = o["length"], o["classes"]
        tokens = rng.integers(c + 1, o["vocab"], size=(size, n))
        label = rng.integers(0, c, size=size)
        pos = (np.full(size, o["needle_at"]) if o["needle_at"] >= 0
               else rng.integers(0, n, size=size))
        tokens[np.arange(size), pos] = label + 1
        return {"tokens": tokens, "target": label, "needle_pos": pos}


class _Seq2Seq(Task):
    """Source token sequences and a target sequence of the same length.

    Symbols are ids ``1..vocab-1`` (0 is the decoders' start id, :data:`BOS`).
    ``source`` feeds a tokens input, ``target`` a per-item labels input (a
    decoder loop's teacher forcing reads it, shifted by the loop behind its
    ``feed.start``); ``target`` is also what ``logits`` [T, vocab] learn.
    ``source_pos`` [T] says which source position each target token comes from
    (the ideal alignment: anti-diagonal for reversal, diagonal for copy).
    """

    provides = {"source": "tokens", "target": "labels"}
    metrics = ("token_accuracy", "sequence_accuracy", "alignment")
    area = "text translation"
    defaults = {"vocab": 12, "length": 8}

    def check(self) -> None:
        if self.opts["vocab"] < 3 or self.opts["length"] < 1:
            self.fail("needs vocab >= 3 (BOS and two symbols) and length >= 1")

    def transform(self, src: np.ndarray) -> np.ndarray:
        """The target of each source row (override)."""
        raise NotImplementedError

    def source_pos(self, src: np.ndarray) -> np.ndarray:
        """Where in the source each target token comes from, [B, T] (override)."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        src = rng.integers(BOS + 1, self.opts["vocab"], size=(size, self.opts["length"]))
        return {"source": src, "target": self.transform(src), "source_pos": self.source_pos(src)}


@register_task("reversal")
class Reversal(_Seq2Seq):
    """Toy translation: the target is the source reversed."""

    def transform(self, src: np.ndarray) -> np.ndarray:
        return src[:, ::-1].copy()

    def source_pos(self, src: np.ndarray) -> np.ndarray:
        import numpy as np

        n = src.shape[1]
        return np.broadcast_to(np.arange(n - 1, -1, -1), src.shape).copy()


@register_task("copy")
class Copy(_Seq2Seq):
    """Toy translation: the target is the source itself."""

    def transform(self, src: np.ndarray) -> np.ndarray:
        return src.copy()

    def source_pos(self, src: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.broadcast_to(np.arange(src.shape[1]), src.shape).copy()


@register_task("sorting")
class Sorting(_Seq2Seq):
    """The target is the source sorted ascending."""

    area = "algorithm learning"

    def transform(self, src: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.sort(src, axis=1)

    def source_pos(self, src: np.ndarray) -> np.ndarray:
        """A stable argsort: with repeated ids, the first occurrence comes first."""
        import numpy as np

        return np.argsort(src, axis=1, kind="stable")


@register_task("associative_recall")
class AssociativeRecall(Task):
    """Key/value pairs, a separator, then one of the keys: recall its value.

    Sequence ``k_1 v_1 ... k_P v_P SEP q`` of length ``2P + 2``. Keys are ids
    ``1..keys`` (distinct within a sequence), values ``keys+1..keys+values``,
    SEP is ``keys+values+1``. The target is :data:`IGNORE` at every step but
    the last, where it is the value paired with ``q``.
    """

    provides = {"seq": "tokens"}
    area = "memory recall"
    defaults = {"keys": 4, "values": 8, "pairs": 3}

    @property
    def vocab(self) -> int:
        """Number of ids used (BOS, keys, values, SEP)."""
        return self.opts["keys"] + self.opts["values"] + 2

    def check(self) -> None:
        o = self.opts
        if not 1 <= o["pairs"] <= o["keys"] or o["values"] < 2:
            self.fail(f"needs 1 <= pairs <= keys and values >= 2 (keys {o['keys']}, "
                      f"pairs {o['pairs']}, values {o['values']})")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        p = o["pairs"]
        keys = np.argsort(rng.random((size, o["keys"])), axis=1)[:, :p] + 1
        vals = rng.integers(o["keys"] + 1, o["keys"] + o["values"] + 1, size=(size, p))
        which = rng.integers(0, p, size=size)
        seq = np.empty((size, 2 * p + 2), dtype=np.int64)
        seq[:, 0:2 * p:2] = keys
        seq[:, 1:2 * p:2] = vals
        seq[:, 2 * p] = o["keys"] + o["values"] + 1
        seq[:, 2 * p + 1] = keys[np.arange(size), which]
        target = np.full_like(seq, IGNORE)
        target[:, -1] = vals[np.arange(size), which]
        return {"seq": seq, "target": target}
