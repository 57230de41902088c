"""Emit rules of the image sensors: the recurrent attention model's ``glimpse`` and
DRAW's ``filterbank`` (read and write attention); the lowerings:
:mod:`attngraph.lower.rules.glimpse`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attngraph.lower.rules.glimpse import glimpse

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["draw_filters", "emit_filterbank", "emit_glimpse"]


def draw_filters(g: Tensor, delta: Tensor, var: Tensor, n: int, pixels: int) -> Tensor:
    """DRAW's (B, N, pixels) Gaussian filters around the centres g + (i − N/2 − 0.5)·δ,
    i = 1 … N, each normalised over the pixels (+ 1e-8: a filter off the image is 0)."""
    i = torch.arange(1, n + 1, device=g.device, dtype=g.dtype)
    mu = g[:, None] + (i - n / 2 - 0.5) * delta[:, None]  # (B, N)
    px = torch.arange(1, pixels + 1, device=g.device, dtype=g.dtype)
    f = torch.exp(-((px - mu[..., None]) ** 2) / (2 * var[:, None, None]))
    return f / (f.sum(-1, keepdim=True) + 1e-8)


def emit_glimpse(ctx: EmitCtx) -> bool:
    m = ctx.mod
    ctx.out(f"{ctx.helper(glimpse)}({ctx.x('image')}, {ctx.x('loc')}, {m.size}, {m.scales})")
    return True


def emit_filterbank(ctx: EmitCtx) -> bool:
    """The filters' grid from the five parameters, then γ F_Y x F_Xᵀ (read) or
    F_Yᵀ w F_X / γ (write), per channel."""
    m, t, nid = ctx.mod, ctx.torch, ctx.node.id
    p = ctx.x("params")
    g = {k: ctx.tmp(f"{nid}_{k}") for k in ("gx", "gy", "var", "delta", "gamma")}
    ctx.line(f"# {nid}: (g̃x, g̃y, log σ², log δ̃, log γ) = {p}")
    ctx.line(f"{g['gx']} = {(m.a + 1) / 2!r} * ({p}[:, 0] + 1)  # the grid's centre")
    ctx.line(f"{g['gy']} = {(m.b + 1) / 2!r} * ({p}[:, 1] + 1)")
    ctx.line(f"{g['var']} = {t}.exp({p}[:, 2])")
    ctx.line(f"{g['delta']} = {(max(m.a, m.b) - 1) / (m.n - 1)!r} * {t}.exp({p}[:, 3])"
             "  # the stride")
    ctx.line(f"{g['gamma']} = {t}.exp({p}[:, 4])  # the intensity")
    filters = ctx.helper(draw_filters)
    fx = ctx.out(f"{filters}({g['gx']}, {g['delta']}, {g['var']}, {m.n}, {m.a})", "fx")
    fy = ctx.out(f"{filters}({g['gy']}, {g['delta']}, {g['var']}, {m.n}, {m.b})", "fy")
    gamma = f"{g['gamma']}[:, None, None, None]"
    if m.write:
        w = ctx.tmp(f"{nid}_patch")
        ctx.line(f"{w} = {ctx.x('patch')}.reshape({p}.shape[0], -1, {m.n}, {m.n})")
        ctx.line(f"{w} = {fy}[:, None].transpose(-1, -2) @ {w} @ {fx}[:, None]  # F_Yᵀ w F_X")
        out = ctx.out(f"{w} / {gamma}")
    else:
        img = ctx.x("image")
        if ctx.has("canvas"):  # DRAW's error image, read with the same filters
            both = ctx.tmp(f"{nid}_image")
            ctx.line(f"{both} = {t}.cat([{img}, {img} - {t}.sigmoid({ctx.x('canvas')})], 1)")
            img = both
        seen = ctx.tmp(f"{nid}_patch")
        ctx.line(f"{seen} = {fy}[:, None] @ {img} @ {fx}[:, None].transpose(-1, -2)"
                 "  # F_Y x F_Xᵀ")
        out = ctx.out(f"{gamma} * {seen}")
    if ctx.reads("flat"):
        ctx.out(f"{out}.flatten(1)", "flat")
    if ctx.reads("gamma"):
        ctx.out(f"{g['gamma']}[:, None]", "gamma")
    return True
