"""Graves' soft window (Graves 2013, section 5.1): the ``window`` kind.

A mixture of K Gaussians over a string's character positions, placed by a
controller state; its centres only move forward from step to step, so a
handwriting model reads its text from left to right at its own pace.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.runtime.module import LowerCtx, Runtime

__all__ = ["soft_window", "Window", "WindowNode"]


def soft_window(items: Tensor, alpha: Tensor, beta: Tensor, kappa: Tensor,
                mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Graves' window from explicit mixture parameters.

    ``φ(u) = Σ_k α_k exp(−β_k (κ_k − u)²)`` at the positions ``u = 1 … U``, and
    the window ``w = Σ_u φ(u) c_u``.

    Parameters
    ----------
    items : Tensor
        ``[B, U, d]``: the characters ``c_u``.
    alpha, beta, kappa : Tensor
        ``[B, K]`` each: the components' weights, widths (> 0) and centres.
    mask : Tensor, optional
        ``[B, U]`` padding of the characters (True = real): padded ones get φ = 0.

    Returns
    -------
    tuple of Tensor
        The window ``[B, d]`` and the weights φ ``[B, U]``.

    Examples
    --------
    >>> c = torch.eye(3).expand(1, 3, 3)  # three one-hot characters
    >>> one = torch.ones(1, 1)
    >>> w, phi = soft_window(c, one, 100 * one, 2 * one)  # a narrow bump on u = 2
    >>> [round(x, 4) for x in phi[0].tolist()], torch.equal(w, phi)
    ([0.0, 1.0, 0.0], True)
    """
    u = torch.arange(1, items.shape[1] + 1, device=items.device, dtype=items.dtype)  # (U,)
    dist = (kappa.unsqueeze(-1) - u) ** 2  # (B, K, U)
    phi = (alpha.unsqueeze(-1) * torch.exp(-beta.unsqueeze(-1) * dist)).sum(1)  # (B, U)
    if mask is not None:
        phi = phi * mask.to(phi.dtype)
    w = (phi.unsqueeze(1) @ items).squeeze(1)  # (B, d)
    return w, phi


class Window(nn.Module):
    """Graves' soft window whose mixture comes from a controller state.

    A linear map of the control ``[B, h]`` gives ``(α̂, β̂, κ̂)`` ``[B, 3K]``;
    ``α = exp(α̂)``, ``β = exp(β̂)``, ``κ = κ_prev + exp(κ̂)``; then
    :func:`soft_window`.
    """

    def __init__(self, control_dim: int, components: int = 1) -> None:
        super().__init__()
        self.components = int(components)
        self.proj = nn.Linear(int(control_dim), 3 * self.components)

    def extra_repr(self) -> str:
        return f"components={self.components}"

    def forward(self, items: Tensor, control: Tensor, prev: Tensor,
                mask: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """``items [B, U, d]``, ``control [B, h]``, ``prev [B, K]`` -> the window ``[B, d]``,
        φ ``[B, U]`` and the new centres κ ``[B, K]``."""
        p = torch.exp(self.proj(control))  # (B, 3K)
        alpha, beta, step = p.split(self.components, -1)  # (B, K) each
        kappa = prev + step
        w, phi = soft_window(items, alpha, beta, kappa, mask)
        return w, phi, kappa


class WindowNode(Window):
    """A ``window`` node: its window, port ``weights`` (φ) and port ``centres`` (κ)."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__(int(ctx.t("control").dims[0]), ctx.spec.components)
        self.itype = ctx.t("items")

    def forward(self, x: dict[str, Tensor], rt: Runtime  # type: ignore[override]
                ) -> dict[str, Tensor]:
        m = padding_mask(rt, self.itype, axis=0)  # (B, U, 1): characters that are padding
        mask = None if m is None else m.squeeze(-1)  # (B, U)
        w, phi, kappa = super().forward(x["items"], x["control"], x["prev"], mask)
        return {"": w, "weights": phi, "centres": kappa}
