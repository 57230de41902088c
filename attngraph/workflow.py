"""The Python workflow: train on a file, records or a DataFrame; evaluate, predict, export.

:func:`fit` (public as ``attngraph.fit``) is ``attngraph train SPEC --data ...`` from
Python: the same run
(:func:`attngraph.train.run.runner.run`, the one training loop), the same run
directory, and the run loaded back (:func:`attngraph.load_run`), so that::

    run = attngraph.fit("specs/global_attention.yaml", "topics.csv", epochs=5)
    run.evaluate("held-out.csv")
    run.predict([{"text": "A storm with rain."}])
    run.export("topics.onnx", format="onnx")

:func:`finetune` (``attngraph.finetune``) trains a run on from its checkpoint
(``attngraph train RUN/spec.yaml --out RUN --resume``): a model brought in by
``attngraph import`` on your own records, read by its own tokenizer
(:mod:`attngraph.train.data.tokenized`)::

    run = attngraph.finetune("runs/bert", "reviews.csv", steps=200, lr=3e-5)
    run.path   # the same directory, its checkpoint further on

A model trained in one's own loop is saved as such a run by :func:`attngraph.save`
(:mod:`attngraph.train.run.ownloop`), and ``Run.export`` writes it as a program
(:mod:`attngraph.train.trained.export`). Data given in memory is written into the run
directory first (:mod:`attngraph.train.data.inputs`), so a run trained from a
DataFrame is the run the same rows give as a CSV file, for the same seed.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.trained.reloaded import Run

__all__ = ["finetune", "fit"]


def _folder(out: str | Path | None) -> tuple[Path, bool]:
    """The run directory, and whether it is a temporary one (``out`` not given)."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix="attngraph-run-")), True
    from attngraph.train.data.inputs import folder_of

    return folder_of(out), False


def _bring_back(written: list[Path], folder: Path, moved: str | None) -> None:
    """Files written for this run that ``overwrite`` moved aside with the earlier run,
    put back where the run's checkpoint says they are."""
    if moved is None:
        return
    for p in written:
        there = Path(moved) / p.name
        if not p.exists() and there.exists():
            shutil.move(str(there), str(p))


def fit(spec: str | Path | Graph, data: Any, *, valid: Any = None,
          out: str | Path | None = None, epochs: int | None = None, steps: int | None = None,
          batch: int | None = None, lr: float | None = None, seed: int = 0,
          fields: Mapping[str, str] | None = None, tokenize: str = "word",
          valid_fraction: float = 0.1, patience: int = 0, device: str = "cpu",
          bf16: bool = False, overwrite: bool = False, quiet: bool = False) -> Run:
    """Train ``spec`` on ``data`` as ``attngraph train SPEC --data`` does; return the run.

    Parameters
    ----------
    spec : str, Path or Graph
        A spec file, YAML text, or a graph read from one. ``auto`` sizes under
        ``dims`` are decided by the training data (the run says what it chose).
    data : str, Path, list of dict, or DataFrame
        A data file or folder (CSV, JSONL, Parquet, pairs, images: docs/data.md),
        records, or a pandas DataFrame (one record per row).
    valid : same kinds as ``data``, optional
        Validation data; without it a seeded ``valid_fraction`` of ``data``.
    out : str or Path, optional
        The run directory (it must not hold a run, unless ``overwrite``); default:
        a temporary one, removed when the returned run is garbage-collected.
    epochs, steps, batch, lr, seed, fields, tokenize, patience, device, bf16, overwrite, quiet
        As the ``attngraph train`` options of those names (``fields`` maps an input,
        or ``label``, to a column). Give ``epochs`` or ``steps``, not both.

    Returns
    -------
    Run
        The run loaded back: ``.predict``, ``.evaluate``, ``.export``, ``.model``,
        ``.labels``, ``.path``.

    Raises
    ------
    AttnGraphError
        What ``attngraph train`` refuses, before anything is written: the spec's
        errors, data that does not read or fit (located in the file, or at
        ``<records>:N`` / ``<DataFrame>:N`` for the N-th record or row), a run
        already in ``out``.
    """
    from attngraph.train.data.inputs import fields_of
    from attngraph.train.trained.reloaded import load_run

    if epochs is not None and steps is not None:
        msg = "give epochs or steps, not both"
        raise TrainingError(msg, SourceLoc("epochs"), "epochs sets the steps from the data")
    folder, temporary = _folder(out)
    settings = {"steps": steps, "epochs": epochs, "batch": batch, "lr": lr, "seed": seed,
                "fields": fields_of(fields), "tokenize": tokenize,
                "valid_fraction": valid_fraction, "patience": patience, "device": device,
                "bf16": bf16, "overwrite": overwrite, "quiet": quiet}
    _train_in(folder, spec, data, valid, temporary=temporary, settings=settings)
    run = load_run(folder, device=device)
    if temporary:
        weakref.finalize(run, shutil.rmtree, str(folder), ignore_errors=True)
    return run


def finetune(run: str | Path, data: Any = None, *, valid: Any = None,
             epochs: int | None = None, steps: int | None = None, batch: int | None = None,
             lr: float | None = None, fields: Mapping[str, str] | None = None,
             valid_fraction: float = 0.1, patience: int = 0, truncate: bool = False,
             blocks: int | None = None, device: str = "cpu", bf16: bool = False,
             quiet: bool = False) -> Run:
    """Train the run in ``run`` on from its checkpoint, as ``attngraph train
    RUN/spec.yaml --out RUN --resume`` does; return it loaded back.

    Parameters
    ----------
    run : str or Path
        A run directory: one that ``attngraph import`` wrote (a real model, trained on
        ``data`` read by its own tokenizer, docs/real-models.md), or any trained run.
    data : str, Path, list of dict, or DataFrame, optional
        The records to train on (as :func:`fit` takes them; records in memory are
        written into the run, so that a later resume reads them again); default: the
        run's own (its data file, or its built-in task).
    valid, epochs, steps, batch, lr, fields, valid_fraction, patience, device, bf16, quiet
        As for :func:`fit`. ``steps`` and ``epochs`` are the total to train on to. A
        run that has trained no step (an import) takes ``batch`` and ``lr``; a trained
        one refuses ones other than its own.
    truncate : bool
        An import reads a text longer than its positions by its first tokens
        (``--truncate``).
    blocks : int, optional
        An imported language model reads its records joined, in blocks of this many
        tokens (``--blocks``).

    Raises
    ------
    AttnGraphError
        What ``attngraph train --resume`` refuses, before anything is written (the
        records written for this call are removed again).
    """
    from attngraph.train.data.inputs import (
        SPEC_FILE,
        Written,
        data_path,
        fields_of,
        named_as,
    )
    from attngraph.train.run.runner import RunConfig
    from attngraph.train.run.runner import run as run_training
    from attngraph.train.store import checkpoints as ck
    from attngraph.train.trained.reloaded import load_run

    if epochs is not None and steps is not None:
        msg = "give epochs or steps, not both"
        raise TrainingError(msg, SourceLoc("epochs"), "epochs sets the steps from the data")
    folder = Path(run)
    if not (folder / ck.CHECKPOINT).is_file():
        msg = f"{folder} holds no run to train on (no {ck.CHECKPOINT})"
        raise TrainingError(msg, SourceLoc(str(folder)), "give a run directory: one "
                            "attngraph train or attngraph import wrote")
    in_memory = any(d is not None and not isinstance(d, (str, Path)) for d in (data, valid))
    # the checkpoint is read here (and again by the training) only when needed: for the
    # step that names records given in memory, or a spec the run does not hold
    prior = ck.load_checkpoint(folder / ck.CHECKPOINT) \
        if in_memory or not (folder / SPEC_FILE).is_file() else None
    written = Written()
    try:
        # the spec: the run's own file (an import's, fit's), else where it was trained
        # from, else the text its checkpoint keeps, written beside it
        spec = str(folder / SPEC_FILE)
        if prior is not None and not (folder / SPEC_FILE).is_file():
            spec = (prior.spec_file if Path(prior.spec_file).is_file() else
                    written.write(folder / SPEC_FILE, prior.spec_text))
        with named_as(written):
            # records in memory are kept beside the run, named by the step they start from
            step = prior.step if prior is not None else 0
            cfg = RunConfig(
                spec=spec, out=str(folder), resume=True,
                data=data_path(data, folder / f"data-train-step{step}.jsonl", written)
                if data is not None else None,
                valid=data_path(valid, folder / f"data-valid-step{step}.jsonl", written)
                if valid is not None else None,
                steps=steps, epochs=epochs, batch=batch, lr=lr, fields=fields_of(fields),
                valid_fraction=valid_fraction, patience=patience, truncate=truncate,
                blocks=blocks, device=device, bf16=bf16, quiet=quiet)
            run_training(cfg)
    except BaseException:
        written.remove()
        raise
    return load_run(folder, device=device)


def _train_in(folder: Path, spec: str | Path | Graph, data: Any, valid: Any, *,
              temporary: bool, settings: dict[str, Any]) -> None:
    """Train into the run directory ``folder``, the data given in memory written there
    first (``settings``: the rest of :class:`RunConfig`); on any failure remove what
    this run wrote, and ``folder`` too when it is temporary or this call made it."""
    from attngraph.train.data.inputs import (
        TRAIN_FILE,
        VALID_FILE,
        Written,
        data_path,
        named_as,
        spec_path,
    )
    from attngraph.train.run.runner import RunConfig
    from attngraph.train.run.runner import run as run_training
    from attngraph.train.store import directory as rundir

    made = not folder.exists()
    # before anything is written
    rundir.check(folder, resume=False, overwrite=settings["overwrite"])
    written = Written()
    try:
        with named_as(written):
            cfg = RunConfig(
                spec=spec_path(spec, folder, written),
                data=data_path(data, folder / TRAIN_FILE, written),
                valid=data_path(valid, folder / VALID_FILE, written) if valid is not None
                else None,
                out=str(folder), **settings)
            summary = run_training(cfg)
    except BaseException:
        written.remove()
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)
        elif made:
            _rmdir(folder)
        raise
    _bring_back(written.files, folder, summary.moved_aside)


def _rmdir(folder: Path) -> None:
    """Remove ``folder`` when it is empty (this call made it; nothing else is in it)."""
    try:
        folder.rmdir()
    except OSError:
        pass
