"""Emit rules of the external memory (``memory``, ``write``, ``address``: the Neural
Turing Machine's slots, erase/add write and location addressing); the lowerings:
:mod:`attngraph.lower.rules.memory`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.rules.memory import CONSTANT_INIT, circular_shift, sharpen

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_address", "emit_memory", "emit_write"]


def emit_memory(ctx: EmitCtx) -> bool:
    """The initial slots (a learned table, or a constant buffer) for every row."""
    m = ctx.mod
    if m.init == "learned":
        table = ctx.param("initial", ctx.node.id)
    else:
        fill = CONSTANT_INIT if m.init == "constant" else 0.0
        made = f"{ctx.torch}.full(({m.slots}, {m.width}), {fill!r})"
        buf = ctx.buffer("initial", ctx.node.id, value=made)
        if buf is None:
            return False
        table = buf
    b = f"{ctx.x('from')}.shape[0]" if ctx.has("from") else ctx.batch()
    ctx.out(f"{table}.unsqueeze(0).expand({b}, -1, -1)")
    return True


def emit_write(ctx: EmitCtx) -> bool:
    """Erase, then add: ``M (1 - w eᵀ) + w aᵀ`` with ``e = sigmoid(erase)``."""
    w, e = ctx.tmp(f"{ctx.node.id}_w"), ctx.tmp(f"{ctx.node.id}_e")
    ctx.line(f"{w} = {ctx.x('weights')}.unsqueeze(-1)  # (B, S, 1): where the head writes")
    ctx.line(f"{e} = {ctx.torch}.sigmoid({ctx.x('erase')}).unsqueeze(-2)  # what it erases")
    ctx.out(f"{ctx.x('memory')} * (1 - {w} * {e}) + {w} * {ctx.x('add')}.unsqueeze(-2)")
    return True


def emit_address(ctx: EmitCtx) -> bool:
    """Gate with the previous weights, shift, sharpen: gate, shift distribution and
    sharpening from a linear map of the control vector."""
    m = ctx.mod
    t, nid = ctx.torch, ctx.node.id
    d, n = int(m.proj.weight.shape[1]), int(m.proj.weight.shape[0])
    proj = ctx.module("proj", ctor=f"{ctx.nn}.Linear({d}, {n}, bias=True)", name=nid)
    mask = ctx.padding(m.ctype) or "None"
    p, g, w = ctx.tmp(f"{nid}_p"), ctx.tmp(f"{nid}_gate"), ctx.tmp(f"{nid}_w")
    ctx.line(f"{p} = {proj}({ctx.x('control')})  # gate, {n - 2} shifts, sharpening")
    ctx.line(f"{g} = {t}.sigmoid({p}[:, 0]).unsqueeze(-1)  # (B, 1)")
    ctx.line(f"{w} = {g} * {ctx.x('content')} + (1 - {g}) * {ctx.x('prev')}  # interpolated")
    ctx.line(f"{w} = {ctx.helper(circular_shift)}({w}, {t}.softmax({p}[:, 1:-1], -1), "
             f"{mask})")
    ctx.out(f"{ctx.helper(sharpen)}({w}, 1 + {ctx.F}.softplus({p}[:, -1]), {mask})")
    return True
