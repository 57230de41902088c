"""The ``steps`` view of ``attngraph attend``: weights over an image's tiles, one panel per step.

A model that reads a canvas tile by tile while it emits a sequence (a caption,
a row of labels) has weights ``[T, P]``: step ``t``'s distribution over the
``P`` tiles, row by row. This view draws the canvas once per step with that
step's weights over it, each panel titled by the token emitted at the step
(and the true one when they differ), so that "attention on the digit being
named" can be seen. When the batch says which tile each step should read
(``digit_tile``, as the captions and digit-row tasks do), that tile gets a box.

The grid of tiles follows the canvas's shape: ``P`` tiles on an ``H × W``
canvas form ``rows × cols`` with ``rows · W = cols · H`` (see :func:`grid_of`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph
    from attngraph.train.tasks.base import Task

__all__ = ["MAX_PANELS", "grid_of", "canvas_grid", "steps_figure"]

#: At most this many steps are drawn (the first ones).
MAX_PANELS = 8


def grid_of(tiles: int, height: int, width: int) -> tuple[int, int] | None:
    """``(rows, cols)`` of ``tiles`` equal square tiles covering a ``height × width`` canvas.

    ``None`` when no such grid exists (the weights are not over the canvas's tiles).

    Examples
    --------
    >>> grid_of(6, 16, 24), grid_of(5, 8, 40), grid_of(16, 32, 32)
    ((2, 3), (1, 5), (4, 4))
    >>> grid_of(7, 16, 24) is None
    True
    """
    for rows in range(1, tiles + 1):
        cols, rest = divmod(tiles, rows)
        if not rest and rows * width == cols * height:
            return rows, cols
    return None


def canvas_grid(graph: Graph, tiles: int) -> tuple[int, int] | None:
    """:func:`grid_of` ``tiles`` on the canvas of the spec's first image input, if any."""
    for n in graph.inputs:
        s = n.spec
        if s is not None and s.type == "image" and isinstance(s.height, int) \
                and isinstance(s.width, int):
            return grid_of(tiles, s.height, s.width)
    return None


def _names(task: Task, graph: Graph, ids: list[int]) -> list[str]:
    """How the ids of the task's label sequence are shown (its ``labels`` field's tokens)."""
    field = next((f for f, t in task.provides.items() if t == "labels"), task.target)
    return task.token_names(field, ids)


def steps_figure(plt: Any, w: Tensor, ex: dict[str, Tensor], outputs: dict[str, Tensor],
                 task: Task, graph: Graph) -> tuple[Any, str]:
    """A figure of one example's weights ``w [T, P]``, one panel per step; ``(figure, what)``.

    ``ex`` is the example's batch fields (its image, and ``target`` and
    ``digit_tile`` when present), ``outputs`` its outputs (``logits [T, V]``
    name the token emitted at each step).
    """
    from matplotlib.patches import Rectangle

    img = ex[next((f for f, t in task.provides.items() if t == "image"), "image")].float()
    img = img.mean(0) if img.dim() == 3 else img  # (H, W)
    h, wd = int(img.shape[0]), int(img.shape[1])
    grid = grid_of(int(w.shape[-1]), h, wd)
    if grid is None:  # pick_view only chooses this view for tile weights
        msg = f"{w.shape[-1]} weights do not tile a {h}×{wd} canvas"
        raise ValueError(msg)
    rows, cols = grid
    steps = min(int(w.shape[0]), MAX_PANELS)
    pred = outputs["logits"].argmax(-1).tolist() if "logits" in outputs else None
    true = ex.get(task.target)
    tiles = ex.get("digit_tile")
    wide = wd >= 2 * h  # a row of tiles: stack the panels, else put them side by side
    across, down = (1, steps) if wide else (steps, 1)
    panel = 6.0 if wide else 2.6  # inches across one panel
    fig, axes = plt.subplots(down, across, squeeze=False,
                             figsize=(across * panel, down * (panel * h / wd + 0.35) + 0.4))
    for t, ax in enumerate(axes.flat):
        ax.imshow(img.numpy(), cmap="gray")
        ax.imshow(w[t].reshape(rows, cols).numpy(), cmap="Reds", alpha=0.55, vmin=0.0,
                  vmax=1.0, extent=(-0.5, wd - 0.5, h - 0.5, -0.5))
        ax.set_xticks([])
        ax.set_yticks([])
        title = f"step {t + 1}"
        if pred is not None:
            said = _names(task, graph, [int(pred[t])])[0]
            title += f": {said}"
            if true is not None and true.dim() == 1 and t < true.shape[0] and int(true[t]) >= 0:
                want = _names(task, graph, [int(true[t])])[0]
                title += "" if want == said else f" (true {want})"
        ax.set_title(title, fontsize=8)
        if tiles is not None and t < tiles.shape[0] and int(tiles[t]) >= 0:
            r, c = divmod(int(tiles[t]), cols)
            th, tw = h / rows, wd / cols
            ax.add_patch(Rectangle((c * tw - 0.5, r * th - 0.5), tw, th, fill=False, lw=1.5,
                                   ec="tab:blue"))
    box = "; blue box: the tile of the digit named" if tiles is not None else ""
    return fig, f"weights over the {rows}×{cols} tiles at each step{box}"
