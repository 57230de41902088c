"""The image views of ``attngraph attend``: a glimpse path, and weights over tiles.

``glimpses``: a model that emits ``locations`` [T, 2] over an image is drawn as its
glimpse path over the canvas, numbered in order, each point with the finest patch
the glimpse saw there. ``tiles``: weights [P] over a g×g grid of image positions
are laid over the canvas.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph
    from attngraph.train.tasks.base import Task

__all__ = ["canvas", "glimpses", "tiles"]


def _field(task: Task, typ: str) -> str | None:
    """The task's field of input type ``typ``."""
    return next((f for f, t in task.provides.items() if t == typ), None)


def canvas(ax: Any, ex: dict[str, Tensor], task: Task) -> tuple[int, int]:
    """Draw the example's image on ``ax`` (channels averaged); its ``(height, width)``."""
    img = ex[_field(task, "image") or "image"]
    img = img.float().mean(0) if img.dim() == 3 else img.float()
    ax.imshow(img.numpy(), cmap="gray")
    ax.set_xticks([])
    ax.set_yticks([])
    return int(img.shape[0]), int(img.shape[1])


def glimpses(ax: Any, loc: Tensor, ex: dict[str, Tensor], task: Task, graph: Graph) -> str:
    """Draw the glimpse path ``loc`` [T, 2] over the image; returns the caption."""
    h, w = canvas(ax, ex, task)
    # grid_sample coordinates: (x, y) in [-1, 1], (-1, -1) the top-left corner
    xs = ((loc[:, 0].float() + 1) * w / 2 - 0.5).tolist()
    ys = ((loc[:, 1].float() + 1) * h / 2 - 0.5).tolist()
    ax.plot(xs, ys, "-", color="tab:orange", lw=1.5)
    side = _glimpse_size(graph)
    colours = [_colour(t, len(xs)) for t in range(len(xs))]
    for t, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if side:  # the finest patch the glimpse saw there
            ax.add_patch(_square(x, y, side, colours[t]))
        ax.scatter([x], [y], color=colours[t], s=110, zorder=3, edgecolors="white")
        ax.annotate(str(t + 1), (x, y), color="black", fontsize=8, fontweight="bold",
                    ha="center", va="center", zorder=4)
    ax.set_xlim(-0.5, w - 0.5)
    ax.set_ylim(h - 0.5, -0.5)
    box = f"; boxes: {side}×{side} px seen" if side else ""
    return f"glimpses in order (1 = first){box}"


def _colour(t: int, n: int) -> Any:
    """Colour of step ``t`` of ``n``: red first, through orange, to yellow."""
    import matplotlib as mpl

    return mpl.colormaps["autumn"](t / max(1, n - 1) * 0.85)


def _square(x: float, y: float, side: int, colour: Any) -> Any:
    from matplotlib.patches import Rectangle

    return Rectangle((x - side / 2, y - side / 2), side, side, fill=False, lw=1.5,
                     ec=colour, zorder=2)


def _glimpse_size(graph: Graph) -> int | None:
    """Side of the finest patch of the spec's glimpse (the first node found whose kind
    the ``glimpses`` picture draws: its ``size``)."""
    from attngraph.kinds.base import traits_of

    for g in (graph, *graph.blocks.values()):
        for n in g.nodes:
            if traits_of(n).picture == "glimpses":
                return int(n.spec.size)
    return None


def tiles(ax: Any, w: Tensor, ex: dict[str, Tensor], task: Task) -> str:
    """Lay weights [P] (P = g²) over the image as a g×g grid; returns the caption."""
    h, wd = canvas(ax, ex, task)
    g = math.isqrt(w.shape[0])
    ax.imshow(w.reshape(g, g).numpy(), cmap="Reds", alpha=0.5, vmin=0.0, extent=(-0.5, wd - 0.5,
                                                                     h - 0.5, -0.5))
    return f"weights over a {g}×{g} grid of image positions"
