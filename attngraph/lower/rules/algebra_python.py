"""The Python export of an expression: its program (:mod:`attngraph.algebra.program`)
as one line of torch calls (:func:`python_line`), for ``model.code``.

Each instruction is written by a function of :data:`_WRITERS`, which gives its text,
its rank (``-1``: a value read, of its own rank; ``0``: a number) and whether it is a
truth value; an instruction's text nests its operands' texts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from attngraph.algebra.functions import FUNCTIONS
from attngraph.lower.rules.algebra_functions import (
    for_each_example,
    length_of,
    masked_amax,
    masked_amin,
    masked_cumsum,
    masked_logsumexp,
    masked_mean,
    masked_norm,
    masked_softmax,
    masked_sum,
    mm,
    over_real,
    positions,
    project,
    real_only,
    zero_padding,
)

if TYPE_CHECKING:
    from attngraph.lower.rules.algebra import Expr

__all__ = ["python_line"]

#: over an axis without padding: the plain torch call, ``{0}`` the value, ``{1}`` the dim
_PLAIN_AXIS = {"sum": "{0}.sum({1})", "mean": "{0}.mean({1})", "amax": "{0}.amax({1})",
               "amin": "{0}.amin({1})", "logsumexp": "torch.logsumexp({0}, {1})",
               "norm": "torch.linalg.vector_norm({0}, dim={1})", "cumsum": "{0}.cumsum({1})",
               "softmax": "torch.softmax({0}, {1})"}
_MASKED_AXIS = {"sum": masked_sum, "mean": masked_mean, "amax": masked_amax,
                "amin": masked_amin, "logsumexp": masked_logsumexp, "norm": masked_norm,
                "cumsum": masked_cumsum, "softmax": masked_softmax}
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "^": "**", "<": "<", "<=": "<=", ">": ">",
        ">=": ">=", "==": "==", "!=": "!="}
_CMP = ("<", "<=", ">", ">=", "==", "!=")


@dataclass
class _Line:
    """What writing one expression keeps: per register, its text, whether it is a truth
    value, and its rank; and how to name the runtime and bundle a helper."""

    mod: Expr
    rt: str
    require: Any
    text: list[str] = field(default_factory=list)
    bools: list[bool] = field(default_factory=list)
    ndims: list[int] = field(default_factory=list)

    def push(self, t: str, nd: int, is_bool: bool = False) -> None:
        self.text.append(t)
        self.bools.append(is_bool)
        self.ndims.append(nd)

    def as_float(self, r: int) -> str:
        """Register ``r``'s text, a truth value cast to the runtime's dtype."""
        return f"{self.text[r]}.to({self.rt}.dtype)" if self.bools[r] else self.text[r]


#: a writer gives an instruction's (text, rank, is a truth value)
_Written = tuple[str, int, bool]


def _num(w: _Line, ins: tuple[Any, ...]) -> _Written:
    return repr(float(ins[1])), 0, False


def _len(w: _Line, ins: tuple[Any, ...]) -> _Written:
    if ins[2] < 0:
        return f"{w.require(length_of)}({w.rt}, {ins[1]!r})", 1, False
    return f"{w.require(length_of)}({w.rt}, {ins[1]!r}, {w.text[ins[2]]}, {ins[3]})", 1, False


def _idxn(w: _Line, ins: tuple[Any, ...]) -> _Written:
    n = ins[1] if isinstance(ins[1], int) else f"{w.rt}.sizes[{ins[1]!r}]"
    return f"torch.arange({n}, device={w.rt}.device, dtype={w.rt}.dtype)[None, :]", 2, False


def _idx(w: _Line, ins: tuple[Any, ...]) -> _Written:
    return f"{w.require(positions)}({w.text[ins[1]]}, {ins[2]})", 2, False


def _align(w: _Line, ins: tuple[Any, ...]) -> _Written:
    if w.ndims[ins[1]] == 0:  # numbers broadcast as they are
        return w.text[ins[1]], 0, w.bools[ins[1]]
    keys = [":"] + [":" if d > 0 else "None" for d in ins[2]]
    if w.ndims[ins[1]] == 1:  # a per-example scalar
        keys = [":"] + ["None"] * len(ins[2])
    while keys and keys[-1] == ":":
        keys.pop()
    return f"{w.text[ins[1]]}[{', '.join(keys)}]", 1 + len(ins[2]), w.bools[ins[1]]


def _neg(w: _Line, ins: tuple[Any, ...]) -> _Written:
    return f"-{w.text[ins[1]]}", w.ndims[ins[1]], False


def _bin(w: _Line, ins: tuple[Any, ...]) -> _Written:
    cmp = ins[1] in _CMP
    a = w.text[ins[2]] if cmp else w.as_float(ins[2])
    b = w.text[ins[3]] if cmp else w.as_float(ins[3])
    return f"({a} {_OPS[ins[1]]} {b})", _rank(w.ndims[ins[2]], w.ndims[ins[3]]), cmp


def _call(w: _Line, ins: tuple[Any, ...]) -> _Written:
    fn = FUNCTIONS[ins[1]]
    vals = [w.text[r] if ins[1] == "where" and k == 0 else w.as_float(r)
            for k, r in enumerate(ins[2])]
    if ins[1] in ("min", "max", "where", "clamp"):  # torch wants tensors there
        vals = [v if w.ndims[r] != 0 else f"torch.tensor({v})"
                for v, r in zip(vals, ins[2], strict=True)]
    t = fn.python.format(*vals) if fn.python else \
        f"{w.require(w.mod.impls[ins[1]])}({', '.join(vals)})"
    return t, _rank(*(w.ndims[r] for r in ins[2])), False


def _axis(w: _Line, ins: tuple[Any, ...]) -> _Written:
    x = w.text[ins[2]]
    if ins[4]:
        fn_name = w.require(_MASKED_AXIS[ins[1]]) if ins[1] in _MASKED_AXIS \
            else w.require(w.mod.impls[ins[1]])
        t = f"{w.require(over_real)}({fn_name}, {x}, {ins[3]}, {w.rt}, {ins[4]!r})"
    elif ins[1] in _PLAIN_AXIS:
        t = _PLAIN_AXIS[ins[1]].format(x, ins[3])
    else:
        t = f"{w.require(w.mod.impls[ins[1]])}({x}, {ins[3]}, None)"
    nd = w.ndims[ins[2]]
    nd = nd if nd < 0 else nd - (1 if FUNCTIONS[ins[1]].form == "reduce" else 0)
    return t, nd, False


def _take(w: _Line, ins: tuple[Any, ...]) -> _Written:
    t = (f"{w.require(w.mod.impls[ins[1]])}({w.text[ins[2]]}, {w.text[ins[3]]}, "
         f"{', '.join(map(repr, ins[4:7]))})")
    return t, 1 + len(ins[6]), False


def _mm(w: _Line, ins: tuple[Any, ...]) -> _Written:
    a = w.text[ins[1]]
    if ins[7]:
        a = f"{w.require(real_only)}({a}, {w.rt}, {ins[7]!r}, -1)"
    return f"{w.require(mm)}({a}, {w.text[ins[2]]}, {', '.join(map(repr, ins[3:7]))})", -1, \
        False


def _proj(w: _Line, ins: tuple[Any, ...]) -> _Written:
    x = w.text[ins[2]]
    if ins[4]:
        x = f"{w.require(real_only)}({x}, {w.rt}, {ins[4]!r}, {ins[3]})"
    return f"{w.require(project)}({w.text[ins[1]]}, {x}, {ins[3]})", w.ndims[ins[2]], False


_WRITERS: dict[str, Callable[[_Line, tuple[Any, ...]], _Written]] = {
    "num": _num, "len": _len, "idxn": _idxn, "idx": _idx, "align": _align, "neg": _neg,
    "bin": _bin, "call": _call, "axis": _axis, "take": _take, "mm": _mm, "proj": _proj,
}


def python_line(mod: Expr, args: dict[str, str], rt: str, require: Any) -> str:
    """The expression ``mod`` computes, as one Python expression of torch calls.

    ``args`` maps each input role (``formula.s``) to its variable, ``rt`` names the
    forward's runtime, ``require(obj)`` bundles a helper and gives its name (the
    padding-aware reductions, the lengths). Numbers are written as numbers, aligned
    values as indexing with ``None``, functions as their registered Python text.
    """
    w = _Line(mod, rt, require)
    reads = [ins for ins in mod.program if ins[0] == "in"]  # the values read come first
    in_pads = dict(mod.in_pads)
    for r, ins in enumerate(reads):
        text = args["formula." + ins[1]]
        if r in in_pads:  # zeroed at padded positions first (see Expr)
            text = f"{require(zero_padding)}({text}, {rt}, {in_pads[r]!r})"
        w.push(text, -1)  # their rank is their own
    for reg, d, src, sd in mod.cuts:  # parameters over a length: the first N entries
        if src >= 0:
            w.text[reg] = f"{w.text[reg]}.narrow({d}, 0, {w.text[src]}.shape[{sd}])"
    for ins in mod.program[len(reads):]:
        w.push(*_WRITERS[ins[0]](w, ins))
    return _finish(w, mod)


def _finish(w: _Line, mod: Expr) -> str:
    """The result register's text made the node's value: one per example, padding zeroed,
    the same for every example expanded over the batch, axes in the node's order."""
    rt, require = w.rt, w.require
    y = w.text[mod.out]
    if y.startswith("(") and y.endswith(")") and _balanced(y[1:-1]):
        y = y[1:-1]
    if w.ndims[mod.out] == 0:
        y = f"torch.ones({rt}.batch, dtype={rt}.dtype, device={rt}.device) * {y}"
    if mod.pads:
        y = f"{require(zero_padding)}({y}, {rt}, {mod.pads!r})"
    if mod.unbatched:
        y = f"{require(for_each_example)}({y}, {rt})"
    if mod.perm:
        y = f"({y}).permute{mod.perm!r}"
    return y


def _rank(*nds: int) -> int:
    """The dimensions of a result of operands of these (-1: a value read, of its own rank)."""
    return -1 if -1 in nds else max(nds, default=0)


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0
