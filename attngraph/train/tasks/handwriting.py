"""Handwriting-like task: draw a character string as a pen trajectory.

``handwriting`` stands in for handwriting generation (Graves 2013, section 5):
every letter of a small alphabet has a stroke, a fixed sequence of pen offsets
``(dx, dy)`` drawn from the task's seed; a string of 2-4 letters is written as
the concatenation of its letters' strokes, each offset with a little Gaussian
noise. A model predicts each next offset from the ones before (teacher forcing)
and the string: it must know which letter it is drawing at every step, so its
attention over the string should move forward one letter per stroke.

Squared error stands in for Graves' mixture density likelihood: the noise is
small and unimodal, so the conditional mean is the whole answer.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> b = get_task("handwriting", seed=0, min_chars=2, max_chars=2, stroke=3).batch(1)
>>> b["chars"].shape, b["pen"].shape, b["target"].shape
(torch.Size([1, 2]), torch.Size([1, 6, 2]), torch.Size([1, 6, 2]))
>>> b["char_of_step"][0].tolist()
[0, 0, 0, 1, 1, 1]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import Task, register_metric, register_task

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

__all__ = ["Handwriting", "trajectory_error", "trajectory_fit", "window_alignment",
           "window_monotonic"]


@register_task("handwriting")
class Handwriting(Task):
    """Pen trajectories of letter strings: each letter a seeded stroke, plus noise.

    ``chars`` [U] holds the string's letter ids ``1..letters`` (0 and
    ``chars_mask`` False past its end); ``pen`` [T, 2] the previous offset at
    each step (zeros at step 0 and past the end, ``pen_mask`` True at the real
    steps); ``target`` [T, 2] the offset to draw at each step (NaN past the
    end: padding, not scored); ``char_of_step`` [T] the position in the string
    of the letter being drawn at each step (-1 past the end). A letter's stroke
    is ``stroke`` offsets drawn uniformly in [-1, 1] from the seed (the same
    for the training and validation splits, and at every occurrence of the letter); each
    drawn offset adds noise of standard deviation ``noise``.
    """

    provides = {"chars": "tokens", "pen": "vectors"}
    area = "handwriting generation"
    objective = "regress"
    metrics = ("trajectory_error", "trajectory_fit", "window_alignment", "window_monotonic")
    defaults = {"letters": 5, "min_chars": 2, "max_chars": 4, "stroke": 3, "noise": 0.05}

    def check(self) -> None:
        o = self.opts
        if o["letters"] < 2 or o["stroke"] < 1:
            self.fail(f"needs letters >= 2 and stroke >= 1 (letters {o['letters']}, "
                      f"stroke {o['stroke']})")
        if not 1 <= o["min_chars"] <= o["max_chars"]:
            self.fail(f"needs 1 <= min_chars <= max_chars (min_chars {o['min_chars']}, "
                      f"max_chars {o['max_chars']})")
        if o["noise"] < 0:
            self.fail(f"noise must be >= 0, got {o['noise']}")

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        """Letters as ``a``, ``b``, ... (id 1 is ``a``; 0, padding, is ``·``; past ``z``
        the id)."""
        if field != "chars":
            return super().token_names(field, ids)
        return [("·" if i == 0 else chr(ord("a") + i - 1) if i <= 26 else str(i)) for i in ids]

    def strokes(self) -> np.ndarray:
        """Each letter's stroke, ``[letters + 1, stroke, 2]`` (row 0, padding, unused)."""
        import numpy as np

        rng = np.random.default_rng([self.seed, 2])
        o = self.opts
        return rng.uniform(-1, 1, (o["letters"] + 1, o["stroke"], 2)).astype(np.float32)

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        u, s = o["max_chars"], o["stroke"]
        n = rng.integers(o["min_chars"], o["max_chars"] + 1, size=size)  # (B,)
        real = np.arange(u)[None, :] < n[:, None]  # (B, U)
        chars = np.where(real, rng.integers(1, o["letters"] + 1, size=(size, u)), 0)
        steps = n * s
        t = u * s
        step_real = np.arange(t)[None, :] < steps[:, None]  # (B, T)
        offsets = self.strokes()[chars].reshape(size, t, 2)
        offsets = offsets + o["noise"] * rng.standard_normal((size, t, 2)).astype(np.float32)
        target = np.where(step_real[..., None], offsets, np.nan).astype(np.float32)
        pen = np.zeros_like(offsets)
        pen[:, 1:] = np.where(step_real[:, 1:, None], offsets[:, :-1], 0.0)
        char_of_step = np.where(step_real, np.arange(t)[None, :] // s, -1)
        return {"chars": chars, "chars_mask": real, "pen": pen.astype(np.float32),
                "pen_mask": step_real, "target": target, "char_of_step": char_of_step}


def _scored(outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> Any:
    """The prediction, the target and where it is real, or None."""
    pred, target = outputs.get("prediction"), batch.get("target")
    if pred is None or target is None or pred.shape != target.shape:
        return None
    return pred.detach(), target, ~target.isnan()


@register_metric("trajectory_error", lower_is_better=True)
def trajectory_error(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                     task: Task) -> float | None:
    """Mean squared error of the predicted pen offsets over the real steps (lower is better)."""
    got = _scored(outputs, batch)
    if got is None:
        return None
    pred, target, keep = got
    return float(((pred - target)[keep] ** 2).mean())


@register_metric("trajectory_fit")
def trajectory_fit(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                   task: Task) -> float | None:
    """1 - squared error / the offsets' variance over the real steps: the share of the
    trajectory the prediction explains (R², 1 is perfect, 0 is guessing the mean)."""
    got = _scored(outputs, batch)
    if got is None:
        return None
    pred, target, keep = got
    real = target[keep]
    return float(1 - ((pred - target)[keep] ** 2).mean() / ((real - real.mean()) ** 2).mean())


def _window_peaks(outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> Any:
    """Where each step's window peaks ``(B, T)`` and the real steps, or None."""
    att, of = outputs.get("attention"), batch.get("char_of_step")
    if att is None or of is None or att.dim() != 3 or att.shape[:2] != of.shape:
        return None
    return att.argmax(-1), of >= 0


@register_metric("window_alignment")
def window_alignment(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                     task: Task) -> float | None:
    """Fraction of real steps whose window peaks on the letter being drawn."""
    got = _window_peaks(outputs, batch)
    if got is None:
        return None
    peak, real = got
    return float((peak == batch["char_of_step"])[real].float().mean())


@register_metric("window_monotonic")
def window_monotonic(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                     task: Task) -> float | None:
    """Fraction of examples whose window peak never moves back over their real steps."""
    got = _window_peaks(outputs, batch)
    if got is None:
        return None
    peak, real = got
    if peak.shape[-1] < 2:
        return 1.0
    back = (peak[:, 1:] < peak[:, :-1]) & real[:, 1:]
    return float((~back.any(-1)).float().mean())
