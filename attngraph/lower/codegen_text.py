"""Layout of the exported Python file: expressions broken to the line length, shapes,
spec lines and docstrings as text.

>>> comment("line 3: q: {kind: queries, from: x}", 8)
'        # line 3: q: {kind: queries, from: x}\\n'
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attngraph.ir.graph import Node, TensorType

__all__ = ["WIDTH", "Doc", "Pair", "class_name", "comment", "flat", "render", "shape", "wrap",
           "yaml_line"]

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


@dataclass
class Doc:
    """A bracketed list of items: ``open item, item close``; ``fill`` packs items
    (numbers) into lines rather than one per line."""

    open: str
    items: Sequence[Doc | Pair | str]
    close: str
    fill: bool = False
    single_comma: bool = False  # a one-item tuple: (x,)


@dataclass
class Pair:
    """``key=value`` or ``key: value``: the value breaks as if the key were not there."""

    key: str
    value: Doc | Pair | str


def flat(d: Doc | Pair | str) -> str:
    """``d`` on one line."""
    if isinstance(d, str):
        return d
    if isinstance(d, Pair):
        return d.key + flat(d.value)
    inner = ", ".join(flat(i) for i in d.items)
    if d.single_comma and len(d.items) == 1:
        inner += ","
    return d.open + inner + d.close


def render(d: Doc | Pair | str, indent: int = 0, width: int = 100, *, tail: int = 0,
           lead: int = 0) -> str:
    """``d`` as code on a line indented ``indent``: on one line when it fits (after
    ``lead`` characters of the line, before ``tail`` more), else its items one per line.

    >>> render(Doc("f(", ["1", "x=2"], ")"))
    'f(1, x=2)'
    >>> print(render(Doc("f(", ["a" * 40, "b" * 40], ")"), width=60))
    f(
        aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,
        bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb,
    )
    """
    if isinstance(d, Pair):
        return d.key + render(d.value, indent, width, tail=tail, lead=lead + len(d.key))
    one = flat(d)
    if isinstance(d, str) or indent + lead + len(one) + tail <= width or not d.items:
        return one
    pad = " " * (indent + 4)
    if d.fill:
        lines: list[str] = []
        cur = ""
        for item in d.items:
            s = flat(item) + ","
            if cur and len(pad) + len(cur) + 1 + len(s) > width:
                lines.append(cur)
                cur = s
            else:
                cur = f"{cur} {s}" if cur else s
        lines.append(cur)
        body = "".join(f"{pad}{line}\n" for line in lines)
    else:
        body = "".join(f"{pad}{render(i, indent + 4, width, tail=1)},\n" for i in d.items)
    return d.open + "\n" + body + " " * indent + d.close
