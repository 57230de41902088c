"""``build(spec, doc) -> Graph``: resolve dims and references into the IR.

Sizes written as dims names become integers; every reference becomes an
:class:`~attngraph.ir.graph.Edge` with its role (the field it came from), port,
``detach`` flag and source position. Dangling references and unknown dims are
collected and raised together as one :class:`~attngraph.errors.GraphError`.
Block definitions become template graphs; a ``block``, ``repeat`` or ``loop``
node gets its body instantiated by shape inference.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from attngraph.errors import Diagnostic, GraphError, SourceLoc, did_you_mean
from attngraph.ir.graph import INPUT, Edge, Graph, Node
from attngraph.source import Document, PathKey
from attngraph.spec import models as m

__all__ = ["build", "SIZE_FIELDS", "REF_FIELDS"]

#: Fields holding a size (a positive integer or a dims name).
SIZE_FIELDS = frozenset({
    "embed", "dim", "hidden", "out", "vocab", "max_len", "slots", "width", "channels",
    "height", "classes", "learned", "zeros", "heads", "times",
})
#: Fields holding references (single, list or mapping).
REF_FIELDS = (
    "from_", "query", "key", "scores", "weights", "values", "mean", "baseline", "image",
    "loc", "memory", "erase", "add", "content", "prev", "control", "init", "steps",
    "inputs",
)


class _Ctx:
    def __init__(self, doc: Document, dims: dict[str, int]) -> None:
        self.doc = doc
        self.dims = dims
        self.diags: list[Diagnostic] = []

    def loc(self, path: PathKey, *, key: bool = False) -> SourceLoc:
        return self.doc.loc(path, key=key)

    def error(self, path: PathKey, msg: str, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(self.loc(path), msg, hint))


def _resolve_size(ctx: _Ctx, where: str, path: PathKey, value: Any) -> Any:
    if isinstance(value, str) and not isinstance(value, bool):
        if value in ctx.dims:
            return ctx.dims[value]
        ctx.error(path, f"{where}: '{value}' is not a dims name",
                  did_you_mean(value, ctx.dims) if ctx.dims else "declare it under dims:")
        return 1
    return value


def _resolve_model(ctx: _Ctx, where: str, path: PathKey, model: BaseModel) -> Any:
    """A copy of ``model`` with every size field (also nested) resolved to an int."""
    update: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        v = getattr(model, name)
        if isinstance(v, BaseModel):
            nv = _resolve_model(ctx, where, (*path, key), v)
            if nv is not v:
                update[name] = nv
        elif isinstance(v, dict) and v and all(isinstance(x, BaseModel) for x in v.values()):
            nd = {k: _resolve_model(ctx, where, (*path, key, k), x) for k, x in v.items()}
            update[name] = nd
        elif name in SIZE_FIELDS and isinstance(v, str):
            update[name] = _resolve_size(ctx, where, (*path, key), v)
    return model.model_copy(update=update) if update else model


def _refs(spec: Any) -> Iterator[tuple[str, PathKey, Any]]:
    """(role, path below the node, reference) for every reference of a node spec."""
    for name in REF_FIELDS:
        if name not in type(spec).model_fields:
            continue
        if name == "init" and spec.kind == "memory":
            continue  # a memory's init is a fill mode (learned/zeros/constant), not a ref
        v = getattr(spec, name)
        key = "from" if name == "from_" else name
        if v is None or isinstance(v, (bool, int)) or isinstance(v, m.LearnedQuery):
            continue
        if isinstance(v, list):
            for i, r in enumerate(v):
                yield f"{key}.{i}", (key, i), r
        elif isinstance(v, dict):
            for k, r in v.items():
                yield f"{key}.{k}", (key, k), r
        else:
            yield key, (key,), v
    mask = getattr(spec, "mask", None)
    if mask is not None and mask.adjacency is not None:
        yield "mask.adjacency", ("mask", "adjacency"), mask.adjacency
    for cname, c in (getattr(spec, "carry", None) or {}).items():
        if c.init is not None:
            yield f"carry.{cname}.init", ("carry", cname, "init"), c.init
    for fname, f in (getattr(spec, "feed", None) or {}).items():
        if f.from_ is not None:
            yield f"feed.{fname}.from", ("feed", fname, "from"), f.from_


def _raw(data: Any, path: PathKey) -> Any:
    for p in path:
        if not isinstance(data, dict) or p not in data:
            return None
        data = data[p]
    return data


def _edge(ctx: _Ctx, role: str, path: PathKey, ref: Any) -> Edge:
    detach = False
    if isinstance(ref, m.RefLong):
        detach = ref.detach
        ref = ref.ref
        path = (*path, "ref")
    src, _, port = str(ref).partition(".")
    return Edge(role=role, src=src, port=port, detach=detach, loc=ctx.loc(path))


def _nodes(
    ctx: _Ctx, base: PathKey, nodes: dict[str, Any], known: set[str], scope: str
) -> list[Node]:
    out = []
    for nid, spec in nodes.items():
        path = (*base, nid)
        where = f"node '{nid}'"
        spec = _resolve_model(ctx, where, path, spec)
        edges = []
        for role, sub, ref in _refs(spec):
            e = _edge(ctx, role, (*path, *sub), ref)
            if e.src not in known:
                ctx.diags.append(Diagnostic(
                    e.loc, f"{where}: {role.split('.')[0]} '{e.src}' is not a node or "
                    f"input{scope}", did_you_mean(e.src, known - {nid}),
                ))
            edges.append(e)
        raw = _raw(ctx.doc.data, path)
        out.append(Node(
            id=nid, kind=spec.kind, spec=spec, inputs=tuple(edges),
            loc=ctx.loc(path), label=spec.label or nid,
            field_locs={k: ctx.loc((*path, k)) for k in raw} if isinstance(raw, dict) else {},
        ))
    return out


def _outputs(
    ctx: _Ctx, path: PathKey, outputs: dict[str, Any], known: set[str], scope: str
) -> tuple[tuple[str, Edge], ...]:
    res = []
    for name, ref in outputs.items():
        e = _edge(ctx, name, (*path, name), ref)
        if e.src not in known:
            ctx.diags.append(Diagnostic(
                e.loc, f"output '{name}': '{e.src}' is not a node or input{scope}",
                did_you_mean(e.src, known),
            ))
        res.append((name, e))
    return tuple(res)


def _input_nodes(ctx: _Ctx, inputs: dict[str, m.InputSpec]) -> list[Node]:
    out = []
    first = True
    for name, spec in inputs.items():
        path = ("inputs", name)
        spec = _resolve_model(ctx, f"input '{name}'", path, spec)
        if spec.length is None:
            # the first collection is N; others get their own symbol unless they
            # say `length:`; per-item labels label the first collection's items
            if spec.type == "labels" or first:
                spec = spec.model_copy(update={"length": "N"})
            else:
                spec = spec.model_copy(update={"length": f"N_{name}"})
            if spec.type in ("tokens", "vectors", "graph"):
                first = False
        raw = _raw(ctx.doc.data, path)
        out.append(Node(id=name, kind=INPUT, spec=spec, loc=ctx.loc(path),
                        label=spec.label or name,
                        field_locs={k: ctx.loc((*path, k)) for k in raw}
                        if isinstance(raw, dict) else {}))
    return out


def _block(ctx: _Ctx, name: str, block: m.BlockSpec) -> Graph:
    base: PathKey = ("blocks", name)
    ins = [Node(id=i, kind=INPUT, spec=None, loc=ctx.loc((*base, "inputs", k)), label=i)
           for k, i in enumerate(block.inputs)]
    clash = set(block.inputs) & set(block.nodes)
    for c in sorted(clash):
        ctx.error((*base, "nodes", c), f"block '{name}': '{c}' is both an input and a node")
    known = set(block.inputs) | set(block.nodes)
    scope = f" of block '{name}'"
    nodes = _nodes(ctx, (*base, "nodes"), block.nodes, known, scope)
    if block.outputs is not None and block.output is not None:
        ctx.error(base, f"block '{name}': give 'output' or 'outputs', not both")
    if block.outputs is None and block.output is None:
        ctx.error(base, f"block '{name}': missing field 'output'",
                  "name the node the block returns: output: <node>")
        outs: tuple[tuple[str, Edge], ...] = ()
    elif block.outputs is not None:
        outs = _outputs(ctx, (*base, "outputs"), block.outputs, known, scope)
    else:
        e = _edge(ctx, "output", (*base, "output"), block.output)
        if e.src not in known:
            ctx.diags.append(Diagnostic(
                e.loc, f"block '{name}': output '{e.src}' is not a node or input{scope}",
                did_you_mean(e.src, known),
            ))
        outs = (("", e),)
    return Graph(name=name, nodes=tuple(ins + nodes), outputs=outs, dims=ctx.dims,
                 file=ctx.doc.file, title=block.label, summary=block.note, block=name)


def build(spec: m.Spec, doc: Document) -> Graph:
    """Resolve ``spec`` into the IR.

    Parameters
    ----------
    spec : Spec
        A validated spec.
    doc : Document
        The document it came from (for positions).

    Returns
    -------
    Graph
        The main graph, without inferred types; ``graph.blocks`` holds each block's
        template graph.

    Raises
    ------
    GraphError
        With one diagnostic per dangling reference, unknown dims name or clash.
    """
    ctx = _Ctx(doc, dict(spec.dims))
    inputs = _input_nodes(ctx, spec.inputs)
    for nid in spec.nodes:
        if nid in spec.inputs:
            ctx.error(("nodes", nid), f"node '{nid}' has the name of an input",
                      "give the node another id")
    known = set(spec.inputs) | set(spec.nodes)
    nodes = _nodes(ctx, ("nodes",), spec.nodes, known, "")
    outputs = _outputs(ctx, ("outputs",), spec.outputs, known, "")
    blocks = {name: _block(ctx, name, b) for name, b in spec.blocks.items()}
    for path, n in [(("nodes", n.id), n) for n in nodes] + [
        (("blocks", g.name, "nodes", n.id), n) for g in blocks.values() for n in g.nodes
        if not n.is_input
    ]:
        bname = n.field("block") if n.kind in ("block", "repeat") else n.field("body")
        if bname is not None and bname not in blocks:
            key = "block" if n.kind != "loop" else "body"
            ctx.error((*path, key), f"node '{n.id}': '{bname}' is not a block",
                      did_you_mean(bname, blocks) if blocks else "define it under blocks:")
    if ctx.diags:
        raise GraphError(ctx.diags[0].message, diagnostics=ctx.diags)
    graph = Graph(
        name=spec.name, nodes=tuple(inputs + nodes), outputs=outputs, dims=ctx.dims,
        file=doc.file, title=spec.title, summary=spec.summary, train=spec.train,
        blocks=blocks,
    )
    return graph
