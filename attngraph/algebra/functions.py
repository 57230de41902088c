"""The functions a formula may call, one :class:`Function` each, in :data:`FUNCTIONS`.

A function is one registration with its traits and its implementation::

    register_function(Function("relu2", "max(x, 0)²", impl=lambda x: torch.relu(x) ** 2,
                               positive=True, doc="squared ReLU (Primer, GAU)"))

Its *form* says how it treats axes, which is all that shape inference needs:

- ``elementwise``: every argument is a value; they broadcast by axis name and the
  result has the union of their axes (``exp``, ``clamp``, ``where``);
- ``reduce``: ``f(x, axis)`` removes the named axis, over its real entries only
  (``sum``, ``max``, ``logsumexp``);
- ``scan``: ``f(x, axis)`` keeps the axis (``cumsum``); padded entries add nothing;
- ``normalise``: ``f(x, axis)`` keeps the axis and the result sums to one over it,
  over its real entries (``softmax``): over the items it is a distribution;
- ``project``: ``f(W, x, axis)`` maps the named axis of ``x`` with the matrix ``W``
  ``[out, in]`` (a linear map over the heads, or over the items of a fixed length);
- ``index``: ``f(axis)``: the position along the axis, 0, 1, ... (``i`` and ``j`` are
  ``pos(queries)`` and ``pos(items)``; ``pos(heads)`` numbers the heads);
- ``take``: ``f(x, index, axis)`` reads ``x`` at the whole-number positions ``index``
  along the named axis (:mod:`attngraph.algebra.take`): the axis is replaced by the
  axes of ``index``;
- ``matmul``: ``f(a, b)`` contracts the last axis of ``a`` with the first of ``b``
  (heads apart), as a matrix product: weights times weights, ``A Z`` of a
  pseudo-inverse iteration; the axes left must be distinct.

The implementation is a callable or a lazy ``"module:attribute"`` reference (the
built-ins live in :mod:`attngraph.lower.rules.algebra`, so nothing imports torch before a
spec is compiled). An elementwise implementation takes tensors (and numbers) and
returns a tensor; a ``reduce``/``scan``/``normalise`` one takes ``(x, dim, mask)``
with ``mask`` a bool tensor broadcastable to ``x`` (True = a real entry) or None;
``python`` is the text the Python export writes for a call, ``{0}``, ``{1}`` the
arguments' text (elementwise functions only; default ``<torch name>({0}, ...)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from attngraph.algebra.spans import (
    Span,
    clamp,
    floor_span,
    increasing,
    least,
    logistic,
    most,
    sign,
    unsigned,
)
from attngraph.registry import Registry

__all__ = ["Function", "FUNCTIONS", "register_function", "Form", "function_table", "START", "END"]

Form = Literal["elementwise", "reduce", "scan", "normalise", "project", "matmul", "index",
               "take"]


@dataclass(frozen=True)
class Function:
    """One function of the formula language (see the module docstring).

    ``arity`` is the (least, most) number of value arguments (the axis of a
    ``reduce``/``scan``/``normalise`` function is not counted); ``positive``: the
    result is never negative (kernel feature maps, weights); ``singular``: its
    derivative is infinite at a finite argument (√x and ‖x‖ at 0, ln x at 0), so a
    formula calling it has its values read zeroed at padded positions first, where a
    masked sum can be 0 (see :class:`attngraph.lower.rules.algebra.Expr`); ``span``:
    the range of the result from the ranges of the value arguments, each a (low, high)
    pair that may be infinite (:mod:`attngraph.algebra.spans`), for an elementwise
    function whose range follows from them (None: unbounded), with which the compiler
    refuses a ``take`` whose positions can leave the table; ``makes_whole``: the result
    is a whole number, ``keeps_whole``: it is one where the arguments are (the positions
    a ``take`` reads must be whole by their formula);
    ``python``: the Python export's text for a call, with ``{0}``, ``{1}``... for the
    arguments.
    """

    name: str
    formula: str
    impl: str | Callable[..., Any]
    form: Form = "elementwise"
    arity: tuple[int, int] = (1, 1)
    positive: bool = False
    singular: bool = False
    doc: str = ""
    python: str = ""
    #: the arguments as the docs write a call (default ``x``, or ``x, axis``)
    args: str = ""
    span: Callable[[tuple[Span, ...]], Span] | None = None
    #: its result is a whole number (floor), or is one where its arguments are (min)
    makes_whole: bool = False
    keeps_whole: bool = False

    @property
    def call(self) -> str:
        """A call as the docs write it: ``clamp(x, lo, hi)``, ``sum(x, axis)``."""
        args = self.args or ("x, axis" if self.takes_axis else "x")
        return f"{self.name}({args})"

    @property
    def takes_axis(self) -> bool:
        """Whether the call names an axis (its last argument)."""
        return self.form not in ("elementwise", "matmul")


#: Every formula function by name.
FUNCTIONS: Registry[Function] = Registry("formula function")


def register_function(fn: Function) -> Function:
    """Add a formula function; formulas may then call ``fn.name(...)``.

    Raises
    ------
    RegistryError
        When a function of that name is registered already.
    """
    FUNCTIONS.register(fn.name, fn)
    return fn


def _over_axis(args: tuple[Span, ...]) -> Span:
    """The span of the largest or least entry over an axis: the entries', or 0 (a row
    with no real entry)."""
    (lo, hi), = args
    return (min(lo, 0.0), max(hi, 0.0))


def _impl(name: str) -> str:
    return f"attngraph.lower.rules.algebra:{name}"


_BUILTINS = (
    # elementwise, one argument
    Function("exp", "eˣ", _impl("exp"), positive=True, doc="the exponential",
             span=increasing(math.exp),
             python="torch.exp({0})"),
    Function("log", "ln x", _impl("log"), singular=True,
             doc="the natural logarithm (of a positive value)",
             span=increasing(math.log, low=0.0),
             python="torch.log({0})"),
    Function("sqrt", "√x", _impl("sqrt"), positive=True, singular=True, doc="the square root",
             span=increasing(math.sqrt, low=0.0),
             python="torch.sqrt({0})"),
    Function("abs", "|x|", _impl("abs_"), positive=True, doc="the absolute value",
             span=unsigned,
             keeps_whole=True,
             python="torch.abs({0})"),
    Function("sin", "sin x", _impl("sin"), doc="the sine", python="torch.sin({0})"),
    Function("cos", "cos x", _impl("cos"), doc="the cosine", python="torch.cos({0})"),
    Function("tanh", "tanh x", _impl("tanh"), doc="the hyperbolic tangent",
             span=increasing(math.tanh),
             python="torch.tanh({0})"),
    Function("sigmoid", "σ(x) = 1/(1 + e⁻ˣ)", _impl("sigmoid"), positive=True,
             doc="the logistic function", span=increasing(logistic),
             python="torch.sigmoid({0})"),
    Function("logsigmoid", "log σ(x)", _impl("logsigmoid"),
             doc="the log of the logistic function, computed stably",
             python="F.logsigmoid({0})"),
    Function("relu", "max(x, 0)", _impl("relu"), positive=True, doc="the rectifier",
             span=lambda a: most((a[0], (0.0, 0.0))),
             keeps_whole=True,
             python="torch.relu({0})"),
    Function("relu2", "max(x, 0)²", _impl("relu2"), positive=True,
             doc="the squared rectifier (Primer; gated attention units)",
             python="torch.relu({0}) ** 2"),
    Function("elu", "x if x > 0 else eˣ − 1", _impl("elu"), doc="the exponential linear unit",
             python="F.elu({0})"),
    Function("elu1", "elu(x) + 1", _impl("elu1"), positive=True,
             doc="elu plus one: a positive feature map (linear attention)",
             python="F.elu({0}) + 1"),
    Function("softplus", "ln(1 + eˣ)", _impl("softplus"), positive=True,
             doc="the smooth rectifier", python="F.softplus({0})"),
    Function("gelu", "x Φ(x)", _impl("gelu"), doc="the Gaussian error linear unit",
             python="F.gelu({0})"),
    Function("silu", "x σ(x)", _impl("silu"), doc="the sigmoid linear unit (swish)",
             python="F.silu({0})"),
    Function("sign", "sign x", _impl("sign"), doc="−1, 0 or 1", span=increasing(sign),
             makes_whole=True,
             python="torch.sign({0})"),
    Function("floor", "⌊x⌋", _impl("floor"),
             doc="the largest whole number not above x (T5's log-spaced buckets of distances)",
             span=lambda a: floor_span(a[0]),
             makes_whole=True,
             python="torch.floor({0})"),
    # elementwise, several arguments
    Function("clamp", "min(max(x, lo), hi)", _impl("clamp"), arity=(3, 3),
             doc="x clamped to [lo, hi]", span=clamp,
             keeps_whole=True,
             python="torch.clamp({0}, {1}, {2})",
             args="x, lo, hi"),
    Function("min", "min(a, b) — or min(x, axis): the least over the axis", _impl("minimum"),
             arity=(2, 2), doc="the smaller of two values (with an axis: a reduction)",
             span=least,
             keeps_whole=True,
             python="torch.minimum({0}, {1})", args="a, b"),
    Function("max", "max(a, b) — or max(x, axis): the largest over the axis", _impl("maximum"),
             arity=(2, 2), doc="the larger of two values (with an axis: a reduction)",
             span=most,
             keeps_whole=True,
             python="torch.maximum({0}, {1})", args="a, b"),
    Function("where", "a if c else b", _impl("where"), arity=(3, 3),
             doc="a where the condition c holds, else b", keeps_whole=True,
             python="torch.where({0}, {1}, {2})",
             args="c, a, b"),
    # over an axis
    Function("sum", "Σ over the axis", _impl("masked_sum"), keeps_whole=True, form="reduce",
             doc="the sum over the real entries of the axis"),
    Function("mean", "the mean over the axis", _impl("masked_mean"), form="reduce",
             doc="the mean over the real entries (0 where there is none)"),
    Function("amax", "max over the axis", _impl("masked_amax"), form="reduce",
             keeps_whole=True, span=_over_axis,
             doc="the largest real entry (0 where there is none); max(x, axis) says the same"),
    Function("amin", "min over the axis", _impl("masked_amin"), form="reduce",
             keeps_whole=True, span=_over_axis,
             doc="the least real entry (0 where there is none); min(x, axis) says the same"),
    Function("logsumexp", "log Σ eˣ over the axis", _impl("masked_logsumexp"), form="reduce",
             doc="log of the sum of exponentials over the real entries, computed stably"),
    Function("norm", "‖x‖₂ over the axis", _impl("masked_norm"), form="reduce", positive=True,
             singular=True,
             doc="the Euclidean norm over the real entries"),
    Function("cumsum", "Σ_{k ≤ j} x_k", _impl("masked_cumsum"), keeps_whole=True, form="scan",
             doc="the running sum along the axis (padded entries add nothing)"),
    Function("softmax", "eˣ / Σ eˣ over the axis", _impl("masked_softmax"), form="normalise",
             positive=True, doc="normalised exponentials over the real entries of the axis "
             "(over the items: a distribution)"),
    Function("pos", "0, 1, … along the axis", "attngraph.lower.rules.algebra:positions",
             form="index", arity=(0, 0), args="axis",
             doc="the position along the axis (i is pos(queries), j is pos(items); "
             "pos(heads) numbers the heads)"),
    Function("mm", "a b: Σ_k a_{..k} b_{k..}", _impl("mm"), form="matmul", arity=(2, 2),
             doc="the matrix product: the last axis of a with the first of b", args="a, b"),
    Function("take", "x[index] along the axis", "attngraph.lower.rules.algebra_take:take",
             form="take", arity=(2, 2), args="x, index, axis",
             doc="x at the whole-number positions index along the axis, which the axes of "
             "index replace: a table read at computed positions (T5's bias per bucket)"),
    Function("project", "W x over the axis", _impl("project"), form="project", arity=(2, 2),
             doc="the linear map W [out, in] applied along the axis of x (mixing heads; "
             "projecting items of a fixed length)", args="W, x, axis"),
)

for _fn in _BUILTINS:
    register_function(_fn)

#: ``max(x, axis)`` and ``min(x, axis)`` are the reductions ``amax`` and ``amin``.
REDUCTION_OF = {"max": "amax", "min": "amin"}


#: The marker lines around the generated table of functions in docs/spec-language.md.
START = "<!-- formula-functions:start (written by `attngraph docs` from the function registry) -->"
END = "<!-- formula-functions:end -->"

_FORMS = {"elementwise": "elementwise", "reduce": "over an axis: removes it",
          "scan": "along an axis: keeps it", "normalise": "over an axis: sums to one",
          "project": "along an axis: maps it", "matmul": "matrix product",
          "index": "positions along an axis", "take": "at positions along an axis"}


def function_table() -> str:
    """The markdown table of every registered formula function (the docs print it).

    >>> function_table().splitlines()[2].startswith("| `abs(x)` |")
    True
    """
    rows = ["| function | computes | form |", "|---|---|---|"]
    for _, f in FUNCTIONS.items():
        text = f"{f.formula}: {f.doc}" if f.doc else f.formula
        rows.append(f"| `{f.call}` | {text.replace('|', chr(92) + '|')} | {_FORMS[f.form]} |")
    return "\n".join(rows) + "\n"
