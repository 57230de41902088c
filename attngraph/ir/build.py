"""``build(spec, doc) -> Graph``: resolve dims and references into the IR.

Sizes written as dims names become integers; every reference becomes an
:class:`~attngraph.ir.graph.Edge` with its :class:`~attngraph.ir.graph.Role` (the
field it came from), port, ``detach`` flag and source position. Which fields are
sizes, references and block names is read from the models
(:func:`attngraph.spec.fields.fields_of`). Dangling references and unknown dims are
collected and raised together as one :class:`~attngraph.errors.GraphError`.
Block definitions become template graphs; a ``block``, ``repeat`` or ``loop``
node gets its body instantiated by shape inference. A size given as a dims name
meets the bounds of its field as a number written there would (``times`` of a
``repeat`` is at most 1,024 either way), and blocks nest at most
:data:`MAX_BLOCK_DEPTH` deep, checked here before anything recurses through them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Annotated, Any, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from attngraph.algebra.formula import formula_loc, formula_refs
from attngraph.errors import Diagnostic, GraphError, SourceLoc, did_you_mean
from attngraph.ir.graph import Edge, Graph, Node, Role
from attngraph.source import Document, PathKey
from attngraph.spec import models as m
from attngraph.spec.fields import fields_of

__all__ = ["build", "MAX_BLOCK_DEPTH", "SECTIONS"]

#: The spec's sections whose positions the graph keeps (its nodes carry the rest).
SECTIONS = ("train", "dims", "inputs", "outputs")
#: Deepest nesting of blocks (a block whose nodes use a block whose nodes use ...);
#: every stage after this one walks bodies recursively.
MAX_BLOCK_DEPTH = 32


class _Ctx:
    def __init__(self, doc: Document, dims: dict[str, int]) -> None:
        self.doc = doc
        self.dims = dims
        self.diags: list[Diagnostic] = []

    def loc(self, path: PathKey, *, key: bool = False) -> SourceLoc:
        return self.doc.loc(path, key=key)

    def error(self, path: PathKey, msg: str, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(self.loc(path), msg, hint))


@functools.cache
def _number_check(model: type[BaseModel], attr: str) -> TypeAdapter[Any]:
    """Validation of a size field's number as if written in place (its own bounds)."""
    info = model.model_fields[attr]
    if not info.metadata:
        return TypeAdapter(cast(Any, info.annotation))
    # Annotated[type, *metadata]: the field's type with its own bounds
    args = (info.annotation, *info.metadata)
    return TypeAdapter(cast(Any, Annotated)[args])


def _resolve_size(ctx: _Ctx, where: str, path: PathKey, value: Any,
                  model: type[BaseModel] | None = None, attr: str = "") -> Any:
    if isinstance(value, str) and not isinstance(value, bool):
        if value not in ctx.dims:
            ctx.error(path, f"{where}: '{value}' is not a dims name",
                      did_you_mean(value, ctx.dims) if ctx.dims else "declare it under dims:")
            return 1
        number = ctx.dims[value]
        if model is None:
            return number
        try:
            _number_check(model, attr).validate_python(number)
        except ValidationError as exc:
            errs = exc.errors(include_url=False)
            err = next((e for e in errs if not e["type"].endswith("_type")), errs[0])
            field = path[-1]
            bound = err.get("ctx") or {}
            most = bound.get("le")
            if most is None:
                msg = str(err["msg"])
                ctx.error(path, f"{where}: {field} '{value}' is {number:,}: "
                          f"{msg[0].lower()}{msg[1:]}", f"change '{value}' under dims:")
            else:
                ctx.error(path, f"{where}: {field} '{value}' is {number:,}, over the limit of "
                          f"{most:,} for {field}", f"make '{value}' at most {most:,} under "
                          f"dims:, or write a number of at most {most:,} here")
            return 1
        return number
    return value


def _resolve_model(ctx: _Ctx, where: str, path: PathKey, model: BaseModel) -> Any:
    """A copy of ``model`` with every size field (also nested) resolved to an int."""
    update: dict[str, Any] = {}
    table = fields_of(type(model))
    for key, name in table.attrs.items():
        v = getattr(model, name)
        if isinstance(v, BaseModel):
            nv = _resolve_model(ctx, where, (*path, key), v)
            if nv is not v:
                update[name] = nv
        elif isinstance(v, dict) and v and all(isinstance(x, BaseModel) for x in v.values()):
            nd = {k: _resolve_model(ctx, where, (*path, key, k), x) for k, x in v.items()}
            update[name] = nd
        elif key in table.sizes and isinstance(v, str):
            update[name] = _resolve_size(ctx, where, (*path, key), v, type(model), name)
    return model.model_copy(update=update) if update else model


def _is_ref(v: object) -> bool:
    return isinstance(v, (str, m.RefLong)) and not isinstance(v, bool)


def _refs(spec: BaseModel) -> Iterator[tuple[Role, PathKey, Any]]:
    """(role, path below the node, reference) for every reference of a node spec."""
    table = fields_of(type(spec))
    for name, attr in table.attrs.items():
        v = getattr(spec, attr)
        if name in table.refs:
            if isinstance(v, list):
                for i, r in enumerate(v):
                    yield Role(name, str(i)), (name, i), r
            elif isinstance(v, dict):
                for k, r in v.items():
                    yield Role(name, k), (name, k), r
            elif _is_ref(v):
                yield Role(name), (name,), v
        elif isinstance(v, BaseModel) and name in table.nested:
            for role, sub, r in _refs(v):
                yield Role(name, sub=role.field), (name, *sub), r
        elif isinstance(v, dict) and name in table.nested:
            for k, x in v.items():
                for role, sub, r in _refs(x):
                    yield Role(name, k, role.field), (name, k, *sub), r


def _raw(data: Any, path: PathKey) -> Any:
    for p in path:
        if not isinstance(data, dict) or p not in data:
            return None
        data = data[p]
    return data


def _edge(ctx: _Ctx, role: Role, path: PathKey, ref: Any) -> Edge:
    detach = False
    if isinstance(ref, m.RefLong):
        detach = ref.detach
        ref = ref.ref
        path = (*path, "ref")
    src, _, port = str(ref).partition(".")
    return Edge(role=role, src=src, port=port, detach=detach, loc=ctx.loc(path))


def _nodes(
    ctx: _Ctx, base: PathKey, nodes: dict[str, Any], known: set[str], scope: str
) -> list[Node[Any]]:
    out = []
    for nid, spec in nodes.items():
        path = (*base, nid)
        where = f"node '{nid}'"
        spec = _resolve_model(ctx, where, path, spec)
        steps = getattr(spec, "steps", None)
        if isinstance(steps, str) and steps in ctx.dims and steps in known:
            # a number (the dims entry) or one step per item of the node: say so, not guess
            ctx.error((*path, "steps"), f"{where}: steps '{steps}' is both an entry of dims "
                      f"({ctx.dims[steps]}) and a node or input{scope}", "rename one of them: "
                      "steps: <dims name> runs that many steps, steps: <node> one step per "
                      "item of its first axis")
        elif isinstance(steps, str) and steps in ctx.dims:
            # a loop's steps given as a dims name: a number, not a reference
            spec = spec.model_copy(update={"steps": ctx.dims[steps]})
        edges = []
        for role, sub, ref in _refs(spec):
            e = _edge(ctx, role, (*path, *sub), ref)
            if e.src not in known:
                ctx.diags.append(Diagnostic(
                    e.loc, f"{where}: {role.field} '{e.src}' is not a node or "
                    f"input{scope}", did_you_mean(e.src, known - {nid}),
                ))
            edges.append(e)
        edges += _formula_edges(ctx, spec, path, known)
        raw = _raw(ctx.doc.data, path)
        out.append(Node(
            id=nid, spec=spec, inputs=tuple(edges),
            loc=ctx.loc(path), label=spec.label or nid,
            field_locs={k: ctx.loc((*path, k)) for k in raw} if isinstance(raw, dict) else {},
        ))
    return out


def _formula_edges(ctx: _Ctx, spec: BaseModel, path: PathKey, known: set[str]) -> list[Edge]:
    """The edges of the nodes and inputs a formula names (role ``formula.<name>``, located
    at the name). Other names (dims, lengths, indices, axes, typos) are for shape
    inference, which knows what each may be."""
    out = []
    for name in sorted(fields_of(type(spec)).formulas):
        text = getattr(spec, fields_of(type(spec)).attr(name))
        if not isinstance(text, str):
            continue
        base = ctx.loc((*path, name))
        for n in formula_refs(text):
            src, _, port = n.name.partition(".")
            if src in known:
                out.append(Edge(role=Role(name, n.name), src=src, port=port,
                                loc=formula_loc(base, text, n.pos)))
    return out


def _outputs(
    ctx: _Ctx, path: PathKey, outputs: dict[str, Any], known: set[str], scope: str
) -> tuple[tuple[str, Edge], ...]:
    res = []
    for name, ref in outputs.items():
        e = _edge(ctx, Role(name), (*path, name), ref)
        if e.src not in known:
            ctx.diags.append(Diagnostic(
                e.loc, f"output '{name}': '{e.src}' is not a node or input{scope}",
                did_you_mean(e.src, known),
            ))
        res.append((name, e))
    return tuple(res)


def _input_nodes(ctx: _Ctx, inputs: dict[str, m.InputSpec]) -> list[Node[Any]]:
    out = []
    first = True
    for name, spec in inputs.items():
        path = ("inputs", name)
        spec = _resolve_model(ctx, f"input '{name}'", path, spec)
        if spec.length is None:
            # the first collection is N; others get their own symbol unless they
            # say `length:`; per-item labels label the first collection's items
            if spec.type == "labels" or (first and spec.type != "positions"):
                spec = spec.model_copy(update={"length": "N"})
            else:
                spec = spec.model_copy(update={"length": f"N_{name}"})
            if spec.type in ("tokens", "vectors", "graph"):
                first = False
        raw = _raw(ctx.doc.data, path)
        out.append(Node(id=name, spec=spec, loc=ctx.loc(path),
                        label=spec.label or name,
                        field_locs={k: ctx.loc((*path, k)) for k in raw}
                        if isinstance(raw, dict) else {}))
    for name in inputs:
        # forward takes each input by keyword, and a mask or adjacency as <input>_<port>
        if name == "self":
            ctx.error(("inputs", name), "input 'self' cannot be passed to forward by "
                      "keyword (a module's __call__ takes self)", "rename the input, e.g. 'x'")
        base, _, port = name.rpartition("_")
        if port in ("mask", "adjacency") and base in inputs:
            ctx.error(("inputs", name),
                      f"input '{name}' has the name of the {port} argument of input "
                      f"'{base}' (forward takes {name}= for it)", "rename one of the two inputs")
    return out


def _block(ctx: _Ctx, name: str, block: m.BlockSpec) -> Graph:
    base: PathKey = ("blocks", name)
    ins = [Node(id=i, spec=None, loc=ctx.loc((*base, "inputs", k)), label=i)
           for k, i in enumerate(block.inputs)]
    clash = set(block.inputs) & set(block.nodes)
    for c in sorted(clash):
        ctx.error((*base, "nodes", c), f"block '{name}': '{c}' is both an input and a node",
                  f"rename the node '{c}' (its inputs are named under inputs:)")
    known = set(block.inputs) | set(block.nodes)
    scope = f" of block '{name}'"
    nodes = _nodes(ctx, (*base, "nodes"), block.nodes, known, scope)
    if block.outputs is not None and block.output is not None:
        ctx.error(base, f"block '{name}': give 'output' or 'outputs', not both",
                  "keep output: <node> for one result, or outputs: {name: <node>} for several")
    if block.outputs is None and block.output is None:
        ctx.error(base, f"block '{name}': missing field 'output'",
                  "name the node the block returns: output: <node>")
        outs: tuple[tuple[str, Edge], ...] = ()
    elif block.outputs is not None:
        outs = _outputs(ctx, (*base, "outputs"), block.outputs, known, scope)
        if not block.outputs:
            ctx.error((*base, "outputs"), f"block '{name}': 'outputs' names no output",
                      "name what the block returns: outputs: {name: <node>}, or "
                      "output: <node> for one result")
    else:
        e = _edge(ctx, Role("output"), (*base, "output"), block.output)
        if e.src not in known:
            ctx.diags.append(Diagnostic(
                e.loc, f"block '{name}': output '{e.src}' is not a node or input{scope}",
                did_you_mean(e.src, known),
            ))
        outs = (("", e),)
    return Graph(name=name, nodes=tuple(ins + nodes), outputs=outs, dims=ctx.dims,
                 file=ctx.doc.file, title=block.label, summary=block.note, block=name)


def _block_uses(g: Graph) -> list[tuple[Node[Any], str, str]]:
    """(node, field, block name) for every field of ``g``'s nodes that names a block."""
    return [(n, key, str(n.field(key))) for n in g.nodes if not n.is_input
            for key in sorted(fields_of(type(n.spec)).blocks) if n.field(key) is not None]


def _check_nesting(ctx: _Ctx, blocks: dict[str, Graph]) -> None:
    """Refuse blocks nested deeper than :data:`MAX_BLOCK_DEPTH`, at the use one too deep.

    Iterative, so that any depth is measured without recursing; a cycle of blocks
    counts once round (``verify`` reports it).
    """
    uses = {name: [u for u in _block_uses(g) if u[2] in blocks] for name, g in blocks.items()}
    height: dict[str, int] = {}
    seen: set[str] = set()
    for root in blocks:
        if root in seen:
            continue
        seen.add(root)
        stack = [(root, iter(uses[root]))]
        while stack:
            name, todo = stack[-1]
            nxt = next(todo, None)
            if nxt is None:
                height[name] = 1 + max((height.get(b, 0) for _, _, b in uses[name]), default=0)
                stack.pop()
            elif nxt[2] not in seen:
                seen.add(nxt[2])
                stack.append((nxt[2], iter(uses[nxt[2]])))
    top = max(blocks, key=lambda b: height.get(b, 0), default=None)
    if top is None or height[top] <= MAX_BLOCK_DEPTH:
        return
    chain = [top]
    for _ in range(MAX_BLOCK_DEPTH):
        node, key, inner = max(uses[chain[-1]], key=lambda u: height.get(u[2], 0))
        chain.append(inner)
    shown = " -> ".join(chain[:3]) + " -> ... -> " + " -> ".join(chain[-2:]) \
        + (" -> ..." if height[top] > len(chain) else "")
    ctx.error(("blocks", chain[-2], "nodes", node.id, key),
              f"node '{node.id}' of block '{chain[-2]}': blocks nest {height[top]} deep "
              f"({shown}), over the limit of {MAX_BLOCK_DEPTH}",
              "use fewer levels: write some blocks' nodes into the block that uses them, "
              "or stack rounds of one block with kind: repeat")


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
    # an `auto` size is refused by validate: a spec read without data has none
    ctx = _Ctx(doc, {k: v for k, v in spec.dims.items() if isinstance(v, int)})
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
        for key in sorted(fields_of(type(n.spec)).blocks):
            bname = n.field(key)
            if bname is not None and bname not in blocks:
                ctx.error((*path, key), f"node '{n.id}': '{bname}' is not a block",
                          did_you_mean(bname, blocks) if blocks else "define it under blocks:")
    if not ctx.diags:
        _check_nesting(ctx, blocks)
    if ctx.diags:
        raise GraphError(ctx.diags[0].message, diagnostics=ctx.diags)
    graph = Graph(
        name=spec.name, nodes=tuple(inputs + nodes), outputs=outputs, dims=ctx.dims,
        file=doc.file, title=spec.title, summary=spec.summary, train=spec.train,
        blocks=blocks, positions=doc.positions(*SECTIONS),
    )
    return graph
