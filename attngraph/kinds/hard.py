"""The ``policy`` kind: hard attention, a sampled choice among items or of a location.

Lowered (with the REINFORCE loss) in :mod:`attngraph.lower.rules.hard`.
"""

from __future__ import annotations

from typing import Literal

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, kind
from attngraph.spec.models import NodeModel, Ref, Scale


class PolicySpec(NodeModel):
    """Hard attention: samples items (categorical) or a location (gaussian)."""

    kind: Literal["policy"]
    scores: Ref | None = None
    """categorical: the scores over items (``[N]`` or ``[M, N]``) to sample from."""
    mean: Ref | None = None
    """gaussian: the mean ``[k]`` to sample around (e.g. a location ``[2]`` from a linear with act
    tanh)."""
    dist: Literal["categorical", "gaussian"] = "categorical"
    """``categorical`` samples an item (needs ``scores``); ``gaussian`` samples a vector (needs
    ``mean``)."""
    std: Scale = 0.1
    """gaussian: the standard deviation of the sample."""
    estimator: Literal["reinforce", "straight_through", "gumbel"] = "reinforce"
    """How gradients pass the sample: REINFORCE (score function), straight-through, or
    Gumbel-softmax (categorical only)."""
    baseline: Ref | bool = True
    """REINFORCE baseline: ``true`` a learned constant, ``false`` none, or a reference to a vector
    ``[d]`` for a learned linear function of it."""
    tau: Scale = 1.0
    """estimator gumbel: the Gumbel-softmax temperature."""


@kind("policy", PolicySpec, lowering="attngraph.lower.rules.hard:PolicyNode", role="weights",
      emit="attngraph.lower.export.emit.sampling:emit_policy",
      style=Style("#f4cccc", "doubleoctagon"), pure=False, samples=True)
def policy_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Ports: sample (default), log_prob, entropy, baseline."""
    s = ctx.spec
    if s.dist == "categorical":
        if not ctx.has("scores") or ctx.has("mean"):
            ctx.fail("a categorical policy samples from 'scores' (and takes no 'mean')",
                     hint="give scores: <scorer>, or use dist: gaussian with mean: <node>")
        t = ctx.t("scores")
        if t.rank == 0 or t.dtype != "float":
            ctx.fail(f"a categorical policy needs float scores over items, but "
                     f"'{ctx.edge('scores').ref}' is {t}", "scores",
                     "give it the scores of a scorer ([N] or [M, N])")
        sample = TensorType(t.dims, heads=t.heads, simplex=True, weights=True)
        lp = TensorType(t.dims[:-1], heads=t.heads)
    else:
        if not ctx.has("mean") or ctx.has("scores"):
            ctx.fail("a gaussian policy samples around 'mean' (and takes no 'scores')",
                     hint="give mean: <node> (e.g. a location predicted by a linear)")
        if s.estimator == "gumbel":
            ctx.fail("estimator 'gumbel' relaxes categorical choices, not gaussian ones",
                     hint="use reinforce for gaussian locations", field="estimator")
        t = ctx.t("mean")
        if t.rank != 1 or t.dtype != "float" or t.heads:
            ctx.fail(f"a gaussian policy's mean is a float vector [k], got {t}", "mean",
                     "predict it with {kind: linear, from: <state>, out: 2, act: tanh}")
        sample = TensorType(t.dims)
        lp = TensorType(())
    if isinstance(s.baseline, bool):
        ctx.params += 1 if s.baseline else 0
    else:
        b = ctx.t("baseline")
        if b.rank != 1 or b.dtype != "float" or b.heads:
            ctx.fail(f"the baseline reads a float vector [d], got {b}", "baseline",
                     "give it a state vector, e.g. the rnn's state, or write baseline: true")
        ctx.params += ctx.features("baseline") + 1
    return {"": sample, "sample": sample, "log_prob": lp, "entropy": lp,
            "baseline": TensorType(())}
