"""Records read by an imported model's own tokenizer: fine-tuning a run of
``attngraph import`` on your data (``attngraph train RUN/spec.yaml --out RUN --resume
--data FILE``).

What the model learns from a record follows from its spec, as what ``attngraph
predict`` gives does (:func:`plan_of`):

- a classifier (a ``logits`` output of one row per example, as BERT's) learns each
  text's ``label``. Labels are the class names of the model's configuration
  (``id2label``, kept in ``import.json``) or class ids. Where the configuration names
  its classes only by its defaults (``LABEL_0``, ``LABEL_1``, ...) or not at all, the
  data's own names become the classes' names (sorted, as a data run sorts them),
  kept with the run's checkpoint (the task's options), so that ``predict``,
  ``evaluate`` and a later resume use them;
- a causal decoder (``logits`` scoring the next token of its own input, as GPT-2's
  and Llama's) learns the language model's objective: every token of the text
  predicts the next, and the text ends in the configuration's end id, so that
  generation learns where to stop;
- an encoder–decoder (its decoder's token input is generated, as T5's) reads the
  text with its encoder and learns the record's ``target``: its decoder reads the
  target shifted right behind the configuration's decoder start id and learns the
  target's ids, closed by the end id (as its tokenizer adds it; added to ids given
  without it).

The text is the column named like the model's text input, else ``text``, else the
record's one column besides its label or target; ``--field INPUT=COLUMN`` (and
``label=COLUMN``) say otherwise. A model's further token inputs (BERT's token types)
read 0. Ids the model cannot read (outside its vocabulary, longer than its position
tables) are an error at the record; with ``--truncate`` a longer text is read by its
first tokens, as the model's tokenizer truncates (a language model's cut text gets no
end id: it goes on). With ``--blocks N`` a language model reads its records as a
corpus: their texts joined, each closed by the end id, and cut into blocks of N
tokens (:func:`blocks_of`), so that no text is too long and none is cut off.
Nothing is written beside the run: the run's ``tokenizer/`` and ``import.json`` are
the encoding, and the label names are in the checkpoint.
"""

from __future__ import annotations

import bisect
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from attngraph.errors import SourceLoc, TrainingError, did_you_mean
from attngraph.train.data.batches import DataTask, EncodedDataset, read_splits
from attngraph.train.data.encoding import LABEL, Encoding, label_text
from attngraph.train.data.records import Record, columns_of, data_error
from attngraph.train.data.runtext import RunText, check_ids, position_bounds, text_value
from attngraph.train.data.vocab import LabelMap
from attngraph.train.store.imported import config_ids, import_info
from attngraph.train.tasks.base import IGNORE

if TYPE_CHECKING:
    from attngraph.analysis.sizes import Bound
    from attngraph.ir.graph import Graph

__all__ = ["Plan", "TokenizedEncoding", "TokenizedTask", "blocks_of", "only_imports",
           "plan_of", "scored_task", "stored_task", "tokenized_task"]

#: The class names a configuration has when nobody named its classes.
_DEFAULT_NAME = re.compile(r"LABEL_(\d+)")
#: Columns a classifier's labels are looked for in, in order (as a data run's).
_LABEL_COLUMNS = (LABEL, "target", "class", "y")


@dataclass(frozen=True)
class Plan:
    """What an imported model learns from a record (see the module docstring).

    ``objective`` is ``classify``, ``lm`` or ``seq2seq``; ``text`` the token input the
    record's text feeds; ``decoder`` the encoder–decoder's decoder input (seq2seq);
    ``classes`` the classifier's number of classes.
    """

    objective: str
    text: str
    decoder: str | None = None
    classes: int | None = None


def plan_of(graph: Graph, where: SourceLoc) -> Plan:
    """The :class:`Plan` of an imported model's spec: what it learns from a text, and
    what ``attngraph predict`` gives for one.

    Raises
    ------
    TrainingError
        At ``where``: an input that is not tokens, no ``logits`` output, or logits
        that neither score classes per example nor the next token.
    """
    from attngraph.lower.decode.decoders import next_token_input

    hint = "attngraph import reads GPT-2, Llama, BERT and T5, which do"
    others = [n for n in graph.inputs if n.spec.type != "tokens"]
    if others:
        msg = (f"input '{others[0].id}' of this model is {others[0].spec.type}: only a "
               "model of token inputs reads a text")
        raise TrainingError(msg, where, hint)
    names = dict(graph.outputs)
    if "logits" not in names or not graph.inputs:
        msg = "this model has no 'logits' output (or no input) that a text gives"
        raise TrainingError(msg, where, hint)
    texts = [n.id for n in graph.inputs]
    made = next_token_input(graph, "logits")
    if made is not None:
        src = next((t for t in texts if t != made), made)
        return Plan("lm", made) if src == made else Plan("seq2seq", src, decoder=made)
    t = graph.output_types()["logits"]
    if t.rank != 1 or t.heads or not isinstance(t.dims[0], int):
        msg = (f"this model's logits are {list(t.dims)} per example: neither one row of "
               "classes nor the next token of its input")
        raise TrainingError(msg, where, hint)
    return Plan("classify", texts[0], classes=int(t.dims[0]))


@dataclass(frozen=True)
class TokenizedEncoding(Encoding):
    """How an imported run reads records (see the module docstring): an
    :class:`~attngraph.train.data.encoding.Encoding` whose text goes through the run's
    tokenizer (:class:`~attngraph.train.data.runtext.RunText`), not a vocabulary learnt
    from the data. ``kind`` is ``classify`` (a class per example) or ``seq2seq`` (a
    target per token, the language model's included); ``reader`` is None for a run
    read back, which encodes nothing."""

    plan: Plan = field(default_factory=lambda: Plan("lm", ""))
    reader: RunText | None = None
    eos: int | None = None
    start: int = 0
    pad: int = 0
    bounds: tuple[Bound, ...] = ()
    mode: str = "tokenizer"
    #: read a text longer than the model's positions by its first tokens (``--truncate``)
    truncate: bool = False
    #: where each record cut to the model's positions is (what :func:`tokenized_task` tells)
    cut: list[SourceLoc] = field(default_factory=list)

    @property
    def most(self) -> int | None:
        """The most tokens the model reads (its smallest position table; None: any)."""
        return min((b.most for b in self.bounds), default=None)

    @property
    def seq_target(self) -> str | None:
        """The input whose length the per-token targets have (None when classifying)."""
        if self.plan.objective == "classify":
            return None
        return self.plan.decoder or self.plan.text

    @property
    def pad_id(self) -> int:
        return self.pad

    @property
    def reads(self) -> str:
        return "text read by the model's own tokenizer" if self.reader is None \
            or self.reader.tokenizer is not None else "text given as the model's token ids"

    @property
    def kept(self) -> str:
        return ("tokenizer: `tokenizer/` and `import.json`; label names: the checkpoint"
                if self.labels is not None else "tokenizer: `tokenizer/` and `import.json`")

    def to_dict(self) -> dict[str, Any]:
        msg = "an imported run's encoding is its tokenizer: it has no data.json"
        raise TypeError(msg)

    def encode(self, graph: Graph, rec: Record, *, need_label: bool = True) -> dict[str, Any]:
        """One record as arrays: each input's ids and ``"y"`` (the class id, or the
        per-token target ids with :data:`IGNORE` where nothing is scored).

        Raises
        ------
        TrainingError
            At the record: a missing column, text that is not text, ids the model
            cannot read, a label that is not the model's.
        """
        plan = self.plan
        ids, cut = self._ids(graph, rec, plan.text)
        out: dict[str, Any] = {}
        if plan.objective == "lm":
            # the end id closes a whole text; a text cut short goes on past its last token
            room = self.most is None or len(ids) < self.most or not self.truncate
            if self.eos is not None and ids[-1] != self.eos and not cut and room:
                ids = self._checked(graph, rec, [*ids, self.eos], plan.text)
            if len(ids) < 2:
                msg = "a text of one token leaves the language model no next token to learn"
                raise data_error(msg, rec.loc, "give texts of two tokens or more")
            out["y"] = np.asarray([*ids[1:], IGNORE], dtype=np.int64)
        elif plan.objective == "seq2seq" and plan.decoder is not None:
            col = self.fields[plan.decoder]
            if col in rec.values or need_label:
                target, cut = self._ids(graph, rec, plan.decoder)
                if self.eos is not None and target[-1] != self.eos and not cut:
                    # the end id closes the target (a tokenizer adds it; ids may not)
                    target = self._checked(graph, rec, [*target, self.eos], plan.decoder)
                out[plan.decoder] = np.asarray([self.start, *target[:-1]], dtype=np.int64)
                out["y"] = np.asarray(target, dtype=np.int64)
        elif self.label is not None and (self.label in rec.values or need_label):
            out["y"] = np.int64(self._class(rec))
        out[plan.text] = np.asarray(ids, dtype=np.int64)
        for node in graph.inputs:  # further token inputs (token types) read 0
            if node.id not in out and node.id != plan.decoder:
                out[node.id] = np.zeros(len(ids), dtype=np.int64)
        return out

    def stream(self, graph: Graph, rec: Record) -> list[int]:
        """A language model's record as ids to join into blocks (:func:`blocks_of`): its
        text closed by the end id, of any length, each id in the vocabulary."""
        plan = self.plan
        col = self.fields[plan.text]
        if col not in rec.values or self.reader is None:
            return self._ids(graph, rec, plan.text)[0]  # its error
        ids = self.reader.ids(text_value(rec, col), rec.loc, given=None)
        if self.eos is not None and ids[-1] != self.eos:
            ids = [*ids, self.eos]
        check_ids(graph, ids, rec.loc, (), vocab=int(graph.node(plan.text).spec.vocab))
        return ids

    def _ids(self, graph: Graph, rec: Record, key: str) -> tuple[list[int], bool]:
        """The ids of the record's text for input ``key``, checked, and whether they
        were cut to the model's positions (:attr:`truncate`)."""
        col = self.fields[key]
        if col not in rec.values:
            cols = ", ".join(map(str, rec.values)) or "none"
            msg = f"this record has no column '{col}' (for the model's input '{key}')"
            raise data_error(msg, rec.loc, f"give every record one (columns: {cols})")
        if self.reader is None:
            msg = "this run was read back without its tokenizer"
            raise TrainingError(msg, rec.loc, "train or predict through the run's directory")
        text = text_value(rec, col)
        ids = self.reader.ids(text, rec.loc, given=None)
        most = self.most
        if self.truncate and most is not None and len(ids) > most:
            self.cut.append(rec.loc)
            return self._checked(graph, rec, self.reader.cut(text, ids, most, rec.loc),
                                 key), True
        return self._checked(graph, rec, ids, key), False

    def _checked(self, graph: Graph, rec: Record, ids: list[int], key: str) -> list[int]:
        check_ids(graph, ids, rec.loc, self.bounds, vocab=int(graph.node(key).spec.vocab))
        return ids

    def _class(self, rec: Record) -> int:
        labels, label = self.labels, self.label
        assert labels is not None and label is not None
        if label not in rec.values:
            cols = ", ".join(map(str, rec.values)) or "none"
            msg = f"this record has no column '{label}' (its class)"
            raise data_error(msg, rec.loc, f"give every record one (columns: {cols})")
        name = label_text(rec, label, rec.values[label])
        if name in labels:
            return labels.id(name)
        # a class id, where no class is named by a number (else the two would mix)
        if _number(name) and int(name) < len(labels) and not any(map(_number, labels.names)):
            return int(name)
        shown = ", ".join(labels.names[:10]) + (", …" if len(labels) > 10 else "")
        msg = f"label '{name}' is not one of the model's classes ({shown})"
        ids = "" if any(map(_number, labels.names)) else f", or a class id 0 … {len(labels) - 1}"
        raise data_error(msg, rec.loc, f"use one of those names{ids}")


class TokenizedTask(DataTask):
    """A :class:`~attngraph.train.data.batches.DataTask` over a run's own tokenizer.

    Its options (kept in the checkpoint) are the class names a classifier learnt
    (``labels``); it writes no ``data.json``.
    """

    enc: TokenizedEncoding

    def __init__(self, enc: TokenizedEncoding, train: EncodedDataset, valid: EncodedDataset,
                 *, seed: int = 0) -> None:
        super().__init__(enc, train, valid, seed=seed)
        if enc.labels is not None:
            self.opts = {"labels": list(enc.labels.names)}
        self.eos = enc.eos if enc.kind == "seq2seq" else None

    def save(self, run_dir: str | Path) -> None:
        """Nothing: the run's tokenizer, ``import.json`` and checkpoint hold the encoding."""

    def token_names(self, field: str, ids: list[int]) -> list[str]:
        own = self.shown.get(field)
        if own is not None and len(own) == len(ids):
            return list(own)
        reader = self.enc.reader
        return reader.shown(ids) if reader is not None else [str(i) for i in ids]


def _number(name: str) -> bool:
    return name.isascii() and name.isdigit()


def blocks_of(graph: Graph, enc: TokenizedEncoding, records: list[Record],
              size: int) -> EncodedDataset:
    """A language model's records joined into one stream of ids (each text closed by the
    end id) and cut into blocks of ``size`` tokens, as a corpus is read (the last block
    may be shorter; one of a single token is dropped). Every token of a block but its
    last learns the next."""
    stream: list[int] = []
    starts: list[int] = []  # where each record's ids start: a block's record, for locations
    for rec in records:
        starts.append(len(stream))
        stream += enc.stream(graph, rec)
    items, located = [], []
    text = enc.plan.text
    for lo in range(0, len(stream), size):
        block = stream[lo:lo + size]
        if len(block) < 2:
            break
        x = np.asarray(block, dtype=np.int64)
        item = {text: x, "y": np.asarray([*block[1:], IGNORE], dtype=np.int64)}
        for node in graph.inputs:  # further token inputs read 0
            item.setdefault(node.id, np.zeros(len(block), dtype=np.int64))
        items.append(item)
        located.append(records[bisect.bisect_right(starts, lo) - 1])
    if not items:
        n = len(stream)
        msg = f"these records make {n} token{'s' if n != 1 else ''}: no block of two to learn"
        raise data_error(msg, records[0].loc, "give more text")
    return EncodedDataset(graph, enc, located, items=items)


def _names(given: Any, classes: int) -> list[str] | None:
    """A configuration's (or a run's) class names when they are one per class."""
    if isinstance(given, list) and len(given) == classes and all(isinstance(n, str)
                                                                 for n in given):
        return list(given)
    return None


def _generic(names: list[str] | None) -> bool:
    """No names, or the configuration's defaults ``LABEL_<i>``: nobody named the classes."""
    return names is None or all((m := _DEFAULT_NAME.fullmatch(n)) is not None
                                and int(m.group(1)) == i for i, n in enumerate(names))


def _class_names(plan: Plan, given: list[str] | None, records: list[Record], col: str,
                 where: SourceLoc) -> LabelMap:
    """The classes' names: the model's (or the run's) names, else the data's own."""
    if not _generic(given) and given is not None:
        return LabelMap(given)
    classes = int(plan.classes or 0)
    own = LabelMap.build(label_text(r, col, r.values[col])
                         for r in records if col in r.values).names
    if len(own) > classes:
        shown = ", ".join(own[:8]) + ("..." if len(own) > 8 else "")
        msg = (f"the data has {len(own)} labels ({shown}), but this classifier has "
               f"{classes} classes")
        raise data_error(msg, where, f"import a model configured with at least "
                         f"{len(own)} labels (num_labels in its config.json)")
    return LabelMap(LabelMap(own).names_for(classes))  # a class the data never named: <class i>


def _columns(graph: Graph, plan: Plan, records: list[Record], fields: Mapping[str, str],
             where: SourceLoc) -> tuple[dict[str, str], str | None]:
    """Input id -> column (the text's, a decoder's target), and the label column."""
    cols = columns_of(records)
    keys = [plan.text, *([plan.decoder] if plan.decoder else []),
            *([LABEL] if plan.objective == "classify" else [])]
    for k, c in fields.items():
        if k not in keys:
            msg = f"--field {k}={c}: this model reads no column as '{k}'"
            raise TrainingError(msg, SourceLoc(f"--field {k}={c}"),
                                f"{did_you_mean(k, keys)} (map: {', '.join(keys)})")
        if c not in cols:
            msg = f"--field {k}={c}: the data has no column '{c}'"
            raise data_error(msg, where, f"{did_you_mean(c, cols)} (columns: {', '.join(cols)})")
    label = None
    if plan.objective == "classify":
        label = fields.get(LABEL) or next((c for c in _LABEL_COLUMNS if c in cols), None)
        if label is None:
            msg = "the data has no 'label' column for the classes"
            raise data_error(msg, where, f"map one: --field label=COLUMN (columns: "
                             f"{', '.join(cols)})")
    out: dict[str, str] = {n.id: "" for n in graph.inputs}
    if plan.decoder is not None:
        out[plan.decoder] = fields.get(plan.decoder) or next(
            (c for c in (plan.decoder, "target") if c in cols), "")
        if not out[plan.decoder]:
            msg = f"the data has no '{plan.decoder}' column for the text the decoder learns"
            raise data_error(msg, where, f"map one: --field {plan.decoder}=COLUMN (columns: "
                             f"{', '.join(cols)})")
    taken = {label, out.get(plan.decoder or "", "")}
    left = [c for c in cols if c not in taken]
    text = fields.get(plan.text) or next((c for c in (plan.text, "text") if c in cols), None)
    if text is None and len(left) == 1:
        text = left[0]
    if text is None:
        msg = f"the data has no column '{plan.text}' or 'text' for the model's text"
        raise data_error(msg, where, f"map one: --field {plan.text}=COLUMN (columns: "
                         f"{', '.join(cols)})")
    out[plan.text] = text
    return out, label


def _encoding(graph: Graph, info: Mapping[str, Any], plan: Plan, reader: RunText | None,
              fields: dict[str, str], label: str | None, labels: LabelMap | None,
              bounds: tuple[Bound, ...], *, truncate: bool = False) -> TokenizedEncoding:
    """The encoding of ``plan``, with the ids of the run's ``import.json`` (``info``)."""
    eos, pad, start = config_ids(info, int(graph.node(plan.decoder or plan.text).spec.vocab))
    kind = "classify" if plan.objective == "classify" else "seq2seq"
    return TokenizedEncoding(kind, fields, {n.id: "tokens" for n in graph.inputs}, label,
                             labels=labels, plan=plan, reader=reader, eos=eos,
                             start=start if start is not None else pad or 0, pad=pad or 0,
                             bounds=bounds, truncate=truncate)


def tokenized_task(graph: Graph, run_dir: str | Path, data: str, *, valid: str | None = None,
                   valid_fraction: float = 0.1, seed: int = 0,
                   fields: dict[str, str] | None = None,
                   labels: Sequence[str] | None = None,
                   truncate: bool = False, blocks: int | None = None) -> TokenizedTask:
    """The task of the records of ``data`` for the imported run ``run_dir``.

    Parameters
    ----------
    graph : Graph
        The run's spec.
    run_dir : str or Path
        A run of ``attngraph import`` (its ``tokenizer/`` and ``import.json``).
    data, valid, valid_fraction, seed :
        As :func:`~attngraph.train.data.batches.data_task` takes them.
    fields : dict, optional
        ``--field`` overrides: the text input, a decoder's input or ``label`` -> column.
    labels : sequence of str, optional
        The class names the run learnt before (a resume's): they win over the
        configuration's.
    truncate : bool
        Read a text longer than the model's positions by its first tokens (as its
        tokenizer truncates) instead of refusing it; a warning says how many were cut.
    blocks : int, optional
        A language model learns its records joined and cut into blocks of this many
        tokens (:func:`blocks_of`), as a corpus is read, rather than one text each.

    Raises
    ------
    TrainingError
        Any problem with the files or their fit to the model, located.
    """
    run_dir = Path(run_dir)
    plan = plan_of(graph, SourceLoc(data))
    train, held = read_splits(data, valid, valid_fraction, seed)
    first = train[0].loc
    where = SourceLoc(first.file, first.line, first.col, first.text)
    cols, label = _columns(graph, plan, train, fields or {}, where)
    info = import_info(run_dir)
    names = None
    if plan.objective == "classify" and label is not None:
        given = _names(list(labels) if labels is not None else info.get("labels"),
                       int(plan.classes or 0))
        names = _class_names(plan, given, train, label, where)
    enc = _encoding(graph, info, plan, RunText.of(run_dir), cols, label, names,
                    position_bounds(graph), truncate=truncate)
    if blocks is not None:
        _check_blocks(plan, blocks, enc.most)
        return TokenizedTask(enc, blocks_of(graph, enc, train, blocks),
                             blocks_of(graph, enc, held, blocks), seed=seed)
    task = TokenizedTask(enc, EncodedDataset(graph, enc, train),
                         EncodedDataset(graph, enc, held), seed=seed)
    if enc.cut:
        first = enc.cut[0]
        warnings.warn(f"{len(enc.cut)} of the {len(train) + len(held)} records read (the "
                      f"first at {first.file}:{first.line}) are longer than the {enc.most} "
                      f"tokens this model reads: their first {enc.most} are read (--truncate)",
                      stacklevel=2)
    return task


def scored_task(graph: Graph, run_dir: str | Path, records: list[Record], *,
                truncate: bool = False) -> TokenizedTask:
    """``records`` for an imported generating model's loss, read as its
    fine-tuning reads them (a causal decoder's text, an encoder–decoder's source and
    ``target``): a task whose validation split is every record, in order.

    Raises
    ------
    TrainingError
        As :func:`tokenized_task`: a record the model cannot read, located.
    """
    run_dir = Path(run_dir)
    first = records[0].loc
    where = SourceLoc(first.file, first.line, first.col, first.text)
    plan = plan_of(graph, where)
    cols, label = _columns(graph, plan, records, {}, where)
    enc = _encoding(graph, import_info(run_dir), plan, RunText.of(run_dir), cols, label,
                    None, position_bounds(graph), truncate=truncate)
    every = EncodedDataset(graph, enc, records)
    return TokenizedTask(enc, every, every)


def _check_blocks(plan: Plan, size: int, most: int | None) -> None:
    """Refuse ``--blocks`` for a model that is no language model, or blocks longer
    than the model reads."""
    if plan.objective != "lm":
        kind = "a classifier" if plan.objective == "classify" else "an encoder-decoder"
        msg = f"--blocks {size} joins a language model's texts, but this model is {kind}"
        raise TrainingError(msg, SourceLoc("--blocks"), "leave out --blocks: each record "
                            "is one example of it")
    if size < 2 or (most is not None and size > most):
        msg = (f"--blocks {size}: a block must hold 2 to {most} tokens (the model reads "
               f"{most})" if most is not None else f"--blocks {size}: a block must hold "
               "2 tokens or more")
        raise TrainingError(msg, SourceLoc("--blocks"), f"give --blocks {most or 2}")


def only_imports(truncate: bool, blocks: int | None = None) -> None:
    """Refuse ``--truncate`` and ``--blocks`` for a run that is not an import: it reads
    its data by the vocabulary it learns, and the resource guard bounds its lengths."""
    for given, flag in ((truncate, "--truncate"), (blocks is not None, "--blocks")):
        if given:
            msg = f"{flag} reads texts by the positions of a model of attngraph import"
            raise TrainingError(msg, SourceLoc(flag), f"leave out {flag}: this run reads "
                                "its data by the vocabulary it learns")


def stored_task(graph: Graph, run_dir: str | Path, config: Mapping[str, Any]) -> TokenizedTask:
    """The task of an imported run fine-tuned on records, read back (``load_run``): its
    plan and class names, no records and no tokenizer."""
    run_dir = Path(run_dir)
    plan = plan_of(graph, SourceLoc(str(run_dir)))
    stored = config.get("options", {}).get("labels")
    names = _names(stored, int(plan.classes or 0)) if plan.objective == "classify" else None
    enc = _encoding(graph, import_info(run_dir), plan, None, {}, LABEL if names else None,
                    LabelMap(names) if names else None, ())
    empty = EncodedDataset(graph, enc, [])
    return TokenizedTask(enc, empty, empty, seed=int(config.get("seed", 0)))
