"""Training in one's own loop: the data encoded as a run encodes it, and the model saved
as a run.

:func:`dataset` (public as ``attngraph.dataset``) reads a spec's training data as
``attngraph train --data`` does (the same columns, tokenisation, vocabularies and
label ids, and ``auto`` sizes decided by it) into a :class:`TrainingData`, a
``torch.utils.data.Dataset`` whose ``collate`` pads batches. :func:`save` (public
as ``attngraph.save``) writes a model trained on it as a run directory: the
checkpoint (the format ``attngraph train`` writes, read back with its strict
model, :mod:`attngraph.train.store.checkpoint_data`), the spec's text (``spec.yaml``) and the
vocabularies and labels (``data.json``), so ``attngraph.load_run``,
``attngraph evaluate``, ``predict``, ``attend`` and ``export`` take it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.train.data.batches import EncodedDataset, target_key
from attngraph.train.data.records import Record, read_records

if TYPE_CHECKING:
    from torch import Tensor, nn

    from attngraph.ir.graph import Graph
    from attngraph.train.data.encoding import Encoding

__all__ = ["TrainingData", "dataset", "save"]


class TrainingData(EncodedDataset):
    """A spec's data, encoded as a run encodes it (a map-style ``Dataset``).

    ``graph`` is the spec (its ``auto`` sizes decided by this data), ``encoding`` the
    columns, vocabularies and labels, ``target`` the batch field holding the target;
    ``collate`` pads a batch, and :meth:`inputs` gives the model's arguments of one.
    """

    def __init__(self, graph: Graph, enc: Encoding, records: list[Record],
                 source: str | None) -> None:
        super().__init__(graph, enc, records)
        self.graph, self.encoding, self.source = graph, enc, source
        self.target = target_key(enc)

    def inputs(self, batch: Mapping[str, Tensor]) -> dict[str, Tensor]:
        """The model's keyword arguments in ``batch`` (its inputs and their masks)."""
        names = {n.id for n in self.graph.inputs}
        return {k: v for k, v in batch.items()
                if k in names or (k.endswith("_mask") and k[:-5] in names)}


def _records(data: Any) -> tuple[list[Record], str | None]:
    """Records of a path (and the path), or of dicts / a DataFrame (and None)."""
    from attngraph.train.data.inputs import records_of

    if isinstance(data, (str, Path)):
        return read_records(data), str(data)
    name = "<DataFrame>" if hasattr(data, "to_dict") and not isinstance(data, Mapping) \
        else "<records>"
    return [Record(dict(r), SourceLoc(name, i, 1)) for i, r in
            enumerate(records_of(data, name), 1)], None


def _graph(spec: str | Path | Graph) -> Graph:
    from attngraph.frontend import load_spec, loads_spec
    from attngraph.ir.graph import Graph
    from attngraph.train.data.inputs import is_path

    if isinstance(spec, Graph):
        return spec
    return load_spec(spec) if is_path(spec) else loads_spec(str(spec))


def dataset(spec: str | Path | Graph, data: Any, *, fields: Mapping[str, str] | None = None,
            tokenize: str = "word") -> TrainingData:
    """``data`` encoded for ``spec`` as ``attngraph train --data`` encodes its training split.

    Parameters
    ----------
    spec : str, Path or Graph
        A spec file, YAML text or graph. ``auto`` sizes under ``dims`` are decided
        by ``data`` (stated on stderr); ``.graph`` is the spec with them.
    data : str, Path, list of dict, or DataFrame
        Labelled examples (every one is used: hold out validation data yourself).
    fields, tokenize :
        As :func:`attngraph.fit` takes them.

    Returns
    -------
    TrainingData
        A ``torch.utils.data.Dataset``: ``DataLoader(ds, batch_size=32, shuffle=True,
        collate_fn=ds.collate)``; ``model(**ds.inputs(batch))``; ``batch[ds.target]``.

    Raises
    ------
    AttnGraphError
        The spec's errors, or data that does not read or fit it.
    """
    from attngraph.frontend import loads_spec
    from attngraph.source import load, loads
    from attngraph.train.data.autosize import auto_dims, sized_graph, statement
    from attngraph.train.data.encoding import make_encoding
    from attngraph.train.data.inputs import fields_of, is_path

    records, source = _records(data)
    given = fields_of(fields)

    def encode(g: Graph) -> Encoding:
        return make_encoding(g, records, fields=given, mode=tokenize)

    if isinstance(spec, (str, Path)):
        doc = load(spec) if is_path(spec) else loads(str(spec))
        if auto_dims(doc):
            graph, chosen = sized_graph(doc, encode)
            sys.stderr.write(statement(chosen, f"the data in {source or 'the records'}") + "\n")
        else:
            graph = loads_spec(doc.text, doc.file)
    else:
        graph = _graph(spec)
    return TrainingData(graph, encode(graph), records, source)


def _model_graph(model: nn.Module, spec: str | Path | Graph | None, data: Any) -> Graph:
    """The spec ``model`` was compiled from: ``spec`` when given (checked against the
    model's own), else the model's, else the training data's."""
    from attngraph.ir.graph import Graph
    from attngraph.train.store.checkpoints import spec_hash

    own = getattr(model, "graph", None)
    own = own if isinstance(own, Graph) else None
    if spec is not None:
        graph = _graph(spec)
        if own is not None and spec_hash(own) != spec_hash(graph):
            msg = f"the model was compiled from another spec ({own.name}, {own.file})"
            raise TrainingError(msg, SourceLoc(graph.file), "give the spec the model was "
                                "compiled from, or leave spec out to take the model's")
        return graph
    if own is not None:
        return own
    if isinstance(data, TrainingData):
        return data.graph
    msg = f"the model ({type(model).__name__}) was not compiled by attngraph"
    raise TrainingError(msg, SourceLoc("<model>"), "compile it with attngraph.compile(SPEC), "
                        "or give spec=")


def _state(model: nn.Module, graph: Graph) -> tuple[dict[str, Any], nn.Module]:
    """The model's parameters (on the CPU), checked to fit ``graph``'s module, and that module."""
    from attngraph.lower import compile as lower

    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    fresh = lower(graph, seed=0)
    try:
        fresh.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "they differ"
        msg = f"the model's parameters do not fit the spec {graph.name}: {first}"
        raise TrainingError(msg, SourceLoc(graph.file), "save the model compiled from this "
                            "spec (attngraph.compile(SPEC))") from None
    return state, fresh


def _config(graph: Graph, enc: Encoding, data: str, *, seed: int, step: int) -> dict[str, Any]:
    """The settings a saved run's checkpoint stores (those a data run stores)."""
    from attngraph.train.engine.step import TrainSettings

    s = TrainSettings.of(graph)
    fields = {**enc.fields, **({"label": enc.label} if enc.label else {})}
    return {"task": "data", "batch": s.batch, "lr": s.lr, "seed": seed, "options": {},
            "eval_every": 1, "eval_size": 256, "checkpoint_every": 1,
            "steps": step if step > 0 else None,
            "data": {"data": data, "valid": None, "valid_fraction": 0.1, "fields": fields,
                     "tokenize": enc.mode, "epochs": None, "patience": 0}}


def save(model: nn.Module, out: str | Path, *, data: Any, spec: str | Path | Graph | None = None,
         fields: Mapping[str, str] | None = None, tokenize: str = "word", seed: int = 0,
         step: int = 0) -> Path:
    """Save a model trained in one's own loop as a run directory.

    Parameters
    ----------
    model : torch.nn.Module
        A model compiled by :func:`attngraph.compile` (of any device), trained.
    out : str or Path
        The run directory to write; it must not hold a run.
    data : TrainingData, str, Path, list of dict, or DataFrame
        What it was trained on: the :func:`dataset` its batches came from (its
        vocabularies and labels are saved), or the data that gives them again.
    spec : str, Path or Graph, optional
        The spec (default: the model's own).
    fields, tokenize :
        How ``data`` reads, when it is not a :class:`TrainingData`.
    seed, step : int
        Stored with the run (the seed the model was compiled with, steps trained).

    Returns
    -------
    Path
        ``out``: ``attngraph.load_run(out)`` reads it back.

    Raises
    ------
    TrainingError
        A model that is not the spec's, data that does not fit it, ``out`` holding a
        run or not writable.
    """
    from attngraph.train.data.inputs import folder_of
    from attngraph.train.store import directory as rundir

    graph = _model_graph(model, spec, data)
    text = graph.text
    if text is None:
        msg = f"the spec '{graph.name}' holds no text (its graph was built in code)"
        raise TrainingError(msg, SourceLoc(graph.file), "compile the model from a spec "
                            "file or YAML text")
    state, fresh = _state(model, graph)
    ds = data if isinstance(data, TrainingData) else dataset(graph, data, fields=fields,
                                                             tokenize=tokenize)
    folder = folder_of(out)
    rundir.check(folder, resume=False, overwrite=False)
    _write_run(folder, graph, text, ds, state, fresh, seed=seed, step=step)
    return folder


def _write_run(folder: Path, graph: Graph, text: str, ds: TrainingData,
               state: dict[str, Any], fresh: nn.Module, *, seed: int, step: int) -> None:
    """Write the run directory's files: the spec's text, the training records (unless
    ``ds`` came from a file), the encoding and the checkpoint; on any failure remove
    what was written."""
    from attngraph.train.data.batches import save_encoding
    from attngraph.train.data.inputs import SPEC_FILE, TRAIN_FILE, Written, data_path
    from attngraph.train.engine.step import TrainSettings, make_optimizer
    from attngraph.train.store import checkpoints as ck

    written = Written()
    try:
        spec_file = written.write(folder / SPEC_FILE, text)
        source = ds.source or data_path([dict(r.values) for r in ds.records],
                                        folder / TRAIN_FILE, written)
        save_encoding(folder, ds.encoding)
        ck.save_checkpoint(folder / ck.CHECKPOINT, ck.Checkpoint(
            step=step, model=state,
            optimizer=make_optimizer(fresh, TrainSettings.of(graph)).state_dict(),
            rng=ck.rng_state(), spec_hash=ck.spec_hash(graph), spec_text=text,
            spec_file=spec_file, config=_config(graph, ds.encoding, source, seed=seed,
                                                step=step)))
    except BaseException:
        written.remove()
        (folder / "data.json").unlink(missing_ok=True)
        raise
