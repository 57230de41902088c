"""Indexing: ``gather`` picks the items that positions point at (a pointer network's
next input is the item it pointed to), ``onehot`` turns ids into one-hot vectors.
Lowered in :mod:`attngraph.lower.rules.indexing`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, elementwise_work, kind
from attngraph.spec.models import NodeModel, Ref, Size

__all__ = ["GatherSpec", "OnehotSpec"]


class GatherSpec(NodeModel):
    """The items of ``from`` at the positions ``index``: [N, d] at long[] -> [d]."""

    kind: Literal["gather"]
    from_: Ref = Field(alias="from")
    """The items ``[N, d]`` to pick from."""
    index: Ref
    """Positions into those N items (a positions input, or ids fed to a loop step)."""


class OnehotSpec(NodeModel):
    """Ids as one-hot float vectors of ``classes`` entries."""

    kind: Literal["onehot"]
    from_: Ref = Field(alias="from")
    """Ids: a tokens or labels input, or ids fed to a loop step."""
    classes: Size | None = None
    """The vector size, at least the number of ids the input may hold (the input's vocab or classes
    if unset); a size."""


@kind("gather", GatherSpec, lowering="attngraph.lower.rules.indexing:Gather", role="support",
      emit="attngraph.lower.export.emit.indexing:emit_gather",
      style=Style("#ffffff", "box"), work=elementwise_work, transparent=True)
def gather_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Items [N, d] at positions into them: long[] (one per example) -> [d], long[M] ->
    [M, d]. The positions must be of these items (a positions input, or one fed to a
    loop step), so that they can be checked against each example's real items."""
    t = ctx.t("from")
    if t.rank != 2 or t.heads or t.dtype != "float":
        ctx.fail(f"gather picks items of [N, d], got {t}", "from",
                 "give it items (merge heads in the readout first)" if t.heads else
                 "give it items [N, d]")
    i = ctx.t("index")
    if i.dtype != "long" or i.rank > 1 or i.heads:
        ctx.fail(f"gather's index is positions: one per example (long[]) or a list "
                 f"(long[M]), got {i}", "index",
                 "feed it positions, e.g. the target positions fed to a loop step")
    if i.index_of is None or i.index_of != t.dims[0]:
        what = f"positions into {i.index_of} items" if i.index_of is not None else "ids"
        ctx.fail(f"gather's index must be positions into the {t.dims[0]} items of "
                 f"'{ctx.edge('from').ref}', got {what}", "index",
                 f"declare them as an input {{type: positions, of: <the input of the "
                 f"{t.dims[0]} items>}} (checked against each example's real items)")
    return {"": TensorType((*i.dims, t.dims[1]))}


@kind("onehot", OnehotSpec, lowering="attngraph.lower.rules.indexing:Onehot", role="support",
      emit="attngraph.lower.export.emit.indexing:emit_onehot",
      style=Style("#ffffff", "box"), work=elementwise_work, step="pointwise")
def onehot_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Ids long[...] -> float [..., classes]; classes from the input's vocab or classes."""
    t = ctx.t("from")
    if t.dtype != "long" or t.heads:
        ctx.fail(f"onehot reads ids, got {t}", "from", "give it a tokens or labels input, or "
                 "ids fed to a loop step")
    classes = ctx.spec.classes
    bound = ctx.id_bound(ctx.edge("from"))
    if classes is None:
        if bound is None:
            ctx.fail("onehot needs 'classes' here (its ids do not come from an input that "
                     "says how many there are)", hint="add classes: <number of ids>")
        classes = bound
    elif bound is not None and bound > classes:
        ctx.fail(f"onehot of {classes} classes, but its ids go up to {bound - 1}",
                 field="classes", hint=f"use classes: {bound} (or more)")
    return {"": TensorType((*t.dims, int(classes)))}
