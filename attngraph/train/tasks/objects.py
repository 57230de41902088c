"""Multiple object recognition: read a row of digits, one label per digit.

``digit_rows`` stands for multiple object recognition (Ba, Mnih & Kavukcuoglu
2015): a canvas one 8×8 tile high and ``cols`` tiles wide holds ``count`` of
scikit-learn's shipped digits in distinct tiles, the rest blank; the target
is their classes from left to right. A model that glimpses the canvas should
look, at step ``t``, at the tile of digit ``t`` (``digit_tile``, read by the
``digit_attention`` metric of :mod:`attngraph.train.tasks.captions`).

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> b = get_task("digit_rows", seed=0, cols=4, count=2).batch(1)
>>> tuple(b["image"].shape), tuple(b["target"].shape)
((1, 1, 8, 32), (1, 2))
>>> bool(b["digit_tile"][0, 0] < b["digit_tile"][0, 1])
True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import Task, register_task
from attngraph.train.tasks.images import _VALID_EVERY, _digits

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DigitRows"]


@register_task("digit_rows")
class DigitRows(Task):
    """A row of ``count`` digits in distinct tiles of a ``cols``-tile canvas.

    ``image`` [1, 8, 8·cols] holds the digits (pixels in [0, 1]); ``target``
    [count] their classes left to right; ``digit_tile`` [count] the tile
    (column) each one is in. Training and validation draw from disjoint sets of source
    digits (every fifth one is held out for validation).
    """

    provides = {"image": "image", "target": "labels"}
    area = "multiple object recognition"
    metrics = ("token_accuracy", "sequence_accuracy", "digit_attention")
    defaults = {"cols": 5, "count": 3}

    def check(self) -> None:
        o = self.opts
        if not 1 <= o["count"] <= o["cols"]:
            self.fail(f"needs 1 <= count <= cols (count {o['count']}, cols {o['cols']})",
                      hint="each digit takes a tile of its own: add columns or ask fewer "
                      "digits")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        imgs, labels = _digits()
        idx = np.arange(len(labels))
        pool = idx[(idx % _VALID_EVERY == 0) == (split != "train")]
        cols, n = self.opts["cols"], self.opts["count"]
        image = np.zeros((size, 1, 8, 8 * cols), dtype=np.float32)
        # distinct columns, left to right
        tile = np.sort(np.argsort(rng.random((size, cols)), axis=1)[:, :n], axis=1)
        pick = rng.choice(pool, size=(size, n))
        for b in range(size):
            for t in range(n):
                x = 8 * int(tile[b, t])
                image[b, 0, :, x:x + 8] = imgs[pick[b, t]]
        return {"image": image, "target": labels[pick], "digit_tile": tile}
