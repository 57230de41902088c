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

__all__ = ["picture_path", "pyplot", "save"]


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


def picture_path(path: str | Path) -> Path:
    """The file a picture is written to: ``.png`` added to a name without a suffix
    (as matplotlib does); a suffix naming no format matplotlib writes is refused."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    if not path.suffix:
        return path.with_suffix(".png")
    known = FigureCanvasAgg.get_supported_filetypes()
    if path.suffix[1:].lower() not in known:
        msg = f"cannot draw a picture as '{path.suffix}'"
        raise TrainingError(msg, SourceLoc(str(path)), "name the file with one of the "
                            f"suffixes {', '.join('.' + k for k in sorted(known))}")
    return path
