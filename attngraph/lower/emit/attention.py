"""Emit rules of the attention vocabulary: items, queries/keys/values, softmax,
readout and the fused attention (the lowerings: :mod:`attngraph.lower.attention`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.attention import merge_heads, split_heads

if TYPE_CHECKING:
    from attngraph.ir.graph import TensorType
    from attngraph.lower.emit import EmitCtx

__all__ = ["emit_attention", "emit_items", "emit_proj", "emit_readout", "emit_softmax"]


def emit_items(ctx: EmitCtx) -> bool:
    """Items from token ids (an embedding) or vectors, then an optional projection."""
    m = ctx.mod
    if m.image:
        return False
    v = ctx.x("from")
    if m.embed is not None:
        v = f"{ctx.module('embed', name=ctx.node.id)}({v})"
    if m.proj is not None:
        if m.embed is not None:
            v = ctx.out(v, note="(B, N, d)")
        v = f"{ctx.module('proj', name=f'{ctx.node.id}_proj')}({v})"
    ctx.out(v)
    return True


def emit_proj(ctx: EmitCtx) -> bool:
    """Learned vectors or a projection (linear or mlp), split into heads."""
    m = ctx.mod
    if m.learned is not None:
        v = f"{ctx.param('weight', ctx.node.id)}.unsqueeze(0).expand({ctx.batch()}, -1, -1)"
    elif m.proj is not None:
        v = f"{ctx.module('proj', name=ctx.node.id)}({ctx.x('from')})"
    else:
        v = ctx.x("from")
    if m.heads:
        v = f"{ctx.helper(split_heads)}({v}, {m.heads})"
    ctx.out(v)
    return True


def causal(ctx: EmitCtx, scores: str) -> str:
    """j <= i over the last two axes of ``scores``: (M, N) bool."""
    return f"{scores}.new_ones({scores}.shape[-2:], dtype={ctx.torch}.bool).tril()"


def _and(a: str | None, b: str) -> str:
    return b if a is None else f"{a} & {b}"


def emit_softmax(ctx: EmitCtx) -> bool:
    """The normaliser of the registry over the items, masked (padding, causal)."""
    m = ctx.mod
    if m.over_queries or m.window is not None or ctx.has("mask.adjacency"):
        return False
    s = ctx.x("scores")
    if m.temperature != 1.0:
        s = ctx.out(f"{s} / {m.temperature!r}", note="scores / temperature")
    mask = ctx.padding(m.t)
    if m.causal:
        if m.t.rank != 2:
            return False
        tri = ctx.tmp("causal")
        ctx.line(f"{tri} = {causal(ctx, s)}  # j <= i")
        mask = _and(mask, tri)
    if mask is not None and (m.causal or " " in mask):
        var = ctx.tmp("mask")
        ctx.line(f"{var} = {mask}")
        mask = var
    fn = ctx.helper(m.normaliser)
    args = [s, mask or "None", *(repr(o) for o in m.options)]
    ctx.out(f"{fn}({', '.join(args)})")
    return True


def _group(ctx: EmitCtx, v: str, t: TensorType, heads: int | None) -> str:
    """Keys or values with a head per query head (grouped-query attention)."""
    if heads and t.heads and t.heads != heads:
        return f"{v}.repeat_interleave({heads // t.heads}, dim=1)"
    return v


def _finish(ctx: EmitCtx, z: str) -> str:
    """Heads merged, then ``out``."""
    m = ctx.mod
    if m.heads:
        z = f"{ctx.helper(merge_heads)}({z}, {m.combine!r})"
    if m.out is not None:
        z = f"{ctx.module('out', name=ctx.node.id)}({z})"
    return z


def emit_readout(ctx: EmitCtx) -> bool:
    """z = Σ_i p_i v_i over the real items; heads merged, ``out``, ``offset``."""
    m = ctx.mod
    if m.act is not None:
        return False
    w, v = ctx.x("weights"), ctx.x("values")
    v = _group(ctx, v, m.vtype, m.heads)
    pad = ctx.padding(m.wtype)
    if m.normalize or pad is not None:
        wv = ctx.tmp("w")
        ctx.line(f"{wv} = {w}" + (f" + {m.eps!r}" if m.normalize else "")
                 + (f"  # weights, 0 at the padding\n{wv} = {wv} * {pad}.to({wv}.dtype)"
                    if pad is not None else ""))
        if m.normalize:
            tot = ctx.tmp("total")
            t = ctx.torch
            ctx.line(f"{tot} = {wv}.sum(-1, keepdim=True)")
            ctx.line(f"{wv} = {wv} / {t}.where({tot} > 0, {tot}, {t}.ones_like({tot}))")
        w = wv
    z = f"({w}.unsqueeze(-2) @ {v}).squeeze(-2)" if m.wtype.rank == 1 else f"{w} @ {v}"
    z = _finish(ctx, z)
    if m.offset is not None:
        z = f"{z} + {ctx.param('offset')}"
    ctx.out(z)
    return True


def emit_attention(ctx: EmitCtx) -> bool:
    """softmax(q·k/√d) v by ``F.scaled_dot_product_attention``, masked."""
    m = ctx.mod
    if m.window is not None or ctx.has("mask.adjacency"):
        return False
    q, k, v = ctx.x("query"), ctx.x("key"), ctx.x("values")
    k, v = _group(ctx, k, m.ktype, m.heads), _group(ctx, v, m.vtype, m.heads)
    if m.vector_query:
        q = f"{q}.unsqueeze(-2)"
    pad = ctx.padding(m.stype)
    sdpa = f"{ctx.F}.scaled_dot_product_attention"
    if pad is None:
        z = f"{sdpa}({q}, {k}, {v}, is_causal={m.causal}, scale={m.scale!r})"
    else:
        mask = ctx.tmp("mask")
        text = pad
        if m.causal:
            if m.stype.rank != 2:
                return False
            t = ctx.torch
            tri = ctx.tmp("causal")
            ctx.line(f"{tri} = {t}.ones({q}.shape[-2], {k}.shape[-2], dtype={t}.bool, "
                     f"device={q}.device).tril()  # j <= i")
            text = _and(pad, tri)
        if m.vector_query:
            text = f"({text}).unsqueeze(-2)"
        ok = ctx.tmp("ok")
        ctx.line(f"{mask} = {text}")
        ctx.line(f"{ok} = {mask}.any(-1, keepdim=True)  # rows with an item to attend")
        z = f"{sdpa}({q}, {k}, {v}, attn_mask={mask} | ~{ok}, scale={m.scale!r})"
        zv = ctx.tmp("z")
        ctx.line(f"{zv} = {z}")
        z = f"{zv} * {ok}.to({zv}.dtype)"
    if m.vector_query:
        z = f"({z}).squeeze(-2)"
    ctx.out(_finish(ctx, z))
    return True
