"""Pictures of real attention: every layer's and head's weights over the tokens of a text.

:func:`text_attention` reads an imported run (``attngraph import``), turns a text
into ids with the tokenizer the import copied from the model directory
(``transformers``' ``AutoTokenizer``), or reads the text as ids (``"15 7 3"``)
when the run has none, and runs the model for the spec's ``heads`` output,
``[layers, N, N]`` per head. :func:`heads_figure` draws them as a grid: one row
per layer, one column per head, each a query × item heatmap with the tokens on
both axes; :func:`attend_text` writes that picture (``attngraph attend RUN
--input TEXT``, with ``--layer`` and ``--head`` to pick rows and columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.train.trained.reloaded import Run

__all__ = ["TextAttention", "attend_text", "heads_figure", "text_attention", "token_ids"]


@dataclass(frozen=True)
class TextAttention:
    """A model's weights over one text: ``weights`` is ``(heads, layers, N, N)``, queries
    down and items across, over the ``ids`` the text became (``tokens`` as shown)."""

    name: str
    ids: list[int]
    tokens: list[str]
    weights: Tensor

    @property
    def layers(self) -> int:
        """How many layers the weights hold."""
        return int(self.weights.shape[1])

    @property
    def heads(self) -> int:
        """How many heads each layer has."""
        return int(self.weights.shape[0])


def token_ids(run_dir: str | Path, text: str) -> tuple[list[int], list[str]]:
    """The ids of ``text`` and their tokens as shown: by the run's tokenizer, else read
    as whitespace-separated ids (:class:`~attngraph.train.data.runtext.RunText`).

    Raises
    ------
    TrainingError
        Text that is not ids, in a run without a tokenizer; a tokenizer without
        ``transformers`` installed; a text that makes no tokens.
    """
    from attngraph.train.data.runtext import RunText

    reader = RunText.of(run_dir)
    ids = reader.ids(text, SourceLoc("--input") if reader.tokenizer is not None
                     else SourceLoc(str(run_dir)))
    return ids, reader.shown(ids)


def text_attention(run_dir: str | Path, text: str, *, output: str = "heads",
                   run: Run | None = None) -> TextAttention:
    """Every layer's and head's weights of an imported run over ``text``.

    Parameters
    ----------
    run_dir : str or Path
        A run written by ``attngraph import``.
    text : str
        The text (or ids, for a run without a tokenizer).
    output : str
        The spec's output holding the weights, ``[layers, N, N]`` per head.
    run : Run, optional
        The run, when loaded already.

    Raises
    ------
    TrainingError
        A text that is not ids (without a tokenizer), ids outside the vocabulary, a
        text longer than the model reads, a spec without ``output``.
    """
    import torch

    from attngraph.train.trained.reloaded import load_run

    run = run if run is not None else load_run(run_dir)
    from attngraph.train.data.runtext import check_ids

    ids, shown = token_ids(run_dir, text)
    check_ids(run.graph, ids, SourceLoc("--input"))
    names = [k for k, _ in run.graph.outputs]
    if output not in names:
        msg = f"the run's spec has no output '{output}' (outputs: {', '.join(names)})"
        raise TrainingError(msg, SourceLoc(str(run_dir)), "declare the layers' weights as an "
                            "output: outputs: {heads: <repeat>.attention}")
    batch: dict[str, Tensor] = {}
    x = torch.tensor([ids], device=run.device)
    for node in run.graph.inputs:  # the text, then any other tokens input (token types) at 0
        batch[node.id] = x if not batch else torch.zeros_like(x)
        batch[f"{node.id}_mask"] = torch.ones_like(x, dtype=torch.bool)
    with torch.no_grad():
        w = run.model(**batch)[output][0].float().cpu()  # (H, L, N, N)
    if w.dim() == 3:  # one head
        w = w[None]
    return TextAttention(run.graph.name, ids, shown, w)


def _picked(given: Sequence[int] | None, count: int, what: str) -> list[int]:
    """The layers or heads to draw (all when none are given), each checked."""
    if not given:
        return list(range(count))
    for i in given:
        if not 0 <= i < count:
            msg = f"--{what} {i} is not a {what} of this model (it has {count}, 0 to {count - 1})"
            raise TrainingError(msg, SourceLoc(f"--{what}"), f"pick {what}s from 0 to {count - 1}")
    return list(dict.fromkeys(given))


def heads_figure(att: TextAttention, *, layers: Sequence[int] | None = None,
                 heads: Sequence[int] | None = None) -> Any:
    """The picture of ``att``: a grid of heatmaps, one row per layer and one column per
    head (``layers``/``heads`` pick some; default all), query tokens down and item tokens
    across, each titled ``layer L head H``, on one colour scale from 0 to the largest
    weight drawn.

    Raises
    ------
    TrainingError
        A layer or head the model does not have.
    """
    from attngraph.train.pictures.plot import pyplot

    rows = _picked(layers, att.layers, "layer")
    cols = _picked(heads, att.heads, "head")
    plt = pyplot()
    n = len(att.tokens)
    side = 1.6 + 0.12 * n
    fig, axes = plt.subplots(len(rows), len(cols), figsize=(side * len(cols), side * len(rows)),
                             squeeze=False)
    small = n <= 24
    # one scale for every panel, 0 to the largest weight drawn: panels compare, and a
    # model whose weights are spread thin still shows where they are
    top = float(att.weights[cols][:, rows].max()) or 1.0
    im = None
    for r, li in enumerate(rows):
        for c, h in enumerate(cols):
            ax = axes[r][c]
            im = ax.imshow(att.weights[h, li].numpy(), vmin=0.0, vmax=top, cmap="viridis")
            ax.set_title(f"layer {li} head {h}", fontsize=7)
            bottom, left = small and r == len(rows) - 1, small and c == 0
            ax.set_xticks(range(n) if bottom else [])
            ax.set_yticks(range(n) if left else [])
            if bottom:
                ax.set_xticklabels(att.tokens, rotation=90, fontsize=6)
            if left:
                ax.set_yticklabels(att.tokens, fontsize=6)
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.02, label="weight")
    fig.suptitle(f"{att.name}: attention per layer (rows) and head (columns); "
                 "query tokens down, attended tokens across", fontsize=9)
    return fig


def attend_text(run_dir: str | Path, text: str, *, out: str | Path | None = None,
                output: str = "heads", layers: Sequence[int] | None = None,
                heads: Sequence[int] | None = None, run: Run | None = None) -> Path:
    """Draw every layer's and head's attention of an imported run over ``text``.

    Parameters
    ----------
    run_dir : str or Path
        A run written by ``attngraph import``.
    text : str
        The text (or ids, for a run without a tokenizer).
    out : str or Path, optional
        The picture (png, svg, pdf); default ``RUN_DIR/heads.png``.
    output : str
        The spec's output holding the weights, ``[layers, N, N]`` per head.
    layers, heads : sequence of int, optional
        The layers (rows) and heads (columns) to draw; default all.
    run : Run, optional
        The run, when loaded already.

    Returns
    -------
    Path
        The picture written.
    """
    from attngraph.train.pictures.plot import picture_path, pyplot, save

    path = picture_path(out if out is not None else Path(run_dir) / "heads.png")
    att = text_attention(run_dir, text, output=output, run=run)
    fig = heads_figure(att, layers=layers, heads=heads)
    try:
        save(fig, path, dpi=90)
    finally:
        pyplot().close(fig)
    return path


def attend_imported(run_dir: str | Path, *, text: str | None, data: str | Path | None = None,
                    example: int = 0, out: str | Path | None = None,
                    layers: Sequence[int] = (), heads: Sequence[int] = ()) -> tuple[Path, str]:
    """``attngraph attend`` of a run written by ``attngraph import``: every layer's and
    head's weights over ``text``, or over the text of record ``example`` of the data file
    ``data`` (``layers`` and ``heads`` pick some); ``(picture path, view)``, the picture
    at ``out`` (default ``RUN_DIR/attention_input.png``, ``attention_<example>.png``).

    Raises
    ------
    TrainingError
        Neither ``text`` nor ``data``, or both; no record ``example``.
    """
    if (text is None) == (data is None):
        what = "both --input and --data" if text is not None else "no --input"
        msg = f"an imported model is drawn over one text ({what} given)"
        raise TrainingError(msg, SourceLoc(str(run_dir)), 'give the text: --input "some text" '
                            "(token ids, \"15 7 3\", when the run has no tokenizer/), or a "
                            "record's: --data FILE --example N")
    run = None
    if data is not None:
        from attngraph.train.data.runtext import text_of
        from attngraph.train.trained.reloaded import load_run

        run = load_run(run_dir)
        records = run.records(data)
        if not 0 <= example < len(records):
            msg = (f"--example {example}: the data has {len(records)} records "
                   f"(0 to {len(records) - 1})")
            raise TrainingError(msg, SourceLoc("--example"), "pick one of them")
        text = text_of(records[example], run.graph.inputs[0].id)
    name = "input" if data is None else str(example)
    path = Path(out) if out is not None else Path(run_dir) / f"attention_{name}.png"
    assert text is not None
    return attend_text(run_dir, text, out=path, layers=layers, heads=heads, run=run), "layers"
