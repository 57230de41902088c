"""What the unrolled view draws of one IR node, shared by its two modules.

:class:`Drawn` holds a node's drawn instances (``x_1, x_2, x_N``), :class:`Dep` a
dependency it draws, :func:`subs` the subscripts of its instances in a mode.
:mod:`renderers.unrolled` decides modes, rows and edges; :mod:`renderers.boxes`
draws the blocks, repeats and loops.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attngraph.ir.graph import Role

__all__ = ["Dep", "Drawn", "subs", "SINGLE"]

#: modes of a source drawn as one node (``port``: a per-item node's summary port,
#: like an rnn's final state)
SINGLE = ("scalar", "box", "port")


@dataclass(frozen=True)
class Dep:
    """A drawn dependency: ``src``'s ``port`` fills ``role`` of the reading node."""

    src: str
    port: str
    role: Role
    detach: bool


@dataclass
class Drawn:
    """The drawn instances of one IR node."""

    mode: str
    axis: str = ""
    #: sub -> diagram node id, in left-to-right order
    inst: dict[str, str] = field(default_factory=dict)
    entry: list[str] = field(default_factory=list)
    exit: str = ""
    height: int = 1


def subs(mode: str, axis: str, items: int, query: int) -> list[str]:
    """Subscripts drawn in ``mode``: ``1 … items, N``; ``q,1 … q,N``; ``q``; or none."""
    idx = [str(k) for k in range(1, items + 1)] + [axis]
    if mode == "items":
        return idx
    if mode == "pairs":
        return [f"{query},{j}" for j in idx]
    if mode == "qonly":
        return [str(query)]
    return [""]
