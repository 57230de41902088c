"""Speech-like tasks: transcribe utterances of noisy prototype frames.

``utterances`` stands in for speech recognition: every token (a "phone") has a
prototype frame, a feature vector fixed by the task's seed; an utterance says
each token of its transcript for a random number of frames, each frame the
prototype plus Gaussian noise. A recogniser must find where each token is
said (the segments are of unknown length) and name it: its attention over the
frames should move forward through the utterance, one segment per token.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> b = get_task("utterances", seed=0, length=3, min_frames=2, max_frames=2).batch(1)
>>> b["frames"].shape[1], b["frames_mask"][0].tolist()
(6, [True, True, True, True, True, True])
>>> b["segment_start"][0].tolist(), b["segment_end"][0].tolist()
([0, 2, 4], [2, 4, 6])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import BOS, Task, register_metric, register_task

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

__all__ = ["Utterances", "segment_attention", "monotonic"]


@register_task("utterances")
class Utterances(Task):
    """Synthetic speech: each token a noisy prototype frame repeated for a random duration.

    ``frames`` [N, dim] (padded at the end, ``frames_mask`` True at the real
    frames) says the transcript ``target`` [T] (ids ``1..vocab-1``, no token
    twice in a row, so segments never merge), token ``t`` during frames
    ``segment_start[t] <= j < segment_end[t]``, ``min_frames..max_frames`` of
    them. Prototypes are unit-variance Gaussian vectors drawn from the seed
    (the same for the training and validation splits); each frame adds noise of
    standard deviation ``noise``.
    """

    provides = {"frames": "vectors", "target": "labels"}
    area = "speech recognition"
    metrics = ("token_accuracy", "segment_attention", "monotonic")
    defaults = {"vocab": 8, "length": 5, "dim": 8, "min_frames": 2, "max_frames": 5,
                "noise": 0.5}

    def check(self) -> None:
        o = self.opts
        if o["vocab"] < 3 or o["length"] < 1 or o["dim"] < 1:
            self.fail(f"needs vocab >= 3, length >= 1 and dim >= 1 (vocab {o['vocab']}, "
                      f"length {o['length']}, dim {o['dim']})")
        if not 1 <= o["min_frames"] <= o["max_frames"]:
            self.fail(f"needs 1 <= min_frames <= max_frames (min_frames {o['min_frames']}, "
                      f"max_frames {o['max_frames']})")
        if o["noise"] < 0:
            self.fail(f"noise must be >= 0, got {o['noise']}")

    def prototypes(self) -> np.ndarray:
        """One prototype frame per token id, ``[vocab, dim]`` (row 0, BOS, unused)."""
        import numpy as np

        rng = np.random.default_rng([self.seed, 2])
        return rng.standard_normal((self.opts["vocab"], self.opts["dim"])).astype(np.float32)

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        t, v = o["length"], o["vocab"]
        # no token twice in a row: each next id is the last one shifted by 1..v-2
        first = rng.integers(BOS + 1, v, size=(size, 1))
        steps = rng.integers(1, v - 1, size=(size, t - 1))
        target = (np.cumsum(np.concatenate([first - 1, steps], axis=1), axis=1) % (v - 1)) + 1
        dur = rng.integers(o["min_frames"], o["max_frames"] + 1, size=(size, t))
        end = np.cumsum(dur, axis=1)
        n = t * o["max_frames"]
        frame_pos = np.arange(n)
        # which token each frame says: the number of segments ended at or before it
        seg = (frame_pos[None, :, None] >= end[:, None, :]).sum(-1)  # (B, n)
        mask = frame_pos[None, :] < end[:, -1:]
        ids = np.take_along_axis(target, np.minimum(seg, t - 1), axis=1)
        frames = self.prototypes()[ids] + o["noise"] * rng.standard_normal(
            (size, n, o["dim"])).astype(np.float32)
        frames[~mask] = 0.0
        return {"frames": frames.astype(np.float32), "frames_mask": mask, "target": target,
                "segment_start": end - dur, "segment_end": end}


def _peaks(outputs: Mapping[str, Any], batch: Mapping[str, Any]) -> Any:
    """Where each target step's attention peaks, ``(B, T)``, or None."""
    att, start = outputs.get("attention"), batch.get("segment_start")
    if att is None or start is None or att.shape[-2] != start.shape[-1]:
        return None
    if att.dim() == 4:  # (B, h, T, N)
        att = att.mean(1)
    return att.argmax(-1)


@register_metric("segment_attention")
def segment_attention(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                      task: Task) -> float | None:
    """Fraction of target steps whose attention peaks inside the frames of their token."""
    peak = _peaks(outputs, batch)
    if peak is None:
        return None
    inside = (peak >= batch["segment_start"]) & (peak < batch["segment_end"])
    return float(inside.float().mean())


@register_metric("monotonic")
def monotonic(outputs: Mapping[str, Any], batch: Mapping[str, Any],
              task: Task) -> float | None:
    """Fraction of examples whose attention peak never moves back from step to step."""
    peak = _peaks(outputs, batch)
    if peak is None:
        return None
    if peak.shape[-1] < 2:
        return 1.0
    return float((peak[:, 1:] >= peak[:, :-1]).all(-1).float().mean())
