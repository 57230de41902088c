"""Layout of the exported Python file: shapes, spec lines and docstrings as text.

>>> comment("line 3: q: {kind: queries, from: x}", 8)
'        # line 3: q: {kind: queries, from: x}\\n'
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attngraph.ir.graph import Node, TensorType

__all__ = ["WIDTH", "class_name", "comment", "shape", "wrap", "yaml_line"]

#: the project's line length: the file passes its ruff rules
WIDTH = 100


def shape(t: TensorType) -> str:
    """``(B, h, N, d)``: a runtime tensor's axes."""
    dims = ["B", *([str(t.heads)] if t.heads else []), *(str(d) for d in t.dims)]
    return "(" + ", ".join(dims) + ")"


def yaml_line(node: Node[Any]) -> str | None:
    """``file:line: the line as written`` for a node with a known source line."""
    loc = node.loc
    if loc.text is None or loc.line <= 0:
        return None
    lines = loc.text.splitlines()
    if loc.line > len(lines):
        return None
    text = " ".join(lines[loc.line - 1].split())
    if not text.startswith(f"{node.id}:"):  # a node written over several lines
        for back in range(loc.line - 1, max(0, loc.line - 6), -1):
            head = " ".join(lines[back - 1].split())
            if head.startswith(f"{node.id}:"):
                return f"line {back}: {head} {text}"
    return f"line {loc.line}: {text}"


def wrap(text: str, first: int, indent: int) -> str:
    """Text for a docstring: escaped, wrapped to the width (the first line starts
    ``first`` columns in, the others ``indent``)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    lines = textwrap.wrap(text, WIDTH - indent - 3, initial_indent=" " * (first - indent),
                          break_long_words=False, break_on_hyphens=False)
    lines[0] = lines[0].lstrip()
    return ("\n" + " " * indent).join(lines)


def comment(text: str, indent: int) -> str:
    """A comment line at ``indent``, cut to the width."""
    pad = " " * indent
    room = WIDTH - indent - 2
    if len(text) > room:
        text = text[:room - 3] + "..."
    return f"{pad}# {text}\n"


def class_name(name: str) -> str:
    """The spec's name as a class name: ``multihead_attention`` -> ``MultiheadAttention``.

    >>> class_name("multihead_attention"), class_name("2d-conv")
    ('MultiheadAttention', 'Model2dConv')
    """
    parts = [p for p in "".join(c if c.isalnum() else "_" for c in name).split("_") if p]
    out = "".join(p[:1].upper() + p[1:] for p in parts) or "Model"
    return out if out.isidentifier() else f"Model{out}"
