"""Constant folding: the numbers a formula computes when compiling (``sqrt(d)``,
``1 - 0.5``), refused at their operator when they have no value or are out of range.
"""

from __future__ import annotations

import math
from typing import Any

from attngraph.algebra.formula import Expr, FormulaError

__all__ = ["FOLD", "fold"]

#: The functions folded when all their arguments are numbers.
FOLD = {"sqrt", "exp", "log", "abs", "sin", "cos", "tanh", "min", "max", "floor"}


def fold(e: Expr, op: str, *xs: float) -> float:
    """A number computed when compiling (``sqrt(d)``, ``1 - 0.5``)."""
    try:
        table: dict[str, Any] = {
            "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
            "/": lambda a, b: a / b, "^": lambda a, b: a ** b,
            "<": lambda a, b: float(a < b), "<=": lambda a, b: float(a <= b),
            ">": lambda a, b: float(a > b), ">=": lambda a, b: float(a >= b),
            "==": lambda a, b: float(a == b), "!=": lambda a, b: float(a != b),
            "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "abs": abs, "sin": math.sin,
            "cos": math.cos, "tanh": math.tanh, "min": min, "max": max, "floor": math.floor,
        }
        n = table[op](*xs)
    except (ValueError, ZeroDivisionError, OverflowError) as exc:
        msg = f"the constant part {op} of the formula has no value: {exc}"
        raise FormulaError(msg, e.pos, "check the numbers and dims it uses") from None
    if isinstance(n, complex) or not float("-inf") < float(n) < float("inf") or abs(n) > 1e30:
        msg = f"the constant part of the formula is out of range ({n})"
        raise FormulaError(msg, e.pos, "use smaller numbers")
    return float(n)
