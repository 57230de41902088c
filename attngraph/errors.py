"""Source locations and the one error hierarchy of attngraph.

Every user-facing error carries a :class:`SourceLoc` and renders as one located
line, the source line with a caret under the problem, and a hint::

    my_spec.yaml:11:6: error: node 's': scorer fn 'dot' needs ...
       11 |   s: {kind: scorer, fn: dot, query: q, key: k, pairs: all}
          |      ^
    hint: make both dims equal, or use fn 'general'
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

__all__ = [
    "AttnGraphError",
    "Diagnostic",
    "GraphError",
    "LoweringError",
    "RegistryError",
    "RenderError",
    "ShapeError",
    "SourceLoc",
    "SpecError",
    "TrainingError",
    "count_problem",
    "did_you_mean",
    "flag_problem",
    "whole",
]


@dataclass(frozen=True)
class SourceLoc:
    """A position in a spec file: 1-based line and column."""

    file: str = "<spec>"
    line: int = 0
    col: int = 0
    text: str | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        if self.line <= 0:
            return self.file
        return f"{self.file}:{self.line}:{self.col}"

    def excerpt(self) -> str:
        """The source line with a caret under the column, or '' when unknown.

        A long line is cut to a window around the column, and control characters
        (from a binary file, say) print as U+FFFD, so the excerpt stays one
        readable line with the caret in place.
        """
        if self.text is None or self.line <= 0:
            return ""
        lines = self.text.splitlines()
        if self.line > len(lines):
            return ""
        src = lines[self.line - 1]
        at = max(self.col - 1, 0)
        start = max(0, min(at - _EXCERPT // 2, len(src) - _EXCERPT))
        shown = src[start:start + _EXCERPT]
        head = "..." if start > 0 else ""
        tail = "..." if start + _EXCERPT < len(src) else ""
        shown = head + _CONTROL.sub("\ufffd", shown) + tail
        num = str(self.line)
        pad = " " * len(num)
        caret = " " * (at - start + len(head)) + "^"
        return f"   {num} | {shown}\n   {pad} | {caret}"


#: Widest part of a source line an excerpt shows.
_EXCERPT = 100
#: C0 and C1 control characters other than tab: never written to a terminal raw.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Diagnostic:
    """One located problem: where, what, and how to fix it."""

    loc: SourceLoc
    message: str
    hint: str | None = None

    def format(self, *, color: bool = False) -> str:
        """Render as ``FILE:LINE:COL: error: message``, excerpt, then hint."""
        err = "\x1b[1;31merror\x1b[0m" if color else "error"
        head = f"{self.loc}: {err}: {self.message}"
        parts = [head]
        ex = self.loc.excerpt()
        if ex:
            parts.append(ex)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class AttnGraphError(Exception):
    """Base of every error attngraph raises for bad input; holds diagnostics."""

    def __init__(
        self,
        message: str,
        loc: SourceLoc | None = None,
        hint: str | None = None,
        *,
        diagnostics: Sequence[Diagnostic] | None = None,
    ) -> None:
        if diagnostics:
            self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        else:
            self.diagnostics = (Diagnostic(loc or SourceLoc(), message, hint),)
        first = self.diagnostics[0]
        super().__init__(f"{first.loc}: error: {first.message}")

    @property
    def loc(self) -> SourceLoc:
        """Location of the first diagnostic."""
        return self.diagnostics[0].loc

    @property
    def message(self) -> str:
        """Message of the first diagnostic."""
        return self.diagnostics[0].message

    @property
    def hint(self) -> str | None:
        """Hint of the first diagnostic."""
        return self.diagnostics[0].hint

    def format(self, *, color: bool = False) -> str:
        """All diagnostics, each with its excerpt, separated by blank lines."""
        return "\n".join(d.format(color=color) for d in self.diagnostics)


class SpecError(AttnGraphError):
    """The YAML or the schema is wrong: syntax, unknown fields, bad values."""


class GraphError(AttnGraphError):
    """The wiring is wrong: dangling references, cycles, missing outputs."""


class ShapeError(AttnGraphError):
    """Shapes do not fit together."""


class LoweringError(AttnGraphError):
    """A graph cannot become a module, or a module failed at run time."""


class RegistryError(AttnGraphError):
    """An unknown or duplicate name in a registry (kinds, scorers, passes, formats...)."""


class RenderError(AttnGraphError):
    """A diagram cannot be drawn (e.g. the ``dot`` program is missing)."""


class TrainingError(AttnGraphError):
    """Training cannot start or resume (bad task, mismatched checkpoint)."""


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """A hint naming the closest known name, or listing the known names."""
    names = sorted(set(known))
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if not names:
        return "nothing of that kind is defined"
    if len(names) <= 40:
        return "known: " + ", ".join(names)
    return "known: " + ", ".join(names[:40]) + ", ..."


def whole(value: object, low: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is a whole number (an ``int``, not a ``bool``), at least ``low``
    when given: what a setting given from Python must be where the command line's
    option types would have checked it."""
    return (not isinstance(value, bool) and isinstance(value, int)
            and (low is None or value >= low))


def count_problem(name: str, value: object, low: int) -> str | None:
    """What is wrong with ``value`` as the count ``name`` of at least ``low``, or None."""
    if whole(value, low):
        return None
    return f"{name} must be a whole number >= {low}, not {value!r:.40}"


def flag_problem(**flags: object) -> tuple[str, str] | None:
    """The first of the switches ``flags`` (name=value) that is not True or False:
    its name and what is wrong with it; None when all are."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            return name, f"{name} must be True or False, not {value!r:.40}"
    return None
