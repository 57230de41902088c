"""Pictures of what a trained model attended to (``attngraph attend``).

The picture follows the spec's inputs and the shape of its attention output:

=============  ==============================  ===========================================
view           when                            drawn as
=============  ==============================  ===========================================
``words``      tokens, weights [N]             the words, each coloured by its weight
``alignment``  tokens + labels, weights [T, N]  heatmap, source tokens × target tokens
``glimpses``   image, ``locations`` [T, 2]      the glimpse path over the canvas
``tiles``      image, weights [P] (P = g²)      the weights as a g×g grid over the canvas
``steps``      image, weights [T, P] (tiles)   one canvas per step, titled by the token emitted
``graph``      graph, weights [N, N]           the graph, nodes coloured by one node's weights
``heads``      ``write``, ``weights`` [T, S]    write | read weights per step (a memory's heads)
``window``     a ``window``'s weights [T, U]    heatmap beside the pen trajectory
                                               (:mod:`~attngraph.train.pictures.window`)
``matrix``     anything else [T, N]            heatmap, its axes named after the inputs
                                               they run over (:mod:`.attend_axes`)
``drawing``    image, ``canvases`` [T, C, H, W]  the canvas after each step, with the read
                                               and write windows (:mod:`.attend_drawing`)
``layers``     a run of ``attngraph import``    every layer's and head's weights over a text
                                               (:mod:`.layers`)
=============  ==============================  ===========================================

Heads are averaged (but in ``layers``); a single query axis ([1, N]) is squeezed. The output read is
the first of ``locations``, ``pooling`` (the weights that pick items for the
class), ``attention``, ``weights`` that the spec declares. matplotlib (Agg
backend) is imported only when drawing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.train.pictures.drawing import draw_steps, draws_canvas
from attngraph.train.pictures.heads import draw_heads, has_heads
from attngraph.train.pictures.image import glimpses, tiles
from attngraph.train.pictures.matrix import heatmap, matrix
from attngraph.train.pictures.plot import picture_path, pyplot, save
from attngraph.train.pictures.steps import canvas_grid, steps_figure
from attngraph.train.pictures.window import draw_window, is_window_weights

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph
    from attngraph.train.tasks.base import Task

__all__ = ["VIEWS", "pick_view", "draw", "draw_model", "attend_run", "load_run", "picture_path"]

VIEWS = ("words", "alignment", "glimpses", "tiles", "steps", "graph", "heads", "window",
         "drawing", "matrix", "layers")
_PREFERRED = ("locations", "pooling", "attention", "weights")


def _weights(x: Tensor) -> Tensor:
    """One example's weights with heads averaged and a single query squeezed."""
    while x.dim() > 2:  # (h, T, N) -> (T, N)
        x = x.float().mean(0)
    if x.dim() == 2 and x.shape[0] == 1:
        x = x[0]
    return x.float()


def pick_view(graph: Graph, outputs: dict[str, Tensor]) -> tuple[str, str]:
    """``(view, output name)`` for a spec's outputs (one example's, no batch axis).

    Raises
    ------
    TrainingError
        When the spec declares none of ``locations``/``pooling``/``attention``/``weights``
        (nor ``canvases`` over an image, the ``drawing`` view).
    """
    if draws_canvas(graph, outputs):
        return "drawing", "canvases"
    types = {n.spec.type for n in graph.inputs if n.spec is not None}
    name = next((k for k in _PREFERRED if k in outputs), None)
    if name is None:
        msg = f"{graph.name} declares no attention output to draw"
        raise TrainingError(msg, graph.where("outputs", key=True),
                            "declare one in outputs: {attention: <softmax node>} "
                            f"(outputs now: {', '.join(sorted(outputs))})")
    if name == "locations" and "image" in types:
        return "glimpses", name
    if is_window_weights(graph, name):
        return "window", name
    w = _weights(outputs[name])
    if "image" in types and w.dim() == 1 and math.isqrt(w.shape[0]) ** 2 == w.shape[0]:
        return "tiles", name
    if "image" in types and w.dim() == 2 and canvas_grid(graph, w.shape[-1]) is not None:
        return "steps", name  # a decoder reading the canvas's tiles (attend_steps)
    if "graph" in types and w.dim() == 2 and w.shape[0] == w.shape[1]:
        return "graph", name
    if "tokens" in types and "labels" in types and w.dim() == 2:
        return "alignment", name
    if "tokens" in types and w.dim() == 1:
        return "words", name
    if name == "weights" and has_heads(outputs):
        return "heads", name
    if w.dim() in (1, 2):
        return "matrix", name
    msg = f"cannot draw output '{name}' of shape {tuple(outputs[name].shape)}"
    edge = dict(graph.outputs).get(name)
    loc = edge.loc if edge is not None else graph.where("outputs", key=True)
    raise TrainingError(msg, loc, "attend draws weights [N], [T, N] or locations [T, 2]")


def _field(graph: Graph, task: Task, typ: str) -> str | None:
    return next((f for f, t in task.provides.items() if t == typ), None)


def _words(ax: Any, w: Tensor, ex: dict[str, Tensor], task: Task, graph: Graph) -> str:
    import matplotlib as mpl

    f = _field(graph, task, "tokens") or "tokens"
    n = int(ex[f"{f}_mask"].sum()) if f"{f}_mask" in ex else ex[f].shape[0]  # padding cut
    tokens = task.token_names(f, ex[f][:n].tolist())
    w = w[:n]
    cmap = mpl.colormaps["Reds"]
    top = float(w.max()) or 1.0
    ax.set_xlim(0, len(tokens))
    ax.set_ylim(0, 1)
    ax.axis("off")
    needle = int(ex["needle_pos"]) if "needle_pos" in ex else None
    for i, (tok, p) in enumerate(zip(tokens, w.tolist(), strict=True)):
        ax.add_patch(mpl.patches.Rectangle((i + 0.05, 0.35), 0.9, 0.4,
                                           color=cmap(p / top), ec="black" if i == needle else
                                           "none", lw=2))
        ax.text(i + 0.5, 0.55, str(tok), ha="center", va="center", fontsize=9,
                color="white" if p / top > 0.6 else "black")
        ax.text(i + 0.5, 0.2, f"{p:.2f}", ha="center", va="center", fontsize=7)
    return "words coloured by attention weight" + (" (box: the informative word)"
                                                   if needle is not None else "")


def _graph(ax: Any, w: Tensor, ex: dict[str, Tensor], task: Task, graph: Graph,
           query: int) -> str:
    import networkx as nx

    f = _field(graph, task, "graph") or "graph"
    adj = ex.get(f"{f}_adjacency")
    n = w.shape[0]
    g = nx.from_numpy_array(adj.numpy().astype(int)) if adj is not None else nx.empty_graph(n)
    g.remove_edges_from(nx.selfloop_edges(g))
    pos = nx.spring_layout(g, seed=0)
    if not 0 <= query < n:
        msg = f"--query {query} is not a node of this graph (it has {n}, 0 to {n - 1})"
        raise TrainingError(msg, SourceLoc(graph.file), f"pass --query from 0 to {n - 1}")
    q = query
    colours = w[q].tolist()
    nx.draw_networkx_edges(g, pos, ax=ax, alpha=0.3)
    nodes = nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colours, cmap="Reds",
                                   vmin=0.0, node_size=160, edgecolors="gray")
    nx.draw_networkx_nodes(g, pos, nodelist=[q], ax=ax, node_color="none",
                           edgecolors="blue", linewidths=2.5, node_size=260)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=6)
    ax.figure.colorbar(nodes, ax=ax, fraction=0.046)
    ax.axis("off")
    return f"weights of node {q} (blue ring) over the graph's nodes"


def draw(graph: Graph, task: Task, outputs: dict[str, Tensor], batch: dict[str, Tensor],
         path: str | Path, *, example: int = 0, query: int = 0,
         dpi: int = 120) -> tuple[Path, str]:
    """Draw example ``example`` of a batch's outputs to ``path``; ``(path, view)``.

    ``outputs`` and ``batch`` keep their batch axis; ``query`` picks the node of
    a ``graph`` view. The format follows the suffix (png, svg, pdf; none means
    png, and ``.png`` is added), at ``dpi`` dots per inch. A missing directory
    is made.

    Raises
    ------
    TrainingError
        An example outside the batch; an unknown suffix or a picture that cannot
        be written (located at the file); a spec without an attention output
        (located at its ``outputs:``).
    """
    size = next(iter(batch.values())).shape[0]
    _check_example(example, size, SourceLoc(graph.file))
    path = picture_path(path)
    out = {k: v[example].detach().cpu() for k, v in outputs.items()}
    ex = {k: v[example] for k, v in batch.items()}
    view, name = pick_view(graph, out)
    if view == "drawing":  # a row of canvases of its own
        return path, draw_steps(graph, task, out, ex, path, pyplot(), dpi)
    if view == "window":  # two panels of its own
        return draw_window(graph, task, out, ex, path, name, dpi), view
    w = _weights(out[name])
    plt = pyplot()
    if view == "steps":  # one panel per step, each titled by its token
        fig, what = steps_figure(plt, w, ex, out, task, graph)
    else:
        row = view == "words" or (view == "matrix" and w.dim() == 1)
        fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * w.shape[-1]), 2.2) if row else (6.0, 5.5))
    try:
        if view != "steps":
            logits = outputs["logits"][example] if "logits" in outputs else None
            what = _panel(ax, view, name, w, out, ex, logits, task, graph, query)
        title = f"{graph.name}: {what}{_prediction(outputs, ex, task, example)}"
        if view == "steps":
            fig.suptitle(title, fontsize=9)
        else:
            ax.set_title(title, fontsize=9)
        fig.tight_layout()
        save(fig, path, dpi)  # a missing directory is made, as train makes its --out
    finally:
        plt.close(fig)
    return path, view


def _panel(ax: Any, view: str, name: str, w: Tensor, out: dict[str, Tensor],
           ex: dict[str, Tensor], logits: Tensor | None, task: Task, graph: Graph,
           query: int) -> str:
    """Draw one example's weights on ``ax`` as ``view``; returns the caption."""
    if view == "words":
        return _words(ax, w, ex, task, graph)
    if view == "glimpses":
        return glimpses(ax, out[name], ex, task, graph)
    if view == "tiles":
        return tiles(ax, w, ex, task)
    if view == "graph":
        return _graph(ax, w, ex, task, graph, query)
    if view == "heads":
        return draw_heads(ax, out, ex, task)
    if view == "alignment":
        w, xl, yl = _aligned(w, ex, logits, task, graph)
        heatmap(ax, w, xl, yl, "source", "target")
        return "alignment: target step × source position"
    return matrix(ax, w, ex, graph, name)



def _prediction(outputs: dict[str, Tensor], ex: dict[str, Tensor], task: Task,
                example: int) -> str:
    """'  (predicted X, true Y)' for a model with one prediction per example, else ''."""
    pred = outputs["logits"][example].argmax(-1) if "logits" in outputs else None
    if pred is None or pred.numel() != 1:
        return ""
    label = ex.get(task.target)
    return f"  (predicted {task.label_name(int(pred))}" + (
        f", true {task.label_name(int(label))})"
        if label is not None and label.numel() == 1 else ")")


def draw_model(graph: Graph, task: Task, model: Any, path: str | Path, *, example: int = 0,
               size: int = 256, dpi: int = 120) -> tuple[Path, str]:
    """Draw example ``example`` of the task's test batch of ``size`` through ``model``.

    The picture ``attngraph attend`` draws of a run trained with this task at
    its default ``eval_size`` (the same fixed test batch); ``(path, view)``.
    The model is run in eval mode, then put back in the mode it was in.
    """
    import torch

    from attngraph.train.engine.device import device_of, float_outputs, to_device
    from attngraph.train.tasks.lookup import bind_inputs

    batch = task.batch(size, split="valid")
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            res = model(**to_device(bind_inputs(graph, task, batch), device_of(model)))
    finally:
        model.train(was)
    outputs = {k: v.cpu() for k, v in float_outputs(res).items()}
    return draw(graph, task, outputs, batch, path, example=example, dpi=dpi)


def _aligned(w: Tensor, ex: dict[str, Tensor], logits: Tensor | None, task: Task,
             graph: Graph) -> tuple[Tensor, list[str], list[str]]:
    """An alignment's weights and its source and target tokens, padding cut.

    The target is the example's own when it has one, else the model's prediction
    up to its first ``<eos>`` (a user's --input).
    """
    src = _field(graph, task, "tokens") or "tokens"
    tgt = _field(graph, task, "labels") or task.target
    n = int(ex[f"{src}_mask"].sum()) if f"{src}_mask" in ex else w.shape[-1]
    xl = task.token_names(src, ex[src][:n].tolist())
    if task.target in ex:
        ys = [int(y) for y in ex[task.target].tolist() if int(y) >= 0]
    else:
        ys = logits.argmax(-1).tolist() if logits is not None else []
        eos = getattr(task, "eos", None)
        if eos is not None and eos in ys:
            ys = ys[:ys.index(eos) + 1]
    ys = ys or list(range(w.shape[0]))
    return w[:len(ys), :n], xl, task.token_names(tgt, ys)


def _check_example(example: int, size: int, where: SourceLoc) -> None:
    """Refuse an example index outside a test batch of ``size``."""
    if not 0 <= example < size:
        msg = f"example {example} is outside the test batch of {size}"
        raise TrainingError(msg, where, f"use --example between 0 and {size - 1}")


def load_run(run_dir: str | Path) -> tuple[Graph, Task, Any, Any]:
    """``(graph, task, model, checkpoint)`` of a run (see
    :func:`attngraph.train.trained.reloaded.load_run`)."""
    from attngraph.train.trained.reloaded import load_run as load

    run = load(run_dir)
    return run.graph, run.task, run.model, run.checkpoint


def attend_run(run_dir: str | Path, *, example: int = 0, out: str | Path | None = None,
               query: int = 0, text: str | None = None, data: str | Path | None = None,
               layers: Sequence[int] = (), heads: Sequence[int] = ()) -> tuple[Path, str]:
    """Draw one example of a trained run; ``(picture path, view)``.

    By default, example ``example`` of the run's fixed test batch (the one its
    test metrics were measured on). A run trained with ``--data`` draws the
    user's own ``text`` (its text input) or example ``example`` of the data file
    ``data``. A run written by ``attngraph import`` draws every layer's and
    head's weights over ``text``, or over the text of record ``example`` of ``data``
    (the ``layers`` view; ``layers`` and ``heads`` pick some,
    :func:`attngraph.train.pictures.layers.attend_imported`). The picture goes to
    ``out`` (default: ``RUN_DIR/attention_<example>.png``,
    ``RUN_DIR/attention_input.png`` for ``text``).
    """
    from attngraph.train.data.batches import DataTask
    from attngraph.train.store.imported import is_imported
    from attngraph.train.trained.reloaded import load_run as load

    if is_imported(run_dir):  # a model that exists: every layer and head over a text
        from attngraph.train.pictures.layers import attend_imported

        return attend_imported(run_dir, text=text, data=data, example=example, out=out,
                               layers=layers, heads=heads)
    name = "input" if text is not None else str(example)
    path = picture_path(out if out is not None else Path(run_dir) / f"attention_{name}.png")
    if layers or heads:
        what = "--layer" if layers else "--head"
        msg = f"{what} picks a layer or head of an imported model's picture"
        raise TrainingError(msg, SourceLoc(what), f"leave out {what}: this run was not "
                            "written by attngraph import")
    run = load(run_dir)
    if text is not None or data is not None:
        records = [run.text_record(text)] if text is not None else run.records(data or "")
        if text is None:
            _check_example(example, len(records), SourceLoc(str(data)))
            records, example = records[example:example + 1], 0
        batch = run.batch_of(records)
        if isinstance(run.task, DataTask):  # the words as written, not <unk>
            run.task.shown = run.words(records[0])
    else:
        if run.encoding is not None:
            msg = "this run was trained on a data file, whose examples it does not keep"
            raise TrainingError(msg, SourceLoc(str(run_dir)),
                                'draw your own example: --input "some text", or one of a '
                                "data file: --data PATH --example N")
        size = int(run.checkpoint.config.get("eval_size", 256))
        _check_example(example, size, SourceLoc(str(run_dir)))
        batch = run.task.batch(size, split="valid")
    outputs = run.outputs(batch)
    return draw(run.graph, run.task, outputs, batch, path, example=example, query=query)
