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

from attngraph.lower.module import LowerCtx, Runtime

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
        theta = image.new_zeros(b, 2, 3)  # (B, 2, 3): maps output coords to image coords
        theta[:, 0, 0] = side / w
        theta[:, 1, 1] = side / h
        theta = theta + torch.cat([image.new_zeros(b, 2, 2), loc.unsqueeze(-1)], dim=-1)
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
