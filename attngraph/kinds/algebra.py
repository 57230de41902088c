"""The algebra kinds: ``expr`` (a formula over named values) and ``param`` (a free
parameter of any declared shape).

An ``expr`` reads the nodes and inputs its formula names (each becomes an edge of
the IR, role ``formula.<name>``, located at the name inside the formula), checks
it statically (:mod:`attngraph.algebra.program`: names, axes by name, sizes,
roles) and gives its result's type, with its axes named. Errors point inside the
formula: the line and column of the offending name or operator.

A ``param`` is a learned (or, with ``fixed: true``, a seeded constant) tensor of
the declared shape, with its axes named, for formulas to read.

Lowered in :mod:`attngraph.lower.rules.algebra`.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from attngraph.algebra.axes import axes_of, canonical
from attngraph.algebra.formula import FormulaError, formula_loc, parse
from attngraph.algebra.program import Env, Program, Val, typecheck
from attngraph.algebra.spans import ANY
from attngraph.errors import ShapeError, SourceLoc, did_you_mean
from attngraph.ir.graph import Dim, Node, TensorType
from attngraph.kinds.base import KINDS, RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.fields import fields_of
from attngraph.spec.models import FORMULA, NodeModel, Size

__all__ = ["ExprSpec", "ParamSpec", "program_of", "param_dims", "table_reads", "FORMULA_ROLE"]

#: The role (field) of a formula's edges: ``formula.<name>``.
FORMULA_ROLE = "formula"

Formula = Annotated[str, StringConstraints(min_length=1, max_length=2000), FORMULA]
AxisName = Literal["heads", "steps", "queries", "items", "inner", "channels", "height", "width",
                   "features"]
LengthSym = Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9_]*$", max_length=64)]
DimName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
Number = Annotated[float, Field(ge=-1e6, le=1e6, allow_inf_nan=False)]


class ExprSpec(NodeModel):
    """A formula over named values: arithmetic as the paper writes it."""

    kind: Literal["expr"]
    formula: Formula
    """The arithmetic, e.g. ``relu(s / sqrt(d)) ^ 2``: numbers; the nodes and inputs of the
    spec by id (``s``, ``enc.state``); dims names; lengths (``N``: each example's real items);
    the indices ``i`` (queries) and ``j`` (items); + − * / ^, comparisons, and the formula
    functions (``exp``, ``sum(x, items)``...)."""
    axes: list[AxisName] | None = None
    """Names the result's axes anew, in the order of its dimensions (without heads): e.g.
    ``[queries, items]`` for scores made by a linear over a fixed length."""
    distribution: bool = False
    """Declare that the result sums to one over its items (a hand-written normaliser), so a
    readout takes it as a distribution."""
    sizes: dict[AxisName, int | DimName | LengthSym] | None = None
    """Sizes of the axes the indices ``i`` and ``j`` run along where no value the formula
    reads has them: e.g. ``{queries: N, items: N}`` for a decay mask γ^(i−j) as a node of its
    own (numbers, dims names, or an input's length)."""


class ParamSpec(NodeModel):
    """A free parameter of a declared shape: a learned scalar per head, a vector, a matrix."""

    kind: Literal["param"]
    shape: Annotated[list[int | DimName | LengthSym], Field(max_length=3)] = Field(
        default_factory=list)
    """Its sizes, without heads: numbers, dims names, or a length symbol (``N``, with
    ``max_len``); ``[]`` (the default) is one number."""
    heads: int | DimName | None = None
    """One parameter per head: a leading heads axis of this size."""
    axes: list[AxisName] | None = None
    """The names of its axes, one per entry of ``shape`` (default: named as any value of that
    shape is: ``[d]`` features, ``[N, d]`` items and features, ``[N, N]`` queries and items)."""
    init: Literal["zeros", "ones", "constant", "normal", "uniform", "xavier"] = "normal"
    """How it starts: zeros, ones, ``value``, normal(0, ``std``), uniform over ``range``,
    or Xavier-uniform (a matrix)."""
    value: Number = 0.0
    """``init: constant``: the starting value."""
    std: Annotated[float, Field(gt=0.0, le=1e3, allow_inf_nan=False)] = 0.02
    """``init: normal``: the standard deviation."""
    range: Annotated[list[Number], Field(min_length=2, max_length=2)] = [-0.1, 0.1]
    """``init: uniform``: the low and high ends."""
    clamp: Annotated[list[Number], Field(min_length=2, max_length=2)] | None = None
    """Keep it within [low, high] in every forward (a decay in (0, 1), a positive β)."""
    fixed: bool = False
    """A seeded constant (a buffer, never trained): random features, a fixed random matrix."""
    max_len: Size | None = None
    """With a length symbol in ``shape``: how many positions it holds (the longest length a
    forward may take; at most 65,536); a formula reading it uses the first N; a size."""

    @model_validator(mode="after")
    def _ranges(self) -> ParamSpec:
        for name in ("range", "clamp"):
            lo_hi = getattr(self, name)
            if lo_hi is not None and not lo_hi[0] < lo_hi[1]:
                msg = f"{name} [{lo_hi[0]:g}, {lo_hi[1]:g}] must go from low to high"
                raise ValueError(msg)
        return self


# ----------------------------------------------------------------------------
# expr


def _scores_like(ctx: RuleCtx, src: Node[Any]) -> bool:
    """Whether a value comes from a scorer or a normaliser (over items whatever its length)."""
    return KINDS[src.kind].role in ("scorer", "weights") if src.kind in KINDS else False


def _val(ctx: RuleCtx, name: str, t: TensorType, scores: bool, where: SourceLoc) -> Val:
    axes = axes_of(t, scores=scores)
    if axes is None:
        msg = f"node '{ctx.node.id}': the axes of '{name}' {t} cannot be told"
        raise ShapeError(msg,
                         where, "name them with an expression's axes: [...] first")
    lead: tuple[str, ...] = ("heads",) if t.heads else ()
    sizes: tuple[Dim, ...] = ((t.heads,) if t.heads else ()) + tuple(t.dims)
    dtype = "bool" if t.dtype == "bool" else "float"
    return Val(lead + axes, sizes, dtype, weights=t.weights, simplex=t.simplex,
               span=t.span or ANY, whole=t.whole)


def program_of(ctx: RuleCtx | Any, graph_dims: dict[str, int] | None = None) -> Program:
    """The typed program of an ``expr`` node (located errors inside its formula)."""
    node = ctx.node
    text = node.spec.formula
    base = node.where("formula")
    try:
        tree = parse(text)
    except FormulaError as exc:
        msg = f"node '{node.id}': {exc.message}"
        raise ShapeError(msg, formula_loc(base, text, exc.offset),
                         exc.hint) from None
    values: dict[str, Val] = {}
    nodes = ctx.done.values() if hasattr(ctx, "done") else ctx.graph.nodes
    inner = {n.types[""].dims[1] for n in nodes if n.is_input and n.spec is not None
             and getattr(n.spec, "nested", False) and "" in n.types}
    for e in node.edges(FORMULA_ROLE):
        src = ctx.graph.node(e.src) if not hasattr(ctx, "done") else ctx.done[e.src]
        t = ctx.type_of(e)
        words = next((d for d in t.dims if d in inner), None)
        if words is not None:
            msg_0 = (
                f"node '{node.id}': '{e.ref}' is over the words {words} of nested "
                             "tokens, whose padding a formula outside a map cannot see"
            )
            raise ShapeError(msg_0, e.loc,
                             "read each sentence in a map's body, where its words are items "
                             "with their own padding")
        if t.dtype == "long":
            msg_1 = (
                f"node '{node.id}': '{e.ref}' holds ids ({t}), which a formula "
                             "does not compute with"
            )
            raise ShapeError(msg_1, e.loc, "embed them first (items with "
                             "embed:, or an embedding) and read the vectors")
        values[e.role.key or e.ref] = _val(ctx, e.ref, t, _scores_like(ctx, src), e.loc)
    dims = dict(ctx.graph.dims if graph_dims is None else graph_dims)
    lengths = _input_lengths(ctx)
    sizes: dict[str, Dim] = {}
    for axis, size in (node.spec.sizes or {}).items():
        if isinstance(size, int):
            if not 0 < size <= 65536:
                ctx.fail(f"sizes: {axis} {size} is out of range (1 to 65,536)", field="sizes",
                         hint="write a size from 1 to 65,536, a dims name or an input's length")
            sizes[axis] = size
        elif size in dims:
            sizes[axis] = int(dims[size])
        elif size in lengths:
            sizes[axis] = size
        else:
            ctx.fail(f"sizes: '{size}' is not a dims name or the length of an input",
                     field="sizes", hint=did_you_mean(size, [*dims, *lengths]))
    try:
        return typecheck(tree, Env(values, dims, sizes, frozenset(lengths)))
    except FormulaError as exc:
        msg = f"node '{node.id}': {exc.message}"
        raise ShapeError(msg, formula_loc(base, text, exc.offset),
                         exc.hint) from None


def _expr_work(ctx: WorkCtx) -> Work:
    """A few operations per element of every step of the formula."""
    prog = program_of(ctx)
    size = 0
    for v in (prog.val,):
        size = max(size, math.prod(ctx.n(s) for s in v.sizes) if v.sizes else 1)
    steps = max(1, len(prog.instrs))
    return Work(size * steps, inner=size)


@kind("expr", ExprSpec, lowering="attngraph.lower.rules.algebra:lower_expr",
      emit="attngraph.lower.export.emit.algebra:emit_expr", role="support",
      style=Style("#f3f3f3", "box"), transparent=True, work=_expr_work, step="pointwise")
def expr_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The formula's value: its axes, named, and its role (scores, weights)."""
    s = ctx.spec
    prog = program_of(ctx)
    _check_cuts(ctx, prog)
    v = prog.val
    axes = tuple(a for a in v.axes if a != "heads")
    dims = tuple(sz for a, sz in zip(v.axes, v.sizes, strict=True) if a != "heads")
    heads = v.sizes[0] if v.axes[:1] == ("heads",) else None
    if heads is not None and not isinstance(heads, int):
        ctx.fail(f"the heads axis has size {heads}", field="formula")
    if s.axes is not None:
        if len(s.axes) != len(dims):
            ctx.fail(f"axes names {len(s.axes)} axes, but the formula's value {_show(v)} has "
                     f"{len(dims)}", field="axes", hint=f"name {len(dims)} axes, in the order "
                     "of the value's dimensions")
        if len(set(s.axes)) != len(s.axes) or "heads" in s.axes:
            ctx.fail("axes names an axis twice (or heads, which a value keeps apart)",
                     field="axes", hint="name each axis once")
        _check_length_axes(ctx, tuple(s.axes), dims, "axes")
        order = canonical(s.axes)
        dims = tuple(dims[s.axes.index(a)] for a in order)
        axes = order
    simplex = v.simplex or s.distribution
    if s.distribution and v.dtype == "bool":
        ctx.fail(f"distribution: true says the value sums to one over its items, but it is a "
                 f"truth value {_show(v)}", field="distribution",
                 hint="normalise it first, e.g. (s > 0) / sum(s > 0, items)")
    if s.distribution and (not axes or axes[-1] != "items"):
        ctx.fail(f"distribution: true says the value sums to one over its items, but it is "
                 f"{_show(v)}", field="distribution",
                 hint="declare it only for a value whose last axis is the items")
    weights = v.weights or s.distribution
    if weights and "items" not in axes:
        weights = False
    dtype: Any = "bool" if v.dtype == "bool" else "float"
    # the range of its entries and whether they are whole, for the formulas reading it
    return {"": TensorType(dims, heads=heads, dtype=dtype, simplex=simplex, weights=weights,
                           axes=axes, span=v.span, whole=v.whole and dtype == "float")}


def table_reads(ctx: RuleCtx | Any, prog: Program) -> list[tuple[str, int, int, int, int]]:
    """For each parameter over a length the formula reads: (name, its register, the
    dimension, the register of another value over that length or -1, its dimension)."""
    out = []
    tables = set()
    for e in ctx.node.edges(FORMULA_ROLE):
        src = ctx.graph.node(e.src) if not hasattr(ctx, "done") else ctx.done[e.src]
        if src.kind == "param" and src.spec.max_len:
            tables.add(e.role.key or e.ref)
    others = [r for name, r in prog.reads.items() if name not in tables]
    for name in sorted(tables):
        reg = prog.reads[name]
        for d, sz in enumerate(prog.vals[reg].sizes):
            if isinstance(sz, str):
                ref = next(((r, dd) for r in others
                            for dd, s2 in enumerate(prog.vals[r].sizes) if s2 == sz), (-1, -1))
                out.append((name, reg, d + 1, ref[0], ref[1] + 1))
    return out


def _check_cuts(ctx: RuleCtx, prog: Program) -> None:
    known = _input_lengths(ctx)
    for name, _, d, ref, _ in table_reads(ctx, prog):
        sz = prog.vals[prog.reads[name]].sizes[d - 1]
        if ref < 0 and sz not in known:
            e = ctx.node.edge(f"{FORMULA_ROLE}.{name}")
            msg = (
                f"node '{ctx.node.id}': the parameter '{name}' holds positions of "
                             f"the length {sz}, but no other value this formula reads is over "
                             f"{sz}, so the batch's {sz} is unknown here"
            )
            raise ShapeError(msg,
                             e.loc if e is not None else ctx.node.loc,
                             f"read a value over {sz} in the same formula (0 * sum(v, "
                             "features) adds nothing and says the length)")


def _show(v: Val) -> str:
    return v.text()


# ----------------------------------------------------------------------------
# param


def param_dims(ctx: RuleCtx | Any) -> tuple[tuple[Dim, ...], tuple[str, ...], int | None]:
    """The parameter's dims (lengths kept as symbols), their axis names (in the order of
    :data:`~attngraph.algebra.axes.AXES`) and its heads."""
    s = ctx.spec
    dims_table = ctx.graph.dims
    dims: list[Dim] = []
    for v in s.shape:
        if isinstance(v, int):
            if not 0 < v <= 1_000_000:
                ctx.fail(f"shape size {v} is out of range (1 to 1,000,000)", field="shape",
                     hint="write a size from 1 to 1,000,000, or a dims name")
            dims.append(v)
        elif v[:1].isupper():
            if s.max_len is None:
                ctx.fail(f"shape has the length {v}, known only when a batch arrives",
                         field="shape", hint=f"add max_len: <the longest {v}> (the parameter "
                         f"holds that many positions; a forward uses the first {v})")
            dims.append(v)
        elif v in dims_table:
            dims.append(int(dims_table[v]))
        else:
            ctx.fail(f"shape: '{v}' is not a dims name", field="shape",
                     hint=did_you_mean(v, dims_table) if dims_table else "declare it under dims:")
    heads: int | None = None
    if s.heads is not None:
        h = s.heads if isinstance(s.heads, int) else dims_table.get(s.heads)
        if h is None or not 0 < int(h) <= 1024:
            ctx.fail(f"heads '{s.heads}' is not a dims name or a number from 1 to 1,024",
                     field="heads", hint=did_you_mean(str(s.heads), dims_table)
                     if dims_table else "write a number from 1 to 1,024")
        heads = int(h)  # type: ignore[arg-type]  # checked just above
    if s.max_len is not None and not 0 < int(s.max_len) <= 65536:
        ctx.fail(f"max_len {s.max_len:,} is out of range (1 to 65,536)", field="max_len",
                 hint="write a number of positions from 1 to 65,536")
    if s.max_len is not None and not any(isinstance(d, str) for d in dims):
        ctx.fail("max_len applies to a shape with a length (N)", field="max_len",
                 hint="drop max_len, or write the length symbol in shape")
    t = TensorType(tuple(dims))
    named = tuple(s.axes) if s.axes is not None else axes_of(t)
    if named is None or len(named) != len(dims):
        ctx.fail(f"axes names {len(s.axes or [])} axes for a shape of {len(dims)}", field="axes",
                 hint="name one axis per entry of shape")
    names_: tuple[str, ...] = tuple(named or ())
    _check_length_axes(ctx, names_, tuple(dims), "axes")
    if len(set(names_)) != len(names_) or "heads" in names_:
        ctx.fail("axes names an axis twice (or heads: use the heads field)", field="axes",
                 hint="name each axis once; a head axis is the heads field")
    order = canonical(names_)
    return tuple(dims[names_.index(a)] for a in order), order, heads


def _input_lengths(ctx: Any) -> set[str]:
    """The length symbols of the graph's inputs: their sizes are known in every forward
    (read off the inferred inputs while shapes are inferred)."""
    nodes = ctx.done.values() if hasattr(ctx, "done") else ctx.graph.nodes
    return {d for n in nodes if n.is_input for t in n.types.values() for d in t.dims
            if isinstance(d, str)}


#: axes whose size is a fixed number (a length's axis holds items, queries, steps...)
FIXED_AXES = ("features", "channels", "height", "width")


def _check_length_axes(ctx: Any, names: tuple[str, ...], dims: tuple[Dim, ...],
                       field: str) -> None:
    """A length (``N``) is the size of items, queries, inner or steps, never of features
    or an image's axes: the padding of a length is read along those."""
    for a, d in zip(names, dims, strict=False):
        if isinstance(d, str) and a in FIXED_AXES:
            ctx.fail(f"axes calls the length {d} '{a}', an axis of a fixed size", field=field,
                     hint="a length is the size of items, queries, inner or steps: name "
                     "it one of those")


def _param_work(ctx: WorkCtx) -> Work:
    """Nothing to compute; a table over a length bounds that length by ``max_len``."""
    for d in ctx.out().dims:
        if isinstance(d, str) and ctx.spec.max_len:
            ctx.at_most(d, int(ctx.spec.max_len), "max_len")
    return Work(0)


@kind("param", ParamSpec, lowering="attngraph.lower.rules.algebra:lower_param", role="support",
      emit="attngraph.lower.export.emit.algebra:emit_param", style=Style("#fff2cc", "box"),
      work=_param_work, step="pointwise")
def param_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """A free parameter of the declared shape, its axes named."""
    s = ctx.spec
    dims, order, heads = param_dims(ctx)
    over = next((d for d in dims if isinstance(d, str)), None)
    if over is not None and over not in _input_lengths(ctx):
        # a formula cuts it to the run-time length of the other values it reads; no other
        # node knows that length, so only formulas may read it
        for n in ctx.graph.nodes:
            bad = [e for e in n.inputs if e.src == ctx.node.id
                   and e.role.field not in fields_of(type(n.spec)).formulas] \
                if not n.is_input else []
            if bad:
                msg = (
                    f"node '{n.id}': '{ctx.node.id}' holds {s.max_len} positions "
                                 f"of the length {over}, which only a formula reading another "
                                 f"value over {over} cuts to the batch's {over}"
                )
                raise ShapeError(msg, bad[0].loc,
                                 f"read it in an expression with a value over {over}, e.g. "
                                 f"{{kind: expr, formula: \"{ctx.node.id} + 0 * s\"}} with s "
                                 f"over {over}, and read that instead")
    if not s.fixed:
        ctx.params += (heads or 1) * math.prod(
            s.max_len if isinstance(d, str) else d for d in dims)
    return {"": TensorType(dims, heads=heads, axes=order)}
