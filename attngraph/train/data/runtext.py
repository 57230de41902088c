"""How an imported run reads and writes text: with the tokenizer ``attngraph import``
copied from the model directory (``transformers``' ``AutoTokenizer``, loaded once), or,
for a run without one, as token ids written out (``"15 7 3"``). :func:`check_ids`
refuses ids the model cannot read: outside its vocabulary, or more of them than its
position tables hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    from attngraph.analysis.sizes import Bound
    from attngraph.ir.graph import Graph
    from attngraph.train.data.records import Record

__all__ = ["RunText", "check_ids", "position_bounds", "text_of", "text_value"]


#: The largest tokenizer file read (a large model's tokenizer.json is tens of MiB).
_MOST = 512 * 2**20
_AGAIN = ("its files are damaged: import the model again into a new directory "
          "(attngraph import SOURCE --out DIR)")
T = TypeVar("T")


class RunText:
    """The text of an imported run's inputs and outputs (see the module docstring)."""

    def __init__(self, run_dir: str | Path, tokenizer: Any | None) -> None:
        self.run_dir = Path(run_dir)
        self.tokenizer = tokenizer

    @classmethod
    def of(cls, run_dir: str | Path) -> RunText:
        """The run's tokenizer (its ``tokenizer/``), else ids.

        Raises
        ------
        TrainingError
            A tokenizer without ``transformers`` installed; at the tokenizer's folder
            or file, one that is not the run's own regular files or does not load.
        """
        from attngraph.train.store.imported import TOKENIZER_DIR

        tok_dir = Path(run_dir) / TOKENIZER_DIR
        if not tok_dir.is_dir():
            return cls(run_dir, None)
        try:
            from transformers import AutoTokenizer
        except ImportError:
            msg = "this run's tokenizer needs the transformers package"
            raise TrainingError(msg, SourceLoc(str(tok_dir)),
                                "pip install 'attngraph[real]', or give ids: \"15 7 3\"") from None
        from attngraph.fileio import Role, check_regular

        role = Role("this run's tokenizer file", _MOST, a="a tokenizer file",
                    dir_hint=_AGAIN, special_hint=_AGAIN, size_hint=_AGAIN, damaged=_AGAIN)
        for f in [tok_dir, *sorted(tok_dir.iterdir())]:  # its own: no link, FIFO or folder
            if f.is_symlink():
                msg = f"this run's tokenizer file {f.name} is a link, not the run's own"
                raise TrainingError(msg, SourceLoc(str(f)), _AGAIN)
            if f != tok_dir:
                check_regular(f, role)  # a folder, FIFO or device: never opened
                if f.stat().st_size > _MOST:
                    msg = f"this run's tokenizer file {f.name} is over {_MOST // 2**20} MiB"
                    raise TrainingError(msg, SourceLoc(str(f)), _AGAIN)
        reader = cls(run_dir, None)
        # transformers' own loader: what it raises on damaged files is the files' fault
        return cls(run_dir, reader._own(lambda: AutoTokenizer.from_pretrained(str(tok_dir)),
                                        SourceLoc(str(tok_dir)), "does not load"))

    def ids(self, text: str, loc: SourceLoc, given: str | None = "--input") -> list[int]:
        """The ids of ``text`` (special tokens included, as the model's tokenizer adds
        them), errors located at ``loc`` (``given``: the option that gave the text, for
        hints; None for a record's).

        Raises
        ------
        TrainingError
            Text that is not ids, in a run without a tokenizer; a text that makes no
            tokens.
        """
        if self.tokenizer is not None:
            tok = self.tokenizer
            ids = self._own(lambda: [int(i) for i in tok(text)["input_ids"]], loc)
            if not ids:
                msg = f"the run's tokenizer makes no tokens of {text[:40]!r}"
                raise TrainingError(msg, loc, f'give some text: {given} "..."' if given
                                    else "give some text")
            return ids
        try:
            ids = [int(w) for w in text.split()]
        except ValueError:
            msg = f"this run has no tokenizer, so its input is token ids, not {text[:40]!r}"
            ask = f'give ids: {given} "15 7 3"' if given else 'write it as ids: "15 7 3"'
            raise TrainingError(msg, loc, f"{ask}; or import from a model directory that "
                                "holds its tokenizer") from None
        if not ids:
            msg = "no token ids given"
            raise TrainingError(msg, loc, f'give ids: {given} "15 7 3"' if given
                                else 'write the text as ids: "15 7 3"')
        return ids

    def cut(self, text: str, ids: list[int], most: int, loc: SourceLoc) -> list[int]:
        """The first ``most`` ids of ``text`` (its ``ids``, when there are more): as the
        model's tokenizer truncates (its special tokens kept: BERT's closing
        ``[SEP]``), else the first ids given."""
        if len(ids) <= most:
            return ids
        tok = self.tokenizer
        if tok is None:
            return ids[:most]
        cut = self._own(lambda: [int(i) for i in tok(text, truncation=True,
                                                     max_length=most)["input_ids"]], loc)
        return cut[:most]

    def shown(self, ids: Sequence[int]) -> list[str]:
        """Each id as a token (the tokenizer's pieces, else the ids)."""
        tok = self.tokenizer
        if tok is None:
            return [str(i) for i in ids]
        return self._own(lambda: [str(t) for t in tok.convert_ids_to_tokens(list(ids))])

    def decode(self, ids: Sequence[int]) -> str:
        """``ids`` as text (special tokens dropped), or the ids written out."""
        tok = self.tokenizer
        if tok is None:
            return " ".join(str(i) for i in ids)
        return self._own(lambda: str(tok.decode(list(ids), skip_special_tokens=True)))

    def _own(self, call: Callable[[], T], loc: SourceLoc | None = None,
             what: str = "fails") -> T:
        """``call()`` of transformers' tokenizer: what it raises (files that do not load,
        or load but do not tokenize: a vocabulary without its unknown token) is an error
        at ``loc`` (default the tokenizer's folder)."""
        from attngraph.train.store.imported import TOKENIZER_DIR

        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - the tokenizer's failure is its files'
            first = (str(exc).strip().splitlines() or [""])[0][:200]
            msg = f"this run's tokenizer {what}: {type(exc).__name__}: {first}"
            raise TrainingError(msg, loc or SourceLoc(str(self.run_dir / TOKENIZER_DIR)),
                                _AGAIN) from None


def position_bounds(graph: Graph) -> tuple[Bound, ...]:
    """The most items each learned position table of the model reads (none: no limit);
    they do not depend on the length, so one measure serves every text."""
    from attngraph.analysis.sizes import measure

    return measure(graph, batch=1, length=1).bounds


def check_ids(graph: Graph, ids: Sequence[int], loc: SourceLoc,
              bounds: tuple[Bound, ...] | None = None, *, vocab: int | None = None) -> None:
    """Refuse ids outside the vocabulary (``vocab``, default the first input's), or more
    tokens than a learned table covers (``bounds``: :func:`position_bounds`, when
    measured already), located at ``loc``."""
    vocab = vocab if vocab is not None else int(graph.inputs[0].spec.vocab)
    bad = next((i for i in ids if not 0 <= i < vocab), None)
    if bad is not None:
        msg = f"token ids must lie in 0 … {vocab - 1}, but the input has {bad}"
        raise TrainingError(msg, loc, "give ids of this model's vocabulary")
    for b in bounds if bounds is not None else position_bounds(graph):
        if len(ids) > b.most:
            msg = (f"the input is {len(ids)} tokens long, but this model reads at most "
                   f"{b.most} (node '{b.node.id}', {b.field} {b.most})")
            raise TrainingError(msg, loc, f"give a shorter text, of at most {b.most} tokens")


def text_of(rec: Record, src: str) -> str:
    """The record's text: its column ``src``, else ``text``, else its one column
    (:func:`text_value`).

    Raises
    ------
    TrainingError
        At the record: none of those columns, or a value that is no text.
    """
    values = rec.values
    for key in (src, "text"):
        if key in values:
            return text_value(rec, key)
    if len(values) != 1:
        cols = ", ".join(map(str, values)) or "none"
        msg = (f"this record has no column '{src}' or 'text' for the model's text "
               f"(columns: {cols})")
        raise TrainingError(msg, rec.loc, f"name the text's column '{src}' or 'text'")
    return text_value(rec, next(iter(values)))


def text_value(rec: Record, col: str) -> str:
    """The text of the record's column ``col``: a string, or a list of ids written out
    (``"15 7 3"``).

    Raises
    ------
    TrainingError
        At the record: a value that is neither.
    """
    v = rec.values[col]
    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return " ".join(str(x) for x in v)  # ids given as a list
    if not isinstance(v, str):
        msg = f"column '{col}' must hold the model's text as a string, not {type(v).__name__}"
        raise TrainingError(msg, rec.loc, "give the text as a string")
    return v
