"""A definition the bundler copies, and the edits it makes to the copied text.

:class:`Def` holds one top-level definition's text (UTF-8, as ``ast`` columns count
bytes) and the edits to apply to it, ``(start, end, replacement)``, rendered last to
first; a replacement is a string, or a callable asked only when the file is
rendered, once every definition is known: :class:`Dropped` leaves out a method no
kept code calls, :class:`Annotation` writes an annotation as it is or as ``Any``.
:class:`~attngraph.lower.export.codegen_bundle.Bundle` makes them.
"""

from __future__ import annotations

import ast
import builtins
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attngraph.lower.export.codegen_source import binding, import_source, is_local, module_tree

if TYPE_CHECKING:
    from attngraph.lower.export.codegen_bundle import Bundle

__all__ = ["BUILTINS", "Annotation", "Def", "Dropped"]

#: The names every file has without defining them.
BUILTINS = frozenset(dir(builtins))


@dataclass
class Def:
    """One bundled top-level definition: its text (UTF-8) and the edits to apply."""

    name: str
    source: bytes
    edits: list[tuple[int, int, Any]] = field(default_factory=list)
    #: (method name, start, end, free names) of methods dropped unless called
    optional: list[tuple[str, int, int, list[ast.Name], set[str], Any]] = field(
        default_factory=list)
    module: str = ""

    def render(self) -> str:
        out = self.source
        for start, end, repl in sorted(self.edits, key=lambda e: e[0], reverse=True):
            text = repl() if callable(repl) else repl
            out = out[:start] + text.encode() + out[end:]
        return out.decode()


@dataclass
class Dropped:
    """The edit that leaves out an uncalled method (empty text)."""

    d: Def
    name: str

    def __call__(self) -> str:
        return ""


@dataclass
class Annotation:
    """An annotation as written when the file defines every name in it, else ``Any``."""

    bundle: Bundle
    node: ast.expr
    module: str

    def __call__(self) -> str:
        text = ast.unparse(self.node)
        if isinstance(self.node, ast.Constant):
            return self.bundle.add_import("typing", "Any", "Any")
        names = [n for n in ast.walk(self.node) if isinstance(n, ast.Name)]
        out: list[tuple[str, str]] = []
        for n in names:
            have = self.bundle.names.get(n.id)
            if n.id in BUILTINS or (have is not None and _defined(self.bundle, n.id)):
                continue
            mod = sys.modules[self.module]
            value = mod.__dict__.get(n.id)
            how = binding(module_tree(self.module), n.id)
            src = import_source(how, n.id, self.module) if isinstance(
                how, (ast.Import, ast.ImportFrom)) else None
            if src is not None and not is_local(src[0]):
                self.bundle.add_import(*src)
                continue
            bound = self.bundle.bound(value) if value is not None else None
            if bound is not None:
                out.append((n.id, bound))
                continue
            return self.bundle.add_import("typing", "Any", "Any")
        for old, new in out:
            text = text.replace(old, new)
        return text


def _defined(bundle: Bundle, name: str) -> bool:
    """``name`` is a definition or import of the file (not a reserved one)."""
    v = bundle.names.get(name)
    return not (isinstance(v, tuple) and v and v[0] == "reserved")
