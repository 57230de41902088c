"""Sizes from the data: the ``dims`` a spec writes as ``auto``, decided when it trains.

A spec may leave a vocabulary or a class count to its training data::

    dims: {vocab: auto, d: 64, classes: auto}

Read alone (``validate``, ``render``, ``compile``) such a spec is an error at the
``auto`` (:mod:`attngraph.spec.validate`). Training on data decides each ``auto``
dims entry from how the spec uses it:

- the ``vocab`` of a ``tokens`` input: that input's vocabulary built from the
  training split, every distinct token kept, plus the four reserved tokens
  (:data:`attngraph.train.data.vocab.RESERVED`);
- the ``classes`` of a per-item ``labels`` input (a decoder's target): its
  vocabulary, the same way;
- the last axis of the ``logits`` output of a classifier: the number of distinct
  labels in the training split.

An entry used several of these ways takes the largest; one used none of them
(``embed: d`` with ``d: auto``) is an error at the entry. The spec is read once
with a distinct stand-in number for each ``auto`` (:data:`STAND_IN`), to find the
inputs and outputs each one feeds, and again with the numbers chosen written in
place of ``auto`` (:func:`substitute`): that text is the run's spec, stored in its
checkpoint, so ``load_run``, ``predict``, ``evaluate`` and ``export`` read the run
as any other. A resumed run takes its sizes from its own ``data.json``.

:func:`attngraph.train.run.sized.sized_spec` is what a training run loads its spec
with (from its data file, or a resumed run's ``data.json``); it states the sizes it
chose on stderr (``attngraph: sizes from the data: vocab = 57 ...``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import AttnGraphError, Diagnostic, SourceLoc, TrainingError
from attngraph.spec.models import AUTO
from attngraph.train.data.vocab import RESERVED

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.source import Document
    from attngraph.train.data.encoding import Encoding

__all__ = ["STAND_IN", "Chosen", "auto_dims", "substitute", "choose", "sized_graph",
           "stored_text", "statement"]

#: The first stand-in number an ``auto`` entry takes while the spec's uses of it are
#: found (each entry its own: ``STAND_IN``, ``STAND_IN + 1``, ...); larger than any
#: vocabulary a data file gives, so a capped vocabulary never takes its place.
STAND_IN = 900_001


@dataclass(frozen=True)
class Chosen:
    """The size chosen for one ``auto`` dims entry, and what it counts (in words)."""

    name: str
    size: int
    why: str

    def __str__(self) -> str:
        return f"{self.name} = {self.size:,} ({self.why})"


def auto_dims(doc: Document) -> dict[str, SourceLoc]:
    """The ``dims`` entries of ``doc`` written ``auto``, with where each value is."""
    dims = doc.data.get("dims") if isinstance(doc.data, dict) else None
    if not isinstance(dims, dict):
        return {}
    return {k: doc.loc(("dims", k)) for k, v in dims.items() if v == AUTO}


def substitute(doc: Document, values: Mapping[str, int]) -> str:
    """``doc``'s text with each ``auto`` dims value named in ``values`` replaced by its
    number, where it is written (the other lines and columns stay where they were)."""
    lines = doc.text.splitlines(keepends=True)
    # right to left on a line, so earlier columns still hold
    for name, loc in sorted(auto_dims(doc).items(), key=lambda e: (e[1].line, -(e[1].col or 0))):
        if name not in values:
            continue
        i, col = loc.line - 1, (loc.col or 1) - 1
        line = lines[i]
        token = next((t for t in (AUTO, f'"{AUTO}"', f"'{AUTO}'") if line.startswith(t, col)),
                     AUTO)
        lines[i] = line[:col] + str(int(values[name])) + line[col + len(token):]
    return "".join(lines)


def _stand_ins(doc: Document) -> dict[str, int]:
    return {name: STAND_IN + i for i, name in enumerate(auto_dims(doc))}


@contextmanager
def _located_in(doc: Document, stand: Mapping[str, int]) -> Iterator[None]:
    """An error found while the spec holds its stand-ins, located in ``doc`` as written
    (its own text and columns, never the stand-in numbers')."""
    try:
        yield
    except AttnGraphError as exc:
        shifts = [(loc.line, loc.col or 0, len(str(stand[k])) - len(AUTO))
                  for k, loc in auto_dims(doc).items()]

        def back(loc: SourceLoc) -> SourceLoc:
            if loc.file != doc.file or loc.line <= 0 or loc.text is None:
                return loc
            col = (loc.col or 0) - sum(d for line, c, d in shifts
                                       if line == loc.line and c < (loc.col or 0))
            return SourceLoc(loc.file, loc.line, max(col, 1), doc.text)

        diags = [Diagnostic(back(d.loc), d.message, d.hint) for d in exc.diagnostics]
        raise type(exc)(diags[0].message, diagnostics=diags) from None


def _with_stand_ins(doc: Document) -> tuple[Graph, dict[str, int]]:
    """The spec read with a stand-in number for each ``auto``, and those numbers."""
    from attngraph.frontend import loads_spec

    stand = _stand_ins(doc)
    with _located_in(doc, stand):
        return loads_spec(substitute(doc, stand), doc.file, allow_large=True), stand


def _uses(graph: Graph, enc: Encoding, number: int) -> list[tuple[int, str]]:
    """(size the data gives, in words) for each place ``graph`` uses the stand-in ``number``."""
    out = []
    for n in graph.inputs:
        typ = str(n.spec.type)
        size = n.spec.vocab if typ == "tokens" else n.spec.classes if typ == "labels" else None
        if size == number and n.id in enc.vocabs:
            v = enc.vocabs[n.id]
            out.append((len(v), f"input '{n.id}': {len(v) - len(RESERVED):,} distinct tokens "
                        f"and {len(RESERVED)} reserved"))
    logits = graph.output_types().get("logits")
    if enc.labels is not None and logits is not None and logits.dims \
            and logits.dims[-1] == number:
        names = enc.labels.names
        shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
        out.append((len(names), f"{len(names):,} labels: {shown}"))
    return out


def choose(doc: Document, graph: Graph, stand: Mapping[str, int],
           enc: Encoding) -> list[Chosen]:
    """The size of each ``auto`` entry of ``doc`` from ``enc`` (learnt from the training
    split), ``graph`` being the spec read with the ``stand`` numbers.

    Raises
    ------
    TrainingError
        At an entry that no vocabulary or label count decides.
    """
    out = []
    for name, loc in auto_dims(doc).items():
        uses = _uses(graph, enc, stand[name])
        if not uses:
            msg = (f"dims '{name}' is auto, but the data decides only vocabularies (the "
                   "vocab of a tokens input, the classes of a per-item labels input) and "
                   "the classes of the logits output; the spec uses it for none of them")
            raise TrainingError(msg, loc, f"write a number for {name}")
        size, why = max(uses)
        out.append(Chosen(name, size, why))
    return out


def statement(chosen: list[Chosen], source: str) -> str:
    """The line a run prints about the sizes it chose."""
    return f"attngraph: sizes from {source}: " + "; ".join(str(c) for c in chosen)


def sized_graph(doc: Document, enc_of: Any) -> tuple[Graph, list[Chosen]]:
    """``doc``'s graph with its ``auto`` entries decided by ``enc_of(stand-in graph)``
    (a function giving the :class:`~attngraph.train.data.encoding.Encoding` of the training
    data for that graph), and what was chosen."""
    from attngraph.frontend import loads_spec

    graph, stand = _with_stand_ins(doc)
    with _located_in(doc, stand):
        enc = enc_of(graph)
    chosen = choose(doc, graph, stand, enc)
    text = substitute(doc, {c.name: c.size for c in chosen})
    return loads_spec(text, doc.file, allow_large=True), chosen


def stored_text(text: str, file: str | Path, graph: Graph) -> str:
    """The spec text a run stores: ``text`` (the spec file's), with each ``auto`` written
    as the number ``graph`` (the run's sized graph) has for it."""
    from attngraph.source import loads

    if AUTO not in text:
        return text
    doc = loads(text, str(file))
    autos = auto_dims(doc)
    if not autos:
        return text
    return substitute(doc, {k: int(graph.dims[k]) for k in autos if k in graph.dims})
