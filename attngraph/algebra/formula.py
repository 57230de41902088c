"""The formula grammar: text -> a tree of :class:`Expr` nodes, each with its offset.

A formula is arithmetic as a paper writes it::

    relu(s / sqrt(d)) ^ 2
    gamma ^ (i - j) * (j <= i)
    s - logsumexp(s, items)

Grammar (lowest precedence first; ``^`` and ``**`` bind right to left and above
unary minus, so ``-x^2`` is ``-(x^2)``, as in mathematics)::

    formula  := compare
    compare  := sum (("<" | "<=" | ">" | ">=" | "==" | "!=") sum)?
    sum      := product (("+" | "-") product)*
    product  := unary (("*" | "/") unary)*
    unary    := ("-" | "+") unary | power
    power    := atom (("^" | "**") unary)?
    atom     := number | name | name "(" args? ")" | "(" formula ")"
    name     := [A-Za-z_][A-Za-z0-9_]* ("." [A-Za-z_][A-Za-z0-9_]*)?

``·`` and ``×`` are ``*``, ``÷`` is ``/``, ``−`` (U+2212) is ``-``, ``√x`` is
``sqrt(x)``. The reader is a hand-written recursive descent over a token list:
it never calls Python's ``eval``, never looks up a Python name, and refuses a
formula longer than :data:`MAX_LENGTH` characters, nested deeper than
:data:`MAX_DEPTH`, or with a number outside ±:data:`MAX_NUMBER`, each at the
offending character (:class:`FormulaError` carries the 0-based offset; the kind
turns it into the spec's line and column). The tree's node types and walks are
:mod:`attngraph.algebra.tree`'s, re-exported here.

>>> str(parse("-x^2 + 3*y"))
'(-(x ^ 2) + (3 * y))'
>>> str(parse("softmax(s / sqrt(d), items)"))
'softmax((s / sqrt(d)), items)'
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

from attngraph.algebra.tree import Binary, Call, Expr, Name, Num, Unary, names, walk
from attngraph.errors import SourceLoc

__all__ = [
    "Expr", "Num", "Name", "Unary", "Binary", "Call", "FormulaError", "parse",
    "MAX_LENGTH", "MAX_DEPTH", "MAX_NUMBER", "MAX_OPERATIONS", "names", "walk", "formula_loc",
    "formula_refs",
]

#: Longest formula read, in characters.
MAX_LENGTH = 2000
#: Deepest nesting of brackets, calls and operators.
MAX_DEPTH = 32
#: Most operations (operators and calls) in one formula: the checker walks the tree
#: recursively, and a chain ``x + x + ...`` is as deep as it is long.
MAX_OPERATIONS = 128
#: Largest magnitude of a number written in a formula: beyond it float32 arithmetic
#: (largest 3.4e38) overflows after a few products.
MAX_NUMBER = 1e9


class FormulaError(ValueError):
    """A formula that cannot be read: ``message`` at character ``offset``, with a ``hint``."""

    def __init__(self, message: str, offset: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.hint = hint


_ALIASES = {"·": "*", "×": "*", "÷": "/", "−": "-", "**": "^", "≤": "<=", "≥": ">=",
            "≠": "!="}
_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+)
  | (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)
  | (?P<op>\*\*|<=|>=|==|!=|[-+*/^(),<>·×÷−√≤≥≠])
""", re.VERBOSE)


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, name, op, end
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            ch = text[i]
            shown = repr(ch) if ch.isprintable() else f"U+{ord(ch):04X}"
            hint = "a formula has numbers, names, + - * / ^, comparisons, brackets and " \
                "function calls"
            if ch in "=":
                hint = "compare with == (a formula never assigns)"
            elif ch in "[]{}":
                hint = "group with round brackets ( )"
            msg = f"unexpected character {shown} in the formula"
            raise FormulaError(msg, i, hint)
        kind = m.lastgroup or ""
        if kind != "space":
            tok = m.group()
            out.append(_Tok(kind, _ALIASES.get(tok, tok), i))
        i = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


_COMPARE = ("<", "<=", ">", ">=", "==", "!=")


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.depth = 0
        self.ops = 0

    def count(self, pos: int) -> None:
        """One more operation; past :data:`MAX_OPERATIONS`, refused at this one."""
        self.ops += 1
        if self.ops > MAX_OPERATIONS:
            msg = f"the formula has more than {MAX_OPERATIONS} operations"
            raise FormulaError(msg, pos, "split it into several expression nodes")

    @property
    def tok(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, text: str, opened: _Tok | None = None) -> _Tok:
        if self.tok.text != text or self.tok.kind != "op":
            found = "the end of the formula" if self.tok.kind == "end" else f"'{self.tok.text}'"
            hint = f"close the '(' at character {opened.pos + 1}" if opened else None
            msg = f"expected '{text}', found {found}"
            raise FormulaError(msg, self.tok.pos, hint)
        return self.take()

    def deeper(self, pos: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            msg = f"the formula nests deeper than {MAX_DEPTH} levels"
            raise FormulaError(msg, pos,
                               "split it into several expression nodes")

    def formula(self) -> Expr:
        left = self.sum()
        if self.tok.kind == "op" and self.tok.text in _COMPARE:
            op = self.take()
            self.count(op.pos)
            right = self.sum()
            if self.tok.kind == "op" and self.tok.text in _COMPARE:
                msg = "comparisons do not chain"
                raise FormulaError(msg, self.tok.pos,
                                   "write (a < b) * (b < c) for a < b < c")
            left = Binary(op.pos, op.text, left, right)
        return left

    def sum(self) -> Expr:
        left = self.product()
        while self.tok.kind == "op" and self.tok.text in "+-":
            op = self.take()
            self.count(op.pos)
            left = Binary(op.pos, op.text, left, self.product())
        return left

    def product(self) -> Expr:
        left = self.unary()
        while self.tok.kind == "op" and self.tok.text in ("*", "/"):
            op = self.take()
            self.count(op.pos)
            left = Binary(op.pos, op.text, left, self.unary())
        return left

    def unary(self) -> Expr:
        if self.tok.kind == "op" and self.tok.text in ("-", "+", "√"):
            op = self.take()
            self.count(op.pos)
            self.deeper(op.pos)
            arg = self.unary()
            self.depth -= 1
            if op.text == "+":
                return arg
            if op.text == "√":
                return Call(op.pos, "sqrt", (arg,))
            return Unary(op.pos, "-", arg)
        return self.power()

    def power(self) -> Expr:
        base = self.atom()
        if self.tok.kind == "op" and self.tok.text == "^":
            op = self.take()
            self.count(op.pos)
            self.deeper(op.pos)
            exp = self.unary()
            self.depth -= 1
            return Binary(op.pos, "^", base, exp)
        return base

    def atom(self) -> Expr:
        t = self.tok
        if t.kind == "num":
            self.take()
            value = float(t.text)
            if not math.isfinite(value) or abs(value) > MAX_NUMBER:
                msg = (
                    f"the number {t.text} is out of range (at most "
                                   f"{MAX_NUMBER:g} in magnitude)"
                )
                raise FormulaError(msg, t.pos,
                                   "write a smaller constant; products of large constants "
                                   "overflow float32")
            return Num(t.pos, value)
        if t.kind == "name":
            self.take()
            if self.tok.kind == "op" and self.tok.text == "(":
                if "." in t.text:
                    msg = f"'{t.text}' is not a function"
                    raise FormulaError(msg, t.pos,
                                       "a call names a function, e.g. exp(x)")
                opened = self.take()
                self.count(t.pos)
                self.deeper(opened.pos)
                args: list[Expr] = []
                if not (self.tok.kind == "op" and self.tok.text == ")"):
                    args.append(self.formula())
                    while self.tok.kind == "op" and self.tok.text == ",":
                        self.take()
                        args.append(self.formula())
                self.expect(")", opened)
                self.depth -= 1
                return Call(t.pos, t.text, tuple(args))
            return Name(t.pos, t.text)
        if t.kind == "op" and t.text == "(":
            opened = self.take()
            self.deeper(opened.pos)
            inner = self.formula()
            self.expect(")", opened)
            self.depth -= 1
            return inner
        if t.kind == "end":
            msg = "the formula ends where a value is expected"
            raise FormulaError(msg, t.pos,
                               "complete the formula, e.g. 'x * 2'")
        msg = f"expected a value, found '{t.text}'"
        raise FormulaError(msg, t.pos,
                           "a value is a number, a name, a call f(x) or a bracket (...)")


@functools.lru_cache(maxsize=512)
def parse(text: str) -> Expr:
    """The tree of formula ``text`` (cached: the same text gives the same tree).

    Raises
    ------
    FormulaError
        At the offending character: an unknown character, a missing bracket, a value
        missing, a formula too long or too deep, a number out of range.

    Examples
    --------
    >>> parse("a+b*c").op, str(parse("2^-x"))
    ('+', '(2 ^ -x)')
    """
    if len(text) > MAX_LENGTH:
        msg = (
            f"the formula is {len(text):,} characters long, over the limit of "
                           f"{MAX_LENGTH:,}"
        )
        raise FormulaError(msg, MAX_LENGTH, "split it into several expression nodes")
    if not text.strip():
        msg = "the formula is empty"
        raise FormulaError(msg, 0, "write the arithmetic, e.g. 'relu(s) ^ 2'")
    p = _Parser(text)
    tree = p.formula()
    if p.tok.kind != "end":
        hint = "join values with an operator" if p.tok.kind in ("num", "name") else \
            "remove it, or open a bracket before it" if p.tok.text == ")" else \
            "join it to the formula with an operator, or remove it"
        msg = f"unexpected '{p.tok.text}' after a complete formula"
        raise FormulaError(msg, p.tok.pos, hint)
    return tree


def formula_loc(base: SourceLoc, text: str, offset: int) -> SourceLoc:
    """The position of character ``offset`` of formula ``text`` whose value starts at ``base``.

    Exact for a formula written on one line, plain or quoted; for one that spans
    lines (a folded scalar) or holds escapes, the value's own position.
    """
    if base.text is None or base.line <= 0:
        return base
    lines = base.text.splitlines()
    if base.line > len(lines):
        return base
    src = lines[base.line - 1][base.col - 1:]
    start = 1 if src[:1] in ("'", '"') else 0
    if src[start:start + len(text)] != text:
        return base
    return SourceLoc(base.file, base.line, base.col + start + offset, base.text)


def formula_refs(text: str) -> list[Name]:
    """The names of formula ``text``, once each, in order of first appearance; none when
    it does not parse (shape inference then reports the syntax error where it is).

    >>> [n.name for n in formula_refs("s - logsumexp(s, items) + b.out")]
    ['s', 'items', 'b.out']
    """
    try:
        tree = parse(text)
    except FormulaError:
        return []
    from attngraph.algebra.functions import FUNCTIONS

    seen: dict[str, Name] = {}
    # a call of something that is no function may name a node (``x (1)``): its edge lets
    # the checker say so
    calls = [Name(c.pos, c.fn) for c in walk(tree) if isinstance(c, Call)
             and c.fn not in FUNCTIONS and c.fn not in ("max", "min")]
    for n in sorted([*names(tree), *calls], key=lambda x: x.pos):
        seen.setdefault(n.name, n)
    return list(seen.values())
