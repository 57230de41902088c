"""Emit rules of the image kinds: ``items`` of an image's pixels or patches, ``conv``
and ``to_image`` (the lowerings: :mod:`attngraph.lower.rules.attention`,
:mod:`attngraph.lower.rules.conv`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.rules.attention import patches

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_conv", "emit_image_items", "emit_to_image"]


def emit_image_items(ctx: EmitCtx) -> bool:
    """An image (B, C, H, W) as items: its pixels, or its patches, then ``proj``."""
    m = ctx.mod
    v = ctx.x("from")
    if m.patches is not None:
        v = f"{ctx.helper(patches)}({v}, {tuple(m.patches)!r})"
        note = "(B, N, C·ph·pw)"
    else:
        v = f"{v}.flatten(2).transpose(1, 2)"
        note = "(B, H·W, C)"
    if m.proj is not None:
        v = ctx.out(v, note=note)
        v = f"{ctx.module('proj', name=f'{ctx.node.id}_proj')}({v})"
    ctx.out(v)
    return True


def emit_conv(ctx: EmitCtx) -> bool:
    """``nn.Conv2d`` over an image; ``nn.Conv1d`` over items, padded items zero."""
    m = ctx.mod
    conv = ctx.module("conv", name=ctx.node.id)
    v = ctx.x("from")
    if m.t.rank == 3:
        ctx.out(f"{conv}({v})")
        return True
    pad = ctx.mask(m.t.dims[0])
    one = m.t.rank == 1
    if pad is not None:
        v = ctx.out(f"{v} * {pad if one else f'{pad}[..., None]'}.to({v}.dtype)",
                    note="padded items zero")
    arg = f"{v}.unsqueeze(1)" if one else f"{v}.transpose(1, 2)"
    y = f"{conv}({arg}).transpose(1, 2)"
    if pad is not None:
        y = ctx.out(y, note="(B, N, out)")
        y = f"{y} * {pad}[..., None].to({y}.dtype)"
    ctx.out(y)
    return True


def emit_to_image(ctx: EmitCtx) -> bool:
    """(B, H·W, C) -> (B, C, H, W), items row by row."""
    v = ctx.x("from")
    h, w = ctx.mod.hw
    ctx.out(f"{v}.transpose(1, 2).reshape({v}.shape[0], {v}.shape[2], {h}, {w})")
    return True
