"""The ``matrix`` view of ``attngraph attend``: a heatmap whose axes say what they are.

An output's type names its axes by the lengths they run over (``[T, N]``); an axis
whose length is the item axis of one of the spec's inputs is named after that
input and what its items are: a ``vectors`` input's items by index
(``frames: item (index)``), a ``tokens`` input's tokens, a ``labels`` input's steps
(a decoder emits one label per step), a graph's nodes. An axis of no input keeps
the generic name (``step`` for the rows, ``item`` for the columns), with its
length's name when it has one. Weights with one row (``[N]``) have no row axis.

Examples
--------
>>> from attngraph.frontend import load_spec
>>> cols, rows = heatmap_axes(load_spec("specs/speech_recognition.yaml"), "attention",
...                           rows=True)
>>> cols.name, cols.input, rows.name
('frames: item (index)', 'frames', 'target: step')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph

__all__ = ["ITEMS", "Axis", "heatmap", "heatmap_axes", "matrix"]

#: What one item of an input of each type is, on an axis over its items.
ITEMS = {"vectors": "item (index)", "tokens": "token", "labels": "step", "graph": "node"}


@dataclass(frozen=True)
class Axis:
    """An axis of a heatmap: its ``name``, and the ``input`` whose items it runs over."""

    name: str
    input: str | None = None


def _axis(graph: Graph, dim: object, generic: str) -> Axis:
    """The axis over ``dim``: the input whose items it runs over, else the generic one."""
    if not isinstance(dim, str):
        return Axis(generic)
    for node in graph.inputs:
        typ = node.types.get("")
        if node.spec is not None and typ is not None and typ.dims and typ.dims[0] == dim:
            return Axis(f"{node.id}: {ITEMS.get(node.spec.type, 'item')}", node.id)
    return Axis(f"{generic} ({dim})")


def heatmap_axes(graph: Graph, output: str, *, rows: bool) -> tuple[Axis, Axis | None]:
    """``(columns, rows)``: the axes of ``output``'s weights drawn as a heatmap.

    ``rows`` says whether the weights drawn have a row axis (``[T, N]``, not ``[N]``);
    without one the second is None.
    """
    typ = graph.output_types().get(output)
    dims = tuple(typ.dims) if typ is not None else ()
    cols = _axis(graph, dims[-1], "item") if dims else Axis("item")
    if not rows:
        return cols, None
    return cols, (_axis(graph, dims[-2], "step") if len(dims) >= 2 else Axis("step"))


def heatmap(ax: Any, w: Tensor, xlabels: list[str] | None, ylabels: list[str] | None,
            xname: str, yname: str) -> None:
    """Draw weights [T, N] on ``ax``: tick labels (up to 40 an axis) and axis names."""
    im = ax.imshow(w.numpy(), cmap="viridis", aspect="auto", vmin=0.0)
    if xlabels is not None and len(xlabels) <= 40:
        ax.set_xticks(range(len(xlabels)), xlabels, fontsize=7)
    if ylabels is not None and len(ylabels) <= 40:
        ax.set_yticks(range(len(ylabels)), ylabels, fontsize=7)
    ax.set_xlabel(xname)
    ax.set_ylabel(yname)
    ax.figure.colorbar(im, ax=ax, fraction=0.046)


def _unpadded(w: Tensor, ex: dict[str, Tensor], rows: Axis | None, cols: Axis) -> Tensor:
    """Weights [T, N] with an input's padding cut from the axes that run over its items."""
    for dim, axis in ((0, rows), (1, cols)):
        mask = ex.get(f"{axis.input}_mask") if axis is not None else None
        if mask is not None and mask.dim() == 1 and mask.shape[0] == w.shape[dim]:
            w = w.narrow(dim, 0, max(1, int(mask.sum())))
    return w


def matrix(ax: Any, w: Tensor, ex: dict[str, Tensor], graph: Graph, name: str) -> str:
    """Draw one example's weights ``w`` ([T, N] or [N]) of output ``name`` as a heatmap
    whose axes are named (:func:`heatmap_axes`), padding cut; returns the caption."""
    cols, rows = heatmap_axes(graph, name, rows=w.dim() == 2)
    w = _unpadded(w if rows else w[None], ex, rows, cols)
    # one row of weights has no row axis: its one row is named by the output
    heatmap(ax, w, None, None if rows else [name], cols.name, rows.name if rows else "")
    return f"'{name}' weights" + (f" per {rows.name}" if rows else f" over {cols.name}")
