"""Hard attention: the ``policy`` kind as a PyTorch module, and the REINFORCE loss.

A policy picks items (``dist: categorical``, from scores over items) or a location
(``dist: gaussian``, around a predicted ``mean``). In training it samples; in eval
it is deterministic (argmax / the mean). It returns four tensors, one per port:

``sample``
    categorical: one-hot weights over the items ``[B, (h,) M?, N]``, usable as a
    readout's weights (hard attention); gaussian: the location ``[B, k]``.
``log_prob``
    log-probability of the sample, ``[B, (h,) M?]`` (categorical) or ``[B]``
    (gaussian, summed over the ``k`` coordinates).
``entropy``
    entropy of the distribution, same shape as ``log_prob``.
``baseline``
    a learned baseline ``[B]``: a scalar parameter (``baseline: true``), a linear
    map of a vector (``baseline: <ref>``; its input is detached so that fitting the
    baseline does not train the network that made the vector), or zeros (``false``).

Estimators decide how gradients cross the sample:

``reinforce``
    the sample carries no gradient; train with :func:`reinforce_loss`.
``straight_through``
    categorical: forward one-hot, backward the gradient of the softmax;
    gaussian: the reparameterised sample ``mean + std·ε``.
``gumbel``
    Gumbel-softmax with temperature ``tau``: one-hot forward, gradient of the
    relaxed sample backward (categorical only).

A user's training loop adds one line for the policy::

    out = model(image=x)
    loss = F.cross_entropy(out["logits"], y)
    reward = (out["logits"].argmax(-1) == y).float()
    loss = loss + reinforce_loss(out["log_prob"], reward, out["baseline"])

or, without declaring those outputs, ``loss + model_reinforce_loss(model, reward)``,
which sums the term over every ``reinforce`` policy of the last forward.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.runtime.module import LowerCtx, Runtime
from attngraph.spec.models import SCALE_RANGE

__all__ = ["Policy", "PolicyNode", "reinforce_loss", "model_reinforce_loss", "masked_logits"]

#: The smallest std and tau used (the lower bound of a spec's scales).
_MIN_SCALE = SCALE_RANGE[0]

Dist = Literal["categorical", "gaussian"]
Estimator = Literal["reinforce", "straight_through", "gumbel"]


def masked_logits(scores: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Scores with masked items at -inf, and which rows keep at least one item.

    Parameters
    ----------
    scores : Tensor
        ``[B, ..., N]`` unnormalised scores.
    mask : Tensor or None
        bool, broadcastable to ``scores``; True marks items that may be chosen.

    Returns
    -------
    logits, alive : Tensor, Tensor
        ``logits`` has ``-inf`` at masked items and zeros in rows where every item
        is masked (so no NaN appears); ``alive`` ``[B, ...]`` is False for those rows.
    """
    if mask is None:
        return scores, torch.ones(scores.shape[:-1], dtype=torch.bool, device=scores.device)
    mask = mask.to(torch.bool).expand_as(scores)
    alive = mask.any(-1)
    keep = mask | ~alive.unsqueeze(-1)  # fully masked rows: keep all, zeroed below
    logits = scores.masked_fill(~keep, float("-inf"))
    logits = torch.where(alive.unsqueeze(-1), logits, torch.zeros_like(scores))
    return logits, alive


def _sum_trailing(x: Tensor, rank: int) -> Tensor:
    """Sum ``x`` over every axis after the first ``rank`` ones."""
    return x.flatten(rank).sum(-1) if x.dim() > rank else x


def reinforce_loss(log_prob: Tensor, reward: Tensor, baseline: Tensor | float = 0.0,
                   *, baseline_weight: float = 1.0) -> Tensor:
    """The variance-reduced REINFORCE loss with a learned baseline.

    ``loss = mean_B[ -Σ_t (r - b_t).detach() · log π(a_t) ] + w · mean(b - r)²``

    Minimising it raises the log-probability of samples whose reward beats the
    baseline, and fits the baseline to the reward; the advantage is detached so the
    baseline gets gradient only from its own squared error.

    Parameters
    ----------
    log_prob : Tensor
        ``[B]`` (one decision) or ``[B, T, ...]`` (decisions per step, stacked by a
        loop, batch first). Axes after those of ``baseline`` are summed (e.g. the
        queries of a categorical policy).
    reward : Tensor
        ``[B]``: one reward per sequence (no gradient flows into it).
    baseline : Tensor or float
        ``[B]`` or ``[B, T]`` (per step), or a constant; a policy's ``baseline`` port.
    baseline_weight : float
        Weight ``w`` of the baseline's squared error.

    Returns
    -------
    Tensor
        A scalar to add to the task loss.

    Examples
    --------
    >>> import torch
    >>> lp = torch.tensor([-1.0, -2.0], requires_grad=True)
    >>> loss = reinforce_loss(lp, torch.tensor([1.0, 0.0]), torch.zeros(2))
    >>> loss.backward(); lp.grad.tolist()
    [-0.5, -0.0]
    """
    if log_prob.dim() == 0:
        log_prob = log_prob.unsqueeze(0)
    batch = log_prob.shape[0]
    reward = reward.detach().to(log_prob.dtype).reshape(batch)
    b = torch.as_tensor(baseline, dtype=log_prob.dtype, device=log_prob.device)
    if b.dim() == 0:
        b = b.expand(batch)
    # log_prob [B, T, extra...] -> [B, T] (or [B]) to meet the baseline's axes
    lp = _sum_trailing(log_prob, max(b.dim(), 1))
    if lp.dim() > b.dim():  # one baseline per sequence, decisions per step
        b = b.reshape(batch, *([1] * (lp.dim() - 1))).expand_as(lp)
    r = reward.reshape(batch, *([1] * (lp.dim() - 1))).expand_as(lp)
    advantage = (r - b).detach()
    policy_term = -(advantage * lp).reshape(batch, -1).sum(-1).mean()
    if not b.requires_grad:
        return policy_term
    return policy_term + baseline_weight * F.mse_loss(b, r)


class Policy(nn.Module):
    """A stochastic choice: categorical over items, or gaussian around a location.

    Parameters
    ----------
    dist : {"categorical", "gaussian"}
        What is chosen.
    estimator : {"reinforce", "straight_through", "gumbel"}
        How gradients cross the sample (see the module docstring).
    std : float
        Standard deviation of the gaussian policy; below 0.001 (the spec's lower
        bound) it is taken as 0.001, so that log-probabilities stay finite.
    tau : float
        Temperature of the Gumbel-softmax relaxation; below 0.001 it is taken as
        0.001, so that the relaxed sample stays finite.
    baseline : bool or int
        ``True``: a learned scalar; an int ``d``: a linear ``d -> 1`` on the vector
        passed as ``baseline_input``; ``False``: zeros.

    Notes
    -----
    ``forward(scores=None, mean=None, mask=None, baseline_input=None)`` returns a dict
    with keys ``sample``, ``log_prob``, ``entropy``, ``baseline``.
    """

    def __init__(self, dist: Dist = "categorical", estimator: Estimator = "reinforce", *,
                 std: float = 0.1, tau: float = 1.0, baseline: bool | int = True) -> None:
        super().__init__()
        self.dist, self.estimator = dist, estimator
        self.std, self.tau = max(float(std), _MIN_SCALE), max(float(tau), _MIN_SCALE)
        self.baseline: nn.Parameter | None = None
        self.baseline_proj: nn.Linear | None = None
        #: whether the categorical policy computes its ``entropy`` (a lowered node
        #: whose entropy nothing reads does not)
        self.entropy = True
        if baseline is True:
            self.baseline = nn.Parameter(torch.zeros(()))
        elif baseline is not False and int(baseline) > 0:
            self.baseline_proj = nn.Linear(int(baseline), 1)

    def extra_repr(self) -> str:
        return f"dist={self.dist}, estimator={self.estimator}, std={self.std}, tau={self.tau}"

    def forward(self, scores: Tensor | None = None, mean: Tensor | None = None,
                mask: Tensor | None = None,
                baseline_input: Tensor | None = None) -> dict[str, Tensor]:
        """Sample (train) or decide (eval); see the class docstring for the ports."""
        return self.decide(scores, mean, mask, baseline_input)

    def decide(self, scores: Tensor | None = None, mean: Tensor | None = None,
               mask: Tensor | None = None,
               baseline_input: Tensor | None = None) -> dict[str, Tensor]:
        """The body of :meth:`forward` (lowered nodes call it from their own forward)."""
        if self.dist == "categorical":
            if scores is None:
                msg = "a categorical policy needs scores"
                raise LoweringError(msg)
            out = self._categorical(scores, mask)
            batch_ref = scores
        else:
            if mean is None:
                msg = "a gaussian policy needs a mean"
                raise LoweringError(msg)
            out = self._gaussian(mean)
            batch_ref = mean
        out["baseline"] = self._baseline(batch_ref, baseline_input)
        return out

    def _baseline(self, ref: Tensor, x: Tensor | None) -> Tensor:
        batch = ref.shape[0]
        if self.baseline_proj is not None:
            if x is None:
                msg = "this policy's baseline reads a vector: pass baseline_input"
                raise LoweringError(msg)
            return self.baseline_proj(x.detach()).squeeze(-1)  # (B,)
        if self.baseline is not None:
            return self.baseline.expand(batch)  # (B,)
        return ref.new_zeros(batch)

    def _categorical(self, scores: Tensor, mask: Tensor | None) -> dict[str, Tensor]:
        if mask is None:  # every row has items to choose from
            logits, alive = scores, None
        else:
            logits, alive = masked_logits(scores, mask)  # (B, ..., N), (B, ...)
        logp = torch.log_softmax(logits, -1)
        probs = logp.exp()
        if self.training and self.estimator == "gumbel":
            # an exponential sample of exactly 0 would give an infinite Gumbel noise
            expo = torch.empty_like(logits).exponential_()
            gumbel = -expo.clamp_min(torch.finfo(expo.dtype).tiny).log()
            soft = torch.softmax((logits + gumbel) / self.tau, -1)
            index = soft.argmax(-1)
        elif self.training:
            soft = probs
            index = torch.multinomial(probs.reshape(-1, probs.shape[-1]).detach(), 1)
            index = index.reshape(probs.shape[:-1])
        else:
            soft = probs
            index = logits.argmax(-1)
        hard = F.one_hot(index, scores.shape[-1]).to(scores.dtype)
        if self.estimator != "reinforce":
            hard = hard - soft.detach() + soft  # forward one-hot, backward d soft
        picked = logp.gather(-1, index.unsqueeze(-1)).squeeze(-1)
        out = {"sample": hard, "log_prob": picked}
        if alive is not None:
            # a row with nothing to choose attends to nothing, with no log-prob
            out["sample"] = hard * alive.unsqueeze(-1).to(scores.dtype)
            out["log_prob"] = torch.where(alive, picked, torch.zeros_like(picked))
        if self.entropy:
            plogp = probs * logp.masked_fill(probs == 0, 0.0)  # 0·log 0 = 0, finite grads
            entropy = -plogp.sum(-1)
            out["entropy"] = entropy if alive is None else \
                torch.where(alive, entropy, torch.zeros_like(entropy))
        return out

    def _gaussian(self, mean: Tensor) -> dict[str, Tensor]:
        if self.training:
            noise = torch.randn_like(mean) * self.std
            sample = mean + noise if self.estimator == "straight_through" \
                else (mean + noise).detach()
        else:
            sample = mean.detach() if self.estimator == "reinforce" else mean
        var = self.std ** 2
        logp = (-((sample.detach() - mean) ** 2) / (2 * var)
                - math.log(self.std) - 0.5 * math.log(2 * math.pi))
        ent = 0.5 + 0.5 * math.log(2 * math.pi) + math.log(self.std)
        entropy = mean.new_full(mean.shape[:1], ent * mean.shape[-1])
        return {"sample": sample, "log_prob": logp.sum(-1), "entropy": entropy}


# --- lowering rule ---------------------------------------------------------------------


def _aux_append(rt: Runtime, key: str, value: Tensor) -> None:
    """Record ``value [B, ...]`` under ``key``; repeated calls (loop steps) are stacked
    on axis 1 when the forward ends (:meth:`Runtime.finish`): ``[B, T, ...]``."""
    rt.steps.setdefault(key, []).append(value)


class PolicyNode(Policy):
    """A ``policy`` node: :class:`Policy` reading its inputs by role.

    The padding mask of the scores' items axis (from the inputs) is applied, so a
    padded item is never chosen. A ``reinforce`` policy also records its
    ``log_prob`` and ``baseline`` in ``rt.aux`` as ``"<id>.log_prob"`` and
    ``"<id>.baseline"``, one column per call (per loop step): ``[B, T, ...]`` and
    ``[B, T]``; :func:`model_reinforce_loss` reads them back.
    """

    def __init__(self, ctx: LowerCtx) -> None:
        s = ctx.spec
        base: bool | int = s.baseline if isinstance(s.baseline, bool) \
            else int(ctx.t("baseline").dims[0])
        super().__init__(s.dist, s.estimator, std=s.std, tau=s.tau, baseline=base)
        self.node_id = ctx.node.id
        self.scores_type = ctx.t("scores") if ctx.has("scores") else None
        self.entropy = ctx.reads("entropy")

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:  # type: ignore[override]
        mask = padding_mask(rt, self.scores_type) if self.scores_type is not None else None
        out = self.decide(x.get("scores"), x.get("mean"), mask, x.get("baseline"))
        if self.estimator == "reinforce":
            _aux_append(rt, f"{self.node_id}.log_prob", out["log_prob"])
            _aux_append(rt, f"{self.node_id}.baseline", out["baseline"])
        return {"": out["sample"], **out}


def model_reinforce_loss(model: nn.Module, reward: Tensor, *,
                         baseline_weight: float = 1.0) -> Tensor:
    """Sum of :func:`reinforce_loss` over every ``reinforce`` policy of the last forward.

    Parameters
    ----------
    model : nn.Module
        A compiled model (:func:`attngraph.compile`) after a forward in training
        mode; its ``aux`` holds each policy's log-probs and baselines, per step.
    reward : Tensor
        ``[B]`` reward of each sequence.
    baseline_weight : float
        Weight of each baseline's squared error.

    Returns
    -------
    Tensor
        A scalar; zero when the model has no ``reinforce`` policy.
    """
    aux: dict[str, Tensor] = getattr(model, "aux", {})
    total = reward.new_zeros(())
    for key in sorted(aux):
        if key.endswith(".log_prob"):
            nid = key[: -len(".log_prob")]
            total = total + reinforce_loss(aux[key], reward, aux[f"{nid}.baseline"],
                                           baseline_weight=baseline_weight)
    return total
