"""The static meaning of ``take(x, index, axis)``: ``x`` read at computed positions.

``take`` reads a table at positions a formula computes: T5's learned scalar per head
and bucket of relative position, ``take(table, bucket, features)`` with ``table``
``[heads, features]`` and ``bucket`` ``[queries, items]``, is the bias
``[heads, queries, items]``. The positions are whole numbers along the named axis
of ``x``; the result has ``x``'s other axes and the axes of ``index``, in the usual
order (:mod:`attngraph.algebra.axes`). The lowering is
:func:`attngraph.lower.rules.algebra_take.take`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from attngraph.algebra.axes import canonical
from attngraph.algebra.formula import Call, Expr, FormulaError
from attngraph.algebra.spans import bounded

if TYPE_CHECKING:
    from attngraph.algebra.program import Dim, Val

__all__ = ["TakeLayout", "take_layout"]

#: (the result's axes and sizes, the taken dimension of x (1-based), x's and index's
#: source dimension for each result dimension (1-based, or -1), the taken axis' length
#: symbol or "")
TakeLayout = tuple[tuple[str, ...], tuple["Dim", ...], int, tuple[int, ...], tuple[int, ...],
                   str]


def take_layout(e: Expr, vx: Val, vi: Val, axis: str) -> TakeLayout:
    """Where the axes of ``take(x, index, axis)`` come from (see the module docstring).

    Raises
    ------
    FormulaError
        ``x`` without that axis, positions that run along it themselves or are truth
        values or not whole numbers by their formula (``vi.whole``), positions whose
        range (``vi.span``, where the formula bounds them: :mod:`attngraph.algebra.spans`)
        leaves the axis, axes of two sizes, or a result of more than three axes besides
        heads.
    """
    if axis not in vx.axes:
        have = ", ".join(vx.axes) or "no axis"
        msg = f"take reads x along the {axis}, but x has {have}"
        raise FormulaError(msg, e.pos, f"name one of its axes: {have}" if vx.axes else
                           "give it a table: a param with shape: [size]")
    if axis in vi.axes:
        msg = f"take's positions run along the {axis} themselves"
        raise FormulaError(msg, e.pos, "compute one position per entry of the other axes "
                           "(e.g. a bucket per query and item)")
    if vi.dtype == "bool":
        msg = "take's positions are a truth value"
        raise FormulaError(msg, e.pos, "give whole numbers: where(c, 1, 0)")
    _check_positions(e, vx.size(axis), axis, vi)
    rest = tuple(a for a in vx.axes if a != axis)
    sizes: dict[str, Dim] = {a: vx.size(a) for a in rest}
    for a, s in zip(vi.axes, vi.sizes, strict=True):
        old = sizes.get(a)
        if old is not None and old != s and 1 not in (old, s):
            msg = f"take: the {a} axes differ, {old} and {s}"
            raise FormulaError(msg, e.pos, f"x and the positions must range over the same {a}")
        if old is None or old == 1:
            sizes[a] = s
    axes = canonical(list(sizes))
    if len([a for a in axes if a != "heads"]) > 3:
        msg = f"take would make a value of {len(axes)} axes ({', '.join(axes)})"
        raise FormulaError(msg, e.pos, "reduce x or the positions first")
    xdims = tuple(1 + rest.index(a) if a in rest else -1 for a in axes)
    idims = tuple(1 + vi.axes.index(a) if a in vi.axes else -1 for a in axes)
    size = vx.size(axis)
    return (axes, tuple(sizes[a] for a in axes), 1 + vx.axes.index(axis), xdims, idims,
            size if isinstance(size, str) else "")


def _check_positions(e: Expr, size: Dim, axis: str, vi: Val) -> None:
    """Refuse positions that are not whole numbers by their formula, and those that the
    formula bounds (numbers, indices, clamps) to a range reaching outside
    ``0 .. size - 1``: at some length of the input they are read, and a position
    outside the table is no entry of it."""
    where = e.args[1] if isinstance(e, Call) and len(e.args) > 1 else e
    if not vi.whole:
        msg = ("take's positions must be whole numbers, but this formula's are not known "
               "to be")
        raise FormulaError(msg, where.pos, f"make them whole: floor({where}); whole numbers "
                           "are numbers, indices, lengths, and what + - * floor clamp min "
                           "max abs where make of them")
    lo, hi = vi.span
    table = e.args[0] if isinstance(e, Call) and e.args else "the table"
    if isinstance(size, int) and bounded(vi.span):
        if lo >= 0 and hi <= size - 1:
            return
        msg = (f"take's positions run from {lo:g} to {hi:g}, but the {axis} axis of {table} "
               f"has {size} entries (0 to {size - 1})")
        hint = f"keep them in range, e.g. clamp({where}, 0, {size - 1})"
        raise FormulaError(msg, where.pos, hint + (f", or give {table} {hi + 1:g} entries "
                                                   f"along the {axis}" if lo >= 0 else ""))
    if (math.isfinite(lo) and lo < 0) or hi < 0:  # below the first entry, at any length
        reach = f"reach {lo:g}" if math.isfinite(lo) else f"are at most {hi:g}"
        msg = (f"take's positions {reach}, below the first entry (0) of the {axis} "
               f"axis of {table}")
        raise FormulaError(msg, where.pos, f"keep them at 0 or more, e.g. max({where}, 0)")
