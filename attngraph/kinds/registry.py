"""Registries for node kinds: a shape rule and a lowering rule per kind.

Rules are filled by decorators in the modules of :mod:`attngraph.kinds`; a user
package can register its own scorer functions the same way (see
:func:`register_scorer`). Looking up an unknown name fails with the sorted list
of known names and a "did you mean".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from attngraph.errors import AttnGraphError, did_you_mean

__all__ = [
    "ShapeFn", "SHAPES", "LOWERINGS", "SCORERS", "ScorerInfo", "shape_rule", "lowering_rule",
    "register_scorer", "lookup",
]

F = TypeVar("F", bound=Callable[..., Any])
ShapeFn = Callable[[Any], dict[str, Any]]

#: kind -> shape rule ``fn(ctx) -> {port: TensorType}``
SHAPES: dict[str, ShapeFn] = {}
#: kind -> lowering rule (filled by :mod:`attngraph.lower`)
LOWERINGS: dict[str, Callable[..., Any]] = {}


@dataclass(frozen=True)
class ScorerInfo:
    """A scorer function: formula text, whether it needs a query, its parameters.

    ``same_size`` means query and key must have one size; ``params(dq, dk, hidden)``
    counts its parameters; ``make`` (optional) builds the torch module for a
    user-registered function: ``make(dq, dk, hidden) -> nn.Module`` whose
    ``forward(q, k)`` returns scores for ``q [.., M, dq]`` and ``k [.., N, dk]``.
    """

    name: str
    formula: str
    needs_query: bool = True
    same_size: bool = False
    params: Callable[[int, int, int], int] = lambda dq, dk, h: 0
    content: bool = True
    make: Callable[..., Any] | None = None


SCORERS: dict[str, ScorerInfo] = {}


def shape_rule(kind: str) -> Callable[[F], F]:
    """Register ``fn`` as the shape rule of ``kind``."""

    def deco(fn: F) -> F:
        SHAPES[kind] = fn
        return fn

    return deco


def lowering_rule(kind: str) -> Callable[[F], F]:
    """Register ``fn`` as the lowering rule of ``kind``."""

    def deco(fn: F) -> F:
        LOWERINGS[kind] = fn
        return fn

    return deco


def register_scorer(info: ScorerInfo) -> ScorerInfo:
    """Add a scorer function; ``fn: <info.name>`` in specs then refers to it."""
    SCORERS[info.name] = info
    return info


def lookup(table: dict[str, Any], name: str, what: str) -> Any:
    """``table[name]``, or an error listing the known names with a did-you-mean."""
    try:
        return table[name]
    except KeyError:
        msg = f"unknown {what} '{name}'"
        raise AttnGraphError(msg, hint=did_you_mean(name, table)) from None
