"""The ``drawing`` view of ``attngraph attend``: a canvas drawn step by step (DRAW).

For a spec that declares ``canvases`` ``[T, C, H, W]`` (the canvas logits after
each step, e.g. a loop's carried canvas) over an image input, the picture is a
row of panels: the image, then σ(c_t) for t = 1 … T. When the spec also
declares the filterbanks of its write (``write_fx`` ``[T, N, W]``,
``write_fy`` ``[T, N, H]``) and of its read (``read_fx``, ``read_fy``), each
panel shows the window each one covered at that step: the box from the first
to the last filter's centre (a filter's centre is its mean pixel), red for the
write and blue for the read.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.train.pictures.plot import save

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph
    from attngraph.train.tasks.base import Task

__all__ = ["draws_canvas", "window", "draw_steps"]

#: the window drawn for each attention: (its outputs' prefix, colour)
_WINDOWS = (("write", "tab:red"), ("read", "tab:blue"))


def draws_canvas(graph: Graph, outputs: dict[str, Tensor]) -> bool:
    """Whether a spec's outputs (one example's) show a canvas drawn over steps."""
    types = {n.spec.type for n in graph.inputs if n.spec is not None}
    c = outputs.get("canvases")
    return c is not None and "image" in types and c.dim() == 4


def window(fx: Tensor, fy: Tensor) -> tuple[float, float, float, float]:
    """``(x0, y0, x1, y1)``: the centres of the first and last filters, in pixel
    coordinates from 0 (the box the grid spans).

    Examples
    --------
    >>> import torch
    >>> f = torch.eye(4)[[1, 2]]  # two one-hot filters on pixels 1 and 2
    >>> window(f, f)
    (1.0, 1.0, 2.0, 2.0)
    """
    import torch

    xs = fx.float() @ torch.arange(fx.shape[-1], dtype=torch.float32)  # (N,)
    ys = fy.float() @ torch.arange(fy.shape[-1], dtype=torch.float32)
    return float(xs[0]), float(ys[0]), float(xs[-1]), float(ys[-1])


def draw_steps(graph: Graph, task: Task, out: dict[str, Tensor], ex: dict[str, Tensor],
               path: Path, plt: Any, dpi: int = 120) -> str:
    """Draw one example's ``canvases`` (and windows) to ``path``; returns the caption."""
    from matplotlib.patches import Rectangle

    canvases = out["canvases"].float().sigmoid()  # (T, C, H, W)
    steps = canvases.shape[0]
    image = next((ex[n.id] for n in graph.inputs if n.spec is not None
                  and n.spec.type == "image" and n.id in ex), None)
    image = ex.get("image", image)
    panels = [("x", image)] if image is not None else []
    panels += [(f"t = {t + 1}", canvases[t]) for t in range(steps)]
    fig, axes = plt.subplots(1, len(panels), figsize=(1.6 * len(panels), 2.1), squeeze=False)
    try:
        for i, (ax, (title, img)) in enumerate(zip(axes[0], panels, strict=True)):
            ax.imshow(img.float().mean(0).numpy(), cmap="gray_r", vmin=0.0, vmax=1.0)
            ax.set_title(title, fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
            t = i - (len(panels) - steps)
            for name, colour in _WINDOWS if t >= 0 else ():
                fx, fy = out.get(f"{name}_fx"), out.get(f"{name}_fy")
                if fx is None or fy is None:
                    continue
                x0, y0, x1, y1 = window(fx[t], fy[t])
                ax.add_patch(Rectangle((x0, y0), max(x1 - x0, 0.3), max(y1 - y0, 0.3),
                                       fill=False, lw=1.2, ec=colour))
        fig.suptitle(f"{graph.name}: the canvas σ(c_t) drawn step by step "
                     "(red: write window, blue: read window)", fontsize=8)
        fig.tight_layout()
        save(fig, path, dpi)
    finally:
        plt.close(fig)
    return "drawing"
