"""The ``input`` kind: graph inputs (and a block's inputs, bound at instantiation).

Its model is the document's :class:`~attngraph.spec.models.InputSpec`; inputs have
no lowering rule (the compiled module binds them from ``forward``'s arguments).
"""

from __future__ import annotations

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, kind, no_work
from attngraph.spec.models import InputSpec


def _need(ctx: RuleCtx, field: str, typ: str, example: str) -> int:
    v = ctx.size(field)
    if v is None:
        ctx.fail(f"input type '{typ}' needs '{field}'", hint=f"e.g. {example}")
    return v


@kind("input", InputSpec, role="input", style=Style("#eeeeee", "invhouse"), work=no_work)
def input_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Types of each input type; ``length`` names the symbolic item count."""
    s = ctx.spec
    if s is None:
        ctx.fail("block input is not bound")
    n = s.length
    typ = s.type
    if (s.nested or s.inner is not None) and typ != "tokens":
        ctx.fail(f"'nested' and 'inner' apply to tokens inputs, not {typ}",
                 field="nested" if s.nested else "inner", hint="drop them")
    if typ == "tokens":
        _need(ctx, "vocab", typ, "{type: tokens, vocab: 1000}")
        if s.nested:  # sentences of words: ids [N, W], a word mask [N, W]
            w = s.inner or "W"
            if w == n:
                ctx.fail(f"the inner length of nested tokens must differ from their length "
                         f"{n}", field="inner", hint="e.g. length: S, inner: W")
            return {"": TensorType((n, w), dtype="long"),
                    "mask": TensorType((n, w), dtype="bool")}
        if s.inner is not None:
            ctx.fail("'inner' is the words' length of nested tokens", field="inner",
                     hint="add nested: true, or drop inner")
        return {"": TensorType((n,), dtype="long"), "mask": TensorType((n,), dtype="bool")}
    if typ == "vectors":
        d = _need(ctx, "dim", typ, "{type: vectors, dim: 64}")
        return {"": TensorType((n, d)), "mask": TensorType((n,), dtype="bool")}
    if typ == "vector":
        return {"": TensorType((_need(ctx, "dim", typ, "{type: vector, dim: 64}"),))}
    if typ == "image":
        c = ctx.size("channels") or 1
        h = _need(ctx, "height", typ, "{type: image, height: 28, width: 28}")
        w = _need(ctx, "width", typ, "{type: image, height: 28, width: 28}")
        return {"": TensorType((c, h, w))}
    if typ == "graph":
        d = _need(ctx, "dim", typ, "{type: graph, dim: 34}")
        return {
            "": TensorType((n, d)),
            "adjacency": TensorType((n, n), dtype="bool"),
            "mask": TensorType((n,), dtype="bool"),
        }
    if typ == "positions":
        if s.of is None:
            ctx.fail("input type 'positions' needs 'of': the input whose items they point at",
                     hint="e.g. {type: positions, of: points, length: T}")
        target = ctx.graph.node(s.of) if s.of in ctx.graph else None
        if target is None or not target.is_input or target.spec is None \
                or target.spec.type not in ("tokens", "vectors", "graph"):
            ctx.fail(f"positions of '{s.of}': that is not a tokens, vectors or graph input",
                     hint="name an input of items, e.g. of: points", field="of")
        return {"": TensorType((n,), dtype="long", index_of=target.spec.length),
                "mask": TensorType((n,), dtype="bool")}
    if s.of is not None:
        ctx.fail(f"'of' applies to inputs of type positions, not {typ}", field="of",
                 hint="drop 'of', or use type: positions")
    # labels
    return {"": TensorType((n,) if s.per_item else (), dtype="long")}
