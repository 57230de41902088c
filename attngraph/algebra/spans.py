"""The range of a formula's values, where the compiler can bound it from the formula
alone: numbers, the indices ``i``, ``j`` and ``pos(axis)`` over an axis of known size,
and what arithmetic and the functions that say how they map ranges (a
:class:`~attngraph.algebra.functions.Function`'s ``span``) make of them; a value read
from another ``expr`` node, the range its type carries (``TensorType.span``). A
node's values are otherwise unbounded. A ``where`` takes the branch its condition
picks where the spans decide it, and otherwise either branch, each bounded as the
condition says of what it compares (``where(d < 8, d, f(d))``: ``d`` at most 8 in the
first, at least 8 in ``f(d)``; :mod:`attngraph.algebra.program`), so that a bound is
one the formula can reach, not an over-estimate:
the compiler refuses a ``take`` whose positions can leave its table's axis
(:mod:`attngraph.algebra.take`). :func:`whole_of` says which values are whole numbers,
the only positions a ``take`` reads.

The docs' bucket, ``clamp(floor((j - i) / 2), -4, 3) + 4`` over any length:

>>> binary("+", clamp((floor_span(ANY), (-4.0, -4.0), (3.0, 3.0))), (4.0, 4.0))
(0.0, 7.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["ANY", "OPPOSITE", "Span", "binary", "bounded", "chosen", "clamp", "floor_span",
           "increasing", "joined", "least", "logistic", "most", "narrowed", "sign", "unsigned",
           "whole_of"]

#: (low, high), either end possibly infinite
Span = tuple[float, float]
#: no bound known
ANY: Span = (-math.inf, math.inf)


def bounded(s: Span) -> bool:
    """Both ends finite."""
    return math.isfinite(s[0]) and math.isfinite(s[1])


def _corners(a: Span, b: Span, op: Callable[[float, float], float]) -> Span:
    try:
        xs = [op(x, y) for x in a for y in b]
    except (ZeroDivisionError, OverflowError):
        return ANY
    if any(math.isnan(x) for x in xs):  # 0 · ∞
        return ANY
    return (min(xs), max(xs))


def binary(op: str, a: Span, b: Span) -> Span:
    """``a op b`` for the arithmetic operators; a comparison is 0 or 1."""
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        return _corners(a, b, lambda x, y: x * y)
    if op == "/":
        if b[0] <= 0 <= b[1]:
            return ANY
        return _corners(a, b, lambda x, y: x / y)
    if op in ("<", "<=", ">", ">=", "==", "!="):
        return _compare(op, a, b)
    return ANY  # '^'


def _compare(op: str, a: Span, b: Span) -> Span:
    """``a op b`` for a comparison: 1 (or 0) where the spans decide it for every entry
    (``dist < 4`` with ``dist`` at most -1), else either."""
    if op in (">", ">="):
        op, a, b = ("<" if op == ">" else "<="), b, a
    if op == "<":
        yes, no = a[1] < b[0], a[0] >= b[1]
    elif op == "<=":
        yes, no = a[1] <= b[0], a[0] > b[1]
    else:  # == and !=
        yes = a[0] == a[1] == b[0] == b[1]
        no = a[1] < b[0] or b[1] < a[0]
        if op == "!=":
            yes, no = no, yes
    return (1.0, 1.0) if yes else (0.0, 0.0) if no else (0.0, 1.0)


#: a comparison's opposite: where ``x < y`` fails, ``x >= y`` holds
OPPOSITE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def narrowed(op: str, a: Span, b: Span) -> tuple[Span, Span] | None:
    """The spans of ``a`` and ``b`` where ``a op b`` holds (None: nowhere): ``x < 4``
    keeps x at most 4 (a bound, not the strict one, is enough to be sound)."""
    if op in (">", ">="):
        flipped = narrowed("<" if op == ">" else "<=", b, a)
        return None if flipped is None else (flipped[1], flipped[0])
    if op in ("<", "<="):
        na, nb = (a[0], min(a[1], b[1])), (max(b[0], a[0]), b[1])
    elif op == "==":
        na = nb = (max(a[0], b[0]), min(a[1], b[1]))
    else:  # !=
        return a, b
    if na[0] > na[1] or nb[0] > nb[1]:
        return None
    return na, nb


def joined(spans: list[Span | None]) -> Span:
    """The span of one of ``spans`` (None: a branch never taken), unbounded as soon as
    one taken branch is."""
    taken = [s for s in spans if s is not None]
    if not taken or not all(bounded(s) for s in taken):
        return ANY
    return (min(s[0] for s in taken), max(s[1] for s in taken))


def chosen(cond: Span, a: Span, b: Span) -> Span:
    """``where(cond, a, b)``: ``a``'s span where the condition holds for every entry
    (its span is 1), ``b``'s where it holds for none (0), else unbounded: the branch
    the data picks may be the one whose span is wider than anything it gives."""
    if cond == (1.0, 1.0):
        return a
    if cond == (0.0, 0.0):
        return b
    return ANY


def increasing(f: Callable[[float], float], low: float = -math.inf,
               high: float = math.inf) -> Callable[[tuple[Span, ...]], Span]:
    """The span of a non-decreasing function ``f`` (of ``math``'s, infinities taken) that
    is defined from ``low``; ``high``: its supremum."""
    def span(args: tuple[Span, ...]) -> Span:
        (lo, hi), = args
        if lo < low:
            return ANY
        try:
            return (f(lo), min(f(hi), high))
        except (ValueError, OverflowError):
            return ANY
    return span


def logistic(x: float) -> float:
    """σ(x), at the infinities too."""
    return 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0


def sign(x: float) -> float:
    return float((x > 0) - (x < 0))


def floor_span(a: Span) -> Span:
    return (math.floor(a[0]) if math.isfinite(a[0]) else a[0],
            math.floor(a[1]) if math.isfinite(a[1]) else a[1])


def least(args: tuple[Span, ...]) -> Span:
    """``min(a, b)``."""
    a, b = args
    return (min(a[0], b[0]), min(a[1], b[1]))


def most(args: tuple[Span, ...]) -> Span:
    """``max(a, b)``."""
    a, b = args
    return (max(a[0], b[0]), max(a[1], b[1]))


def clamp(args: tuple[Span, ...]) -> Span:
    """``clamp(x, lo, hi)``: ``min(max(x, lo), hi)``."""
    x, lo, hi = args
    return least((most((x, lo)), hi))


def unsigned(args: tuple[Span, ...]) -> Span:
    """``abs(x)``."""
    (lo, hi), = args
    if lo >= 0:
        return (lo, hi)
    if hi <= 0:
        return (-hi, -lo)
    return (0.0, max(-lo, hi))


def of_instr(instr: tuple[Any, ...], val: Any, regs: list[Span],
             fn_span: Callable[[tuple[Span, ...]], Span] | None) -> Span:
    """The span of one instruction of a typed formula
    (:mod:`attngraph.algebra.program`) whose type is ``val`` (a value read keeps the
    span its type carries), ``regs`` the spans of the registers before it, ``fn_span``
    a called function's ``span``. A ``where`` is the checker's to bound (it reads the
    instruction of its condition: ``_Checker._where`` in the program module)."""
    op = instr[0]
    if val.const is not None:
        return (val.const, val.const)
    if op == "in":
        return val.span  # type: ignore[no-any-return]
    if op in ("idx", "idxn"):  # 0, 1, ..., size - 1
        size = val.sizes[0]
        return (0.0, float(size) - 1) if isinstance(size, int) else (0.0, math.inf)
    if op == "align":  # a view of the register with singleton axes
        return regs[instr[1]]
    if op == "neg":
        lo, hi = regs[instr[1]]
        return (-hi, -lo)
    if op == "bin":
        return binary(str(instr[1]), regs[instr[2]], regs[instr[3]])
    if op == "call" and fn_span is not None:
        return fn_span(tuple(regs[r] for r in instr[2]))
    if op == "axis" and fn_span is not None:  # over an axis: amax, amin
        return fn_span((regs[instr[2]],))
    return ANY


def whole_of(instr: tuple[Any, ...], val: Any, regs: list[bool], fn: Any) -> bool:
    """Whether one instruction's entries are whole numbers: a whole number, an index or
    a length, a value read that is whole, ``+ - *`` and comparisons of whole numbers,
    and a function that makes them (``makes_whole``: floor) or keeps them
    (``keeps_whole``: min, max, clamp, abs, where's branches...)."""
    op = instr[0]
    if val.const is not None:
        return float(val.const).is_integer()
    if op == "in":
        return bool(val.whole)
    if op in ("idx", "idxn", "len"):
        return True
    if op in ("neg", "align"):
        return regs[instr[1]]
    if op == "bin":
        if str(instr[1]) in ("<", "<=", ">", ">=", "==", "!="):
            return True  # 0 or 1
        return str(instr[1]) not in ("/", "^") and regs[instr[2]] and regs[instr[3]]
    if op == "call" and fn is not None:
        args = list(instr[2])[1:] if instr[1] == "where" else list(instr[2])
        return bool(fn.makes_whole or (fn.keeps_whole and all(regs[r] for r in args)))
    if op == "axis" and fn is not None:  # sum, amax, amin, cumsum of whole numbers
        return bool(fn.makes_whole or (fn.keeps_whole and regs[instr[2]]))
    return False
