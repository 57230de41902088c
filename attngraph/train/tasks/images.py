"""Image tasks: cluttered digits (scikit-learn's shipped 8×8 digits on a canvas)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import Task, register_metric, register_task

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

#: digits with index % 5 == 0 are held out for the validation split
_VALID_EVERY = 5


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
    validation draw from disjoint sets of source digits (every fifth one is held
    out for validation).
    """

    provides = {"image": "image"}
    area = "image classification in clutter"
    metrics = ("accuracy", "glimpse_hit", "tile_peak")
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
        pool = idx[(idx % _VALID_EVERY == 0) == (split != "train")]
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


def _digit_box(batch: Mapping[str, Any], canvas: int) -> Any:
    """``[B, 2, 2]``: the digit's (x, y) lower and upper bounds in [-1, 1] coordinates."""
    pos = batch["position"].float()  # (B, 2): row, col of the top-left corner
    lo = pos.flip(-1) / canvas * 2 - 1  # (B, 2): x, y
    return lo, lo + 16 / canvas


@register_metric("glimpse_hit")
def glimpse_hit(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                task: Task) -> float | None:
    """Fraction of images with a glimpse centred on the digit.

    Reads the spec's ``locations`` output ``[T, 2]``: where each glimpse was
    taken, (x, y) in [-1, 1]. A location hits when it lies strictly inside the
    digit's 8×8 box (the centre of the canvas, where the glimpse models start,
    is inside none).
    """
    locs = outputs.get("locations")
    if locs is None or "position" not in batch or locs.dim() != 3 or locs.shape[-1] != 2:
        return None
    lo, hi = _digit_box(batch, int(task.opts["canvas"]))
    inside = ((locs > lo[:, None]) & (locs < hi[:, None])).all(-1)  # (B, T)
    return float(inside.any(-1).float().mean())


@register_metric("tile_peak")
def tile_peak(outputs: Mapping[str, Any], batch: Mapping[str, Any],
              task: Task) -> float | None:
    """Fraction of images whose attention over tiles peaks on the digit's tile.

    Reads ``attention`` ``[N]`` over a square grid of tiles (row by row); applies
    when the digits sit on a grid of whole tiles (``grid`` = the tile side).
    """
    att = outputs.get("attention")
    if att is None or "position" not in batch or att.dim() != 2:
        return None
    side = round(att.shape[-1] ** 0.5)
    canvas = int(task.opts["canvas"])
    if side * side != att.shape[-1] or canvas % side or task.opts["grid"] != canvas // side:
        return None
    tile = batch["position"] // (canvas // side)  # (B, 2): row, col of the digit's tile
    want = tile[:, 0] * side + tile[:, 1]
    return float((att.argmax(-1) == want).float().mean())
