"""Emit rules of the attention vocabulary: items, queries/keys/values, softmax,
readout and the fused attention (the lowerings: :mod:`attngraph.lower.rules.attention`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.export.codegen_text import shape
from attngraph.lower.export.emit.images import emit_image_items
from attngraph.lower.rules.attention import merge_heads, split_heads

if TYPE_CHECKING:
    from attngraph.ir.graph import TensorType
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_attention", "emit_feature_map", "emit_items", "emit_linear_attention",
           "emit_proj", "emit_readout", "emit_softmax"]


def emit_items(ctx: EmitCtx) -> bool:
    """Items from token ids (an embedding) or vectors, then an optional projection."""
    m = ctx.mod
    if m.image:
        return emit_image_items(ctx)
    v = ctx.x("from")
    if m.embed is not None:
        v = f"{ctx.module('embed', name=ctx.node.id)}({v})"
    if m.proj is not None:
        if m.embed is not None:
            v = ctx.out(v, note="(B, N, d)")
        v = f"{ctx.module('proj', name=f'{ctx.node.id}_proj')}({v})"
    ctx.out(v)
    return True


def emit_feature_map(ctx: EmitCtx) -> bool:
    """φ(x) elementwise."""
    ctx.out(f"{ctx.fn(ctx.mod.phi)}({ctx.x('from')})")
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


def _and(a: str | None, b: str) -> str:
    return b if a is None else (a if not b else f"{a} & {b}")


def structure(ctx: EmitCtx, scores: str, heads: bool, *, rank: int, causal: bool,
              window: int | None, self_loops: bool) -> str | None:
    """The causal, window and adjacency masks of ``scores`` (AND), or None; written
    as lines of their own."""
    t = ctx.torch
    mask = None
    if causal or window is not None:
        if rank != 2:
            msg = "a causal or window mask needs scores (M, N)"
            raise TypeError(msg)
        dev = f"device={scores}.device"
        i, j = ctx.tmp("i"), ctx.tmp("j")
        ctx.line(f"{i} = {t}.arange({scores}.shape[-2], {dev})[:, None]  # query positions")
        ctx.line(f"{j} = {t}.arange({scores}.shape[-1], {dev})[None, :]  # item positions")
        if causal:
            mask = f"({j} <= {i})"
        if window is not None:
            mask = _and(mask, f"(({i} - {j}).abs() <= {window})")
    if ctx.has("mask.adjacency"):
        adj = ctx.tmp("adjacency")
        ctx.line(f"{adj} = {ctx.x('mask.adjacency')}.to({t}.bool)  # edges j -> i")
        if self_loops:
            eye = ctx.tmp("eye")
            ctx.line(f"{eye} = {t}.eye({adj}.shape[-1], dtype={t}.bool, device={adj}.device)")
            ctx.line(f"{adj} = {adj} | {eye}  # and i -> i")
        mask = _and(mask, f"{adj}.unsqueeze(1)" if heads else adj)
    return mask


def emit_softmax(ctx: EmitCtx) -> bool:
    """The normaliser of the registry over the items (or over the queries), masked
    (padding, causal, window, adjacency)."""
    m = ctx.mod
    s = ctx.x("scores")
    if m.temperature != 1.0:
        s = ctx.out(f"{s} / {m.temperature!r}", note="scores / temperature")
    mask = _and(ctx.padding(m.t), structure(ctx, s, bool(m.t.heads), rank=m.t.rank,
                                            causal=m.causal, window=m.window,
                                            self_loops=m.self_loops) or "") or None
    rows = ctx.padding(m.t, axis=-2) if m.over_queries else None
    if rows is not None:  # padded queries take no part either
        mask = _and(mask, rows)
    if mask is not None and " " in mask:
        var = ctx.tmp("mask")
        ctx.line(f"{var} = {mask}")
        mask = var
    fn = ctx.helper(m.normaliser)
    opts = "".join(f", {o!r}" for o in m.options)
    if not m.over_queries:
        ctx.out(f"{fn}({s}, {mask or 'None'}{opts})")
        return True
    if mask is not None:  # each item's weights over the queries: transposed
        ctx.line(f"{mask} = {mask}.expand_as({s}).transpose(-1, -2)")
    ctx.out(f"{fn}({s}.transpose(-1, -2), {mask or 'None'}{opts}).transpose(-1, -2)",
            note=f"{shape(m.t)}, over the queries")
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
    if m.act is not None:
        z = f"{ctx.fn(m.act)}({z})"
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


def emit_linear_attention(ctx: EmitCtx) -> bool:
    """z_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j), over the real j (j <= i when
    causal: running sums); the N×N scores never formed."""
    m, t = ctx.mod, ctx.torch
    q, k, v = ctx.x("query"), ctx.x("key"), ctx.x("values")
    k, v = _group(ctx, k, m.ktype, m.heads), _group(ctx, v, m.vtype, m.heads)
    pad = ctx.padding(m.ktype, axis=0)
    if pad is not None:
        kk = ctx.tmp(f"{ctx.node.id}_key")
        ctx.line(f"{kk} = {k} * {pad}.to({k}.dtype)  # padded keys add nothing")
        k = kk
    if m.vector_query:
        q = f"{q}.unsqueeze(-2)"
    num, den = ctx.tmp(f"{ctx.node.id}_num"), ctx.tmp(f"{ctx.node.id}_den")
    if m.causal:  # running sums over j <= i
        kv = ctx.tmp(f"{ctx.node.id}_kv")
        ctx.line(f"{kv} = {t}.cumsum({k}.unsqueeze(-1) * {v}.unsqueeze(-2), dim=-3)"
                 "  # Σ_{j<=i} φ(k_j) v_jᵀ")
        ctx.line(f"{num} = ({q}.unsqueeze(-2) @ {kv}).squeeze(-2)")
        ctx.line(f"{den} = ({q} * {t}.cumsum({k}, dim=-2)).sum(-1, keepdim=True)")
    else:
        ctx.line(f"{num} = {q} @ ({k}.transpose(-1, -2) @ {v})  # φ(q)ᵀ Σ_j φ(k_j) v_jᵀ")
        ctx.line(f"{den} = {q} @ {k}.sum(-2).unsqueeze(-1)  # φ(q)ᵀ Σ_j φ(k_j)")
    z = f"{num} / {t}.where({den} > 0, {den}, {t}.ones_like({den}))"
    if m.vector_query:
        z = f"({z}).squeeze(-2)"
    ctx.out(_finish(ctx, z))
    return True
