"""Emit rules of the relative position kinds: ``rotary`` (RoPE) and ``position_bias``
(ALiBi, T5 buckets); the lowerings: :mod:`attngraph.lower.rules.relative`.

What depends on the positions alone (the rotary tables, ALiBi's bias, T5's buckets)
is computed once per forward (:meth:`~attngraph.lower.export.emit.EmitCtx.shared`), as
the modeling files of ``transformers`` compute their position embeddings before the
layers: in a paragraph of its own before the top-level statement that holds the
first node reading it (a repeat's or a loop's ``for``), and read by every node of the
same sizes after it. A value whose sizes are no input's is computed where the node
is, at the sizes of the value it reads, and read by the nodes after it in its body.
The lowerings keep such values in the forward's memo
(:mod:`attngraph.lower.runtime.memo`); the file needs none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from attngraph.kinds.relative import alibi_slopes
from attngraph.lower.rules.relative import t5_bucket

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_position_bias", "emit_rotary", "rotary_tables", "rotate_pairs"]


# -- the file's functions ---------------------------------------------------------------


def rotary_tables(n: int, d: int, base: float, dtype: torch.dtype,
                  device: torch.device) -> tuple[Tensor, Tensor]:
    """RoPE's tables over positions 0 … n−1, ``(n, d)`` each: the cosine and the signed
    sine of each angle n·θ_i, θ_i = base^(−2i/d), once per feature of the pair i:
    ``(cos, cos)`` and ``(−sin, sin)``. The angles are computed in float32 at least."""
    exact = torch.promote_types(dtype, torch.float32)
    theta = (base ** (-torch.arange(0, d, 2, dtype=torch.float64, device=device) / d)).to(exact)
    angle = torch.arange(n, dtype=exact, device=device)[:, None] * theta  # (n, d/2)
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    return torch.stack((cos, cos), -1).flatten(-2), torch.stack((-sin, sin), -1).flatten(-2)


def rotate_pairs(v: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Each pair (a, b) of features (2i, 2i+1) of ``v`` (..., n, d) turned by its angle:
    (a·cos − b·sin, b·cos + a·sin), with the tables of :func:`rotary_tables` (in
    ``v``'s dtype: under autocast, a projection's)."""
    swapped = v.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (b, a) for each pair (a, b)
    return v * cos.to(v.dtype) + swapped * sin.to(v.dtype)


# -- the rules ----------------------------------------------------------------------------


def emit_rotary(ctx: EmitCtx) -> bool:
    """The queries or keys with each pair of features turned by its position's angle
    (:func:`rotate_pairs`); the tables of the positions made once (module doc)."""
    m = ctx.mod
    v, t = ctx.x("from"), ctx.t("from")
    d, base = int(m.d), float(m.base)
    n = t.dims[0]

    def make(env: _Env) -> tuple[list[str], tuple[str, ...]]:
        cos, sin = ctx.tmp("cos"), ctx.tmp("sin")
        call = (f"{ctx.helper(rotary_tables)}({env.sizes[0]}, {d}, {base!r}, {env.dtype()}, "
                f"{env.device})")
        return [f"{cos}, {sin} = {call}  # ({n}, {d}) each"], (cos, sin)

    here = _Env([f"{v}.shape[-2]"], lambda: f"{v}.dtype", f"{v}.device")
    note = f"# RoPE tables: position n turns feature pair i by n·θ_i, θ_i = {base:g}^(−2i/{d})"
    (cos, sin), _ = _once(ctx, ("rotary", n, d, base), [n], here, note, make)
    ctx.out(f"{ctx.helper(rotate_pairs)}({v}, {cos}, {sin})")
    return True


def emit_position_bias(ctx: EmitCtx) -> bool:
    """The scores plus ALiBi's −m_h·|i − j|, or plus T5's learned scalar per head for
    the bucket of j − i (an ``nn.Embedding`` of the buckets); the bias or the buckets
    made once (module doc)."""
    m = ctx.mod
    s, t = ctx.x("scores"), ctx.t("scores")
    here = _Env([f"{s}.shape[-2]", f"{s}.shape[-1]"], lambda: f"{s}.dtype", f"{s}.device")
    dims, h, heads = list(t.dims), int(m.h), bool(m.heads)
    if m.fn == "alibi":
        note = (f"# ALiBi: −m_h·|i − j| for the {dims[0]} × {dims[1]} scores, a fixed slope "
                "m_h per head")
        (bias,), top = _once(ctx, ("alibi", *dims, h), dims, here, note,
                             lambda env: _alibi(ctx, env, dims, h))
        bias = bias if heads else f"{bias}[0]"
        cast = f".to({s}.dtype)" if top else ""  # made in the model's dtype: as the scores
        ctx.out(f"{s} + {bias}{cast}")
        return True
    buckets, far, both = int(m.buckets), int(m.max_distance), bool(m.bidirectional)
    table = ctx.module("table", ctor=f"{ctx.nn}.Embedding({buckets}, {h})", name=ctx.node.id)
    how = "both directions" if both else "j > i: bucket 0"
    note = f"# T5's bucket of each j − i: {buckets} buckets ({how}), log-spaced up to {far}"
    (bucket,), _ = _once(ctx, ("t5", *dims, buckets, far, both), dims, here, note,
                         lambda env: _t5(ctx, env, dims, buckets, far, both))
    look = f"{table}({bucket}).permute(2, 0, 1)" if heads else f"{table}({bucket})[..., 0]"
    ctx.out(f"{s} + {look}.to({s}.dtype)")
    return True


def _positions(ctx: EmitCtx, env: _Env) -> tuple[list[str], str, str]:
    """The query and item positions, ``(M, 1)`` and ``(1, N)``."""
    i, j = ctx.tmp("i"), ctx.tmp("j")
    t = ctx.torch
    return ([f"{i} = {t}.arange({env.sizes[0]}, device={env.device})[:, None]  # query positions",
             f"{j} = {t}.arange({env.sizes[1]}, device={env.device})[None, :]  # item positions"],
            i, j)


def _alibi(ctx: EmitCtx, env: _Env, dims: list[Any], h: int) -> tuple[list[str], tuple[str]]:
    """ALiBi's bias ``(h, M, N)``: the slopes in float64, then in the model's dtype."""
    t = ctx.torch
    slopes, bias = ctx.tmp("slopes"), ctx.tmp("alibi")
    pos, i, j = _positions(ctx, env)
    dt = env.dtype()
    return ([f"{slopes} = {t}.tensor({ctx.helper(alibi_slopes)}({h}), dtype={t}.float64, "
             f"device={env.device})  # m_h",
             *pos,
             f"{bias} = -{slopes}[:, None, None].to({dt}) * ({i} - {j}).abs().to("
             f"{dt})  # ({h}, {dims[0]}, {dims[1]})"], (bias,))


def _t5(ctx: EmitCtx, env: _Env, dims: list[Any], buckets: int, far: int,
        both: bool) -> tuple[list[str], tuple[str]]:
    """T5's bucket of each pair's j − i, ``(M, N)``."""
    bucket = ctx.tmp("bucket")
    pos, i, j = _positions(ctx, env)
    return ([*pos,
             f"{bucket} = {ctx.helper(t5_bucket)}({j} - {i}, bidirectional={both}, "
             f"buckets={buckets}, max_distance={far})  # ({dims[0]}, {dims[1]})"], (bucket,))


# -- made once ------------------------------------------------------------------------------


@dataclass
class _Env:
    """Where a value of the positions is made: the sizes of its lengths, the dtype (a
    variable made when first read) and the device, as expressions."""

    sizes: list[str]
    dtype: Callable[[], str]
    device: str


def _once(ctx: EmitCtx, key: tuple[Any, ...], dims: list[Any], here: _Env, note: str,
          make: Callable[[_Env], tuple[list[str], tuple[str, ...]]]
          ) -> tuple[tuple[str, ...], bool]:
    """The variables of the value ``key`` (of the lengths ``dims``) and whether it is
    made at forward's top level: when the sizes are the inputs', there (in the model's
    dtype), else here, at the sizes ``here``; by ``make`` under the comment ``note``
    the first time, read as they are afterwards."""
    sizes = [_size(ctx, d) for d in dims]
    top = all(size is not None for size in sizes)
    put = ctx.prelude if top else ctx.line

    def write() -> tuple[str, ...]:
        put(note)  # (first: the dtype's variable, made by ``make``, follows it)
        env = _Env([str(size) for size in sizes], lambda: _dtype(ctx), ctx.device()) \
            if top else here
        lines, names = make(env)
        for line in lines:
            put(line)
        return names

    return ctx.shared(key, write, top=top), top


def _dtype(ctx: EmitCtx) -> str:
    """The model's dtype at forward's top level: a variable when it is a call."""
    dt = ctx.dtype()
    if "(" not in dt:
        return dt

    def make() -> tuple[str]:
        var = ctx.tmp("dtype")
        ctx.prelude(f"{var} = {dt}")
        return (var,)

    return ctx.shared(("dtype",), make, top=True)[0]


def _size(ctx: EmitCtx, dim: Any) -> str | None:
    """The size of length ``dim`` in forward's first statements (an input's), or None."""
    return str(dim) if isinstance(dim, int) else ctx.size(dim)
