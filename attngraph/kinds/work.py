"""What one run of a node costs (``work=``, the resource guard) and how large its
values can grow (``magnitude=``, the numerics guard): the rules a kind may give and
what they read. Re-exported by :mod:`attngraph.kinds.base`."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from attngraph.ir.graph import Dim, Graph, Node, TensorType
from attngraph.kinds.context import NodeCtx

__all__ = ["Bound", "Work", "WorkCtx", "WorkRule", "MagnitudeCtx", "MagnitudeRule",
           "dense_work", "elementwise_work", "no_work"]


@dataclass(frozen=True)
class Work:
    """What one run of a node costs for one example: ``macs`` multiply-adds;
    ``inner``, the elements of the largest tensor it makes besides its outputs
    (the ``(M, N, hidden)`` sum of an additive scorer over all pairs, an mlp's
    hidden layer); ``kept``, the elements of all such tensors together (what the
    backward pass keeps; default ``inner``)."""

    macs: int = 0
    inner: int = 0
    kept: int | None = None


@dataclass(frozen=True)
class Bound:
    """A length that a node caps: ``symbol`` is at most ``most`` (its ``field`` says so)."""

    symbol: str
    most: int
    node: Node[Any]
    field: str


class WorkCtx(NodeCtx):
    """What a work rule may read: an inferred node, its inputs' types, and ``n(dim)``,
    the size of a dimension at the lengths the guard assumes. A rule whose node
    holds a table over positions says how long a length may be with :meth:`at_most`."""

    def __init__(self, node: Node[Any], graph: Graph, length: Callable[[str], int]) -> None:
        super().__init__(node, graph)
        self.length = length
        self.bounds: list[Bound] = []

    def at_most(self, dim: Dim, most: int, field: str) -> None:
        """Record that the length ``dim`` (if symbolic) is at most ``most``."""
        if isinstance(dim, str):
            self.bounds.append(Bound(dim, most, self.node, field))

    def n(self, dim: Dim) -> int:
        """A dimension's size: its number, or the assumed size of its length."""
        return dim if isinstance(dim, int) else self.length(dim)

    def elements(self, t: TensorType) -> int:
        """Elements of one example's value of type ``t`` (heads included)."""
        return (t.heads or 1) * math.prod(self.n(d) for d in t.dims)

    def positions(self, t: TensorType) -> int:
        """How many feature vectors a value of type ``t`` holds (all but its last axis)."""
        return (t.heads or 1) * math.prod(self.n(d) for d in t.dims[:-1])

    def out(self) -> TensorType:
        """The node's default output type."""
        return self.node.types[""]


#: A work rule: ``rule(ctx) -> Work`` for one run of a node.
WorkRule = Callable[[WorkCtx], Work]

@dataclass(frozen=True)
class MagnitudeCtx:
    """What a magnitude rule reads: the node, the magnitudes of its inputs (one per
    input edge, in order, by role in ``by_role``), their types, and ``n(dim)``, the
    size of a dimension at the lengths the guard assumes."""

    node: Node[Any]
    ins: tuple[float, ...]
    by_role: Mapping[str, float]
    in_types: tuple[TensorType, ...]
    n: Callable[[Dim], int]

    def most(self) -> float:
        """The largest input magnitude (1 for a node without inputs)."""
        return max(self.ins, default=1.0)


#: ``rule(ctx) -> float``: how large the node's output values can grow, given its
#: inputs' (the numerics guard, :mod:`attngraph.analysis.magnitude`); None: the
#: largest input's (a node that mixes or selects its inputs without amplifying them).
MagnitudeRule = Callable[[MagnitudeCtx], float]

def dense_work(ctx: WorkCtx) -> Work:
    """Each parameter used once per output position (linear layers, rnn), plus a few
    operations per output element."""
    out = ctx.out()
    return Work(ctx.node.params * ctx.positions(out) + ctx.elements(out))


def elementwise_work(ctx: WorkCtx) -> Work:
    """A few operations per output element, whatever the parameters (lookups, sums)."""
    return Work(ctx.elements(ctx.out()))


def no_work(ctx: WorkCtx) -> Work:
    """Nothing of its own (an input; a block, repeat or loop, whose body the guard counts)."""
    return Work()


