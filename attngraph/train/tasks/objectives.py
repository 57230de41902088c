"""What training minimises: the task's objective, plus the model's own terms.

A task names its objective (:attr:`~attngraph.train.tasks.base.Task.objective`),
one of :data:`OBJECTIVES`; the objective says which output of the spec it reads
and how that output is scored against the task's target:

``classify``
    cross-entropy of the output ``logits`` ``[..., C]`` against class ids over
    its leading axes; targets equal to :data:`~attngraph.train.tasks.base.IGNORE`
    are skipped. The reward of an example (for ``reinforce`` policies) is 1 when
    every scored prediction is right, else 0.
``regress``
    squared error of the output ``prediction`` against float targets of its
    shape, averaged over the targets that are not NaN (NaN marks padding). The
    reward is minus an example's mean squared error.
``bernoulli``
    binary cross-entropy of the output ``logits`` (one logit per value, e.g. per
    pixel) against targets in [0, 1], summed over an example's values and
    averaged over the batch: the negative log-likelihood of independent binary
    values, in nats per example. The reward is minus an example's
    negative log-likelihood.

Besides the objective, a model may add terms of its own: every entry of the
compiled model's ``aux`` (its last forward's extra tensors) whose key ends in
``.loss`` (``"<node id>.loss"``, e.g. a latent's KL divergence) is summed
over its steps, averaged over the batch and added (:func:`model_terms`).

Examples
--------
>>> import torch
>>> out = {"prediction": torch.tensor([[1.0, 2.0], [3.0, 0.0]])}
>>> target = torch.tensor([[1.0, 4.0], [3.0, float("nan")]])
>>> float(OBJECTIVES["regress"].loss(out, target))  # (0 + 4 + 0) / 3
1.3333333730697632
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attngraph.errors import TrainingError
from attngraph.registry import Registry
from attngraph.train.tasks.base import IGNORE

if TYPE_CHECKING:
    from torch import Tensor, nn

    from attngraph.ir.graph import Graph

__all__ = ["Objective", "OBJECTIVES", "model_terms"]


@dataclass(frozen=True)
class Objective:
    """One way to score a model's output against a task's target.

    Attributes
    ----------
    name : str
        Its name in :data:`OBJECTIVES` (a task's ``objective``).
    output : str
        The spec output it reads.
    loss_fn : callable
        ``(output, target) -> scalar loss``, given the output already fitted to
        the target's axes.
    reward_fn : callable
        ``(output, target) -> [B] reward`` for ``reinforce`` policies.
    hint : str
        What the output must be, for an error.
    classes : bool
        The output has one more axis than the target, last: a score per class.
    """

    name: str
    output: str
    loss_fn: Callable[[Tensor, Tensor], Tensor]
    reward_fn: Callable[[Tensor, Tensor], Tensor]
    hint: str
    classes: bool = False

    def fitted(self, outputs: Mapping[str, Tensor], target: Tensor,
               graph: Graph | None = None) -> Tensor:
        """The output this objective reads, checked against (and fitted to) ``target``.

        Raises
        ------
        TrainingError
            Located at the spec's ``outputs:`` when the output is missing, or at
            the output when its shape does not fit the target.
        """
        out = outputs.get(self.output)
        if out is None:
            raise self.missing(graph)
        extra = int(self.classes)
        if out.dim() == target.dim() + extra + 1 and out.shape[1] == 1:  # one query: [B, 1, ...]
            out = out.squeeze(1)
        if out.shape[: out.dim() - extra] != target.shape:
            msg = (f"output '{self.output}' has shape {tuple(out.shape)}, but the task's "
                   f"targets are {tuple(target.shape)}")
            loc = graph.output(self.output).loc if graph is not None else None
            raise TrainingError(msg, loc, self.hint)
        return out

    def loss(self, outputs: Mapping[str, Tensor], target: Tensor, *,
             graph: Graph | None = None) -> Tensor:
        """The mean loss (a scalar) of ``outputs`` on ``target``."""
        return self.loss_fn(self.fitted(outputs, target, graph), target)

    def reward(self, outputs: Mapping[str, Tensor], target: Tensor) -> Tensor:
        """Per-example reward ``[B]`` (higher is better)."""
        return self.reward_fn(self.fitted(outputs, target), target)

    def missing(self, graph: Graph | None) -> TrainingError:
        """The error for a spec that lacks this objective's output."""
        msg = (f"training on a '{self.name}' task needs the spec to declare an output "
               f"named '{self.output}'")
        loc = graph.where("outputs", key=True) if graph is not None else None
        return TrainingError(msg, loc, f"add outputs: {{{self.output}: <node>}}")


def _ce(logits: Tensor, target: Tensor) -> Tensor:
    import torch.nn.functional as F

    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=IGNORE)


def _all_right(logits: Tensor, target: Tensor) -> Tensor:
    ok = (logits.argmax(-1) == target) | (target == IGNORE)
    return ok.reshape(ok.shape[0], -1).all(-1).float()


def _per_example_mse(pred: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Summed squared error and count of scored values, per example."""
    keep = ~target.isnan()
    err = ((pred - target.nan_to_num()) ** 2 * keep).reshape(pred.shape[0], -1).sum(-1)
    return err, keep.reshape(pred.shape[0], -1).sum(-1)


def _mse(pred: Tensor, target: Tensor) -> Tensor:
    err, n = _per_example_mse(pred, target)
    return err.sum() / n.sum().clamp(min=1)


def _neg_mse(pred: Tensor, target: Tensor) -> Tensor:
    err, n = _per_example_mse(pred, target)
    return -(err / n.clamp(min=1))


def bernoulli_nll(logits: Tensor, target: Tensor) -> Tensor:
    """Per-example negative log-likelihood ``[B]`` of binary values in nats.

    >>> import math, torch
    >>> math.isclose(float(bernoulli_nll(torch.zeros(1, 4), torch.ones(1, 4))[0]), 4 * math.log(2),
    ...              rel_tol=1e-6)
    True
    """
    import torch.nn.functional as F

    nll = F.binary_cross_entropy_with_logits(logits, target.to(logits.dtype), reduction="none")
    return nll.reshape(nll.shape[0], -1).sum(-1)


#: name -> objective (a task's ``objective``)
OBJECTIVES: Registry[Objective] = Registry("objective")
OBJECTIVES.register("classify", Objective(
    "classify", "logits", _ce, _all_right,
    "logits must be [..., classes] over the targets' axes", classes=True))
OBJECTIVES.register("regress", Objective(
    "regress", "prediction", _mse, _neg_mse,
    "the prediction must have the targets' shape"))
OBJECTIVES.register("bernoulli", Objective(
    "bernoulli", "logits", lambda x, t: bernoulli_nll(x, t).mean(),
    lambda x, t: -bernoulli_nll(x, t), "logits must have the targets' shape (one per value)"))


def model_terms(model: nn.Module) -> Tensor | float:
    """The model's own loss terms of its last forward, each averaged over the batch.

    Every ``aux`` entry keyed ``"<node id>.loss"`` counts (e.g. a latent's KL):
    ``[B]``, or ``[B, T]`` when recorded once per loop step, summed over all
    but the batch axis, then averaged over the batch.

    Returns
    -------
    Tensor or float
        Their sum, or ``0.0`` when the model has none.
    """
    aux: dict[str, Tensor] = getattr(model, "aux", {})
    total: Tensor | float = 0.0
    for key in sorted(aux):
        if key.endswith(".loss"):
            a = aux[key].float()
            total = total + (a.reshape(a.shape[0], -1).sum(-1).mean() if a.dim() else a)
    return total

