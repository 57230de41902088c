"""Data for the training loop through :mod:`torch.utils.data`: files and built-in tasks.

Every batch the loop trains on comes from a :class:`torch.utils.data.DataLoader`
(:func:`train_stream`):

- a built-in task is a :class:`TaskStream`, an ``IterableDataset`` of its seeded
  batches (the same batches, in the same order, as ``task.batch(size)``);
- the user's data is an :class:`EncodedDataset` of encoded records
  (:mod:`attngraph.train.data.encoding`), shuffled per epoch by a permutation seeded
  from the run's seed and the epoch, and padded by :func:`collate`.

:class:`DataTask` is the :class:`~attngraph.train.tasks.base.Task` of a user's
data: it names the batch fields (the spec's input ids), the target (class ids,
or target ids padded with :data:`~attngraph.train.tasks.base.IGNORE`) and the
metrics, and gives validation batches from the validation split, so the step, the
evaluation, the checkpoints and ``attend`` work on it unchanged. Padded token
inputs come with ``<input>_mask`` (True = a real token), as compiled models take.

This module imports torch: only the training and run commands import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import loads_json, read_text
from attngraph.train.data import datajson
from attngraph.train.data.encoding import Encoding, make_encoding
from attngraph.train.data.records import data_error, read_records
from attngraph.train.data.vocab import EOS
from attngraph.train.store.directory import atomic_write, run_file
from attngraph.train.tasks.base import IGNORE, Task, split_name

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.ir.graph import Graph
    from attngraph.train.data.records import Record

__all__ = ["EncodedDataset", "DataTask", "TaskStream", "collate", "train_stream",
           "steps_per_epoch", "target_key", "split_records", "read_splits", "data_task",
           "DATA_FILE",
           "save_encoding", "load_encoding"]


class EncodedDataset(Dataset[dict[str, Any]]):
    """The encoded records of one file (a map-style ``torch.utils.data.Dataset``).

    Records are encoded when it is made, so a bad record fails before training (or
    ``items`` are given, encoded already: an import's texts cut into blocks).
    ``lengths`` gives, per variable-length field, the longest in the file: every
    batch pads to it, so outputs of any two batches line up.
    """

    def __init__(self, graph: Graph, enc: Encoding, records: list[Record], *,
                 need_label: bool = True,
                 items: list[dict[str, Any]] | None = None) -> None:
        self.records = records
        self.items = items if items is not None else \
            [enc.encode(graph, r, need_label=need_label) for r in records]
        self.lengths = {k: max(int(x[k].shape[0]) for x in self.items if k in x)
                        for k, t in enc.types.items()
                        if t in ("tokens", "labels", "vectors") and any(k in x for x in self.items)}
        self.enc = enc

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.items[i]

    def collate(self, items: Sequence[dict[str, Any]]) -> dict[str, Tensor]:
        """A batch of ``items``, padded to this file's lengths."""
        return collate(items, self.enc, self.lengths)


def collate(items: Sequence[dict[str, Any]], enc: Encoding,
            lengths: dict[str, int]) -> dict[str, Tensor]:
    """Stack encoded examples into a batch; pad token inputs (with masks) and targets.

    Token and per-item labels inputs pad with ``<pad>``; ``<input>_mask`` is
    True at real tokens. The target is ``"target"`` (``"target_out"`` when an
    input is named ``target``): class ids, or a seq2seq target's ids padded
    with IGNORE so padding is not scored.
    """
    batch: dict[str, Tensor] = {}
    for k, typ in enc.types.items():
        if not any(k in x for x in items):
            continue
        rows = [x[k] for x in items]
        if k in lengths:
            n = lengths[k]
            shape = (len(rows), n, *rows[0].shape[1:])
            fill = enc.pad_id if typ in ("tokens", "labels") else 0
            arr = np.full(shape, fill, dtype=rows[0].dtype)
            mask = np.zeros((len(rows), n), dtype=bool)
            for i, r in enumerate(rows):
                arr[i, :len(r)] = r
                mask[i, :len(r)] = True
            batch[k] = torch.from_numpy(arr)
            if typ == "labels":
                batch[target_key(enc)] = torch.from_numpy(np.where(mask, arr, IGNORE))
            else:
                batch[f"{k}_mask"] = torch.from_numpy(mask)
        else:
            batch[k] = torch.from_numpy(np.stack(rows))
    if all("y" in x for x in items) and items:
        ys = [x["y"] for x in items]
        if enc.kind == "classify":
            batch[target_key(enc)] = torch.from_numpy(np.array(ys))
        elif enc.seq_target is not None:  # a target per token, padded as its input is
            arr = np.full((len(ys), lengths[enc.seq_target]), IGNORE, dtype=np.int64)
            for i, y in enumerate(ys):
                arr[i, :len(y)] = y
            batch[target_key(enc)] = torch.from_numpy(arr)
    return batch


def target_key(enc: Encoding) -> str:
    """The batch field holding the target."""
    return "target_out" if "target" in enc.types else "target"


class DataTask(Task):
    """The user's data as a task: batches of a training and a validation :class:`EncodedDataset`.

    Parameters
    ----------
    enc : Encoding
        How records were encoded.
    train, valid : EncodedDataset
        The splits; ``batch(size, split="valid")`` is the first ``size`` examples
        of ``valid``, :meth:`valid_batches` all of it.
    seed : int
        Seeds the shuffling (:func:`train_stream`).
    """

    name = "data"

    def __init__(self, enc: Encoding, train: EncodedDataset, valid: EncodedDataset, *,
                 seed: int = 0) -> None:
        super().__init__(seed=seed)
        self.enc, self.train, self.valid = enc, train, valid
        self.provides = dict(enc.types)  # type: ignore[misc]
        self.target = target_key(enc)  # type: ignore[misc]
        self.metrics = (("token_accuracy", "sequence_accuracy") if enc.kind == "seq2seq"  # type: ignore[misc]
                        else ("accuracy",))
        self._stream: Iterator[dict[str, Tensor]] | None = None
        #: the id that ends a generated target (a seq2seq run), for pictures
        self.eos = EOS if enc.kind == "seq2seq" else None
        #: field -> the words of a user's own example, shown instead of ``<unk>``
        self.shown: dict[str, list[str]] = {}

    def batch(self, size: int, *, split: str = "train") -> dict[str, Tensor]:
        """The next training batch, or the first ``size`` validation examples
        (``split="valid"``, or its old name ``"test"``)."""
        name = split_name(split)
        if name is None:
            self.fail(f"split must be 'train' or 'valid', not {split!r}")
        if name == "valid":
            ds = self.valid
            return ds.collate([ds[i] for i in range(min(size, len(ds)))])
        if self._stream is None:
            self._stream = train_stream(self, size, self.seed)
        return next(self._stream)

    def valid_batches(self, size: int) -> Iterator[dict[str, Tensor]]:
        """The whole validation split in batches of ``size`` (padded alike)."""
        ds = self.valid
        for lo in range(0, len(ds), size):
            yield ds.collate([ds[i] for i in range(lo, min(lo + size, len(ds)))])

    def save(self, run_dir: str | Path) -> None:
        """Keep the encoding with the run (its ``data.json``), for reading records later."""
        save_encoding(run_dir, self.enc)

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        """The tokens of ``ids`` in input ``field`` (for pictures): the example's own
        words when :attr:`shown` holds them, else the vocabulary's."""
        own = self.shown.get(field)
        if own is not None and len(own) == len(ids):
            return list(own)
        v = self.enc.vocabs.get(field)
        return [v.tokens[i] if v is not None and 0 <= i < len(v) else str(i) for i in ids]

    def label_name(self, i: int) -> str:
        """The label name of class ``i``."""
        return self.enc.labels.name(i) if self.enc.labels is not None else str(i)

    def __repr__(self) -> str:
        return (f"DataTask({self.enc.kind}, train={len(self.train)}, "
                f"valid={len(self.valid)}, seed={self.seed})")


class TaskStream(IterableDataset[dict[str, Any]]):
    """A built-in task's endless seeded training batches (an ``IterableDataset``)."""

    def __init__(self, task: Task, size: int) -> None:
        self.task, self.size = task, size

    def __iter__(self) -> Iterator[dict[str, Tensor]]:
        return self.task.batches(self.size)


def steps_per_epoch(task: DataTask, batch: int) -> int:
    """Training steps in one pass over the training split (the last batch may be short)."""
    return math.ceil(len(task.train) / batch)


def train_stream(task: Task, batch: int, seed: int, start: int = 0) -> Iterator[dict[str, Tensor]]:
    """The training batches after step ``start``, through a ``DataLoader``.

    A built-in task's stream goes on from its own random state (restored on
    resume). A :class:`DataTask`'s epochs are each a permutation seeded from
    ``(seed, epoch)``, so a resumed run skips to where step ``start`` left off
    and sees the batches a straight run would. Neither draws from torch's
    global random state (the loader gets its own generator).
    """
    gen = torch.Generator().manual_seed(seed)
    if not isinstance(task, DataTask):
        yield from DataLoader(TaskStream(task, batch), batch_size=None, generator=gen)
        return
    per = steps_per_epoch(task, batch)
    epoch, skip = divmod(start, per)
    while True:
        g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
        order = torch.randperm(len(task.train), generator=g).tolist()
        chunks = [order[i:i + batch] for i in range(0, len(order), batch)][skip:]
        yield from DataLoader(task.train, batch_sampler=chunks, collate_fn=task.train.collate,
                              generator=gen)
        epoch, skip = epoch + 1, 0



#: File name of a data run's encoding (vocabularies, labels, fields) in its directory.
DATA_FILE = "data.json"


def split_records(records: list[Record], fraction: float, seed: int,
                  where: str) -> tuple[list[Record], list[Record]]:
    """``(train, valid)``: a seeded ``fraction`` of ``records`` held out for validation.

    Raises
    ------
    TrainingError
        When the fraction is outside (0, 1) or leaves either split empty.
    """
    if not 0.0 < fraction < 1.0:
        msg = f"--valid-fraction must be between 0 and 1 (exclusive), not {fraction}"
        raise TrainingError(msg, SourceLoc("--valid-fraction"),
                            "e.g. --valid-fraction 0.1, or give --valid PATH")
    n = len(records)
    k = round(n * fraction)
    if k < 1 or k >= n:
        msg = (f"{n} example{'s' if n != 1 else ''}: a validation fraction of {fraction} "
               f"leaves {'no validation' if k < 1 else 'no training'} example")
        raise data_error(msg, where, "give more examples, another --valid-fraction, or a "
                         "validation file with --valid PATH")
    order = np.random.default_rng([seed, 2]).permutation(n)
    held = set(order[:k].tolist())
    return ([r for i, r in enumerate(records) if i not in held],
            [r for i, r in enumerate(records) if i in held])


def read_splits(data: str, valid: str | None, valid_fraction: float,
                seed: int) -> tuple[list[Record], list[Record]]:
    """``(train, valid)``: the records of ``data`` and of ``valid``, or without it a
    seeded ``valid_fraction`` of ``data`` held out (:func:`split_records`)."""
    records = read_records(data)
    if valid is not None:
        return records, read_records(valid)
    return split_records(records, valid_fraction, seed, data)


def data_task(graph: Graph, data: str, *, valid: str | None = None,
              valid_fraction: float = 0.1, seed: int = 0,
              fields: dict[str, str] | None = None, mode: str = "word",
              enc: Encoding | None = None) -> DataTask:
    """The :class:`DataTask` of the file ``data`` for ``graph``.

    Parameters
    ----------
    graph : Graph
        The spec.
    data : str
        The training data (see :func:`attngraph.train.data.records.read_records`).
    valid : str, optional
        Validation data; without it, a seeded ``valid_fraction`` of ``data``.
    seed : int
        Seeds the split and the shuffling.
    fields, mode :
        As :func:`attngraph.train.data.encoding.make_encoding` takes them.
    enc : Encoding, optional
        The encoding to use (a resumed run's); default: learnt from the training split.

    Raises
    ------
    TrainingError
        Any problem with the files or their fit to the spec, located.
    """
    train, held = read_splits(data, valid, valid_fraction, seed)
    if enc is None:
        enc = make_encoding(graph, train, fields=fields, mode=mode)
    return DataTask(enc, EncodedDataset(graph, enc, train), EncodedDataset(graph, enc, held),
                    seed=seed)


def save_encoding(run_dir: str | Path, enc: Encoding) -> Path:
    """Write ``enc`` to ``RUN/data.json`` (atomically)."""
    path = Path(run_dir) / DATA_FILE
    text = json.dumps(enc.to_dict(), indent=1, ensure_ascii=False) + "\n"
    atomic_write(path, text.encode("utf-8"))
    return path


def load_encoding(run_dir: str | Path, graph: Graph | None = None) -> Encoding:
    """The encoding saved in ``RUN/data.json``, checked (against ``graph`` when given).

    Its structure is checked by :class:`attngraph.train.data.datajson.DataFile`, and
    its fit to ``graph`` by :func:`attngraph.train.data.datajson.check_fit`.

    Raises
    ------
    TrainingError
        At the file (at the key when it can be found), when it is missing,
        damaged, or does not fit ``graph``.
    """
    path = Path(run_dir) / DATA_FILE
    if not path.exists() and not path.is_symlink():
        msg = "this run has no data.json (its vocabularies and labels)"
        raise data_error(msg, path, "this run was trained on a built-in task; give "
                         "--data only to runs trained with --data")
    # a regular file, bounded, strict UTF-8, JSON with limits: a FIFO, a 5,000-digit
    # integer or 5,000 nested brackets is one located error, not a hang or a traceback
    role = run_file(DATA_FILE)
    text = read_text(path, role)
    if not text.strip():
        msg = "this run's data.json is empty"
        raise data_error(msg, path, "train the run again")
    data = loads_json(text, str(path), role, what="this run's data.json", float32=False)
    checked = datajson.parse(data, text, str(path))
    if graph is not None:
        datajson.check_fit(checked, graph, text, str(path))
    return Encoding.from_dict(checked.model_dump(), path)
