"""The ``glimpse`` kind: multi-resolution patches of an image at a location.

As in the recurrent attention model (Mnih et al., 2014, "Recurrent Models of
Visual Attention"): around a location ``l`` the glimpse sensor takes ``scales``
square patches; the first is ``size × size`` pixels, each next one has twice the
side (four times the area), and every patch is averaged down to ``size × size``.
The patches are stacked and flattened.

Coordinates follow :func:`torch.nn.functional.grid_sample` with
``align_corners=False``: ``loc = (x, y)`` in ``[-1, 1]``, ``x`` along the width,
``(-1, -1)`` the top-left corner of the image and ``(0, 0)`` its centre. Pixels
outside the image read as zero. The sensor is differentiable with respect to the
image and to the location (bilinear sampling).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Glimpse", "GlimpseNode", "glimpse"]


def glimpse(image: Tensor, loc: Tensor, size: int, scales: int = 1) -> Tensor:
    """Extract ``scales`` patches around ``loc`` and flatten them.

    Parameters
    ----------
    image : Tensor
        ``[B, C, H, W]``.
    loc : Tensor
        ``[B, 2]``: ``(x, y)`` centres in ``[-1, 1]`` image coordinates.
    size : int
        Side in pixels of the smallest patch, and of every output patch.
    scales : int
        Number of patches; patch ``i`` has side ``size · 2**i`` pixels.

    Returns
    -------
    Tensor
        ``[B, scales · C · size · size]``, ordered ``(scale, channel, row, column)``.

    Examples
    --------
    >>> import torch
    >>> img = torch.arange(16.0).reshape(1, 1, 4, 4)
    >>> glimpse(img, torch.zeros(1, 2), size=2).tolist()
    [[5.0, 6.0, 9.0, 10.0]]
    """
    b, c, h, w = image.shape
    loc = loc.to(image.dtype)
    patches = []
    for i in range(scales):
        factor = 2 ** i
        side = size * factor
        # (B, 2, 3): maps output coords to image coords, [[side/W, 0, x], [0, side/H, y]]
        scale = image.new_tensor([[side / w, 0.0], [0.0, side / h]]).expand(b, 2, 2)
        theta = torch.cat([scale, loc.unsqueeze(-1)], dim=-1)
        grid = F.affine_grid(theta, [b, c, side, side], align_corners=False)
        patch = F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros",
                              align_corners=False)  # (B, C, side, side)
        if factor > 1:
            patch = F.avg_pool2d(patch, factor)  # (B, C, size, size)
        patches.append(patch)
    return torch.stack(patches, dim=1).flatten(1)  # (B, scales*C*size*size)


class Glimpse(nn.Module):
    """The glimpse sensor as a module (no parameters); see :func:`glimpse`."""

    def __init__(self, size: int, scales: int = 1) -> None:
        super().__init__()
        self.size, self.scales = int(size), int(scales)

    def extra_repr(self) -> str:
        return f"size={self.size}, scales={self.scales}"

    def forward(self, image: Tensor, loc: Tensor) -> Tensor:
        """``image [B, C, H, W]``, ``loc [B, 2]`` -> ``[B, scales·C·size·size]``."""
        return glimpse(image, loc, self.size, self.scales)


class GlimpseNode(Glimpse):
    """A ``glimpse`` node: reads ``image`` ``[B, C, H, W]`` and ``loc`` ``[B, 2]``."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__(ctx.spec.size, ctx.spec.scales)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:  # type: ignore[override]
        return glimpse(x["image"], x["loc"], self.size, self.scales)  # (B, scales*C*size*size)


class Filterbank(NodeModule):
    """DRAW's read and write attention (Gregor et al. 2015, sections 3.2 and 3.3) on an
    image of B rows and A columns:

        (g̃x, g̃y, log σ², log δ̃, log γ) = params
        gX = (A + 1)/2 · (g̃x + 1),  gY = (B + 1)/2 · (g̃y + 1),  δ = (max(A, B) − 1)/(N − 1) · δ̃
        μ_X^i = gX + (i − N/2 − 0.5) δ,  μ_Y^j = gY + (j − N/2 − 0.5) δ,  i, j = 1 … N
        F_X[i, a] = exp(−(a − μ_X^i)² / 2σ²) / Z_X  (a = 1 … A, the paper's pixel numbers)
        read  = γ · F_Y x F_Xᵀ per channel          (with a canvas c, also γ · F_Y x̂ F_Xᵀ,
                                                     x̂ = x − σ(c), after x's channels)
        write = (1/γ) · F_Yᵀ w F_X per channel      (w: the N×N patch)

    Each row of F_X and F_Y is normalised over the pixels (Z + 1e-8 in the
    denominator, as common implementations do, so a filter far off the image is 0).
    """

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.n = int(ctx.spec.size)
        self.write = ctx.spec.patch is not None
        _, b, a = (int(x) for x in (ctx.node.types[""] if self.write else ctx.t("image")).dims)
        self.a, self.b = a, b

    def extra_repr(self) -> str:
        return f"{'write' if self.write else 'read'}, size={self.n}, image={self.b}x{self.a}"

    def _filters(self, g: Tensor, delta: Tensor, var: Tensor, pixels: int) -> Tensor:
        """(B, N, pixels) Gaussian filters around centres g + (i − N/2 − 0.5)·δ."""
        i = torch.arange(1, self.n + 1, device=g.device, dtype=g.dtype)
        mu = g[:, None] + (i - self.n / 2 - 0.5) * delta[:, None]  # (B, N)
        px = torch.arange(1, pixels + 1, device=g.device, dtype=g.dtype)
        f = torch.exp(-((px - mu[..., None]) ** 2) / (2 * var[:, None, None]))
        return f / (f.sum(-1, keepdim=True) + 1e-8)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        p = x["params"]  # (B, 5)
        gx = (self.a + 1) / 2 * (p[:, 0] + 1)
        gy = (self.b + 1) / 2 * (p[:, 1] + 1)
        var = torch.exp(p[:, 2])
        delta = (max(self.a, self.b) - 1) / (self.n - 1) * torch.exp(p[:, 3])
        gamma = torch.exp(p[:, 4])
        fx = self._filters(gx, delta, var, self.a)  # (B, N, A)
        fy = self._filters(gy, delta, var, self.b)  # (B, N, B_img)
        if self.write:
            w = x["patch"].reshape(p.shape[0], -1, self.n, self.n)  # (B, C, N, N)
            out = fy[:, None].transpose(-1, -2) @ w @ fx[:, None]  # (B, C, B_img, A)
            out = out / gamma[:, None, None, None]
        else:
            img = x["image"]  # (B, C, B_img, A)
            if "canvas" in x:  # DRAW's error image, read with the same filters
                img = torch.cat([img, img - torch.sigmoid(x["canvas"])], 1)  # (B, 2C, ...)
            out = fy[:, None] @ img @ fx[:, None].transpose(-1, -2)  # (B, C, N, N)
            out = gamma[:, None, None, None] * out
        return {"": out, "flat": out.flatten(1), "fx": fx, "fy": fy, "gamma": gamma[:, None]}
