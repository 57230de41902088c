"""The confusion matrix of a classifier's report as a picture (``evaluate --picture``).

Cells shaded by the share of each true class's targets (each row sums to 1, so
a small class reads as clearly as a large one) and labelled with the counts;
true classes down, predicted across, the class names on both axes. The bytes
are made in memory (:func:`confusion_picture`); the command writes them whole.
matplotlib is imported only here, when a picture is asked for.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    from attngraph.train.trained.evaluation import ClassScores

__all__ = ["confusion_picture"]

#: The most classes whose cells are labelled with their counts.
_COUNTS = 30


def confusion_picture(scores: ClassScores, path: str | Path, *, title: str = "") -> bytes:
    """The confusion matrix drawn in the format of ``path``'s suffix (png, svg, pdf).

    Raises
    ------
    TrainingError
        When matplotlib cannot draw it (a name it cannot lay out), at ``path``.
    """
    import numpy as np

    from attngraph.train.pictures.plot import pyplot

    plt = pyplot()
    counts = np.asarray(scores.confusion, dtype=np.int64)
    rows = counts.sum(1, keepdims=True)
    share = counts / np.maximum(rows, 1)
    k = len(scores.labels)
    side = min(4.0 + 0.45 * k, 30.0)
    fig, ax = plt.subplots(figsize=(side + 1.5, side))
    try:
        im = ax.imshow(share, cmap="Blues", vmin=0.0, vmax=1.0)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="share of the true class")
        ax.set_xticks(range(k), labels=list(scores.labels), rotation=45, ha="right",
                      rotation_mode="anchor")
        ax.set_yticks(range(k), labels=list(scores.labels))
        ax.set_xlabel("predicted")
        ax.set_ylabel("true")
        if k <= _COUNTS:
            for i in range(k):
                for j in range(k):
                    ax.text(j, i, str(counts[i, j]), ha="center", va="center", fontsize=8,
                            color="white" if share[i, j] > 0.5 else "black")
        ax.set_title(title or f"confusion matrix ({int(counts.sum())} targets)")
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=Path(path).suffix[1:].lower() or "png", dpi=120)
    except (ValueError, RuntimeError) as exc:
        msg = f"cannot draw the confusion matrix: {exc}"
        raise TrainingError(msg, SourceLoc(str(path)), "draw it as .png or .svg") from None
    finally:
        plt.close(fig)
    return buf.getvalue()
