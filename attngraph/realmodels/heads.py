"""Pictures of real attention: every layer's and head's weights over the tokens of a text.

:func:`attend_text` reads an imported run (``attngraph import``), turns a text into
ids with the tokenizer the import copied from the model directory (``transformers``'
``AutoTokenizer``), or reads the text as ids (``"15 7 3"``) when the run has none,
runs the model and draws the spec's ``heads`` output, ``[layers, N, N]`` per
head, as a grid: one row per layer, one column per head, each a query × item
heatmap with the tokens on both axes.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["attend_text", "token_ids"]


def token_ids(run_dir: str | Path, text: str) -> tuple[list[int], list[str]]:
    """The ids of ``text`` and their tokens as shown: by the run's tokenizer, else read
    as whitespace-separated ids.

    Raises
    ------
    TrainingError
        Text that is not ids, in a run without a tokenizer; a tokenizer without
        ``transformers`` installed.
    """
    from attngraph.realmodels.rundir import TOKENIZER_DIR

    tok_dir = Path(run_dir) / TOKENIZER_DIR
    if tok_dir.is_dir():
        try:
            from transformers import AutoTokenizer
        except ImportError:
            msg = "this run's tokenizer needs the transformers package"
            raise TrainingError(msg, SourceLoc(str(tok_dir)),
                                "pip install 'attngraph[real]', or give ids: \"15 7 3\"") from None
        tok = AutoTokenizer.from_pretrained(str(tok_dir))
        ids = [int(i) for i in tok(text)["input_ids"]]
        return ids, [str(t) for t in tok.convert_ids_to_tokens(ids)]
    try:
        ids = [int(w) for w in text.split()]
    except ValueError:
        msg = f"this run has no tokenizer, so its input is token ids, not {text[:40]!r}"
        raise TrainingError(msg, SourceLoc(str(run_dir)), 'give ids: --input "15 7 3"; or '
                            "import from a model directory that holds its tokenizer") from None
    if not ids:
        msg = "no token ids given"
        raise TrainingError(msg, SourceLoc(str(run_dir)), 'give ids: --input "15 7 3"')
    return ids, [str(i) for i in ids]


def attend_text(run_dir: str | Path, text: str, *, out: str | Path | None = None,
                output: str = "heads") -> Path:
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

    Returns
    -------
    Path
        The picture written.
    """
    import torch

    from attngraph.train.runs import load_run

    run = load_run(run_dir)
    ids, shown = token_ids(run_dir, text)
    vocab = int(run.graph.inputs[0].spec.vocab)
    if max(ids) >= vocab or min(ids) < 0:
        msg = f"token ids must lie in 0 … {vocab - 1}, but the input has {max(ids)}"
        raise TrainingError(msg, SourceLoc(str(run_dir)), "give ids of this model's vocabulary")
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
    if w.dim() == 3:
        w = w[None]
    path = Path(out) if out is not None else Path(run_dir) / "heads.png"
    _draw(w, shown, path, f"{run.graph.name}: attention per layer (rows) and head (columns)")
    return path


def _draw(w: Tensor, tokens: list[str], path: Path, title: str) -> None:
    """A grid of heatmaps, layers by heads, query tokens down and item tokens across."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heads, layers = int(w.shape[0]), int(w.shape[1])
    side = 1.6 + 0.12 * len(tokens)
    fig, axes = plt.subplots(layers, heads, figsize=(side * heads, side * layers),
                             squeeze=False)
    small = len(tokens) <= 24
    for li in range(layers):
        for h in range(heads):
            ax = axes[li][h]
            ax.imshow(w[h, li].numpy(), vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_title(f"layer {li} head {h}", fontsize=7)
            ax.set_xticks(range(len(tokens)) if small and li == layers - 1 else [])
            ax.set_yticks(range(len(tokens)) if small and h == 0 else [])
            if small and li == layers - 1:
                ax.set_xticklabels(tokens, rotation=90, fontsize=6)
            if small and h == 0:
                ax.set_yticklabels(tokens, fontsize=6)
    fig.suptitle(title, fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
