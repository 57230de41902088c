"""The ``latent`` kind: a sampled Gaussian code with its KL divergence, as in a VAE
or DRAW (Gregor et al. 2015, section 2).

From a state ``h``, two linear maps give the mean μ and the log standard deviation
log σ of Q(z | h) = N(μ, σ²); the output is a sample z = μ + σ ⊙ ε, ε ~ N(0, I)
(the reparameterisation trick, so gradients reach μ and σ). The KL divergence of
Q from the prior N(0, I) is a port and a training term. Lowered in
:mod:`attngraph.lower.rules.latent`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import NodeModel, Ref, Size


class LatentSpec(NodeModel):
    """A reparameterised Gaussian sample z ~ N(μ(h), σ(h)²) whose KL from N(0, I) is trained."""

    kind: Literal["latent"]
    from_: Ref = Field(alias="from")
    """The state ``[d]`` the posterior is computed from (e.g. an encoder's state)."""
    size: Size
    """The code's size k: z, μ and log σ are ``[k]``; a size."""


def _latent_work(ctx: WorkCtx) -> Work:
    """Two maps d -> k, then the sample and the KL: a few operations per code value."""
    k = ctx.n(ctx.spec.size)
    return Work(ctx.node.params + 8 * k, inner=k)


@kind("latent", LatentSpec, lowering="attngraph.lower.rules.latent:Latent", role="support",
      emit="attngraph.lower.export.emit.sampling:emit_latent",
      style=Style("#d9d2e9", "ellipse"), work=_latent_work, pure=False)
def latent_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[d] -> z [k]; ports ``mean`` [k], ``log_std`` [k] and ``kl`` (a scalar per example)."""
    t = ctx.t("from")
    if t.rank != 1 or t.dtype != "float" or t.heads:
        ctx.fail(f"a latent is computed from a state vector [d], got {t}", "from",
                 "give it an encoder's state, e.g. an rnn's output for one step")
    d, k = ctx.features("from"), int(ctx.spec.size)
    ctx.params += 2 * (d * k + k)
    z = TensorType((k,))
    return {"": z, "mean": z, "log_std": z, "kl": TensorType(())}
