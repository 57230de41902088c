"""Emit rules of the kinds that sample: ``latent`` (a reparameterised Gaussian,
:mod:`attngraph.lower.rules.latent`) and ``policy`` (hard attention,
:mod:`attngraph.lower.rules.hard`). The file draws what the compiled model draws: the same
torch calls on the same shapes in the same order, so one seed gives the same samples.
A ``reinforce`` policy's log-probabilities and baselines, and a latent's KL, are
recorded in ``self.aux`` as the compiled model records them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from attngraph.lower.rules.hard import masked_logits

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_latent", "emit_policy"]


def _linear(ctx: EmitCtx, child: str) -> str:
    lin = ctx.mod.get_submodule(child)
    d, k = int(lin.weight.shape[1]), int(lin.weight.shape[0])
    return ctx.module(child, ctor=f"{ctx.nn}.Linear({d}, {k}, bias={lin.bias is not None})")


def emit_latent(ctx: EmitCtx) -> bool:
    """z = μ + σ ε with ε ~ N(0, I) drawn in float32 on the CPU (the model's draws),
    and the KL from N(0, I), recorded in ``aux``."""
    h, t = ctx.x("from"), ctx.torch
    mean = ctx.out(f"{_linear(ctx, 'mean')}({h})", "mean")
    log_std = ctx.out(f"{_linear(ctx, 'log_std')}({h})", "log_std")
    eps = ctx.tmp(f"{ctx.node.id}_eps")
    ctx.line(f"{eps} = {t}.randn({mean}.shape, dtype={t}.float32).to({mean})"
             "  # ε ~ N(0, I), on the CPU")
    ctx.out(f"{mean} + {t}.exp({log_std}) * {eps}")
    kl = ctx.out(f"(0.5 * ({mean}**2 + {t}.exp(2 * {log_std}) - 1) - {log_std}).sum(-1)",
                 "kl", note="KL(Q ‖ N(0, I))")
    ctx.record("loss", kl)
    return True


def emit_policy(ctx: EmitCtx) -> bool:
    """Sample in training, decide in eval; the log-probability, entropy and baseline."""
    m = ctx.mod
    if m.dist == "categorical":
        if not ctx.has("scores"):
            return False
        ref = ctx.x("scores")
        _categorical(ctx, ref)
    else:
        if not ctx.has("mean"):
            return False
        ref = ctx.x("mean")
        _gaussian(ctx, ref)
    if m.baseline_proj is not None:
        base = f"{_linear(ctx, 'baseline_proj')}({ctx.x('baseline')}.detach()).squeeze(-1)"
    elif m.baseline is not None:
        base = f"{ctx.param('baseline')}.expand({ref}.shape[0])"
    else:
        base = f"{ref}.new_zeros({ref}.shape[0])"
    if not _keeps(ctx, "baseline"):
        return True
    base = ctx.out(base, "baseline")
    if m.estimator == "reinforce":
        ctx.record("log_prob", ctx.scope.vals[f"{ctx.node.id}.log_prob"])
        ctx.record("baseline", base)
    return True


def _categorical(ctx: EmitCtx, scores: str) -> None:
    """One-hot choice of an item: sampled (or Gumbel-softmax) in training, the argmax
    in eval; padded items are never chosen."""
    m, t, nid = ctx.mod, ctx.torch, ctx.node.id
    mask = ctx.padding(m.scores_type) if m.scores_type is not None else None
    logits, alive = ctx.tmp(f"{nid}_logits"), ctx.tmp(f"{nid}_alive")
    if mask is not None:
        ctx.line(f"{logits}, {alive} = {ctx.helper(masked_logits)}({scores}, {mask})")
    else:
        logits = scores
    logp, probs = ctx.tmp(f"{nid}_logp"), ctx.tmp(f"{nid}_probs")
    soft, index = ctx.tmp(f"{nid}_soft"), ctx.tmp(f"{nid}_index")
    ctx.line(f"{logp} = {t}.log_softmax({logits}, -1)")
    ctx.line(f"{probs} = {logp}.exp()")
    ctx.line("if self.training:")
    if m.estimator == "gumbel":
        g = ctx.tmp(f"{nid}_gumbel")
        ctx.line(f"    {g} = {t}.empty_like({logits}).exponential_()")
        ctx.line(f"    {g} = -{g}.clamp_min({t}.finfo({g}.dtype).tiny).log()  # Gumbel noise")
        ctx.line(f"    {soft} = {t}.softmax(({logits} + {g}) / {m.tau!r}, -1)")
        ctx.line(f"    {index} = {soft}.argmax(-1)")
    else:
        soft = probs
        ctx.line(f"    {index} = {probs}.reshape(-1, {probs}.shape[-1]).detach()")
        ctx.line(f"    {index} = {t}.multinomial({index}, 1).reshape({probs}.shape[:-1])")
    ctx.line("else:")
    if soft != probs:
        ctx.line(f"    {soft} = {probs}")
    ctx.line(f"    {index} = {logits}.argmax(-1)")
    hard = ctx.tmp(f"{nid}_hard") if mask is not None else ctx.w.value_var(ctx.scope, nid)
    ctx.line(f"{hard} = {ctx.F}.one_hot({index}, {scores}.shape[-1]).to({scores}.dtype)")
    if m.estimator != "reinforce":
        ctx.line(f"{hard} = {hard} - {soft}.detach() + {soft}  # forward one-hot, backward soft")
    picked = f"{logp}.gather(-1, {index}.unsqueeze(-1)).squeeze(-1)"
    if mask is None:
        ctx.alias("sample", hard)
        if _keeps(ctx, "log_prob"):
            ctx.out(picked, "log_prob")
    else:  # a row with nothing to choose attends to nothing, with no log-prob
        ctx.alias("sample", ctx.out(f"{hard} * {alive}.unsqueeze(-1).to({scores}.dtype)"))
        if _keeps(ctx, "log_prob"):
            p = ctx.tmp(f"{nid}_picked")
            ctx.line(f"{p} = {picked}")
            ctx.out(f"{t}.where({alive}, {p}, {t}.zeros_like({p}))", "log_prob")
    if m.entropy and ctx.reads("entropy"):
        e = f"-({probs} * {logp}.masked_fill({probs} == 0, 0.0)).sum(-1)"
        if mask is not None:
            ent = ctx.tmp(f"{nid}_ent")
            ctx.line(f"{ent} = {e}")
            e = f"{t}.where({alive}, {ent}, {t}.zeros_like({ent}))"
        ctx.out(e, "entropy")


def _gaussian(ctx: EmitCtx, mean: str) -> None:
    """A location around ``mean``: sampled with noise of std σ in training, the mean in
    eval; its log-density and the entropy."""
    m, t = ctx.mod, ctx.torch
    std, through = m.std, m.estimator == "straight_through"
    sample = ctx.w.value_var(ctx.scope, ctx.node.id)
    noisy = f"{mean} + {t}.randn_like({mean}) * {std!r}"
    ctx.line("if self.training:")
    ctx.line(f"    {sample} = {noisy}" if through else f"    {sample} = ({noisy}).detach()")
    ctx.line("else:")
    ctx.line(f"    {sample} = {mean}" if m.estimator != "reinforce" else
             f"    {sample} = {mean}.detach()")
    ctx.alias("sample", sample)
    if _keeps(ctx, "log_prob"):
        lp = ctx.tmp(f"{ctx.node.id}_logp")
        ctx.line(f"{lp} = -(({sample}.detach() - {mean}) ** 2) / {2 * std ** 2!r}")
        ctx.out(f"({lp}{_minus(math.log(std))}{_minus(0.5 * math.log(2 * math.pi))}).sum(-1)",
                "log_prob")
    if ctx.reads("entropy"):
        ent = 0.5 + 0.5 * math.log(2 * math.pi) + math.log(std)
        ctx.out(f"{mean}.new_full({mean}.shape[:1], {ent!r} * {mean}.shape[-1])", "entropy")


def _minus(c: float) -> str:
    """`` - c`` (`` + -c`` when c < 0: the same number)."""
    return f" - {c!r}" if c >= 0 else f" + {-c!r}"


def _keeps(ctx: EmitCtx, port: str) -> bool:
    """Whether port ``port`` is read, or recorded (a ``reinforce`` policy's)."""
    return ctx.reads(port) or ctx.mod.estimator == "reinforce"
