"""The ``window`` view of ``attngraph attend``: Graves' soft window over time.

Drawn when the attention output is the ``weights`` port of a ``window`` node (in
a loop: the window at every step). Two panels: the weights φ(t, u) as a heatmap,
steps down and the string's characters across (padding cut), and the pen
trajectory the steps draw (the running sum of the offsets), each stroke
coloured by the character it writes, with the model's predicted pen positions
(each step's predicted offset from the true previous position) as dots.
matplotlib is imported only when drawing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.train.pictures.plot import pyplot, save

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Edge, Graph
    from attngraph.train.tasks.base import Task

__all__ = ["is_window_weights", "draw_window"]


def _source(graph: Graph, edge: Edge) -> tuple[str | None, str]:
    """``(picture, port)`` of the node an edge reads, through loop and block bodies:
    the picture its kind says draws it (``picture=``), and the port."""
    from attngraph.kinds.base import traits_of

    node = graph.node(edge.src)
    if node.body is not None and traits_of(node).body in ("steps", "once"):
        outs = dict(node.body.outputs)
        port = edge.port or next(iter(outs), "")
        if port in outs:
            return _source(node.body, outs[port])
    return traits_of(node).picture, edge.port


def is_window_weights(graph: Graph, name: str) -> bool:
    """Whether output ``name`` of ``graph`` is the ``weights`` port of a node the
    ``window`` picture draws (a ``window``).

    >>> from attngraph.frontend import load_spec
    >>> from pathlib import Path
    >>> g = load_spec(Path(__file__).parents[3] / "specs" / "handwriting_generation.yaml")
    >>> is_window_weights(g, "attention"), is_window_weights(g, "prediction")
    (True, False)
    """
    edges = dict(graph.outputs)
    return name in edges and _source(graph, edges[name]) == ("window", "weights")


def _field(task: Task, typ: str) -> str | None:
    return next((f for f, t in task.provides.items() if t == typ), None)


def draw_window(graph: Graph, task: Task, out: dict[str, Tensor], ex: dict[str, Tensor],
                path: Path, name: str, dpi: int = 120) -> Path:
    """Draw one example's window over time beside its pen trajectory to ``path``.

    ``out`` and ``ex`` are one example's outputs and batch fields (no batch axis).

    Raises
    ------
    TrainingError
        When the picture cannot be written (located at the file).
    """
    plt = pyplot()
    w = out[name].float()  # (T, U)
    chars = _field(task, "tokens") or "chars"
    pen = _field(task, "vectors") or "pen"
    u = int(ex[f"{chars}_mask"].sum()) if f"{chars}_mask" in ex else w.shape[1]
    t = int(ex[f"{pen}_mask"].sum()) if f"{pen}_mask" in ex else w.shape[0]
    letters = task.token_names(chars, ex[chars][:u].tolist())
    fig, (hm, tr) = plt.subplots(1, 2, figsize=(9.0, 4.8),
                                 gridspec_kw={"width_ratios": [1, 1.4]})
    try:
        im = hm.imshow(w[:t, :u].numpy(), cmap="viridis", aspect="auto", vmin=0.0)
        hm.set_xticks(range(u), letters)
        hm.set_xlabel("character u")
        hm.set_ylabel("step t")
        hm.set_title("window φ(t, u)", fontsize=9)
        fig.colorbar(im, ax=hm, fraction=0.046)
        _trajectory(tr, out, ex, t, letters)
        fig.suptitle(f"{graph.name}: the window over the string while the pen draws it",
                     fontsize=9)
        fig.tight_layout()
        save(fig, path, dpi)
    finally:
        plt.close(fig)
    return path


def _trajectory(ax: Any, out: dict[str, Tensor], ex: dict[str, Tensor], t: int,
                letters: list[str]) -> None:
    """The true pen path (strokes coloured by character) and the predicted positions."""
    import matplotlib as mpl
    import torch

    target = ex.get("target")
    if target is None or target.dim() != 2 or target.shape[-1] != 2:
        ax.axis("off")
        return
    step = target[:t].float()  # (t, 2) true offsets
    pos = torch.cat([step.new_zeros(1, 2), step.cumsum(0)])  # (t + 1, 2) pen positions
    of = ex.get("char_of_step")
    cmap = mpl.colormaps["tab10"]
    for i in range(t):
        c = int(of[i]) if of is not None else 0
        ax.plot(pos[i:i + 2, 0], pos[i:i + 2, 1], "-", color=cmap(c % 10), lw=2)
    if of is not None:  # each character's name at the start of its stroke
        for c, letter in enumerate(letters):
            first = (of[:t] == c).nonzero()
            if len(first):
                x, y = pos[int(first[0])].tolist()
                ax.annotate(letter, (x, y), fontsize=10, fontweight="bold",
                            color=cmap(c % 10), xytext=(3, 3), textcoords="offset points")
    pred = out.get("prediction")
    if pred is not None and pred.shape[-1] == 2:
        guess = pos[:t] + pred[:t].float()  # (t, 2): from the true previous position
        ax.scatter(guess[:, 0], guess[:, 1], s=14, color="black", zorder=3,
                   label="predicted pen position")
        ax.legend(fontsize=7, loc="best")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title("pen trajectory (colour: the character drawn)", fontsize=9)
