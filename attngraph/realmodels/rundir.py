"""An imported real model as a run directory (``attngraph import``).

The directory holds what ``attngraph train`` leaves, written through the
checkpoint writer (:func:`attngraph.train.store.checkpoints.save_checkpoint`), so that
``load_run`` and the commands that read runs take it:

- ``checkpoint.pt``: step 0, the imported parameters, a fresh optimiser state, the
  spec text with the model's dims and its hash;
- ``spec.yaml``: that spec text, for ``describe``, ``render`` and for training on
  from the import (``attngraph train RUN/spec.yaml --out RUN --resume --steps K``);
- ``import.json``: where the weights came from and how they were mapped, and what
  ``attngraph predict`` reads of the configuration (:func:`special_ids`);
- ``tokenizer/``: the model directory's tokenizer files, when it has them.

A run written here (one that holds ``import.json``, :func:`is_imported`) is allowed
past the parameter limit of specs when it is read back (``load_run``): the model
exists already, so its size is bounded by what the machine can hold
(:func:`check_memory`), not by a limit meant for specs someone is writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import write_file
from attngraph.realmodels.build import Imported, load_model
from attngraph.realmodels.source import TOKENIZER_FILES
from attngraph.train.store.imported import (
    IMPORT_FILE,
    TOKENIZER_DIR,
    available_memory,
    check_memory,
    is_imported,
)

__all__ = ["IMPORT_FILE", "SPEC_FILE", "TOKENIZER_DIR", "available_memory", "check_memory",
           "import_model", "is_imported", "special_ids"]

SPEC_FILE = "spec.yaml"
#: A decoder's run trains on (fine-tunes) with this built-in task unless told otherwise.
DECODER_TASK = "repeat_copy"


def _weights_files(source: Path) -> list[Path]:
    """The files of weights a source holds (a model directory's, or the file itself)."""
    if source.is_file():
        return [source]
    return [*source.glob("*.safetensors"), *source.glob("pytorch_model*.bin")]


def _task(imp: Imported) -> tuple[str, dict[str, Any]]:
    """The built-in task a run of this model trains on: copying, for a causal decoder."""
    vocab = int(imp.dims.get("vocab", 16))
    return DECODER_TASK, {"vocab": vocab, "length": 8}


def import_model(source: str | Path, out: str | Path, *, spec: str | Path | None = None,
                 config: str | Path | None = None, seed: int = 0, lr: float = 1e-4,
                 batch: int = 8) -> Imported:
    """Read a real model (see :func:`~attngraph.realmodels.load_model`) and write it as the
    run directory ``out``.

    Parameters
    ----------
    source : str or Path
        A ``transformers`` model directory, or a safetensors file.
    out : str or Path
        The run directory to write; it must not hold a run.
    spec, config :
        As for :func:`~attngraph.realmodels.load_model`.
    seed, lr, batch :
        The run's settings for training on from the imported weights.

    Returns
    -------
    Imported
        The model, as written.

    Raises
    ------
    TrainingError
        Besides load_model's errors: ``out`` holds a run already, or cannot be written.
    """
    from attngraph.train.store import checkpoints as ck

    run = Path(out)
    if (run / ck.CHECKPOINT).exists():
        msg = f"{run} holds a run already"
        raise TrainingError(msg, SourceLoc(str(run)), "import into a new directory")
    check_memory(_weights_files(Path(source)), source)
    imp = load_model(source, spec=spec, config=config, seed=seed)
    _write_checkpoint(run, imp, seed=seed, lr=lr, batch=batch)
    tok = _copy_tokenizer(imp, run)
    info = {"format": 1, "source": str(source), "config": imp.source.config_file,
            "weights": imp.source.weights_file, "spec": imp.spec_file,
            "model_type": imp.source.config.get("model_type"), "dims": imp.dims,
            "tokenizer": TOKENIZER_DIR if tok is not None else None,
            **special_ids(imp.source.config)}
    write_file(run / IMPORT_FILE, json.dumps(info, indent=1) + "\n", error=TrainingError)
    return imp


def special_ids(config: dict[str, Any]) -> dict[str, Any]:
    """What ``attngraph predict`` reads of the model's configuration: the end, padding
    and decoder start ids (``eos``, ``pad``, ``start``; None where it names none) and
    a classifier's label names by class id (``labels``, from ``id2label``)."""
    def one(key: str) -> int | None:
        v = config.get(key)
        if isinstance(v, list):  # several end ids: the first
            v = v[0] if v else None
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    names = config.get("id2label")
    labels = None
    if isinstance(names, dict) and names:
        try:
            by_id = {int(k): str(v) for k, v in names.items()}
        except (TypeError, ValueError):
            by_id = {}
        if sorted(by_id) == list(range(len(by_id))):
            labels = [by_id[i] for i in range(len(by_id))]
    return {"eos": one("eos_token_id"), "pad": one("pad_token_id"),
            "start": one("decoder_start_token_id"), "labels": labels}


def _write_checkpoint(run: Path, imp: Imported, *, seed: int, lr: float, batch: int) -> None:
    """Write ``run``'s spec file and its step-0 checkpoint: the imported parameters,
    a fresh optimiser state, and the settings for training on."""
    from attngraph.train.engine.step import TrainSettings, make_optimizer
    from attngraph.train.store import checkpoints as ck

    task, options = _task(imp)
    settings = TrainSettings.of(imp.graph, lr=lr, batch=batch)
    opt = make_optimizer(imp.model, settings)
    cfg = {"task": task, "batch": batch, "lr": lr, "seed": seed, "options": options,
           "eval_every": 100, "eval_size": 16, "checkpoint_every": 100}
    spec_file = str(run / SPEC_FILE)
    write_file(spec_file, imp.spec_text, error=TrainingError, parents=True)
    state = {k: v.detach().clone() for k, v in imp.model.state_dict().items()}
    ck.save_checkpoint(run / ck.CHECKPOINT, ck.Checkpoint(
        step=0, model=state, optimizer=opt.state_dict(), rng=ck.rng_state(),
        spec_hash=ck.spec_hash(imp.graph), spec_text=imp.spec_text, spec_file=spec_file,
        config=cfg))


def _copy_tokenizer(imp: Imported, run: Path) -> Path | None:
    """Copy the model directory's tokenizer files into ``run``; their folder, or None
    when the source has no tokenizer."""
    if imp.source.tokenizer is None:
        return None
    tok = run / TOKENIZER_DIR
    tok.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        f = imp.source.tokenizer / name
        if f.is_file():
            shutil.copyfile(f, tok / name)
    return tok
