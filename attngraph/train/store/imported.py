"""Runs written by ``attngraph import``: which they are and how large they may be.

A run that holds ``import.json`` (:func:`is_imported`) is a model that exists: it is
allowed past the parameter limit of specs (:data:`attngraph.guard.MAX_PARAMS`)
when it is read back, bounded instead by what the machine can hold
(:func:`check_memory`). This lives with the runs, not with the importer
(:mod:`attngraph.realmodels`), because reading a run must not depend on the importer.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, TrainingError

__all__ = ["IMPORT_FILE", "TOKENIZER_DIR", "available_memory", "check_memory", "config_id",
           "config_ids", "import_info", "is_imported"]

#: The file ``attngraph import`` writes into its run: where the weights came from.
IMPORT_FILE = "import.json"
#: The folder of the model directory's tokenizer files in such a run, when it had them.
TOKENIZER_DIR = "tokenizer"


def is_imported(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a run written by ``attngraph import`` (its ``import.json``).

    Such a run is allowed past the parameter limit of specs
    (:data:`attngraph.guard.MAX_PARAMS`): its size is that of a model that exists,
    bounded by the machine's memory instead (:func:`check_memory`).
    """
    return (Path(run_dir) / IMPORT_FILE).is_file()


def available_memory() -> int | None:
    """Bytes of memory the machine can give now (``MemAvailable``), else its physical
    memory; None where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def check_memory(files: list[Path], where: str | Path) -> None:
    """Refuse to read weights the machine cannot hold: reading ``files`` into a model
    holds their tensors and the model's parameters at once, twice their size.

    Raises
    ------
    TrainingError
        At ``where``, with both figures, when twice the files' size exceeds
        :func:`available_memory`.
    """
    size = sum(f.stat().st_size for f in files if f.is_file())
    free = available_memory()
    if free is not None and 2 * size > free:
        msg = (f"reading these weights needs about {2 * size / 2**30:,.1f} GiB (twice the "
               f"{size / 2**30:,.1f} GiB on disk: the tensors read and the model's "
               f"parameters), but this machine has {free / 2**30:,.1f} GiB free")
        raise TrainingError(msg, SourceLoc(str(where)), "free memory, or use a machine "
                            "with more; a smaller model of the family imports the same way")


def import_info(run_dir: str | Path) -> dict[str, Any]:
    """What the run's ``import.json`` holds (where the weights came from; the
    configuration's end, padding and start ids and label names), read as a run's files
    are (a regular file, bounded, strict JSON: damage is an error at it). A run
    imported before it kept the ids reads none."""
    from attngraph.fileio import loads_json, read_text
    from attngraph.train.store.directory import run_file

    path = Path(run_dir) / IMPORT_FILE
    role = run_file(IMPORT_FILE, damaged="this file is damaged: import the model again into "
                    "a new directory (attngraph import SOURCE --out DIR)")
    info = loads_json(read_text(path, role), str(path), role,
                      what=f"this run's {IMPORT_FILE}", float32=False)
    return info if isinstance(info, dict) else {}


def config_id(info: Mapping[str, Any], key: str) -> int | None:
    """An id of the configuration that ``import.json`` keeps (``eos``, ``pad``,
    ``start``), or None where it names none."""
    v = info.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def config_ids(info: Mapping[str, Any], vocab: int) -> tuple[int | None, int | None, int | None]:
    """The end, padding and decoder start ids of ``import.json`` that lie in a
    vocabulary of ``vocab``: an id outside it (GPT-2's end id in a small vocabulary) is
    one the model never reads or emits, so none."""
    eos, pad, start = (config_id(info, k) for k in ("eos", "pad", "start"))
    return tuple(v if v is not None and 0 <= v < vocab else None  # type: ignore[return-value]
                 for v in (eos, pad, start))
