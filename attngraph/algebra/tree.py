"""The tree of a formula: its nodes, each with its offset in the text, and walks over it.

:func:`attngraph.algebra.formula.parse` makes the tree (and re-exports these names).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Expr", "Num", "Name", "Unary", "Binary", "Call", "walk", "names"]


@dataclass(frozen=True)
class Expr:
    """A node of a formula's tree; ``pos`` is its 0-based offset in the text."""

    pos: int


@dataclass(frozen=True)
class Num(Expr):
    """A number."""

    value: float

    def __str__(self) -> str:
        return f"{self.value:g}"


@dataclass(frozen=True)
class Name(Expr):
    """A name: a node or input (``enc`` or ``enc.state``), a dims name, a length,
    an index (``i``, ``j``) or an axis (``items``); what it is, shape inference says."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Unary(Expr):
    """``-x`` (op ``-``)."""

    op: str
    arg: Expr

    def __str__(self) -> str:
        return f"{self.op}{self.arg}"


@dataclass(frozen=True)
class Binary(Expr):
    """``a op b`` for op in ``+ - * / ^`` and the comparisons."""

    op: str
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return f"({self.left} {self.op} {self.right})"


@dataclass(frozen=True)
class Call(Expr):
    """``fn(arg, ...)``: a function of the registry (:mod:`attngraph.algebra.functions`)."""

    fn: str
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(str(a) for a in self.args)})"


def walk(e: Expr) -> list[Expr]:
    """Every node of a tree, parents before children."""
    out: list[Expr] = []
    stack = [e]
    while stack:
        x = stack.pop()
        out.append(x)
        if isinstance(x, Unary):
            stack.append(x.arg)
        elif isinstance(x, Binary):
            stack += [x.right, x.left]
        elif isinstance(x, Call):
            stack += reversed(x.args)
    return out


def names(e: Expr) -> list[Name]:
    """The names a formula reads, in order of appearance (repeats included).

    >>> from attngraph.algebra.formula import parse
    >>> [n.name for n in names(parse("exp(s) / sum(exp(s), items)"))]
    ['s', 's', 'items']
    """
    return sorted((x for x in walk(e) if isinstance(x, Name)), key=lambda n: n.pos)
