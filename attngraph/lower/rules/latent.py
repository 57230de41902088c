"""The ``latent`` kind: a reparameterised Gaussian sample and its KL divergence.

Q(z | h) = N(μ, diag σ²) with μ = W_μ h + b_μ and log σ = W_σ h + b_σ; the sample
is z = μ + σ ⊙ ε with ε ~ N(0, I) drawn from torch's global CPU generator in
float32, then moved to the model's device and dtype, so that one seed gives the
same draws everywhere (the trainer seeds it, :func:`attngraph.train.engine.step.seeded`).
The node samples in eval mode too: the KL and the reconstruction of one sample
are an unbiased estimate of the negative ELBO, which the mean alone is not (the
trainer's evaluation runs on a fixed seed, so the figure is the same at every
evaluation).

Its KL from the prior N(0, I), summed over the code,

    KL = ½ Σ_k (μ_k² + σ_k² − 1) − Σ_k log σ_k,

is the ``kl`` port ``[B]`` and is recorded in the model's ``aux`` as
``"<node id>.loss"`` (``[B, T]`` in a loop of T steps), which training adds to
the loss (:func:`attngraph.train.tasks.objectives.model_terms`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Latent", "gaussian_kl"]


def gaussian_kl(mean: Tensor, log_std: Tensor) -> Tensor:
    """KL(N(μ, σ²) ‖ N(0, 1)) summed over the last axis.

    Examples
    --------
    >>> import torch
    >>> float(gaussian_kl(torch.zeros(1, 3), torch.zeros(1, 3))[0])
    0.0
    >>> float(gaussian_kl(torch.ones(1, 2), torch.zeros(1, 2))[0])  # ½ Σ μ²
    1.0
    """
    return (0.5 * (mean**2 + torch.exp(2 * log_std) - 1) - log_std).sum(-1)


class Latent(NodeModule):
    """A ``latent`` node: ``from`` ``[B, d]`` -> z ``[B, k]`` and its ports (see module doc)."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        d, k = ctx.features("from"), int(ctx.spec.size)
        self.mean = nn.Linear(d, k)
        self.log_std = nn.Linear(d, k)
        self.key = f"{ctx.node.id}.loss"

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        h = x["from"]  # (B, d)
        mean, log_std = self.mean(h), self.log_std(h)  # (B, k) each
        # ε drawn in float32 on the CPU: one seed gives the same draws in any dtype and on
        # any device (and the trainer's seeded CPU generator covers them)
        eps = torch.randn(mean.shape, dtype=torch.float32).to(mean)  # (B, k)
        z = mean + torch.exp(log_std) * eps  # (B, k)
        kl = gaussian_kl(mean, log_std)  # (B,)
        rt.steps.setdefault(self.key, []).append(kl)
        return {"": z, "mean": mean, "log_std": log_std, "kl": kl}
