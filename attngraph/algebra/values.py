"""What a formula's values are, and what it may read: :class:`Val`, :class:`Env`,
and the :class:`Program` that :func:`attngraph.algebra.program.typecheck` makes
(re-exported there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attngraph.algebra.spans import ANY, Span

__all__ = ["Dim", "INDICES", "Val", "Env", "Program"]

#: A size: a fixed integer, or a symbol known at run time (as the IR's ``Dim``; the
#: algebra does not import the IR, whose builder reads formulas).
Dim = int | str

#: The position indices a formula may read: ``i`` along the queries, ``j`` along the items.
INDICES = {"i": "queries", "j": "items"}


@dataclass(frozen=True)
class Val:
    """What a (sub)formula is: named axes (``heads`` included) with their sizes, dtype,
    and role: ``weights`` (it derives from attention weights), ``simplex`` (a
    distribution over its items axis), ``const`` (a number known when compiling)."""

    axes: tuple[str, ...] = ()
    sizes: tuple[Dim, ...] = ()
    dtype: str = "float"
    weights: bool = False
    simplex: bool = False
    const: float | None = None
    #: the range of its entries where the formula bounds it (:mod:`attngraph.algebra.spans`)
    span: Span = ANY
    #: its entries are whole numbers (positions a ``take`` may read at)
    whole: bool = False

    def size(self, axis: str) -> Dim:
        return self.sizes[self.axes.index(axis)]

    def text(self) -> str:
        if not self.axes:
            return "a number" if self.const is not None else "a scalar"
        return "[" + ", ".join(f"{a} {s}" for a, s in zip(self.axes, self.sizes,
                                                          strict=True)) + "]"


@dataclass(frozen=True)
class Env:
    """What a formula may name: ``values`` (reference text -> its :class:`Val`),
    ``dims`` (name -> number), ``sizes`` (axis -> size, for indices over an axis no value
    has), ``lengths`` (the symbols a forward knows the size of)."""

    values: Mapping[str, Val]
    dims: Mapping[str, int] = field(default_factory=dict)
    #: sizes of the axes the indices run along where no value read has them
    sizes: Mapping[str, Dim] = field(default_factory=dict)
    #: the lengths whose size every forward knows (the inputs')
    lengths: frozenset[str] = frozenset()


@dataclass
class Program:
    """A typed formula: its instructions, the register of its result, and its type."""

    instrs: list[tuple[Any, ...]]
    out: int
    val: Val
    #: registers by the value they read (reference text)
    reads: dict[str, int]
    #: the type of every register
    vals: list[Val]
