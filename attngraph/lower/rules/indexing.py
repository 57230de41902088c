"""Lowerings of :mod:`attngraph.kinds.indexing`: gather and one-hot."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Gather", "Onehot"]


class Gather(NodeModule):
    """(B, N, d) at (B,) or (B, M) -> (B, d) or (B, M, d). The positions' real entries
    were checked against each example's real items when forward read them, and their
    padded entries set to 0 (:mod:`attngraph.lower.runtime.inputs`), so every index is in range."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.vector = ctx.t("index").rank == 0

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        items, index = x["from"], x["index"].long()
        idx = index[:, None] if self.vector else index  # (B, M)
        out = items.gather(1, idx[..., None].expand(-1, -1, items.shape[-1]))  # (B, M, d)
        return out[:, 0] if self.vector else out


class Onehot(NodeModule):
    """Ids (B, ...) -> one-hot floats (B, ..., classes), in the run's float dtype."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.classes = int(ctx.node.types[""].dims[-1])

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return F.one_hot(x["from"].long(), self.classes).to(rt.dtype)
