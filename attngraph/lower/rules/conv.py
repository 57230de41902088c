"""Lowerings of :mod:`attngraph.kinds.conv`: convolutions and items back to an image."""

from __future__ import annotations

from torch import Tensor, nn

from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Conv", "ToImage"]


class Conv(NodeModule):
    """``nn.Conv1d`` over items ('same' padding; padded items read as zeros, their
    outputs zero) or ``nn.Conv2d`` over an image."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        t = ctx.t("from")
        self.t = t
        k = int(s.kernel)
        if t.rank == 3:
            pad = k // 2 if s.padding is None else int(s.padding)
            self.conv: nn.Module = nn.Conv2d(int(t.dims[0]), int(s.out), k, stride=int(s.stride),
                                             padding=pad, bias=s.bias)
        else:
            c = 1 if t.rank == 1 else int(t.dims[-1])
            self.conv = nn.Conv1d(c, int(s.out), k, padding=k // 2, bias=s.bias)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]
        if self.t.rank == 3:
            return self.conv(v)  # (B, out, H', W')
        pad = padding_mask(rt, self.t.with_dims(self.t.dims[0]))  # (B, N)
        if pad is not None:
            v = v * (pad if self.t.rank == 1 else pad.unsqueeze(-1)).to(v.dtype)
        v = v.unsqueeze(1) if self.t.rank == 1 else v.transpose(1, 2)  # (B, C, N)
        y = self.conv(v).transpose(1, 2)  # (B, N, out)
        if pad is not None:
            y = y * pad.unsqueeze(-1).to(y.dtype)
        return y


class ToImage(NodeModule):
    """(B, H·W, C) -> (B, C, H, W), items row by row."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.hw = (int(ctx.spec.height), int(ctx.spec.width))

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]
        return v.transpose(1, 2).reshape(v.shape[0], v.shape[2], *self.hw)
