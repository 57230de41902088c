"""A formula's static meaning: its names resolved, its axes and role checked, and the
straight-line program that computes it.

:func:`typecheck` walks a formula tree (:mod:`attngraph.algebra.formula`) with an
:class:`Env` (the values it may read, with their types; the dims; the symbols of the
lengths) and returns a :class:`Program`: its result :class:`Val` (named axes, sizes,
dtype, role) and a list of instructions, one per operation, each a tuple of plain
numbers and strings (the lowering runs them; the Python export writes them), so
nothing of the tree reaches the compiled module.

Names in a formula are, in this order of kinds (a name that is two of them is an
error, never a silent choice): a node or input of the spec (``s``, ``enc.state``),
a dims name (``d``: its number), a length symbol (``N``: the number of real items
of each example), the indices ``i`` (of the queries) and ``j`` (of the items), and,
as the last argument of a function over an axis, an axis name (``items``).

Values broadcast by axis name (:mod:`attngraph.algebra.axes`); an axis both sides
have must have one size (or a fixed size of one, which stretches).

Instructions (``r`` registers are indices into the list of results so far):

- ``("in", role)``: the value read by edge ``role``;
- ``("num", x)``: a number;
- ``("len", sym, r, dim)``: per example, the real items of length ``sym`` (its
  padding mask's count, else the batch's size of it, else dimension ``dim`` of
  register ``r``);
- ``("idxn", size)``: 0, 1, ... ``size`` (a number, or a length's size in the batch),
  shaped ``(1, L)``;
- ``("idx", r, dim)``: 0, 1, ... along dimension ``dim`` of register ``r``, shaped
  ``(1, L)`` (a value over that one axis);
- ``("neg", a)``; ``("bin", op, a, b)``; ``("call", fn, (a, ...))``;
- ``("axis", fn, a, dim, sym)``: a reduce, scan or normalise function over
  dimension ``dim`` of ``a`` (``sym``: the length whose padding mask applies, or "");
- ``("mm", a, b, a_heads, b_heads, a_rank, b_rank, sym)``: the matrix product of ``a``
  and ``b`` (each of rank 1 or 2 besides heads), padded entries of the contracted
  length ``sym`` taken as zero;
- ``("proj", w, a, dim, sym)``: the matrix ``w`` applied along dimension ``dim`` of ``a``
  (its padded entries, of length ``sym``, taken as zero);
- ``("take", fn, x, index, dim, xdims, idims, sym)``: ``x`` at the positions ``index``
  along its dimension ``dim`` (of length ``sym``, or ""), aligned to the result by
  ``xdims`` and ``idims`` (:mod:`attngraph.algebra.take`);
- ``("align", a, shape)``: register ``a`` viewed with singleton axes inserted
  (``shape``: for each result dimension, the source dimension or -1).

The types are :mod:`attngraph.algebra.values`'s (re-exported here), the constant
folding :mod:`attngraph.algebra.fold`'s.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attngraph.algebra.axes import AXES, canonical, is_scores
from attngraph.algebra.fold import FOLD, fold
from attngraph.algebra.formula import Binary, Call, Expr, FormulaError, Name, Num, Unary, names
from attngraph.algebra.functions import FUNCTIONS, REDUCTION_OF, Function
from attngraph.algebra.spans import (
    ANY,
    OPPOSITE,
    Span,
    chosen,
    joined,
    narrowed,
    of_instr,
    whole_of,
)
from attngraph.algebra.take import take_layout
from attngraph.algebra.values import INDICES, Dim, Env, Program, Val
from attngraph.errors import did_you_mean

__all__ = ["Val", "Env", "Program", "typecheck", "INDICES", "operands"]

_ARITH = ("+", "-", "*", "/", "^")


#: the operands of each instruction that are registers whose values it reads
_OPERANDS = {"neg": (1,), "bin": (2, 3), "axis": (2,), "take": (2, 3), "mm": (1, 2),
             "proj": (1, 2), "align": (1,), "idx": (1,)}


def operands(instr: tuple[Any, ...]) -> list[int]:
    """The registers whose values an instruction reads (a ``len`` reads at most a
    register's shape, for a length the runtime does not know)."""
    if instr[0] == "call":
        return list(instr[2])
    return [instr[i] for i in _OPERANDS.get(instr[0], ())]


def _fail(e: Expr, msg: str, hint: str | None = None) -> FormulaError:
    return FormulaError(msg, e.pos, hint)


class _Checker:
    def __init__(self, env: Env) -> None:
        self.env = env
        self.instrs: list[tuple[Any, ...]] = []
        self.vals: list[Val] = []
        #: each register's range where the formula bounds it (:mod:`~attngraph.algebra.spans`)
        self.spans: list[Span] = []
        self.budget = self.BUDGET
        self.wholes: list[bool] = []
        self.reads: dict[str, int] = {}
        #: for each (axis, size) seen on a value read, a register and its dimension
        self.where: dict[tuple[str, Dim], tuple[int, int]] = {}

    def emit(self, instr: tuple[Any, ...], val: Val) -> int:
        fn = FUNCTIONS.get(instr[1]) if instr[0] in ("call", "axis") else None
        self.instrs.append(instr)
        self.vals.append(val)
        self.spans.append(self._span(len(self.instrs) - 1, self.spans))
        self.wholes.append(whole_of(instr, val, self.wholes, fn))
        return len(self.instrs) - 1

    # ranges (:mod:`~attngraph.algebra.spans`) ----------------------------
    #: registers a formula's wheres may work out again under their conditions, in all:
    #: a bound on the checker's work whatever the formula's wheres nest to
    BUDGET = 20_000

    def _span(self, r: int, spans: list[Span]) -> Span:
        """Register ``r``'s range, given the registers' ``spans`` before it."""
        instr = self.instrs[r]
        if instr[0] == "call" and instr[1] == "where":
            return self._where(instr[2], spans)
        fn = FUNCTIONS.get(instr[1]) if instr[0] in ("call", "axis") else None
        return of_instr(instr, self.vals[r], spans, fn.span if fn is not None else None)

    def _where(self, args: tuple[int, ...], spans: list[Span]) -> Span:
        """``where(c, a, b)``'s range: the branch ``c`` picks where its range decides it;
        else, for a comparison ``x op y``, either branch worked out again with ``x`` and
        ``y`` narrowed as the comparison (or its opposite) says; else unbounded."""
        c, a, b = args
        cond = spans[c]
        test = self.instrs[c]
        if cond in ((0.0, 0.0), (1.0, 1.0)) or test[0] != "bin" or test[1] not in OPPOSITE:
            return chosen(cond, spans[a], spans[b])
        return joined([self._under(test, test[1], a, spans),
                       self._under(test, OPPOSITE[test[1]], b, spans)])

    def _under(self, test: tuple[Any, ...], op: str, r: int, spans: list[Span]
               ) -> Span | None:
        """Register ``r``'s range where ``x op y`` holds for the operands of ``test``
        (None: nowhere), or unbounded once the budget is spent."""
        x, y = self._base(test[2]), self._base(test[3])
        both = narrowed(op, spans[x], spans[y])
        if both is None:
            return None
        if r in (x, y):  # the branch is what is compared
            return both[0] if r == x else both[1]
        # only what was computed before the branch can be read by it
        known = {reg: sp for reg, sp in zip((x, y), both, strict=True) if reg < r}
        if not known:
            return spans[r]
        start = min(known) + 1
        if self.budget < r - start + 1:
            return ANY
        self.budget -= r - start + 1
        mine = list(spans[:r + 1])
        for reg, sp in known.items():
            mine[reg] = sp
        for k in range(start, r + 1):
            if k not in known:
                # what the condition says holds entry by entry: an operation that reads
                # other entries (over an axis, mm, take...) keeps its range as it was
                mine[k] = spans[k] if self._mixes(k) else self._span(k, mine)
        return mine[r]

    def _mixes(self, r: int) -> bool:
        """Whether register ``r``'s entries read other entries of its arguments."""
        instr = self.instrs[r]
        if instr[0] == "axis":
            return True
        fn = FUNCTIONS.get(instr[1]) if instr[0] == "call" else None
        return fn is not None and fn.form != "elementwise"

    def _base(self, r: int) -> int:
        """The register ``r`` views (through alignments)."""
        while self.instrs[r][0] == "align":
            r = self.instrs[r][1]
        return r

    # names ---------------------------------------------------------------
    def lengths(self) -> dict[Dim, tuple[int, int]]:
        return {size: at for (_, size), at in self.where.items() if isinstance(size, str)}

    def name(self, e: Name) -> int:
        env = self.env
        kinds = []
        if e.name in env.values:
            kinds.append("a node")
        if e.name in env.dims:
            kinds.append("a dims name")
        if e.name in INDICES:
            kinds.append(f"the index of the {INDICES[e.name]}")
        if len(kinds) > 1:
            raise _fail(e, f"'{e.name}' is both {kinds[0]} and {kinds[1]}",
                        f"rename the node '{e.name}', so that the formula says which it means")
        if e.name in env.values:
            if e.name in self.reads:
                return self.reads[e.name]
            v = env.values[e.name]
            r = self.emit(("in", e.name), v)
            self.reads[e.name] = r
            for d, (a, s) in enumerate(zip(v.axes, v.sizes, strict=True)):
                self.where.setdefault((a, s), (r, d + 1))
            return r
        if e.name in env.dims:
            n = float(env.dims[e.name])
            return self.emit(("num", n), Val(const=n))
        if e.name in INDICES:
            return self.index(e, e.name, INDICES[e.name])
        lengths = self.lengths()
        if e.name in lengths:
            reg, d = lengths[e.name]
            return self.emit(("len", e.name, reg, d), Val())
        if e.name in env.lengths:
            return self.emit(("len", e.name, -1, -1), Val())
        if e.name in AXES:
            raise _fail(e, f"'{e.name}' is an axis, which only a function over an axis takes "
                        "as its last argument", f"e.g. sum(x, {e.name})")
        known = sorted({*env.values, *env.dims, *INDICES, *(str(n) for n in lengths),
                        *env.lengths})
        hint = did_you_mean(e.name, known) if known else "declare it as a node"
        raise _fail(e, f"'{e.name}' is not a node, input, dims name, length or index this "
                    "formula can read", hint)

    def index(self, e: Expr, name: str, axis: str) -> int:
        """0, 1, ... along ``axis``: sized by a value read over it, else by ``sizes:``."""
        src = next(((s, at) for (a, s), at in self.where.items() if a == axis), None)
        if src is None and axis in self.env.sizes:
            size = self.env.sizes[axis]
            return self.emit(("idxn", size), Val((axis,), (size,)))
        if src is None:
            raise _fail(e, f"the index {name} runs along the {axis}, but no value this "
                        f"formula reads has {axis}", f"use {name} with a value over the "
                        f"{axis}, or give the axis a size: sizes: {{{axis}: N}}")
        size, (reg, d) = src
        return self.emit(("idx", reg, d), Val((axis,), (size,)))

    # structure -----------------------------------------------------------
    def expr(self, e: Expr) -> int:
        if isinstance(e, Num):
            return self.emit(("num", e.value), Val(const=e.value))
        if isinstance(e, Name):
            return self.name(e)
        if isinstance(e, Unary):
            a = self.expr(e.arg)
            v = self.vals[a]
            if v.dtype == "bool":
                raise _fail(e, "a comparison's truth value cannot be negated with '-'",
                            "write 1 - (a < b), or compare the other way round")
            c = -v.const if v.const is not None else None
            return self.emit(("neg", a), replace(v, const=c, simplex=False))
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Call):
            return self.call(e)
        raise _fail(e, f"unknown formula node {type(e).__name__}")

    def broadcast(self, e: Expr, regs: list[int], what: str) -> tuple[Val, list[int]]:
        """The union of the operands' axes; each operand aligned to it."""
        sizes: dict[str, Dim] = {}
        for r in regs:
            v = self.vals[r]
            for a, s in zip(v.axes, v.sizes, strict=True):
                old = sizes.get(a)
                if old is None or old == 1:
                    sizes[a] = s
                elif s != 1 and old != s:
                    raise _fail(e, f"{what}: the {a} axes differ, {old} and {s}",
                                f"both sides must range over the same {a}; read values over "
                                "one length, or name the axes of one side (axes: [...])")
        axes = canonical(sizes.keys() | {a for r in regs for a in self.vals[r].axes})
        if len([a for a in axes if a != "heads"]) > 3:
            shown = "; ".join(self.vals[r].text() for r in regs if self.vals[r].axes)
            raise _fail(e, f"{what} would make a value of {len(axes)} axes ({', '.join(axes)}) "
                        f"from {shown}",
                        "axes meet by name: a [C] vector is over features, not channels; name "
                        "its axis with an expression's axes: [channels], or reduce one side first")
        out_sizes = tuple(sizes.get(a, 1) for a in axes)
        aligned = [self.align(r, axes) for r in regs]
        dtypes = {self.vals[r].dtype for r in regs}
        dtype = "bool" if dtypes == {"bool"} else "float"
        w = any(self.vals[r].weights for r in regs) and is_scores(axes)
        return Val(axes, out_sizes, dtype, weights=w), aligned

    def align(self, r: int, axes: tuple[str, ...]) -> int:
        v = self.vals[r]
        if v.const is not None or v.axes == axes:
            return r
        shape = tuple(1 + v.axes.index(a) if a in v.axes else -1 for a in axes)
        sizes = tuple(v.size(a) if a in v.axes else 1 for a in axes)
        return self.emit(("align", r, shape), replace(v, axes=axes, sizes=sizes))

    def binary(self, e: Binary) -> int:
        a, b = self.expr(e.left), self.expr(e.right)
        va, vb = self.vals[a], self.vals[b]
        if va.const is not None and vb.const is not None:
            n = fold(e, e.op, va.const, vb.const)
            return self.emit(("num", n), Val(const=n))
        cmp = e.op not in _ARITH
        if e.op == "/" and vb.const == 0:
            raise _fail(e, "division by zero: the divisor is the constant 0",
                        "divide by a value that is not 0")
        val, (ra, rb) = self.broadcast(e, [a, b], f"'{e.op}'")
        val = replace(val, dtype="bool" if cmp else "float")
        if cmp:
            val = replace(val, weights=False)
        return self.emit(("bin", e.op, ra, rb), val)

    def call(self, e: Call) -> int:
        name, fn, args, axis_name = self.function(e)
        if fn.form == "index":
            assert axis_name is not None
            if args:
                raise _fail(e, f"{e.fn} takes only an axis", f"e.g. {e.fn}(heads)")
            return self.index(e, f"{e.fn}({axis_name})", axis_name)
        lo, hi = fn.arity
        if not lo <= len(args) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise _fail(e, f"{e.fn} takes {want} value argument(s), found {len(args)}",
                        f"{fn.name}: {fn.formula}")
        regs = [self.expr(x) for x in args]
        if fn.form == "elementwise":
            return self.elementwise(e, name, regs)
        if fn.form == "matmul":
            return self.matmul(e, *regs)
        assert axis_name is not None
        if fn.form == "take":
            lay = take_layout(e, self.vals[regs[0]],
                              replace(self.vals[regs[1]], span=self.spans[regs[1]],
                                      whole=self.wholes[regs[1]]), axis_name)
            return self.emit(("take", name, *regs, *lay[2:]), Val(lay[0], lay[1], "float"))
        if fn.form == "project":
            w, x = regs
            return self.project(e, w, x, axis_name)
        (x,) = regs
        return self.over_axis(e, name, fn.form, x, axis_name)

    def function(self, e: Call) -> tuple[str, Function, list[Expr], str | None]:
        """The function ``e`` calls (a reduction's name for ``max(x, items)``), its value
        arguments, and the axis named as its last argument (None if it takes none)."""
        name = REDUCTION_OF.get(e.fn, e.fn) if len(e.args) == 2 and _axis_arg(e) else e.fn
        if name not in FUNCTIONS and e.fn in self.env.values:
            raise _fail(e, f"'{e.fn}' is a node, not a function",
                        f"join it with an operator, e.g. {e.fn} * (...)")
        if name not in FUNCTIONS:
            hint = did_you_mean(e.fn, FUNCTIONS.names())
            raise _fail(e, f"unknown function '{e.fn}'", hint)
        fn = FUNCTIONS[name]
        args = list(e.args)
        axis_name = None
        if fn.takes_axis:
            if not args or not _axis_arg(e):
                raise _fail(e, f"{e.fn} works along an axis, named as its last argument",
                            f"e.g. {e.fn}({'W, ' if fn.form == 'project' else ''}x, items); "
                            f"the axes are {', '.join(AXES)}")
            axis_e = args.pop()
            assert isinstance(axis_e, Name)
            axis_name = axis_e.name
        return name, fn, args, axis_name

    def elementwise(self, e: Call, name: str, regs: list[int]) -> int:
        """An elementwise function: folded when its arguments are numbers, else
        broadcast over their axes (``where``'s first argument a condition)."""
        if all(self.vals[r].const is not None for r in regs) and name in FOLD:
            n = fold(e, name, *[self.vals[r].const for r in regs])  # type: ignore[arg-type]
            return self.emit(("num", n), Val(const=n))
        val, aligned = self.broadcast(e, regs, f"{e.fn}(...)")
        if name == "where":
            if self.vals[regs[0]].dtype != "bool":
                raise _fail(e.args[0], "where's first argument is a condition",
                            "compare, e.g. where(j <= i, x, 0)")
            val = replace(val, dtype="float" if any(self.vals[r].dtype == "float"
                                                    for r in regs[1:]) else "bool")
        else:
            val = replace(val, dtype="float")
        return self.emit(("call", name, tuple(aligned)), val)

    def project(self, e: Call, w: int, x: int, axis_name: str) -> int:
        """``project(W, x, axis)``: the matrix ``W`` [out, in] applied along ``axis``."""
        vw, vx = self.vals[w], self.vals[x]
        if len(vw.axes) != 2 or "heads" in vw.axes:
            raise _fail(e.args[0], f"project's first argument is a matrix [out, in], "
                        f"found {vw.text()}", "declare it as a param with shape: [out, in]")
        if axis_name not in vx.axes:
            raise _fail(e.args[1], f"project works along the {axis_name}, which "
                        f"{vx.text()} does not have", f"name one of {', '.join(vx.axes)}")
        d = vx.axes.index(axis_name)
        if vw.sizes[1] != vx.sizes[d]:
            raise _fail(e, f"project: W maps {vw.sizes[1]} {axis_name} but x has "
                        f"{vx.sizes[d]}", "make W's second size the axis' size"
                        + (" (a length must be fixed: give the input a fixed length, or "
                           "make W [out, N] with max_len)" if isinstance(vx.sizes[d], str)
                           else ""))
        new = list(vx.sizes)
        new[d] = vw.sizes[0]
        sym = vx.sizes[d] if isinstance(vx.sizes[d], str) else ""
        return self.emit(("proj", w, x, d + 1, sym), replace(vx, sizes=tuple(new),
                                                      weights=False, simplex=False))

    def over_axis(self, e: Call, name: str, form: str, x: int, axis_name: str) -> int:
        """A reduce, scan or normalise function of ``x`` along ``axis_name``."""
        vx = self.vals[x]
        if axis_name not in vx.axes:
            have = ", ".join(vx.axes) or "no axis"
            raise _fail(e.args[-1], f"{e.fn} over the {axis_name}, but its argument has {have}",
                        f"name one of its axes: {have}" if vx.axes else
                        "a scalar has nothing to reduce")
        d = vx.axes.index(axis_name)
        size = vx.sizes[d]
        sym = size if isinstance(size, str) else ""
        if form == "reduce":
            axes = vx.axes[:d] + vx.axes[d + 1:]
            sizes = vx.sizes[:d] + vx.sizes[d + 1:]
            val = Val(axes, sizes, "float", weights=vx.weights and is_scores(axes))
        else:
            dist = form == "normalise" and axis_name == "items"
            val = replace(vx, dtype="float", simplex=dist and vx.axes[-1] == "items",
                          weights=vx.weights or form == "normalise")
        return self.emit(("axis", name, x, d + 1, sym), val)

    def matmul(self, e: Call, a: int, b: int) -> int:
        """``a b``: a's last axis against b's first (heads apart), as matrices."""
        va, vb = self.vals[a], self.vals[b]
        ra = [x for x in va.axes if x != "heads"]
        rb = [x for x in vb.axes if x != "heads"]
        if not ra or not rb or len(ra) > 2 or len(rb) > 2:
            raise _fail(e, f"{e.fn} multiplies matrices or vectors, found {va.text()} and "
                        f"{vb.text()}", "give it values of one or two axes besides heads")
        ka, kb = va.size(ra[-1]), vb.size(rb[0])
        if ka != kb:
            raise _fail(e, f"{e.fn}: the {ra[-1]} of a ({ka}) and the {rb[0]} of b ({kb}) "
                        "differ", "a's last axis and b's first must have one size")
        ha = va.size("heads") if "heads" in va.axes else None
        hb = vb.size("heads") if "heads" in vb.axes else None
        if ha is not None and hb is not None and ha != hb:
            raise _fail(e, f"{e.fn}: {ha} heads against {hb}", "give both the same heads")
        rest = ra[:-1] + rb[1:]
        if len(set(rest)) != len(rest) or tuple(rest) != canonical(rest):
            raise _fail(e, f"{e.fn} would give axes ({', '.join(rest)}), which must be distinct "
                        "and in the order " + ", ".join(AXES),
                        "name the axes of one side anew (an expression's axes: [...]) first")
        heads = ha if ha is not None else hb
        axes = (("heads",) if heads is not None else ()) + tuple(rest)
        sizes = ((heads,) if heads is not None else ()) + tuple(
            [va.size(x) for x in ra[:-1]] + [vb.size(x) for x in rb[1:]])
        w = (va.weights or vb.weights) and is_scores(axes)
        sym = ka if isinstance(ka, str) else ""
        return self.emit(("mm", a, b, ha is not None, hb is not None, len(ra), len(rb), sym),
                         Val(axes, sizes, "float", weights=w))

    def finish(self, r: int) -> Program:
        return Program(self.instrs, r, replace(self.vals[r], span=self.spans[r],
                                               whole=self.wholes[r]), self.reads, self.vals)


def _axis_arg(e: Call) -> bool:
    last = e.args[-1] if e.args else None
    return isinstance(last, Name) and last.name in AXES


def typecheck(tree: Expr, env: Env) -> Program:
    """The :class:`Program` of ``tree`` in ``env`` (see the module docstring).

    Raises
    ------
    FormulaError
        At the offending name or operator: an unknown name, function or axis; a name
        that means two things; axes of different sizes; a wrong number of arguments.
    """
    c = _Checker(env)
    # read every value first, so that lengths and indices know where their sizes are
    for n in names(tree):
        if n.name in env.values:
            c.name(n)
    r = c.expr(tree)
    return c.finish(r)
