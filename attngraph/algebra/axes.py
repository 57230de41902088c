"""Named axes: what each axis of a value means, so that formulas broadcast by name.

Every value of a spec has its axes named (besides the batch): ``heads`` (the
head axis), ``steps`` (a loop's stacked steps), ``queries``, ``items``, ``inner``
(the words of a nested sentence), ``channels``, ``height``, ``width`` and
``features``. A value made by an expression or a parameter carries its names in
its type (``TensorType.axes``); any other value is named by what it is:

======================  ===================================
value                   axes
======================  ===================================
a vector ``[d]``        features
scores, weights ``[N]`` items
scores ``[M, N]``       queries, items
items ``[N, d]``        items, features
an image ``[C, H, W]``  channels, height, width
======================  ===================================

Scores and weights are told apart from vectors by where they come from (a scorer,
a normaliser) or by a length that only items have (``[N]`` rather than ``[d]``).
Axes are always kept in the order of :data:`AXES`, so aligning two values for
arithmetic only inserts axes of size one, never reorders.

>>> from attngraph.ir.graph import TensorType
>>> axes_of(TensorType(("N", 64))), axes_of(TensorType((16,)), scores=True)
(('items', 'features'), ('items',))
"""

from __future__ import annotations

from typing import Protocol


class TensorType(Protocol):
    """What the algebra reads of a value's type (the IR's ``TensorType``; the algebra
    does not import the IR, whose builder reads formulas)."""

    @property
    def dims(self) -> tuple[int | str, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def weights(self) -> bool: ...
    @property
    def axes(self) -> tuple[str, ...] | None: ...

__all__ = ["AXES", "ORDER", "axes_of", "canonical", "is_scores"]

#: Every axis name, in the order values keep their axes.
AXES = ("heads", "steps", "queries", "items", "inner", "channels", "height", "width",
        "features")
ORDER = {a: i for i, a in enumerate(AXES)}


def canonical(names: set[str] | tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The names in the order of :data:`AXES`."""
    return tuple(sorted(set(names), key=ORDER.__getitem__))


def axes_of(t: TensorType, *, scores: bool = False) -> tuple[str, ...] | None:
    """The names of ``t``'s axes (without heads), or None when they cannot be told.

    ``scores``: the value comes from a scorer or a normaliser (scores or weights over
    items, even when their length is a fixed number).
    """
    if t.axes is not None:
        return tuple(t.axes)
    dims = t.dims
    sym = [isinstance(d, str) for d in dims]
    over_items = scores or t.weights or t.dtype == "bool"
    if len(dims) == 0:
        return ()
    if len(dims) == 1:
        return ("items",) if over_items or sym[0] else ("features",)
    if len(dims) == 2:
        if all(sym) and dims[0] != dims[1] and t.dtype != "float":
            return ("items", "inner")  # ids (or a mask) of nested tokens: sentences, words
        return ("queries", "items") if over_items or sym[1] else ("items", "features")
    if len(dims) == 3:
        if not any(sym):
            return ("channels", "height", "width")
        return ("items", "inner", "features")
    return None


def is_scores(names: tuple[str, ...]) -> bool:
    """Whether a value with these axes is per item and per query only: scores or weights."""
    return "items" in names and "features" not in names
