"""A trained run's model as a file that runs without attngraph (``Run.export``).

:func:`export_run` is ``attngraph export RUN -o FILE`` from Python: the run's
trained weights in a freshly compiled module on the CPU, written as a
torch.export program (``pt2``), an ONNX model (``onnx``) or PyTorch source with
its weights beside it (``python``), each checked to load back before it is
written (:func:`attngraph.lower.export.programs.export_file`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import SourceLoc, TrainingError, did_you_mean

if TYPE_CHECKING:
    from attngraph.train.trained.reloaded import Run

__all__ = ["export_run"]


def export_run(run: Run, path: str | Path, *, format: str = "pt2",  # noqa: A002
               batch: int = 2, length: int = 8) -> Path:
    """Write ``run``'s trained model to ``path`` as ``attngraph export RUN`` does.

    Parameters
    ----------
    run : Run
        A loaded run.
    path : str or Path
        The file to write: a ``pt2`` torch.export program, an ``onnx`` model, or
        ``python`` source (its weights written beside it, as ``.safetensors``).
    format : str
        ``pt2``, ``onnx`` or ``python``.
    batch, length : int
        The example the program is traced on (batch and lengths stay dynamic).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    AttnGraphError
        An unknown format, a model the format cannot hold, a file that cannot be written.
    """
    from attngraph.fileio import write_file
    from attngraph.lower import compile as lower
    from attngraph.lower.export.programs import FORMATS, export_file

    if not isinstance(path, (str, Path)) or not isinstance(format, str):
        what = ("path", path) if not isinstance(path, (str, Path)) else ("format", format)
        msg = f"export takes a file path and a format name, but {what[0]} is {what[1]!r:.40}"
        raise TrainingError(msg, SourceLoc(str(run.path)), "e.g. run.export('model.pt2'), "
                            "format 'pt2', 'onnx' or 'python'")
    if format not in FORMATS:
        msg = f"unknown export format {format!r}"
        raise TrainingError(msg, SourceLoc(str(path)),
                            f"{did_you_mean(format, FORMATS)} (formats: {', '.join(FORMATS)})")
    model = lower(run.graph, seed=0)  # on the CPU, whatever device the run is on
    model.load_state_dict({k: v.detach().cpu() for k, v in run.model.state_dict().items()})
    model.eval()
    out = Path(path)
    beside = out.with_suffix(".safetensors") if format == "python" else None
    if beside is not None and beside == out:
        msg = f"{out}: the Python file would be overwritten by its own weights"
        raise TrainingError(msg, SourceLoc(str(out)), "name the file .py")
    made = export_file(model, format, batch=batch, length=length,
                       weights=beside.name if beside is not None else None)
    if beside is not None:
        write_file(beside, made.weights or b"", error=TrainingError, parents=True)
    write_file(out, made.data, error=TrainingError, parents=True)
    return out
