"""What the renderers read of a node kind: its role and its style.

Both come from the kind's one home, :data:`attngraph.kinds.KINDS` (see
:mod:`attngraph.kinds.base`), so a kind a user registers draws like the built-in
kinds of its role, in its own style. The views (:mod:`renderers.architecture`,
:mod:`renderers.unrolled`) keep no table of kinds of their own; what they draw
that is no node kind (a softmax's mask note, the graph's outputs) is styled here.
"""

from __future__ import annotations

from attngraph.ir.graph import Node
from attngraph.kinds import KINDS, Style
from attngraph.kinds.base import DEFAULT_STYLE, traits_of
from attngraph.spec.fields import fields_of

__all__ = ["role_of", "style_of", "formulas", "traits_of", "PSEUDO_STYLES"]

#: What the architecture view draws that is no node kind: a mask note, an output.
PSEUDO_STYLES = {
    "mask": Style("#d9d9d9", "note"),
    "output": Style("#eeeeee", "house"),
}


def style_of(kind: str) -> Style:
    """How ``kind`` is drawn: its registered style, or a pseudo-kind's; plain if unknown."""
    if kind in PSEUDO_STYLES:
        return PSEUDO_STYLES[kind]
    k = KINDS.get(kind)
    return k.style if k is not None else DEFAULT_STYLE


def role_of(node: Node) -> str | None:
    """The role of ``node``'s kind (``"weights"``, ``"structure"``...), None if unknown."""
    k = KINDS.get(node.kind)
    return k.role if k is not None else None


def formulas(node: Node) -> list[str]:
    """The formulas ``node`` computes (the text of its model's formula fields): what a
    diagram writes on an expression's node."""
    if node.spec is None or node.is_input:
        return []
    table = fields_of(type(node.spec))
    return [str(getattr(node.spec, table.attr(f))) for f in sorted(table.formulas)]
