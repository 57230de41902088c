"""Projections: queries, keys and values of items or a vector, optionally split into
heads. Lowered in :mod:`attngraph.lower.rules.attention`; re-exported by
:mod:`attngraph.kinds.attention`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import NodeModel, Ref, Size

__all__ = ["QueriesSpec", "KeysSpec", "ValuesSpec", "queries_shape", "keys_shape",
           "values_shape"]

_PROJ = Style("#d9ead3", "box")


class _Proj(NodeModel):
    """A projection of items or a vector, optionally split into heads."""

    from_: Ref | None = Field(default=None, alias="from")
    """What to project: a vector ``[d]`` or items ``[N, d]`` (float, without heads)."""
    dim: Size | None = None
    """Output size (the input's size if unset); a size."""
    heads: Size | None = None
    """Split the output into this many heads of ``dim / heads`` features (it must divide ``dim``); a
    size."""
    proj: Literal["linear", "identity", "mlp"] = "linear"
    """The projection: ``linear`` W x + b, ``identity`` x itself (``dim`` must equal the input
    size), ``mlp`` a two-layer MLP through ``hidden``."""
    bias: bool = True
    """Whether the projection has a bias."""
    hidden: Size | None = None
    """proj mlp: the hidden size (``dim`` if unset); a size."""


class QueriesSpec(_Proj):
    """Queries ``[M, d]`` (or ``[d]``): a projection, or ``learned: K`` vectors."""

    kind: Literal["queries"]
    learned: Size | None = None
    """K learned query vectors ``[K, dim]`` of their own instead of a projection of ``from`` (needs
    ``dim``; not together with ``from``); a size."""


class KeysSpec(_Proj):
    """Keys ``[N, d]``: a projection of items."""

    kind: Literal["keys"]


class ValuesSpec(_Proj):
    """Values ``[N, d]``: a projection of items."""

    kind: Literal["values"]


def _proj_dim(ctx: RuleCtx, d_in: int) -> int:
    """Output size of a projection; counts its parameters."""
    s = ctx.spec
    d_out = s.dim if s.dim is not None else d_in
    if s.proj == "identity":
        if d_out != d_in:
            ctx.fail(f"proj identity keeps the size {d_in}, but dim is {d_out}",
                     hint="drop 'dim', or use proj: linear", field="dim")
    elif s.proj == "linear":
        ctx.params += d_in * d_out + (d_out if s.bias else 0)
    else:
        h = s.hidden if s.hidden is not None else d_out
        ctx.params += d_in * h + h + h * d_out + (d_out if s.bias else 0)
    return d_out


def _qkv_work(ctx: WorkCtx) -> Work:
    """Learned vectors are copied; a projection runs once per vector, before the heads split."""
    out = ctx.out()
    if getattr(ctx.spec, "learned", None) is not None:
        return Work(ctx.elements(out))
    vectors = ctx.elements(ctx.t("from")) // ctx.features("from")
    hidden = vectors * ctx.spec.hidden if ctx.spec.proj == "mlp" and ctx.spec.hidden else 0
    return Work(ctx.node.params * vectors + ctx.elements(out), inner=hidden)


def _qkv(ctx: RuleCtx, what: str) -> dict[str, TensorType]:
    s = ctx.spec
    if getattr(s, "learned", None) is not None:
        if ctx.has("from"):
            ctx.fail("give 'from' or 'learned', not both",
                     hint="drop 'learned' to project 'from', or drop 'from' for learned queries")
        if s.dim is None:
            ctx.fail("learned queries need 'dim: <size>'", hint="e.g. {learned: 4, dim: d}")
        k, d = s.learned, s.dim
        ctx.params += k * d
        lead: tuple = (k,)
    else:
        if not ctx.has("from"):
            ctx.fail(f"{what} need 'from: <node>' (or learned: K for queries)",
                     hint="add from: <items or vector>")
        t = ctx.t("from")
        if t.dtype != "float" or t.rank not in (1, 2) or t.heads:
            ctx.fail(f"{what} project vectors [d] or items [N, d], got {t}", "from",
                     "merge heads in the readout (combine: concat) first" if t.heads else
                     "give them float items [N, d] (ids become items with embed:) or a vector")
        lead = t.dims[:-1]
        d = _proj_dim(ctx, ctx.features("from"))
    h = s.heads
    if h:
        if d % h:
            lo, hi = h * (d // h), h * (d // h + 1)
            sizes = f"{lo} or {hi}" if lo else str(hi)
            ctx.fail(f"{h} heads do not divide size {d}",
                     hint=f"make the size a multiple of {h} (e.g. dim: {sizes})", field="heads")
        return {"": TensorType((*lead, d // h), heads=h)}
    return {"": TensorType((*lead, d))}


@kind("queries", QueriesSpec, lowering="attngraph.lower.rules.attention:Proj",
      emit="attngraph.lower.export.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work, step="pointwise")
def queries_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[M, d] or [d]; with heads h, [M, d/h] per head."""
    return _qkv(ctx, "queries")


@kind("keys", KeysSpec, lowering="attngraph.lower.rules.attention:Proj",
      emit="attngraph.lower.export.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work, step="pointwise")
def keys_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "keys")


@kind("values", ValuesSpec, lowering="attngraph.lower.rules.attention:Proj",
      emit="attngraph.lower.export.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work, step="pointwise")
def values_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "values")
