"""The graph a run trains: its spec, with the ``auto`` sizes decided by the run's data.

The data side (stand-ins, the choice, the substituted text) is
:mod:`attngraph.train.data.autosize`; this module reads the run's settings (its data
file and split, or a resumed run's ``data.json``) and says what it chose.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from attngraph.errors import TrainingError
from attngraph.train.data.autosize import auto_dims, sized_graph, statement

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.data.encoding import Encoding
    from attngraph.train.data.records import Record
    from attngraph.train.run.config import RunConfig

__all__ = ["sized_spec"]


def _training_encoding(graph: Graph, config: RunConfig) -> Encoding:
    """The encoding a fresh run of ``config`` learns from its training split."""
    from attngraph.train.data.batches import split_records
    from attngraph.train.data.encoding import make_encoding
    from attngraph.train.data.records import read_records

    data = str(config.data)
    records: list[Record] = read_records(data)
    if config.valid is None:
        records, _ = split_records(records, config.valid_fraction, config.seed, data)
    return make_encoding(graph, records, fields=dict(config.fields), mode=config.tokenize)


def sized_spec(config: RunConfig, stream: TextIO | None = None) -> Graph:
    """The graph a run of ``config`` trains: ``config.spec`` as it is, or with its
    ``auto`` sizes decided by the training data (a resumed run: by its ``data.json``),
    stated on ``stream`` (default stderr).

    Raises
    ------
    AttnGraphError
        The spec's own errors; an ``auto`` entry without data to decide it (a built-in
        task), or that the data does not decide.
    """
    from attngraph.frontend import load_spec
    from attngraph.source import load

    doc = load(config.spec)
    autos = auto_dims(doc)
    if not autos:
        return load_spec(config.spec, allow_large=True)
    if config.resume:
        from attngraph.train.data.batches import load_encoding

        name = doc.data.get("name") if isinstance(doc.data, dict) else None
        out = Path(config.out or Path("runs") / str(name))
        graph, chosen = sized_graph(doc, lambda _g: load_encoding(out))
        source = f"the run's {out / 'data.json'}"
    elif config.data is None:
        name, loc = next(iter(autos.items()))
        msg = f"dims '{name}' is auto: only training on data decides it, and this run " \
            "trains on a built-in task"
        raise TrainingError(msg, loc, f"train it with --data FILE, or write a number for "
                            f"{name}")
    else:
        graph, chosen = sized_graph(doc, lambda g: _training_encoding(g, config))
        source = f"the data in {config.data}"
    (stream or sys.stderr).write(statement(chosen, source) + "\n")
    return graph
