"""Language tasks: next-token prediction on a synthetic language with a copy.

``repeat_copy`` makes sequences ``x_1 .. x_L x_1 .. x_L``: ``L`` random tokens
followed by the same tokens again. A language model predicts every next token;
in the first half that is a guess (the tokens are uniform), in the second half
the answer is written ``L - 1`` positions back, so a model that attends there
predicts it exactly. Its metrics, ``copy_accuracy`` and ``copy_attention``,
score only the copied half.

Examples
--------
>>> from attngraph.train.tasks.lookup import get_task
>>> b = get_task("repeat_copy", seed=0, vocab=10, length=4).batch(2)
>>> bool((b["tokens"][:, :4] == b["tokens"][:, 4:]).all())
True
>>> b["copy_pos"][0].tolist()
[-1, -1, -1, 0, 1, 2, 3, -1]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import BOS, IGNORE, Task, register_metric, register_task

if TYPE_CHECKING:
    from collections.abc import Mapping

    import numpy as np

__all__ = ["RepeatCopy", "copy_accuracy", "copy_attention"]


@register_task("repeat_copy")
class RepeatCopy(Task):
    """A causal language model's task: ``length`` random tokens, then the same again.

    ``tokens`` [2L] uses ids ``1..vocab-1``; ``target`` [2L] is the next token
    at each position (:data:`IGNORE` at the last). ``copy_pos`` [2L] is, at a
    position whose next token repeats the first half, the position of the token
    it repeats (``i + 1 - L``), and -1 elsewhere: where attention should look.
    """

    provides = {"tokens": "tokens"}
    area = "language modeling"
    metrics = ("copy_accuracy", "copy_attention")
    defaults = {"vocab": 16, "length": 8}

    def check(self) -> None:
        o = self.opts
        if o["vocab"] < 3 or o["length"] < 2:
            self.fail(f"needs vocab >= 3 and length >= 2 (vocab {o['vocab']}, "
                      f"length {o['length']})")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        n = self.opts["length"]
        half = rng.integers(BOS + 1, self.opts["vocab"], size=(size, n))
        tokens = np.concatenate([half, half], axis=1)
        target = np.full_like(tokens, IGNORE)
        target[:, :-1] = tokens[:, 1:]
        i = np.arange(2 * n)
        pos = np.where((i >= n - 1) & (i < 2 * n - 1), i + 1 - n, -1)
        return {"tokens": tokens, "target": target,
                "copy_pos": np.broadcast_to(pos, tokens.shape).copy()}


def _copied(batch: Mapping[str, Any]) -> Any:
    """The mask of positions whose next token is a copy, or None."""
    pos = batch.get("copy_pos")
    return None if pos is None else pos >= 0


@register_metric("copy_accuracy")
def copy_accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                  task: Task) -> float | None:
    """Fraction of next tokens in the copied half (``copy_pos >= 0``) predicted right."""
    logits, keep = outputs.get("logits"), _copied(batch)
    if logits is None or keep is None or logits.shape[:-1] != keep.shape:
        return None
    pred = logits.argmax(-1)
    return float((pred[keep] == batch[task.target][keep]).float().mean())


@register_metric("copy_attention")
def copy_attention(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                   task: Task) -> float | None:
    """Fraction of copied next tokens whose attention peaks on the token they repeat.

    Reads ``attention`` ``[N, N]`` (heads averaged): query ``i``'s weights
    should peak at ``copy_pos[i]``.
    """
    att, keep = outputs.get("attention"), _copied(batch)
    if att is None or keep is None or att.shape[-2:] != (keep.shape[-1], keep.shape[-1]):
        return None
    if att.dim() == 4:  # (B, h, N, N)
        att = att.mean(1)
    hit = att.argmax(-1) == batch["copy_pos"]
    return float(hit[keep].float().mean())
