"""Lowerings of the attention vocabulary (:mod:`attngraph.kinds.attention`): items,
queries/keys/values, softmax, readout, and the fused ``attention`` node made by the
fusion pass. Scorers are lowered in :mod:`attngraph.lower.rules.scorers`."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.ir.graph import TensorType
from attngraph.kinds.choices import load
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.lower.rules.activations import activation_fn, feature_map_fn
from attngraph.lower.rules.banded import banded_attention, use_banded
from attngraph.lower.rules.heads import (  # noqa: F401  (importable from here, as before)
    group_heads,
    grouped_matmul,
    merge_heads,
    split_heads,
)
from attngraph.lower.rules.masks import (
    attention_mask,
    combine,
    no_empty_row,
    padding_mask,
    row_any,
)
from attngraph.lower.runtime.memo import tracing
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime


class Items(NodeModule):
    """Items [N, d] from token ids (``embed``), vectors, image pixels or patches."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        t = ctx.t("from")
        self.patches = None
        self.embed = None
        self.image = t.rank == 3
        if t.dtype == "long":
            src = ctx.graph.node(ctx.edge("from").src)
            self.embed = nn.Embedding(src.spec.vocab, s.embed)
            d = s.embed
        elif self.image:
            c = ctx.fixed(t.dims[0], "the image's channels", "from")
            self.patches = tuple(s.patches) if s.patches is not None else None
            d = c * self.patches[0] * self.patches[1] if self.patches else c
        else:
            d = ctx.features("from")
        self.proj = nn.Linear(d, s.dim, bias=s.bias) if s.dim is not None else None

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]
        if self.embed is not None:
            v = self.embed(v)  # (B, N, d)
        elif self.image:
            if self.patches is not None:
                v = patches(v, self.patches)  # (B, N, d)
            else:
                v = v.flatten(2).transpose(1, 2)  # (B, H·W, C)
        if self.proj is not None:
            v = self.proj(v)  # (B, N, dim)
        return v


def patches(image: Tensor, size: tuple[int, int]) -> Tensor:
    """Non-overlapping ``size`` patches of ``image`` (B, C, H, W) as (B, N, C·ph·pw):
    ``F.unfold`` with stride = kernel, row by row, each patch channel-major; done by
    a reshape and a permute (one copy), which costs a fraction of ``unfold``'s."""
    b, c, h, w = image.shape
    ph, pw = size
    if h % ph or w % pw:  # the spec's shape rule only lets whole patches through
        return F.unfold(image, kernel_size=size, stride=size).transpose(1, 2)
    v = image.reshape(b, c, h // ph, ph, w // pw, pw).permute(0, 2, 4, 1, 3, 5)
    return v.reshape(b, (h // ph) * (w // pw), c * ph * pw)


class Proj(NodeModule):
    """Queries, keys or values: learned vectors or a projection, split into heads."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        self.heads = s.heads
        self.learned = getattr(s, "learned", None)
        self.proj: nn.Module | None = None
        if self.learned is not None:
            self.weight = nn.Parameter(torch.randn(self.learned, s.dim) * 0.02)
            return
        d_in = ctx.features("from")
        d_out = s.dim if s.dim is not None else d_in
        if s.proj == "linear":
            self.proj = nn.Linear(d_in, d_out, bias=s.bias)
        elif s.proj == "mlp":
            h = s.hidden if s.hidden is not None else d_out
            self.proj = nn.Sequential(nn.Linear(d_in, h), nn.Tanh(),
                                      nn.Linear(h, d_out, bias=s.bias))

    def fusable_linear(self) -> tuple[Tensor, Tensor | None] | None:
        """A plain linear projection can share one matmul with its siblings."""
        if isinstance(self.proj, nn.Linear):
            return self.proj.weight, self.proj.bias
        return None

    def after_linear(self, y: Tensor, rt: Runtime) -> Tensor:
        """Split the projection into heads."""
        return split_heads(y, self.heads) if self.heads else y

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        if self.learned is not None:
            v = self.weight.unsqueeze(0).expand(rt.batch, -1, -1)  # (B, K, d)
        else:
            v = x["from"]
            if self.proj is not None:
                v = self.proj(v)  # (B, [L,] d)
        return split_heads(v, self.heads) if self.heads else v


class FeatureMap(NodeModule):
    """φ(x) elementwise: a feature map of the registry (elu(x) + 1, relu(x), ...)."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.phi: Callable[[Tensor], Tensor] = feature_map_fn(ctx.spec.fn)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return self.phi(x["from"])


class Softmax(NodeModule):
    """Weights over the items (last) axis, or over the queries, with padding, causal,
    window and adjacency masks; by a normaliser of the registry (softmax, sparsemax,
    entmax-1.5, top-k, ...)."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        m = s.mask
        self.t = ctx.t("scores")
        self.causal = bool(m and m.causal)
        self.window: int | None = m.window if m else None
        self.self_loops = m.self_loops if m else True
        self.temperature = float(s.temperature)
        info = NORMALISERS[s.fn]
        #: ``normaliser(scores, mask, *options)``; a top-k's options are ``k`` and ``ties``
        self.normaliser: Callable[..., Tensor] = load(info.impl)
        self.options: tuple[int | str, ...] = (int(s.k), s.ties) if info.needs_k else ()
        self.over_queries = s.axis == "queries"
        #: no structural mask: only padding of the items (their length symbol) applies
        items = self.t.dims[-1] if self.t.dims else None
        self.padding_only = (not self.causal and self.window is None and not self.over_queries
                             and not ctx.has("mask.adjacency"))
        self.items = items if isinstance(items, str) else None

    def mask(self, scores: Tensor, x: dict[str, Tensor], rt: Runtime) -> Tensor | None:
        """Every mask that applies to these scores, or None."""
        if self.padding_only and (self.items is None or self.items not in rt.masks):
            return None
        two = self.t.rank == 2
        mask = attention_mask(
            self.t, rt, causal=self.causal, window=self.window,
            adjacency=x.get("mask.adjacency"), self_loops=self.self_loops,
            m=scores.shape[-2] if two else None, n=scores.shape[-1], device=scores.device,
        )
        if self.over_queries:  # padded queries take no part either
            mask = combine(mask, padding_mask(rt, self.t, axis=-2))
        return mask

    def normalise(self, s: Tensor, mask: Tensor | None) -> Tensor:
        """The normaliser over the last axis of ``s``."""
        return self.normaliser(s, mask, *self.options)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        s = x["scores"]
        if self.temperature != 1.0:
            s = s / self.temperature
        mask = self.mask(s, x, rt)
        if self.over_queries:  # each item's weights sum to one over the queries
            if mask is not None:
                mask = mask.expand_as(s).transpose(-1, -2)
            return self.normalise(s.transpose(-1, -2), mask).transpose(-1, -2)
        return self.normalise(s, mask)  # (B, [h,] [M,] N)


class _ReadoutOut(NodeModule):
    """What a readout does after Σ_i p_i v_i: heads merged by ``combine``, optional ``out``."""

    def __init__(self, ctx: LowerCtx, d: int, heads: int | None) -> None:
        super().__init__()
        s = ctx.spec
        self.heads = heads
        self.vtype = ctx.t("values")
        self.combine = s.combine
        d_out = d * self.heads if self.heads and s.combine == "concat" else d
        self.out = nn.Linear(d_out, s.out, bias=s.bias) if s.out is not None else None

    def finish(self, z: Tensor) -> Tensor:
        """Merge heads and project: (B, [h,] [M,] d) -> (B, [M,] out)."""
        if self.heads:
            z = merge_heads(z, self.combine)
        return self.out(z) if self.out is not None else z


class Readout(_ReadoutOut):
    """z = Σ_i p_i v_i per query, heads merged by ``combine``, optional ``out``, then
    ``offset`` (z + b) and ``act``."""

    def __init__(self, ctx: LowerCtx, d: int) -> None:
        super().__init__(ctx, d, ctx.t("weights").heads)
        s = ctx.spec
        self.wtype = ctx.t("weights")
        self.normalize = bool(s.normalize)
        self.eps = float(s.eps)
        d_out = int(ctx.node.types[""].dims[-1])
        # zeros, as GATConv starts its bias
        self.offset = nn.Parameter(torch.zeros(d_out)) if s.offset else None
        #: the activation applied last; None for one that changes nothing
        self.act: Callable[[Tensor], Tensor] | None = activation_fn(s.act)
        #: one weight vector per row, no heads, nothing after the sum (a decoder's context)
        self.plain = (self.wtype.rank == 1 and not self.heads and not self.normalize
                      and self.out is None and self.offset is None and self.act is None)
        #: grouped-query heads: each value head read by a group of query heads
        self.grouped = bool(self.heads and self.vtype.heads
                            and self.vtype.heads != self.heads and self.wtype.rank == 2)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        w, v = x["weights"], x["values"]  # (B, [h,] [M,] N), (B, [h,] N, d)
        if self.plain and not rt.masks and v.dim() == 3 and v.stride(0) != 0:
            return torch.bmm(w.unsqueeze(1), v).squeeze(1)  # (B, d)
        grouped = self.grouped and w.dim() == 4 and not tracing()
        if not grouped:  # a value head per query head
            v = group_heads(v, self.vtype, self.heads)
        pad = padding_mask(rt, self.wtype) if rt.masks else None
        if self.normalize:  # (w + eps) / Σ_items (w + eps), over the real items
            w = w + self.eps
        if pad is not None:
            w = w * pad.to(w.dtype)
        if self.normalize:
            total = w.sum(-1, keepdim=True)
            w = w / torch.where(total > 0, total, torch.ones_like(total))
        if self.wtype.rank == 1 and w.dim() == 2 and v.dim() == 3 and v.stride(0) == 0:
            z = w @ v[0]  # values shared by the batch (positions, learned items): (B, d)
        elif self.wtype.rank == 1:
            z = (w.unsqueeze(-2) @ v).squeeze(-2)  # (B, [h,] d)
        elif grouped:
            z = grouped_matmul(w, v)  # (B, h, M, d)
        else:
            z = w @ v  # (B, [h,] M, d)
        z = self.finish(z)  # (B, [M,] d)
        if self.offset is not None:
            z = z + self.offset
        return z if self.act is None else self.act(z)


def lower_readout(ctx: LowerCtx) -> NodeModule:
    """Weighted average of the values."""
    return Readout(ctx, ctx.features("values"))


class FusedAttention(_ReadoutOut):
    """Dot-product scorer (q·k/√d or q·k), softmax and readout as one
    ``scaled_dot_product_attention``."""

    def __init__(self, ctx: LowerCtx) -> None:
        q, k = ctx.t("query"), ctx.t("key")
        super().__init__(ctx, ctx.features("values"), q.heads)
        s = ctx.spec
        self.ktype = k
        self.vector_query = q.rank == 1
        self.stype = TensorType(k.dims[:1] if q.rank == 1 else (q.dims[0], k.dims[0]),
                                heads=q.heads)
        m = s.mask
        self.causal = bool(m and m.causal)
        self.window: int | None = m.window if m else None
        self.self_loops = m.self_loops if m else True
        root = math.sqrt(ctx.features("key")) if s.scaled else 1.0  # q·k/√d, or q·k
        self.scale = 1.0 / (root * float(s.temperature))
        #: grouped-query heads (Ainslie et al. 2023): keys and values of one head count,
        #: each read by a group of query heads, which SDPA reads in place
        #: (``enable_gqa``) rather than from a copy per query head
        self.grouped = bool(q.heads and k.heads and k.heads == self.vtype.heads
                            and k.heads != q.heads)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        q, k, v = x["query"], x["key"], x["values"]  # (B, [h,] M, d), (B, [h', ] N, d) x2
        if self.vector_query:
            q = q.unsqueeze(-2)  # (B, [h,] 1, d)
        adjacency = x.get("mask.adjacency")
        key_sym = self.stype.dims[-1]
        pad = rt.masks.get(key_sym) if isinstance(key_sym, str) else None
        m, n = q.shape[-2], k.shape[-2]
        window = self.window
        gqa = self.grouped and adjacency is None and not use_banded(m, n, window) \
            and not tracing()
        if not gqa:  # a key and value head per query head
            k, v = group_heads(k, self.ktype, self.heads), group_heads(v, self.vtype, self.heads)
        if adjacency is None and window is not None and use_banded(m, n, window):
            # local attention: O(N·w) blocks instead of an N×N masked matrix
            z = banded_attention(q, k, v, int(window), scale=self.scale,
                                 causal=self.causal, key_mask=pad)
        elif adjacency is None and pad is None and window is None:
            # no mask, or only the causal one: SDPA's own (fused) causal path
            z = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal and bool(m > 0),
                                               scale=self.scale, enable_gqa=gqa)
        else:
            mask = attention_mask(
                self.stype, rt, causal=self.causal, window=window,
                adjacency=adjacency, self_loops=self.self_loops,
                m=m, n=n, device=q.device,
            )
            if mask is None:  # not reached: adjacency, padding or window is set here
                msg = "the masked attention path got no mask"
                raise ValueError(msg)
            if self.vector_query:
                mask = mask.unsqueeze(-2)  # (B, [1,] 1, N)
            z = _masked_sdpa(q, k, v, mask, self.scale, gqa)  # (B, [h,] M, d)
        if self.vector_query:
            z = z.squeeze(-2)  # (B, [h,] d)
        return self.finish(z)


def _masked_sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale: float,
                 gqa: bool) -> Tensor:
    """SDPA under a bool ``mask``, a fully masked row giving zeros, never NaN: such a row
    attends everything and is zeroed after; where no row can be fully masked
    (:func:`~attngraph.lower.rules.masks.no_empty_row`), SDPA under the mask alone. ``gqa``:
    the keys and values have a head per group of query heads (SDPA's ``enable_gqa``)."""
    if no_empty_row(mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                              enable_gqa=gqa)
    ok = row_any(mask)  # rows with something to attend
    z = F.scaled_dot_product_attention(q, k, v, attn_mask=mask | ~ok, scale=scale,
                                       enable_gqa=gqa)
    return z * ok.to(z.dtype)


class LinearAttention(_ReadoutOut):
    """Kernel attention in linear time (Katharopoulos et al. 2020), made by the pass
    :mod:`attngraph.passes.linear_attention` from φ(q)·φ(k) → sum → readout:

        z_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j)

    over every real j, or j <= i when causal (running sums). The N×N scores are never
    formed: O(N·d·d_v) per head.
    """

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__(ctx, ctx.features("values"), ctx.t("query").heads)
        s = ctx.spec
        self.causal = bool(s.mask and s.mask.causal)
        self.ktype = ctx.t("key")
        self.vector_query = ctx.t("query").rank == 1

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        q, k, v = x["query"], x["key"], x["values"]  # (B, [h,] M, d), (B, [h,] N, d), ...
        k, v = group_heads(k, self.ktype, self.heads), group_heads(v, self.vtype, self.heads)
        pad = padding_mask(rt, self.ktype, axis=0)
        if pad is not None:  # padded keys add nothing to either sum
            k = k * pad.to(k.dtype)
        if self.vector_query:
            q = q.unsqueeze(-2)  # (B, [h,] 1, d)
        if self.causal:  # running sums over j <= i
            kv = torch.cumsum(k.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)  # (.., N, d, dv)
            num = (q.unsqueeze(-2) @ kv).squeeze(-2)  # (.., N, dv)
            den = (q * torch.cumsum(k, dim=-2)).sum(-1, keepdim=True)  # (.., N, 1)
        else:
            num = q @ (k.transpose(-1, -2) @ v)  # (.., M, dv)
            den = q @ k.sum(-2).unsqueeze(-1)  # (.., M, 1)
        z = num / torch.where(den > 0, den, torch.ones_like(den))
        if self.vector_query:
            z = z.squeeze(-2)
        return self.finish(z)
