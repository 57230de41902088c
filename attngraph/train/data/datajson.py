"""A data run's ``data.json``, checked whole when it is read back.

The file holds an :class:`~attngraph.train.data.encoding.Encoding` as plain data
(:meth:`~attngraph.train.data.encoding.Encoding.to_dict`). Read back by ``predict``,
``evaluate``, ``attend`` and ``--resume``, it is checked twice, each problem one
:class:`~attngraph.errors.TrainingError` at the file (at the line of the key
when it can be found) with a hint:

- its structure, declaratively (:class:`DataFile`, pydantic, strict, no extra
  keys): the format, the kind, ``fields`` and ``types`` naming the same inputs,
  a vocabulary (reserved tokens first, no token twice) for every text input, the
  labels of a classifying run (distinct, non-empty names) and its label column;
- its fit to the spec it is used with (:func:`check_fit`): the same inputs of
  the same types, each vocabulary no larger than its input's ``vocab`` (or
  ``classes``), no more labels than the spec's ``logits`` give classes.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from attngraph.errors import SourceLoc, TrainingError
from attngraph.train.data.vocab import RESERVED

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["DataFile", "parse", "check_fit"]

_HINT = ("data.json is written by attngraph train and read as it was written: this one "
         "is damaged or edited; train the run again (--overwrite moves it aside)")
_MISFIT = ("this data.json belongs to another spec, or was edited: train the run again "
           "(--overwrite moves it aside)")
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)
InputType = Literal["tokens", "labels", "image", "vector", "vectors"]
Name = Field(min_length=1)


def _unique(items: list[str], what: str) -> None:
    seen = set()
    for t in items:
        if t in seen:
            msg = f"{what} {t!r:.40} appears twice"
            raise ValueError(msg)
        seen.add(t)


class VocabData(BaseModel):
    """One text input's vocabulary: tokens by id, the reserved ones first."""

    model_config = _STRICT
    mode: Literal["word", "char"]
    tokens: list[str]

    @model_validator(mode="after")
    def _reserved_first(self) -> VocabData:
        if self.tokens[:len(RESERVED)] != list(RESERVED):
            msg = f"a vocabulary starts with the reserved tokens {', '.join(RESERVED)}"
            raise ValueError(msg)
        _unique(self.tokens, "token")
        return self


class LabelsData(BaseModel):
    """The class names by class id."""

    model_config = _STRICT
    names: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _distinct(self) -> LabelsData:
        if any(not n.strip() or n != n.strip() for n in self.names):
            msg = "a label name is non-empty text without surrounding spaces"
            raise ValueError(msg)
        _unique(self.names, "label")
        return self


class DataFile(BaseModel):
    """What ``data.json`` holds (see the module docstring)."""

    model_config = _STRICT
    format: Literal[1]
    kind: Literal["classify", "seq2seq"]
    fields: dict[str, str] = Field(min_length=1)
    types: dict[str, InputType] = Field(min_length=1)
    label: str | None
    tokenize: Literal["word", "char"]
    vocabs: dict[str, VocabData]
    labels: LabelsData | None

    @model_validator(mode="after")
    def _consistent(self) -> DataFile:
        if set(self.fields) != set(self.types):
            msg = (f"fields name the inputs {sorted(self.fields)}, types "
                   f"{sorted(self.types)}: they name the same inputs")
            raise ValueError(msg)
        if any(not c for c in self.fields.values()):
            msg = "every input reads a named column (fields)"
            raise ValueError(msg)
        texts = {k for k, t in self.types.items() if t in ("tokens", "labels")}
        if set(self.vocabs) != texts:
            msg = (f"vocabs cover {sorted(self.vocabs)}, the text inputs are "
                   f"{sorted(texts)}: one vocabulary per text input")
            raise ValueError(msg)
        if any(v.mode != self.tokenize for v in self.vocabs.values()):
            msg = f"every vocabulary's mode is the run's tokenize ({self.tokenize})"
            raise ValueError(msg)
        targets = [k for k, t in self.types.items() if t == "labels"]
        if self.kind == "seq2seq" and (len(targets) != 1 or self.labels is not None):
            msg = "a seq2seq run has one labels input and no class labels"
            raise ValueError(msg)
        if self.kind == "classify" and (targets or self.labels is None or not self.label):
            msg = "a classify run has a label column and labels, and no labels input"
            raise ValueError(msg)
        return self


def _key_loc(text: str, file: str, path: tuple[Any, ...]) -> SourceLoc:
    """Where the last key of ``path`` is written in ``text`` (else the file)."""
    pos, found = 0, False
    for part in path:
        if not isinstance(part, str):
            continue
        m = re.compile(r'"' + re.escape(part) + r'"\s*:').search(text, pos)
        if m is None:
            break
        pos, found = m.start(), True
    if not found:
        return SourceLoc(file)
    start = text.rfind("\n", 0, pos) + 1
    return SourceLoc(file, text.count("\n", 0, pos) + 1, pos - start + 1, text)


def _words(err: ErrorDetails) -> str:
    """One pydantic error in words: where in the file, and what."""
    where = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if not where:  # the whole file: a JSON list, or keys that disagree
        return msg
    if err["type"] == "missing":
        return f"it lacks '{where}'"
    if err["type"] == "extra_forbidden":
        return f"'{where}' is not a data.json key"
    return f"'{where}': {msg}" + (f" (found {err['input']!r:.40})"
                                  if err["type"] not in ("value_error",) else "")


def parse(data: Any, text: str, file: str) -> DataFile:
    """``data`` (read from ``file``, whose text is ``text``) as a :class:`DataFile`.

    Raises
    ------
    TrainingError
        At the first problem's key in the file, naming every problem (up to 4).
    """
    try:
        return DataFile.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        shown = "; ".join(_words(e) for e in errs[:4]) + \
            (f"; and {len(errs) - 4} more" if len(errs) > 4 else "")
        msg = f"this run's data.json is damaged: {shown}"
        raise TrainingError(msg, _key_loc(text, file, tuple(errs[0]["loc"])),
                            _HINT) from None


def check_fit(df: DataFile, graph: Graph, text: str, file: str) -> None:
    """Refuse a ``data.json`` that does not fit ``graph`` (see the module docstring).

    Raises
    ------
    TrainingError
        At the key of ``data.json`` that does not fit, naming the spec's value.
    """
    found = _misfit(df, graph)
    if found is not None:
        msg = f"this run's data.json does not fit spec '{graph.name}': {found[0]}"
        raise TrainingError(msg, _key_loc(text, file, found[1]), _MISFIT)


def _misfit(df: DataFile, graph: Graph) -> tuple[str, tuple[str, ...]] | None:
    """The first way ``df`` does not fit ``graph``, and the key path where it shows."""
    want = {n.id: str(n.spec.type) for n in graph.inputs}
    if set(df.types) != set(want):
        return (f"it reads the inputs {', '.join(sorted(df.types))}, the spec has "
                f"{', '.join(sorted(want))}", ("types",))
    for n in graph.inputs:
        if df.types[n.id] != want[n.id]:
            return (f"input '{n.id}' is {df.types[n.id]} here, {want[n.id]} in the spec",
                    ("types", n.id))
        if n.id in df.vocabs:
            size = _int(n.spec.vocab if want[n.id] == "tokens" else n.spec.classes)
            have = len(df.vocabs[n.id].tokens)
            if size is not None and have > size:
                return (f"the vocabulary of '{n.id}' has {have} tokens, the spec's input "
                        f"takes {size} ids", ("vocabs", n.id))
    if df.labels is not None:
        t = graph.output_types().get("logits")
        classes = t.dims[-1] if t is not None and t.dims else None
        if isinstance(classes, int) and len(df.labels.names) > classes:
            return (f"{len(df.labels.names)} labels, the spec's logits give {classes} "
                    "classes", ("labels",))
    return None


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
