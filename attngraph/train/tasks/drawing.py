"""Image generation: binarised digits to draw (DRAW's task, on scikit-learn's digits).

``digit_drawing`` stands for image generation: each example is one of
scikit-learn's shipped 8×8 digits, binarised (pixel > 0.5), at a random place
on a ``canvas`` × ``canvas`` image; the target is the image itself. A model
trained on it (objective ``bernoulli``) gives the image's pixels as Bernoulli
logits and is scored by its negative ELBO in nats per image.

The yardstick is a model of independent pixels: pixel (i, j) is on with the
probability that it is on in the training images (the mean binarised training
digit averaged over every placement, exactly; clipped to [1e-3, 1 − 1e-3]).
Its NLL, ``pixel_baseline``, is what a model that ignores the shape of digits
pays; ``elbo_gain`` is the fraction of it the model saves.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> task = get_task("digit_drawing", seed=0, canvas=10)
>>> b = task.batch(2)
>>> tuple(b["image"].shape), bool((b["image"] == b["target"]).all())
((2, 1, 10, 10), True)
>>> sorted(set(b["image"].unique().tolist()))
[0.0, 1.0]
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import Task, register_metric, register_task
from attngraph.train.tasks.images import _VALID_EVERY, _digits

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np
    from torch import Tensor

__all__ = ["DigitDrawing", "pixel_probabilities", "negative_elbo", "pixel_baseline",
           "elbo_gain"]

#: the side of a digit, in pixels
_DIGIT = 8


def _pool(split: str) -> np.ndarray:
    """The binarised digits of a split ``[n, 8, 8]`` (every fifth digit is held out
    for validation)."""
    import numpy as np

    imgs, labels = _digits()
    idx = np.arange(len(labels))
    return (imgs[(idx % _VALID_EVERY == 0) == (split != "train")] > 0.5).astype(np.float32)


@functools.lru_cache(maxsize=8)
def pixel_probabilities(canvas: int) -> np.ndarray:
    """``[canvas, canvas]``: how often each pixel is on in the training images.

    The mean binarised training digit, averaged over every placement on the
    canvas (all equally likely), clipped to [1e-3, 1 − 1e-3].

    >>> import numpy as np
    >>> p = pixel_probabilities(8)  # one placement: the mean digit itself
    >>> bool(np.allclose(p, np.clip(_pool("train").mean(0), 1e-3, 1 - 1e-3)))
    True
    """
    import numpy as np

    mean = _pool("train").mean(0)
    spots = canvas - _DIGIT + 1
    p = np.zeros((canvas, canvas), dtype=np.float64)
    for y in range(spots):
        for x in range(spots):
            p[y:y + _DIGIT, x:x + _DIGIT] += mean
    return np.clip(p / spots**2, 1e-3, 1 - 1e-3).astype(np.float32)


@register_task("digit_drawing")
class DigitDrawing(Task):
    """A binarised 8×8 digit at a random place on a ``canvas``² image, to be drawn.

    ``image`` [1, canvas, canvas] is the input and ``target`` the same pixels
    (0 or 1), for a ``bernoulli`` objective; ``position`` (row, col) is the
    digit's top-left corner. Training and validation draw from disjoint sets of source
    digits (every fifth one is held out for validation).
    """

    provides = {"image": "image"}
    area = "image generation"
    objective = "bernoulli"
    metrics = ("negative_elbo", "pixel_baseline", "elbo_gain")
    defaults = {"canvas": 12}

    def check(self) -> None:
        if not _DIGIT <= self.opts["canvas"] <= 64:
            self.fail(f"needs 8 <= canvas <= 64 (a digit is 8×8), got {self.opts['canvas']}")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        pool = _pool(split)
        c = self.opts["canvas"]
        image = np.zeros((size, 1, c, c), dtype=np.float32)
        pick = rng.integers(0, len(pool), size=size)
        pos = rng.integers(0, c - _DIGIT + 1, size=(size, 2))
        for b in range(size):
            y, x = pos[b]
            image[b, 0, y:y + _DIGIT, x:x + _DIGIT] = pool[pick[b]]
        return {"image": image, "target": image.copy(), "position": pos}


def _nll(logits: Tensor, target: Tensor) -> Tensor:
    """Per-example Bernoulli NLL ``[B]`` in nats."""
    from attngraph.train.tasks.objectives import bernoulli_nll

    return bernoulli_nll(logits, target)


@register_metric("negative_elbo", lower_is_better=True)
def negative_elbo(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                  task: Task) -> float | None:
    """The negative ELBO in nats per image: −log D(x | logits) + the KL terms.

    Reads ``logits`` (the image's Bernoulli logits, the target's shape) and
    ``kl`` (``[T]`` per-step KL divergences of the codes, or ``[]``), both per
    example. The KL is part of the bound, so a spec without a ``kl`` output is
    not scored (None).
    """
    logits, kl = outputs.get("logits"), outputs.get("kl")
    target = batch.get("target")
    if logits is None or kl is None or target is None or logits.shape != target.shape:
        return None
    bound = _nll(logits.detach(), target) + kl.detach().reshape(kl.shape[0], -1).sum(-1)
    return float(bound.mean())


@register_metric("pixel_baseline", lower_is_better=True)
def pixel_baseline(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                   task: Task) -> float | None:
    """NLL in nats per image of the validation images under independent pixels, each on
    with its frequency in the training images (:func:`pixel_probabilities`)."""
    import torch

    target = batch.get("target")
    if target is None or "canvas" not in task.opts or target.dim() != 4:
        return None
    p = torch.from_numpy(pixel_probabilities(int(task.opts["canvas"])))
    logits = torch.logit(p.double()).to(target.device).expand_as(target)
    return float(_nll(logits, target.double()).mean())


@register_metric("elbo_gain")
def elbo_gain(outputs: Mapping[str, Any], batch: Mapping[str, Any],
              task: Task) -> float | None:
    """The fraction of the independent-pixels NLL that the model's negative ELBO saves:
    1 − negative_elbo / pixel_baseline (0: no better than independent pixels)."""
    bound, base = negative_elbo(outputs, batch, task), pixel_baseline(outputs, batch, task)
    if bound is None or base is None:
        return None
    return 1.0 - bound / base
