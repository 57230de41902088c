"""What every picture of a run shares: matplotlib's headless pyplot, and saving.

The attention views (:mod:`attngraph.train.pictures.attend` and the view modules
beside it) and the comparison figures (:mod:`attngraph.train.report.compare_figures`)
draw through :func:`pyplot` and write through :func:`save`, so a picture that
cannot be written fails the same way everywhere: one error at the file, with a
hint. matplotlib is imported only when a picture is drawn.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import write_file

__all__ = ["pyplot", "save"]


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg back end (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, dpi: int = 120) -> None:
    """Write ``fig`` to ``path`` (its suffix gives the format), making a missing directory.

    Raises
    ------
    TrainingError
        Located at ``path`` when it cannot be written (a part of it is a file, no
        permission, ...), with a hint.
    """

    def refused(exc: OSError) -> TrainingError:
        why = ("a part of its path is a file, not a directory"
               if isinstance(exc, (FileExistsError, NotADirectoryError))
               else (exc.strerror or str(exc)).lower())
        msg = f"cannot write the picture: {why}"
        return TrainingError(msg, SourceLoc(str(path)),
                             "draw into a directory you can write: -o PICTURE")

    buf = io.BytesIO()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(buf, format=path.suffix[1:].lower() or None, dpi=dpi)
    except OSError as exc:
        raise refused(exc) from None
    # whole or not at all: a full disk leaves the previous picture as it was
    write_file(path, buf.getvalue(), failed=lambda _p, exc: refused(exc))
