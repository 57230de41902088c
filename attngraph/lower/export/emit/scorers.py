"""Emit rules of ``scorer`` (dot, scaled dot, general, additive) and of ``prepare``
(an additive score's ``U k``, hoisted before a loop's steps); the lowerings:
:mod:`attngraph.lower.rules.scorers`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.rules.scorers import (
    Additive,
    Cosine,
    Dot,
    Gat,
    Gatv2,
    General,
    Location,
    MlpScore,
)
from attngraph.lower.runtime.names import module_key

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_prepare", "emit_scorer"]


def _owner_param(ctx: EmitCtx, owner_id: str, pname: str) -> str:
    """A parameter of the scorer ``owner_id`` of the same graph, declared here."""
    objs = [getattr(m._owner[0], pname) for m in ctx.mods]
    paths = [f"{p.rsplit('nodes.', 1)[0]}nodes.{module_key(owner_id)}.{pname}"
             for p in ctx.paths]
    return ctx.w.declare(objs, paths, None, f"{owner_id}_{pname}", module=False)


def emit_prepare(ctx: EmitCtx) -> bool:
    """U k_i for every key, once (before a decoder's steps)."""
    owner = ctx.mod._owner[0]
    if not isinstance(owner, Additive) or owner.W.dim() != 2:
        return False
    k = ctx.x("from")
    if owner.groups > 1:
        k = f"{k}.repeat_interleave({owner.groups}, dim=1)"
    ctx.out(f"{k} @ {_owner_param(ctx, ctx.spec.of, 'U')}")
    return True


def _query(ctx: EmitCtx) -> str | None:
    """The query expression: the input, or the learned vector (1, dq)."""
    m = ctx.mod
    if ctx.has("query"):
        return ctx.x("query")
    if m.query is not None:
        return f"{ctx.param('query')}.unsqueeze(0)"
    return None


def emit_scorer(ctx: EmitCtx) -> bool:
    """Scores of the queries against the keys."""
    m = ctx.mod
    k = ctx.x("key")
    if m.groups > 1 and not m.prepared:
        k = f"{k}.repeat_interleave({m.groups}, dim=1)"
    if type(m) is Location:
        return _location(ctx, k)
    if not m.has_query:
        return type(m) is MlpScore and _mlp(ctx, k)
    q = _query(ctx)
    if q is None or (ctx.has("features") and type(m) is not Additive):
        return False
    if type(m) in (Dot, General) or isinstance(m, Dot):
        return _dot(ctx, q, k)
    if type(m) is Additive and m.W.dim() == 2 and not ctx.t("key").heads:
        return _additive(ctx, q, k)
    pairs = {Cosine: _cosine, Gat: _gat, Gatv2: _gatv2}.get(type(m))
    if pairs is None:
        return False
    if m.vector_query:  # one query per row: the pairs of (B, [h,] 1, dq), squeezed
        ctx.out(f"{pairs(ctx, f'{q}.unsqueeze(-2)', k, False)}.squeeze(-2)")
    else:
        ctx.out(pairs(ctx, q, k, m.pairs == "aligned"))
    return True


def _dot(ctx: EmitCtx, q: str, k: str) -> bool:
    m = ctx.mod
    if isinstance(m, General):
        q = f"({q} @ {ctx.param('W')})"
    scale = "" if getattr(m, "scale", 1.0) == 1.0 else f" * {m.scale!r}"
    if m.vector_query:
        ctx.out(f"({q}.unsqueeze(-2) @ {k}.transpose(-1, -2)).squeeze(-2){scale}")
    elif m.pairs == "aligned":
        ctx.out(f"({q} * {k}).sum(-1){scale}")
    else:
        ctx.out(f"{q} @ {k}.transpose(-1, -2){scale}")
    return True


def _additive(ctx: EmitCtx, q: str, k: str) -> bool:
    """vᵀ tanh(W q + b + U k), the bias with the small W q term."""
    m = ctx.mod
    t = ctx.torch
    w = ctx.param("W")
    b = ctx.param("b") if m.b is not None else None
    uk = _keys(ctx, k)
    v = ctx.param("v")
    vector = m.vector_query
    if vector and b is not None:
        wq = f"{t}.addmm({b}, {q}, {w})"
    else:
        wq = f"{ctx.F}.linear({q}, {w}.T, {b})" if b is not None else f"{q} @ {w}"
    if uk != k and len(uk) > 16:  # U k on a line of its own
        var = ctx.tmp(f"{ctx.node.id}_key")
        ctx.line(f"{var} = {uk}  # U k")
        uk = var
    if len(wq) + len(uk) > 48:  # W q + b on a line of its own
        var = ctx.tmp(f"{ctx.node.id}_query")
        ctx.line(f"{var} = {wq}  # W q + b")
        wq = var
    if vector:
        e = f"{t}.tanh({wq}.unsqueeze(-2) + {uk})"
    elif m.pairs == "aligned":
        e = f"{t}.tanh({wq} + {uk})"
    else:
        e = f"{t}.tanh({wq}.unsqueeze(-2) + ({uk}).unsqueeze(-3))"
    ctx.out(f"{e} @ {v}")
    return True


def _keys(ctx: EmitCtx, k: str) -> str:
    """U k (``k`` itself when prepared), with features f: U k + V f, or [U; V] [k ‖ f]."""
    m = ctx.mod
    if not ctx.has("features"):
        return k if m.prepared else f"{k} @ {ctx.param('U')}"
    f = ctx.tmp(f"{ctx.node.id}_f")
    ctx.line(f"{f} = {ctx.x('features')}{'.unsqueeze(-1)' if m.feature_vector else ''}"
             f".to({k}.dtype)  # the items' features")
    if m.prepared:
        return f"{k} + {f} @ {ctx.param('V')}"
    t = ctx.torch
    return f"{t}.cat([{k}, {f}], -1) @ {t}.cat([{ctx.param('U')}, {ctx.param('V')}], -2)"


def _cosine(ctx: EmitCtx, q: str, k: str, aligned: bool) -> str:
    """β·cos(q, k), β fixed or learned (per head)."""
    m = ctx.mod
    beta = repr(m.beta_value) if m.beta is None else ctx.param("beta")
    if m.beta is not None and m.beta.dim() and not aligned:
        beta = f"{beta}.unsqueeze(-1)"
    f = ctx.F
    if aligned:
        return f"{beta} * {f}.cosine_similarity({q}, {k}, dim=-1, eps=1e-08)"
    qn, kn = ctx.tmp(f"{ctx.node.id}_q"), ctx.tmp(f"{ctx.node.id}_k")
    ctx.line(f"{qn} = {f}.normalize({q}, dim=-1, eps=1e-08)  # q / |q|")
    ctx.line(f"{kn} = {f}.normalize({k}, dim=-1, eps=1e-08)  # k / |k|")
    return f"{beta} * ({qn} @ {kn}.transpose(-1, -2))"


def _gat(ctx: EmitCtx, q: str, k: str, aligned: bool) -> str:
    """LeakyReLU_0.2(a_qᵀ q_i + a_kᵀ k_j)."""
    sq, sk = ctx.tmp(f"{ctx.node.id}_q"), ctx.tmp(f"{ctx.node.id}_k")
    ctx.line(f"{sq} = ({q} * {ctx.param('a_q')}.unsqueeze(-2)).sum(-1)  # a_qᵀ q")
    ctx.line(f"{sk} = ({k} * {ctx.param('a_k')}.unsqueeze(-2)).sum(-1)  # a_kᵀ k")
    both = f"{sq} + {sk}" if aligned else f"{sq}.unsqueeze(-1) + {sk}.unsqueeze(-2)"
    return f"{ctx.F}.leaky_relu({both}, 0.2)"


def _gatv2(ctx: EmitCtx, q: str, k: str, aligned: bool) -> str:
    """aᵀ LeakyReLU_0.2(q_i + k_j), ``a`` per head."""
    m = ctx.mod
    a = ctx.param("a")
    if m.a.dim() != 1:
        ones = "1, " * (1 if aligned else 2)
        a = f"{a}.reshape({m.a.shape[0]}, {ones}{m.a.shape[1]})"
    e = f"{q} + {k}" if aligned else f"{q}.unsqueeze(-2) + {k}.unsqueeze(-3)"
    return f"({ctx.F}.leaky_relu({e}, 0.2) * {a}).sum(-1)"


def _mlp(ctx: EmitCtx, k: str) -> bool:
    """vᵀ tanh(W k + b): each item scored alone."""
    m = ctx.mod
    w, v = ctx.param("W"), ctx.param("v")
    b = ctx.param("b") if m.b is not None else None
    t = ctx.torch
    if m.W.dim() == 2:
        ctx.out(f"{t}.tanh({ctx.F}.linear({k}, {w}.T, {b})) @ {v}")
        return True
    e = f"{k} @ {w}" if b is None else f"{k} @ {w} + {b}.unsqueeze(-2)"
    ctx.out(f"({t}.tanh({e}) * {v}.unsqueeze(-2)).sum(-1)")
    return True


def _location(ctx: EmitCtx, k: str) -> bool:
    """A learned score per position, or a Gaussian window around L·sigmoid(vᵀ tanh(W q))."""
    m = ctx.mod
    n = f"{k}.shape[-2]"
    if not m.gaussian:
        ctx.out(f"{ctx.param('weight')}[:{n}].expand({k}.shape[0], {n})")
        return True
    t = ctx.torch
    if ctx.has("query"):
        q = ctx.x("query")
    elif m.query is not None:
        q = f"{ctx.param('query')}.unsqueeze(0).expand({k}.shape[0], -1)"
    else:
        return False
    p = ctx.tmp(f"{ctx.node.id}_p")
    ctx.line(f"{p} = {t}.sigmoid({t}.tanh({q} @ {ctx.param('W')}) @ {ctx.param('v')})"
             "  # where, in (0, 1)")
    mask = ctx.mask(m.key_type.dims[0])
    length = f"{mask}.sum(-1).to({p}.dtype)" if mask is not None else f"float({n})"
    rows = ctx.t("query").rank if ctx.has("query") else 1
    centre = ctx.tmp(f"{ctx.node.id}_centre")
    lead = f"{length}[:, None]" if rows == 2 and mask is not None else length
    ctx.line(f"{centre} = ({lead} * {p})[..., None]  # the centre, in items")
    i = ctx.tmp("i")
    ctx.line(f"{i} = {t}.arange({n}, device={k}.device, dtype={p}.dtype)")
    ctx.out(f"-(({i} - {centre}) ** 2) / {2 * m.sigma ** 2!r}")
    return True
