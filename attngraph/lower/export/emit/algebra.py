"""Emit rules of the algebra's kinds: ``expr`` (a formula as one line of torch) and
``param`` (a free tensor, cut to the batch's lengths, clamped); the lowerings:
:mod:`attngraph.lower.rules.algebra`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

from attngraph.lower.export.codegen_body import FORWARD_GLOBALS, not_hidden

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_expr", "emit_param"]


def emit_expr(ctx: EmitCtx) -> bool:
    """A formula as one line of torch (the algebra writes it from its registry)."""
    m = ctx.mod
    if any(True for _ in m.parameters()) or any(True for _ in m.buffers()):
        return False
    line = m.python_line(dict(ctx.ins), ctx.rt(), ctx.helper)
    not_hidden(line, ctx.node.id, ctx.graph, ctx.w.params & FORWARD_GLOBALS)
    if "torch." in line:
        ctx.w.bundle.add_import("torch", None, "torch")
    if "F." in line:
        ctx.w.bundle.add_import("torch.nn", "functional", "F")
    ctx.out(line)
    return True


def emit_param(ctx: EmitCtx) -> bool:
    """The tensor ``(1, [h,] *dims)``; an axis over a length cut to the batch's size."""
    m = ctx.mod
    if isinstance(m.value, nn.Parameter):
        v = ctx.param("value", ctx.node.id)
    else:  # fixed: a seeded buffer
        buf = ctx.buffer("value", ctx.node.id)
        if buf is None:
            return False
        v = buf
    for d, sym in m.lengths:  # the first N positions of the table
        n = ctx.size(sym)
        if n is None:
            return False
        v = f"{v}.narrow({d}, 0, {n})"
    if m.clamp_to is not None:
        v = f"{v}.clamp({m.clamp_to[0]!r}, {m.clamp_to[1]!r})"
    ctx.out(v)
    return True
