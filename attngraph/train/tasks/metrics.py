"""The built-in metrics, registered in :data:`~attngraph.train.tasks.base.METRICS`.

A metric is ``fn(outputs, batch, task) -> float | None``: a figure of the
model's ``outputs`` on a ``batch`` of ``task``, or None when it does not apply
(the spec lacks the output it reads). ``accuracy`` (alias ``token_accuracy``)
and ``sequence_accuracy`` read ``logits``; ``attention_peak`` and ``alignment``
read attention weights. The image task's own metrics (``glimpse_hit``,
``tile_peak``) live beside it in :mod:`attngraph.train.tasks.images`.
:func:`attngraph.train.tasks.lookup.compute_metrics` evaluates a task's metrics.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import IGNORE, METRICS, Task, register_metric

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["accuracy", "sequence_accuracy", "attention_peak", "alignment"]


def _pred_target(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                 task: Task) -> tuple[Tensor, Tensor] | None:
    logits = outputs.get("logits")
    if logits is None:
        return None
    target = batch[task.target]
    if logits.dim() == target.dim() + 2:  # a single query axis: [B, 1, C]
        logits = logits.reshape(*target.shape, logits.shape[-1])
    return logits.argmax(-1), target


@register_metric("accuracy")
def accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any], task: Task) -> float | None:
    """Fraction of scored targets (not :data:`IGNORE`) predicted right."""
    pt = _pred_target(outputs, batch, task)
    if pt is None:
        return None
    pred, target = pt
    keep = target != IGNORE
    return float((pred[keep] == target[keep]).float().mean())


METRICS.register("token_accuracy", accuracy)


@register_metric("sequence_accuracy")
def sequence_accuracy(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                      task: Task) -> float | None:
    """Fraction of examples with every scored target right."""
    pt = _pred_target(outputs, batch, task)
    if pt is None:
        return None
    pred, target = pt
    ok = (pred == target) | (target == IGNORE)
    return float(ok.reshape(ok.shape[0], -1).all(-1).float().mean())


@register_metric("attention_peak")
def attention_peak(outputs: Mapping[str, Any], batch: Mapping[str, Any],
                   task: Task) -> float | None:
    """Fraction of examples whose attention weights peak on the needle position.

    Reads the spec's ``pooling`` output when it has one (the attention that picks
    items for the class), else ``attention``; heads and queries are averaged.
    """
    att = outputs.get("pooling", outputs.get("attention"))
    pos = batch.get("needle_pos")
    if att is None or pos is None:
        return None
    att = att.reshape(att.shape[0], -1, att.shape[-1]).mean(1)  # heads/queries averaged
    return float((att.argmax(-1) == pos).float().mean())


@register_metric("alignment")
def alignment(outputs: Mapping[str, Any], batch: Mapping[str, Any],
              task: Task) -> float | None:
    """Fraction of target steps whose attention peaks on the source token they copy.

    Reads ``attention`` [T, N] (heads averaged) and the task's ``source_pos``.
    """
    att = outputs.get("attention")
    pos = batch.get("source_pos")
    if att is None or pos is None or att.shape[-2:] != (pos.shape[-1], att.shape[-1]):
        return None
    if att.dim() == 4:  # (B, h, T, N)
        att = att.mean(1)
    return float((att.argmax(-1) == pos).float().mean())
