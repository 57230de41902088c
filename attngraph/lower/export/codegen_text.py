"""Layout of the exported Python file: expressions broken to the line length, shapes,
spec lines and docstrings as text.

User text (a spec's name, title and summary, node ids, YAML lines) reaches the file
only through :func:`escape`: as a string literal (:func:`quote`), in a docstring
(:func:`wrap`) or in a comment (:func:`comment`), it cannot end the literal, the
docstring or the comment line early.

>>> comment("line 3: q: {kind: queries, from: x}", 8)
'        # line 3: q: {kind: queries, from: x}\\n'
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attngraph.ir.graph import Node, TensorType

__all__ = ["FILE_NAMES", "WIDTH", "Doc", "Pair", "class_name", "comment", "docstring_text",
           "escape", "flat", "quote", "render", "shape", "wrap", "yaml_line"]

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


def escape(text: str, *, backslash: bool = True) -> str:
    r"""User text with nothing that could end a literal or a line: every character
    that is not printable (a newline, ``\x00``, ``\u2028``, a lone surrogate) as
    its escape, and (``backslash``: inside a literal) every backslash doubled.

    >>> print(escape("a\\b\nc\x00"), escape("a\\b", backslash=False))
    a\\b\nc\x00 a\b
    """
    out = []
    for c in str(text):
        if c == "\\" and backslash:
            out.append("\\\\")
        elif c.isprintable() or c == " ":
            out.append(c)
        else:
            out.append(repr(c)[1:-1])
    return "".join(out)


def quote(text: str) -> str:
    r"""User text as a string literal (``repr``: quotes, backslashes and control
    characters escaped).

    >>> print(quote('say "hi"\n'))
    'say "hi"\n'
    """
    return repr(str(text))


#: a run of quotes, or one at the end: what would close (or begin closing) a docstring
_QUOTES = re.compile(r'"{2,}|"$')


def docstring_text(text: str) -> str:
    r"""User text for the inside of a triple-quoted docstring: whitespace runs as one
    space, escaped (:func:`escape`), quotes escaped where two meet or one ends it.

    >>> print(docstring_text('a "b" ""c\\ "'))
    a "b" \"\"c\\ \"
    """
    flat_text = escape(" ".join(str(text).split()))
    return _QUOTES.sub(lambda m: '\\"' * len(m.group()), flat_text)


def wrap(text: str, first: int, indent: int) -> str:
    """Text for a docstring (:func:`docstring_text`), wrapped to the width (the first
    line starts ``first`` columns in, the others ``indent``)."""
    text = docstring_text(text)
    lines = textwrap.wrap(text, WIDTH - indent - 3, initial_indent=" " * (first - indent),
                          break_long_words=False, break_on_hyphens=False) or [""]
    lines[0] = lines[0].lstrip()
    return ("\n" + " " * indent).join(lines)


def comment(text: str, indent: int) -> str:
    """A comment line at ``indent``, cut to the width (control characters escaped:
    :func:`escape`)."""
    pad = " " * indent
    room = WIDTH - indent - 2
    text = escape(text, backslash=False)
    if len(text) > room:
        text = text[:room - 3] + "..."
    return f"{pad}# {text}\n"


#: names the file binds whatever the spec (imports, the error classes) or writes as they
#: are (an inline node's ``torch.``, ``F.``): the spec's class is never one of them
FILE_NAMES = frozenset({"torch", "nn", "F", "Tensor", "Any", "annotations",
                        "AttnGraphError", "LoweringError"})


def class_name(name: str) -> str:
    """The class of spec ``name`` in its Python file: the name in CamelCase
    (``multihead_attention`` -> ``MultiheadAttention``), a valid identifier, with
    ``Model`` added when that is a keyword, a builtin or one of :data:`FILE_NAMES`
    (:class:`~attngraph.lower.runtime.names.Mangler`). The file's helpers are named around it.

    >>> class_name("multihead_attention"), class_name("2d-conv"), class_name("none")
    ('MultiheadAttention', 'Model2dConv', 'NoneModel')
    >>> class_name("runtime"), class_name("tensor"), class_name("")
    ('Runtime', 'TensorModel', 'Model')
    """
    from attngraph.lower.runtime.names import Mangler

    return Mangler(FILE_NAMES).name(name, camel=True, prefix="Model", suffix="Model")


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
