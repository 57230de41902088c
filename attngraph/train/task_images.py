"""Image tasks: cluttered digits (scikit-learn's shipped 8×8 digits on a canvas)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from attngraph.train.tasks import Task, register_task

if TYPE_CHECKING:
    import numpy as np

#: digits with index % 5 == 0 are held out for the test split
_TEST_EVERY = 5


@functools.lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 8×8 digits shipped with scikit-learn, scaled to [0, 1]."""
    import numpy as np
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images / 16.0).astype(np.float32), d.target.astype(np.int64)


@register_task("cluttered_digits")
class ClutteredDigits(Task):
    """One 8×8 digit at a random place on a ``canvas``² image, among clutter.

    Clutter is ``clutter`` random ``fragment``×``fragment`` crops of other digits
    scattered over the canvas (pixelwise max, so the digit itself is never
    erased). ``position`` is the digit's top-left corner (row, col), a multiple
    of ``grid`` (``grid: 8`` puts the digit exactly in one 8×8 tile, for models
    that attend over a fixed grid of tiles; 1 = anywhere). Train and
    test draw from disjoint sets of source digits (every fifth one is test).
    """

    provides = {"image": "image"}
    defaults = {"canvas": 32, "clutter": 4, "fragment": 4, "grid": 1}

    def check(self) -> None:
        o = self.opts
        if o["canvas"] < 8 or not 1 <= o["fragment"] <= 8 or o["clutter"] < 0:
            self.fail("needs canvas >= 8, 1 <= fragment <= 8 and clutter >= 0")
        if o["grid"] < 1:
            self.fail("grid must be >= 1")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        imgs, labels = _digits()
        idx = np.arange(len(labels))
        pool = idx[(idx % _TEST_EVERY == 0) == (split == "test")]
        o = self.opts
        c, f = o["canvas"], o["fragment"]
        out = np.zeros((size, 1, c, c), dtype=np.float32)
        pick = rng.choice(pool, size=size)
        pos = rng.integers(0, (c - 8) // o["grid"] + 1, size=(size, 2)) * o["grid"]
        for b in range(size):
            for _ in range(o["clutter"]):
                src = imgs[rng.choice(pool)]
                sy, sx = rng.integers(0, 8 - f + 1, size=2)
                y, x = rng.integers(0, c - f + 1, size=2)
                frag = src[sy:sy + f, sx:sx + f]
                np.maximum(out[b, 0, y:y + f, x:x + f], frag, out=out[b, 0, y:y + f, x:x + f])
            y, x = pos[b]
            win = out[b, 0, y:y + 8, x:x + 8]
            np.maximum(win, imgs[pick[b]], out=win)
        return {"image": out, "target": labels[pick], "position": pos}
