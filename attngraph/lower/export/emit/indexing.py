"""Emit rules of ``gather`` and ``onehot`` (the lowerings:
:mod:`attngraph.lower.rules.indexing`) and of Graves' soft ``window``
(:mod:`attngraph.lower.rules.window`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.rules.window import soft_window

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_gather", "emit_onehot", "emit_window"]


def emit_gather(ctx: EmitCtx) -> bool:
    """The items at the positions: (B, N, d) at (B,) or (B, M)."""
    x, i = ctx.x("from"), ctx.x("index")
    if ctx.mod.vector:
        ctx.out(f"{x}.gather(1, {i}.long()[:, None, None].expand(-1, -1, {x}.shape[-1]))[:, 0]")
    else:
        ctx.out(f"{x}.gather(1, {i}.long()[..., None].expand(-1, -1, {x}.shape[-1]))")
    return True


def emit_onehot(ctx: EmitCtx) -> bool:
    ctx.out(f"{ctx.F}.one_hot({ctx.x('from')}.long(), {ctx.mod.classes}).to({ctx.dtype()})")
    return True


def emit_window(ctx: EmitCtx) -> bool:
    """α, β and the centres' step from the control (exp of a linear map), the centres
    moved on, then the mixture of Gaussians over the characters and its window."""
    m = ctx.mod
    if m.itype.heads:
        return False
    nid, k = ctx.node.id, m.components
    d = int(m.proj.weight.shape[1])
    proj = ctx.module("proj", ctor=f"{ctx.nn}.Linear({d}, {3 * k}, bias=True)", name=nid)
    alpha, beta, step = (ctx.tmp(f"{nid}_{s}") for s in ("alpha", "beta", "step"))
    ctx.line(f"{alpha}, {beta}, {step} = {ctx.torch}.exp({proj}({ctx.x('control')}))"
             f".split({k}, -1)  # (B, {k}) each")
    kappa = ctx.out(f"{ctx.x('prev')} + {step}", "centres")
    mask = ctx.mask(m.itype.dims[0]) or "None"
    ctx.outs(f"{ctx.helper(soft_window)}({ctx.x('items')}, {alpha}, {beta}, {kappa}, {mask})",
             ["", "weights"])
    return True
