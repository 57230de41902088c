"""``metrics.csv``: a run's metrics log as a table, beside ``metrics.jsonl``.

One row per line of the JSON log, in its order, under one header fixed when the
run starts: ``step``, ``split`` (``train`` or ``valid``), ``loss``, then the
task's metrics in the task's order (a figure a line lacks is an empty cell).
Rows are written with :mod:`csv` and appended as the JSON log is (one ``write``
per step, :class:`attngraph.train.store.directory.Log`); on ``--resume`` the file is
written again whole from the JSON log's kept lines (a line of an earlier version,
``"split": "test"``, becomes a ``valid`` row), so both always hold the same steps.
pandas reads it as it is: ``pandas.read_csv("runs/ga/metrics.csv")``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attngraph.fileio import lines
from attngraph.train.store import directory as rundir

__all__ = ["CSV_FILE", "columns", "rows", "CsvLog"]

#: File name of the table inside a run's output directory.
CSV_FILE = rundir.CSV_FILE
_FIXED = ("step", "split", "loss")


def columns(metrics: Sequence[str], extra: Iterable[str] = ()) -> list[str]:
    """The header: step, split, loss, the task's ``metrics``, then ``extra`` keys.

    >>> columns(["accuracy", "attention_peak"])
    ['step', 'split', 'loss', 'accuracy', 'attention_peak']
    """
    head = list(_FIXED) + [m for m in metrics if m not in _FIXED]
    return head + sorted({k for k in extra if k not in head})


def rows(records: Iterable[Mapping[str, Any]], head: Sequence[str], *,
         header: bool = False) -> str:
    """``records`` (log lines as dicts) as CSV text under ``head`` (with it first when
    ``header``); the old split name ``test`` is written ``valid``.

    >>> print(rows([{"step": 1, "split": "test", "accuracy": 0.5}],
    ...            ["step", "split", "loss", "accuracy"], header=True), end="")
    step,split,loss,accuracy
    1,valid,,0.5
    """
    buf = io.StringIO()
    out = csv.DictWriter(buf, fieldnames=list(head), lineterminator="\n",
                         extrasaction="ignore")
    if header:
        out.writeheader()
    for rec in records:
        split = rec.get("split")
        out.writerow({**rec, "split": "valid" if split == "test" else split})
    return buf.getvalue()


class CsvLog:
    """``metrics.csv`` of a run, opened for appending after its header (and on resume,
    the rows of the JSON log's kept lines ``kept``) is written whole."""

    def __init__(self, path: Path, metrics: Sequence[str], kept: str = "") -> None:
        records = [json.loads(ln) for ln in lines(kept) if ln.strip()]
        self.head = columns(metrics, (k for r in records for k in r))
        rundir.atomic_write(path, rows(records, self.head, header=True).encode("utf-8"))
        self.log = rundir.Log(path)

    def write(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Append one row per record (one ``write``)."""
        self.log.write(rows(records, self.head))

    def close(self) -> None:
        """Close the file."""
        self.log.close()
