"""How a run turns records into arrays: fields, vocabularies, label names.

An :class:`Encoding` binds a spec's declared inputs to the columns of the
user's records (:mod:`attngraph.train.data.records`) and holds what was learnt from the
training split: one :class:`~attngraph.train.data.vocab.Vocab` per text input and
the :class:`~attngraph.train.data.vocab.LabelMap` of the class labels. It is plain
data (:meth:`Encoding.to_dict`), saved as the run's ``data.json``, so a
reloaded run reads new records exactly as training did.

Two kinds of run:

- ``classify``: the spec's ``logits`` are one class per example; the ``label``
  column (``--field label=COLUMN``) holds class names.
- ``seq2seq``: the spec has a per-item ``labels`` input (a decoder's target,
  as in ``bahdanau_translation``); its column holds target text, which is
  both the teacher-forcing input and what ``logits`` learn, ending in ``<eos>``.

Inputs read the column of their own name; when that is missing and one column
is left over, that one (``{"text": ..., "label": ...}`` feeds a ``tokens``
input). ``--field INPUT=COLUMN`` overrides. By type: ``tokens`` and per-item
``labels`` take text (or a list of tokens); ``image`` an image file (relative
to the data file's folder), of the spec's exact size; ``vector`` a list of
numbers (in CSV, a cell of numbers separated by spaces); ``vectors`` a list
of such lists.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError, did_you_mean
from attngraph.fileio import FLOAT32_MAX, read_image
from attngraph.train.data.records import Record, columns_of, data_error, value_loc
from attngraph.train.data.vocab import EOS, MODES, PAD, RESERVED, UNK, LabelMap, Vocab, tokenize

if TYPE_CHECKING:
    import numpy as np

    from attngraph.ir.graph import Graph, Node

__all__ = ["LABEL", "Encoding", "label_text", "make_encoding"]

#: The ``--field`` key of the class-label column (classify runs).
LABEL = "label"
_SUPPORTED = ("tokens", "labels", "image", "vector", "vectors")


@dataclass(frozen=True)
class Encoding:
    """Columns, vocabularies and labels of a run (see the module docstring)."""

    kind: str
    fields: dict[str, str]
    types: dict[str, str]
    label: str | None = None
    mode: str = "word"
    vocabs: dict[str, Vocab] = field(default_factory=dict)
    labels: LabelMap | None = None

    @property
    def seq_target(self) -> str | None:
        """The per-item labels input a seq2seq run learns (None when classifying)."""
        return next((i for i, t in self.types.items() if t == "labels"), None) \
            if self.kind == "seq2seq" else None

    @property
    def pad_id(self) -> int:
        """The id padding token inputs read."""
        return PAD

    @property
    def reads(self) -> str:
        """How text is read, in words (for the model card)."""
        return f"text split into {'words' if self.mode == 'word' else 'characters'}"

    @property
    def kept(self) -> str:
        """Where the run keeps this encoding, in words (for the model card)."""
        return "vocabularies and labels: `data.json`"

    def to_dict(self) -> dict[str, Any]:
        """Plain data: what ``data.json`` holds."""
        return {"format": 1, "kind": self.kind, "fields": dict(self.fields),
                "types": dict(self.types), "label": self.label, "tokenize": self.mode,
                "vocabs": {k: v.to_dict() for k, v in self.vocabs.items()},
                "labels": self.labels.to_dict() if self.labels is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str | Path) -> Encoding:
        """The inverse of :meth:`to_dict`; a damaged file is an error naming ``where``."""
        try:
            if data.get("format") != 1 or data["kind"] not in ("classify", "seq2seq"):
                raise ValueError
            labels = data.get("labels")
            return cls(kind=data["kind"], fields=dict(data["fields"]),
                       types=dict(data["types"]), label=data.get("label"),
                       mode=data["tokenize"],
                       vocabs={k: Vocab.from_dict(v) for k, v in data["vocabs"].items()},
                       labels=LabelMap.from_dict(labels) if labels is not None else None)
        except (KeyError, TypeError, ValueError, AttributeError):
            msg = "this run's data file (vocabularies and labels) is damaged"
            raise data_error(msg, where, "train the run again") from None

    def encode(self, graph: Graph, rec: Record, *, need_label: bool = True) -> dict[str, Any]:
        """One record as arrays: each input's, and ``"y"`` (the class id) when it has one.

        Raises
        ------
        TrainingError
            At the record: a missing column, a value of the wrong type, text
            with no token, an image of the wrong size, an unknown label.
        """
        import numpy as np

        out: dict[str, Any] = {}
        for node in graph.inputs:
            col = self.fields[node.id]
            if col not in rec.values:
                if node.id == self.seq_target and not need_label:
                    continue  # predicting: the target is generated
                raise _missing(rec, col, node.id, list(rec.values))
            out[node.id] = self._value(node, rec, col, rec.values[col])
        if self.kind == "classify" and self.label is not None and self.labels is not None:
            if self.label in rec.values:
                name = label_text(rec, self.label, rec.values[self.label])
                if name not in self.labels:
                    known = ", ".join(self.labels.names[:20])
                    msg = f"label '{name}' is not among the training labels"
                    raise data_error(msg, rec.loc, f"the run knows: {known}")
                out["y"] = np.int64(self.labels.id(name))
            elif need_label:
                raise _missing(rec, self.label, LABEL, list(rec.values))
        return out

    def _value(self, node: Node[Any], rec: Record, col: str, v: Any) -> Any:
        import numpy as np

        typ = self.types[node.id]
        if typ in ("tokens", "labels"):
            toks = _tokens(rec, col, v, self.mode)
            ids = self.vocabs[node.id].encode(toks)
            if typ == "labels":
                ids.append(EOS)
            return np.asarray(ids, dtype=np.int64)
        if typ == "image":
            return _image(node, rec, col, v)
        want = node.types[""].dims
        arr = _numbers(rec, col, v, nested=typ == "vectors")
        d = want[-1]
        if isinstance(d, int) and arr.shape[-1] != d:
            msg = f"column '{col}' has {arr.shape[-1]} numbers, input '{node.id}' takes {d}"
            raise data_error(msg, rec.loc, f"give {d} numbers per vector")
        return arr.astype(np.float32)


def _missing(rec: Record, col: str, key: str, cols: list[str]) -> TrainingError:
    msg = f"this record has no column '{col}' (for {key!r})"
    return data_error(msg, rec.loc, f"{did_you_mean(col, cols)}; map another column with "
                      f"--field {key}=COLUMN (columns: {', '.join(cols)})")


def _kind(rec: Record, col: str, v: Any, want: str) -> TrainingError:
    return data_error(f"column '{col}' holds {type(v).__name__} {v!r:.40}, not {want}",
                      value_loc(rec, col), f"give {want} in column '{col}', or map another "
                      "column with --field INPUT=COLUMN")


def _tokens(rec: Record, col: str, v: Any, mode: str) -> list[str]:
    if isinstance(v, str):
        toks = tokenize(v, mode)
    elif isinstance(v, list) and all(isinstance(t, str) for t in v):
        toks = list(v)
    else:
        raise _kind(rec, col, v, "text")
    if not toks:
        msg = f"column '{col}' holds no {mode} token"
        raise data_error(msg, rec.loc,
                         "give every example some text, or leave the example out")
    return toks


def label_text(rec: Record, col: str, v: Any) -> str:
    """A record's label (column ``col``, value ``v``) as text: a name or an integer."""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (str, int)) and str(v).strip():
        return str(v).strip()
    raise _kind(rec, col, v, "a label (a name or an integer)")


def _numbers(rec: Record, col: str, v: Any, *, nested: bool) -> np.ndarray:
    import numpy as np

    if isinstance(v, str) and not nested:
        try:
            v = [float(x) for x in v.replace(",", " ").split()]
        except ValueError:
            raise _kind(rec, col, v, "numbers separated by spaces") from None
    want = "a list of lists of numbers" if nested else "a list of numbers"
    try:
        arr = np.asarray(v, dtype=np.float64)
    except (ValueError, TypeError, OverflowError):
        raise _kind(rec, col, v, want) from None
    if arr.ndim != (2 if nested else 1) or arr.size == 0 or arr.dtype == object:
        raise _kind(rec, col, v, want)
    # float('nan'), 'inf' and '1e39' parse, and would train to NaN parameters
    bad = ~np.isfinite(arr) | (np.abs(arr) > FLOAT32_MAX)
    if bad.any():
        x = float(arr[np.unravel_index(int(bad.argmax()), arr.shape)])
        what = "is not a finite number" if not np.isfinite(x) else \
            "is too large for float32 (at most ±3.4e38)"
        msg = f"column '{col}' holds {x:g}, which {what}"
        raise data_error(msg, value_loc(rec, col), "write finite numbers of a sensible size "
                         "(scale the data), or leave the example out")
    return arr


def _image(node: Node[Any], rec: Record, col: str, v: Any) -> np.ndarray:
    import numpy as np

    if not isinstance(v, str):
        raise _kind(rec, col, v, "an image file name")
    p = Path(v)
    if not p.is_absolute():
        p = Path(rec.loc.file).parent / p
    c, h, w = (int(d) for d in node.types[""].dims)  # image dims are sizes
    modes = {1: "L", 3: "RGB", 4: "RGBA"}
    if c not in modes:
        msg = f"input '{node.id}' has {c} channels; image files give 1, 3 or 4"
        raise data_error(msg, rec.loc, "declare channels: 1 (grey) or 3 (colour)")

    def size_ok(width: int, height: int) -> None:  # from the header, before decoding
        if (width, height) != (w, h):
            msg = (f"the image {p.name} is {width}×{height}, input '{node.id}' takes "
                   f"{w}×{h}")
            raise data_error(msg, value_loc(rec, col), f"resize the images to {w}×{h} "
                             "(attngraph does not resize), or set the spec's width and height")

    try:
        im = read_image(p, mode=modes[c], size_ok=size_ok)
    except TrainingError as exc:
        if exc.loc.file == str(p) and rec.loc.file != str(p):  # at the record naming it
            raise data_error(exc.message, value_loc(rec, col), exc.hint or "") from None
        raise
    arr = np.asarray(im, dtype=np.float32) / 255.0
    return arr[None] if c == 1 else arr.transpose(2, 0, 1)  # (C, H, W)


def _columns(graph: Graph, records: list[Record], fields: Mapping[str, str],
             kind: str) -> tuple[dict[str, str], str | None]:
    """Input id -> column, and the label column (classify)."""
    cols = columns_of(records)
    first = records[0].loc
    where = SourceLoc(first.file, first.line, first.col, first.text)
    keys = [n.id for n in graph.inputs] + ([LABEL] if kind == "classify" else [])
    for k, c in fields.items():
        if k not in keys:
            msg = f"--field {k}={c}: the spec has no input '{k}'"
            raise TrainingError(msg, SourceLoc(graph.file), f"{did_you_mean(k, keys)} "
                                f"(map: {', '.join(keys)})")
        if c not in cols:
            msg = f"--field {k}={c}: the data has no column '{c}'"
            raise data_error(msg, where, f"{did_you_mean(c, cols)} (columns: {', '.join(cols)})")
    out: dict[str, str] = {}
    label = None
    if kind == "classify":
        label = fields.get(LABEL) or next((c for c in (LABEL, "target", "class", "y")
                                           if c in cols), None)
        if label is None:
            msg = "the data has no 'label' column for the classes"
            raise data_error(msg, where, f"map one: --field label=COLUMN (columns: "
                             f"{', '.join(cols)})")
    for n in graph.inputs:
        out[n.id] = fields.get(n.id) or (n.id if n.id in cols else "")
    taken = set(out.values()) | {label}
    left = [c for c in records[0].values if c not in taken]  # the first record's (a header)
    for k, c in out.items():
        if c:
            continue
        if len(left) == 1 and list(out.values()).count("") == 1:
            out[k] = left[0]
            continue
        msg = f"the data has no column '{k}' for the spec's input '{k}'"
        raise data_error(msg, where, f"map one: --field {k}=COLUMN (columns: {', '.join(cols)})")
    return out, label


def make_encoding(graph: Graph, records: list[Record], *, fields: Mapping[str, str] | None = None,
                  mode: str = "word") -> Encoding:
    """The encoding of ``graph``'s inputs learnt from the training ``records``.

    Parameters
    ----------
    graph : Graph
        The spec (after shape inference).
    records : list of Record
        The training split: vocabularies and labels are built from these only.
    fields : mapping, optional
        ``--field`` overrides: input id (or ``label``) -> column.
    mode : str
        ``word`` or ``char`` tokenisation.

    Raises
    ------
    TrainingError
        An input type files cannot give, an unmapped or unknown column, a
        value of the wrong type, or more labels than the spec's classes.

    Warns
    -----
    UserWarning
        When a vocabulary the spec caps keeps fewer tokens than the training
        split has: how many distinct tokens, and what share of the text, read
        as ``<unk>``. (A cap is a choice; ``auto`` under ``dims`` keeps them all.)
    """
    if mode not in MODES:
        msg = f"unknown tokenisation {mode!r}"
        raise TrainingError(msg, SourceLoc("--tokenize"), f"use one of: {', '.join(MODES)}")
    types = {n.id: str(n.spec.type) for n in graph.inputs}
    for n in graph.inputs:
        if types[n.id] not in _SUPPORTED or (types[n.id] == "labels" and not n.spec.per_item):
            msg = f"input '{n.id}' of type {types[n.id]} cannot be read from a data file"
            raise TrainingError(msg, n.where("type"), "files give tokens, per-item labels, "
                                "image, vector or vectors inputs; train it on a built-in task")
    kind = "seq2seq" if "labels" in types.values() else "classify"
    cols, label = _columns(graph, records, fields or {}, kind)
    vocabs = {}
    for n in graph.inputs:
        if types[n.id] in ("tokens", "labels"):
            col = cols[n.id]
            texts = [_tokens(r, col, r.values[col], mode) if col in r.values
                     else _tokens(r, col, _raise_missing(r, col, n.id), mode) for r in records]
            size = int(n.spec.vocab if types[n.id] == "tokens" else n.spec.classes)
            vocabs[n.id] = Vocab.build(texts, size=size, mode=mode)
            if vocabs[n.id].dropped:
                warnings.warn(_capped(n, vocabs[n.id], texts), stacklevel=2)
    labels = None
    if kind == "classify" and label is not None:
        names = [label_text(r, label, r.values[label]) if label in r.values
                 else _raise_missing(r, label, LABEL) for r in records]
        labels = LabelMap.build(names)
        _check_classes(graph, labels, records[0].loc.file)
    return Encoding(kind, cols, types, label, mode, vocabs, labels)


def _capped(node: Node[Any], vocab: Vocab, texts: list[list[str]]) -> str:
    """What a vocabulary smaller than the training split's tokens leaves out, in words."""
    field = "vocab" if str(node.spec.type) == "tokens" else "classes"
    distinct = len(vocab) - len(RESERVED) + vocab.dropped
    total = sum(len(t) for t in texts)
    unk = sum(vocab.encode(t).count(UNK) for t in texts)
    return (f"{node.where(field)}: input '{node.id}': its {field} of {len(vocab):,} keeps "
            f"{len(vocab) - len(RESERVED):,} of the {distinct:,} distinct tokens of the training "
            f"split; the {vocab.dropped:,} rarest ({unk:,} of its {total:,} tokens, "
            f"{100 * unk / max(total, 1):.1f}%) read as <unk> (to keep them all: a {field} of "
            f"at least {distinct + len(RESERVED):,}, or auto under dims)")


def _raise_missing(rec: Record, col: str, key: str) -> Any:
    raise _missing(rec, col, key, list(rec.values))


def _check_classes(graph: Graph, labels: LabelMap, file: str) -> None:
    """Refuse more labels than the spec's ``logits`` have classes."""
    t = graph.output_types().get("logits")
    classes = t.dims[-1] if t is not None and t.dims else None
    if isinstance(classes, int) and len(labels) > classes:
        msg = (f"the data in {file} has {len(labels)} labels ({', '.join(labels.names[:8])}"
               f"{'...' if len(labels) > 8 else ''}), the spec's logits give {classes} classes")
        named = [k for k, v in graph.dims.items() if v == classes]
        if len(named) == 1:  # the dims entry the logits take their size from
            loc, what = graph.where("dims", named[0]), named[0]
        else:
            loc, what = graph.where("dims", key=True), "the spec's classes"
        raise TrainingError(msg, loc, f"make {what} at least {len(labels)}, or write "
                            f"{what.split()[-1]}: auto under dims to take the data's count")
