"""Items: the set of vectors attention ranges over, made from an input's tokens (a
learned table), vectors, or an image's pixels or patches. Lowered in
:mod:`attngraph.lower.rules.attention`; re-exported by :mod:`attngraph.kinds.attention`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from attngraph.ir.graph import Edge, Node, TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import NodeModel, PosInt, Ref, Size

__all__ = ["ItemsSpec", "items_shape", "image_grid"]


class ItemsSpec(NodeModel):
    """Items ``[N, d]``: embedded token ids, vectors, image pixels or patches, graph nodes."""

    kind: Literal["items"]
    from_: Ref = Field(alias="from")
    """What to turn into items: a tokens, vectors, image or graph input, or a node giving items
    ``[N, d]``."""
    embed: Size | None = None
    """Token ids: the size of the learned table ``[vocab, embed]`` they are looked up in (required
    for ids; ``from`` is then a tokens input); a size."""
    patches: tuple[PosInt, PosInt] | None = None
    """Image: cut it into tiles ``[ph, pw]``, each one item of size ``C·ph·pw`` (ph and pw divide
    the height and width); unset, each pixel is an item."""
    dim: Size | None = None
    """Project every item to this size with a linear map; a size."""
    bias: bool = True
    """Whether the ``dim`` projection has a bias."""




def _items_table(n: Node[Any]) -> tuple[int, int] | None:
    """``(vocab, embed)`` of the table items with ``embed`` look ids up in (their
    parameters may also hold a ``dim`` projection after it); None without one."""
    s = n.spec
    if s.embed is None:
        return None
    d = int(s.embed)
    extra = 0 if s.dim is None else d * int(s.dim) + (int(s.dim) if s.bias else 0)
    return (int(n.params) - extra) // d, d


def _items_work(ctx: WorkCtx) -> Work:
    """The projection (``dim``) once per item; a lookup or a copy per element."""
    out, src = ctx.out(), ctx.t("from")
    table = 0
    if src.dtype == "long":
        table = ctx.graph.node(ctx.edge("from").src).spec.vocab * ctx.spec.embed
    n = ctx.positions(out)
    # patches are cut into a tensor of their own before a projection (dim) reads them
    cut = ctx.elements(src) if src.rank == 3 and ctx.spec.dim is not None else 0
    # a table shared with another node (tied weights) is not counted in params here
    return Work(n * max(ctx.node.params - table, 0) + ctx.elements(out) + ctx.elements(src),
                inner=cut)


@kind("items", ItemsSpec, lowering="attngraph.lower.rules.attention:Items",
      emit="attngraph.lower.export.emit.attention:emit_items", role="items",
      style=Style("#cfe2f3", "box"), work=_items_work, table=_items_table, step="pointwise")
def items_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]: embedded tokens, projected vectors, image patches, graph nodes."""
    s = ctx.spec
    t = ctx.t("from")
    if t.dtype == "long":
        if s.embed is None:
            ctx.fail(f"items from token ids {t} need 'embed: <size>'", "from",
                     "add embed: d to look the ids up in a learned table")
        if t.rank != 1:
            ctx.fail(f"items from ids need one items axis, got {t}", "from",
                     "read the tokens input itself")
        src = ctx.src("from")
        vocab = src.field("vocab") if src.is_input and src.spec is not None else None
        if vocab is None:
            ctx.fail("items with 'embed' need token ids from a tokens input (for its vocab)",
                     "from", "read a tokens input directly, or use an embedding node with "
                     "vocab: <size> (e.g. inside a block)")
        ctx.params += vocab * s.embed
        n, d = t.dims[0], s.embed
    elif t.rank == 3 and t.dtype == "float":
        c, h, w = (ctx.fixed(x, f"the {what} of image '{ctx.edge('from').ref}'", "from")
                   for x, what in zip(t.dims, ("channels", "height", "width"), strict=True))
        if s.patches is not None:
            ph, pw = s.patches
            if h % ph or w % pw:
                ctx.fail(f"patches {ph}x{pw} do not tile an image of {h}x{w}",
                         hint="choose patch sizes that divide the height and width",
                         field="patches")
            n, d = (h // ph) * (w // pw), c * ph * pw
        else:
            n, d = h * w, c
    elif t.rank == 2 and t.dtype == "float" and t.heads:
        ctx.fail(f"items are one set without heads, but '{ctx.edge('from').ref}' has {t}",
                 "from", "merge the heads in a readout (combine: concat) first")
    elif t.rank == 2 and t.dtype == "float":
        if s.embed is not None:
            ctx.fail("'embed' applies to token ids, but this input is vectors", "from",
                     "use dim: <size> to project vectors")
        n, d = t.dims[0], ctx.features("from")
    else:
        per_item = t.rank == 1 and isinstance(t.dims[0], str)
        ctx.fail(f"items need tokens, vectors [N, d], an image or a graph, got {t}", "from",
                 f"'{ctx.edge('from').ref}' is one number per item: kind conv (from: it, out: "
                 "k, kernel: 1 or more) makes per-item features [N, k]" if per_item else
                 "a single vector is one item: use kind 'queries' or 'linear' for it")
    if s.dim is not None:
        ctx.params += d * s.dim + (s.dim if s.bias else 0)
        d = s.dim
    return {"": TensorType((n, d))}


def image_grid(src: Node, type_of: Callable[[Edge], TensorType]) -> tuple[int, int]:
    """``(rows, cols)`` of the items an ``items`` node cuts from an image.

    ``src`` is the node that made the items; raises ``ValueError`` when it is not
    an ``items`` node reading an image (its pixels, or its ``patches``).
    """
    e = src.edge("from") if src.kind == "items" else None  # this module's own kind
    t = type_of(e) if e is not None else None
    if t is None or t.rank != 3 or t.dtype != "float":
        raise ValueError(src.id)
    h, w = t.dims[1], t.dims[2]
    if not isinstance(h, int) or not isinstance(w, int):
        raise ValueError(src.id)
    ph, pw = src.spec.patches if src.spec.patches is not None else (1, 1)
    return h // ph, w // pw
