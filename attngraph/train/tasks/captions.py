"""Caption tasks: name the digits on a canvas in reading order.

``digit_captions`` stands for caption generation: a canvas of ``rows`` ×
``cols`` tiles of 8×8 pixels holds ``min_digits..max_digits`` of
scikit-learn's shipped digits, each in its own tile; the caption names them
in reading order (row by row, left to right) and ends with ``<eos>``. A
captioner that attends over the tiles should look, while it names a digit,
at the tile that digit is in.

Token ids: 0 is BOS (the decoder's start), ``1 + d`` names digit ``d``, 11 is
``<eos>``; a caption shorter than ``max_digits`` repeats ``<eos>`` to the
fixed length ``max_digits + 1``.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> task = get_task("digit_captions", seed=0, rows=1, cols=3, min_digits=2, max_digits=2)
>>> b = task.batch(1)
>>> tuple(b["image"].shape), tuple(b["target"].shape), int(b["target"][0, -1])
((1, 1, 8, 24), (1, 3), 11)
>>> task.token_names("target", [0, 1, 10, 11])
['<bos>', '0', '9', '<eos>']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import Task, register_metric, register_task
from attngraph.train.tasks.images import _VALID_EVERY, _digits

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

__all__ = ["DigitCaptions", "EOS", "digit_attention"]

#: the caption's end token (digits are 1..10, BOS is 0)
EOS = 11


@register_task("digit_captions")
class DigitCaptions(Task):
    """Canvases of 2-3 digits, each in its own 8×8 tile; the caption names them in order.

    ``image`` [1, 8·rows, 8·cols] holds the digits (pixels in [0, 1], other
    tiles blank); ``target`` [max_digits + 1] is the caption; ``digit_tile``
    [max_digits + 1] is the tile (row-major index) of the digit each step
    names, -1 at ``<eos>``. Training and validation draw from disjoint sets of source
    digits (every fifth one is held out for validation).
    """

    provides = {"image": "image", "target": "labels"}
    area = "caption generation"
    metrics = ("token_accuracy", "sequence_accuracy", "digit_attention")
    defaults = {"rows": 2, "cols": 3, "min_digits": 2, "max_digits": 3}

    def check(self) -> None:
        o = self.opts
        if o["rows"] < 1 or o["cols"] < 1:
            self.fail(f"needs rows >= 1 and cols >= 1 (rows {o['rows']}, cols {o['cols']})")
        if not 1 <= o["min_digits"] <= o["max_digits"] <= o["rows"] * o["cols"]:
            self.fail("needs 1 <= min_digits <= max_digits <= rows * cols "
                      f"(min_digits {o['min_digits']}, max_digits {o['max_digits']}, "
                      f"{o['rows'] * o['cols']} tiles)",
                      hint="each digit takes a tile of its own: add tiles or ask fewer digits")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        imgs, labels = _digits()
        idx = np.arange(len(labels))
        pool = idx[(idx % _VALID_EVERY == 0) == (split != "train")]
        o = self.opts
        r, c, most = o["rows"], o["cols"], o["max_digits"]
        image = np.zeros((size, 1, 8 * r, 8 * c), dtype=np.float32)
        target = np.full((size, most + 1), EOS, dtype=np.int64)
        tile = np.full((size, most + 1), -1, dtype=np.int64)
        count = rng.integers(o["min_digits"], most + 1, size=size)
        for b in range(size):
            # distinct tiles, sorted: the reading order is the row-major tile index
            where = np.sort(rng.choice(r * c, size=int(count[b]), replace=False))
            pick = rng.choice(pool, size=int(count[b]))
            for t, (k, p) in enumerate(zip(where, pick, strict=True)):
                y, x = divmod(int(k), c)
                image[b, 0, 8 * y:8 * y + 8, 8 * x:8 * x + 8] = imgs[p]
                target[b, t] = 1 + labels[p]
                tile[b, t] = k
        return {"image": image, "target": target, "digit_tile": tile}

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        """``<bos>``, the digit named, or ``<eos>``."""
        return ["<bos>" if i == 0 else "<eos>" if i == EOS else str(i - 1) for i in ids]


@register_metric("digit_attention")
def digit_attention(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                    task: Task) -> float | None:
    """Fraction of digit-naming steps whose attention peaks on the tile of that digit.

    Reads ``attention`` ``[T, N]`` over the canvas's tiles (row by row) and the
    batch's ``digit_tile``; ``<eos>`` steps are not scored.
    """
    att, tile = outputs.get("attention"), batch.get("digit_tile")
    if att is None or tile is None or att.dim() != 3 or att.shape[1] != tile.shape[-1]:
        return None
    keep = tile >= 0
    return float((att.argmax(-1) == tile)[keep].float().mean())
