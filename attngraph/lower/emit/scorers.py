"""Emit rules of ``scorer`` (dot, scaled dot, general, additive) and of ``prepare``
(an additive score's ``U k``, hoisted before a loop's steps); the lowerings:
:mod:`attngraph.lower.scorers`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.names import module_key
from attngraph.lower.scorers import Additive, Dot, General

if TYPE_CHECKING:
    from attngraph.lower.emit import EmitCtx

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
    if m.query is not None and m.query.dim() == 1:
        return f"{ctx.param('query')}.unsqueeze(0)"
    return None


def emit_scorer(ctx: EmitCtx) -> bool:
    """Scores of the queries against the keys."""
    m = ctx.mod
    if not m.has_query or ctx.has("features") or ctx.has("mask.adjacency"):
        return False
    q = _query(ctx)
    if q is None:
        return False
    k = ctx.x("key")
    if m.groups > 1 and not m.prepared:
        k = f"{k}.repeat_interleave({m.groups}, dim=1)"
    if type(m) in (Dot, General) or isinstance(m, Dot):
        return _dot(ctx, q, k)
    if type(m) is Additive and m.W.dim() == 2 and m.V is None:
        return _additive(ctx, q, k)
    return False


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
    uk = k if m.prepared else f"{k} @ {ctx.param('U')}"
    v = ctx.param("v")
    vector = m.vector_query
    if vector and b is not None:
        wq = f"{t}.addmm({b}, {q}, {w})"
    else:
        wq = f"{ctx.F}.linear({q}, {w}.T, {b})" if b is not None else f"{q} @ {w}"
    if not m.prepared and len(uk) > 16:  # U k on a line of its own
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
