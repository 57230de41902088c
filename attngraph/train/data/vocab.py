"""Tokenising text, the vocabulary of a run, and label names <-> class ids.

Text is split one of two ways, stated in the run's ``data.json``:

- ``word``: lower-cased, split on whitespace, punctuation marks split off as
  tokens of their own (``"Hello, world!"`` -> ``hello , world !``);
- ``char``: every character a token (spaces included).

A :class:`Vocab` is built from the *training split only*, most frequent token
first (ties alphabetical), capped at the size the spec's input declares. Its
first ids are reserved and agree with :mod:`attngraph.train.tasks.base`:
``0`` is :data:`~attngraph.train.tasks.base.BOS` (a decoder loop's start id),
then ``<pad>``, ``<unk>`` (any token not kept) and ``<eos>`` (ends a target
sequence). A :class:`LabelMap` maps label names to class ids in sorted order
and back. Both are plain data (:meth:`Vocab.to_dict`), saved with the run.

Examples
--------
>>> tokenize("Hello, world!", "word")
['hello', ',', 'world', '!']
>>> v = Vocab.build([tokenize("the cat the dog", "word")], size=7, mode="word")
>>> v.tokens
['<bos>', '<pad>', '<unk>', '<eos>', 'the', 'cat', 'dog']
>>> v.encode(tokenize("the bird", "word"))
[4, 2]
>>> v.decode([4, 6, 3, 5])
'the dog'
>>> Vocab.from_dict(v.to_dict()) == v
True
>>> labels = LabelMap.build(["pos", "neg", "pos"])
>>> labels.names, labels.id("pos"), labels.name(0)
(['neg', 'pos'], 1, 'neg')
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attngraph.errors import TrainingError
from attngraph.train.tasks.base import BOS

__all__ = ["MODES", "RESERVED", "PAD", "UNK", "EOS", "tokenize", "Vocab", "LabelMap"]

#: The ways text is split into tokens.
MODES = ("word", "char")
#: The reserved tokens, at ids 0..3 (``<bos>`` is :data:`attngraph.train.tasks.base.BOS`).
RESERVED = ("<bos>", "<pad>", "<unk>", "<eos>")
PAD = 1
UNK = 2
EOS = 3
assert RESERVED.index("<bos>") == BOS  # noqa: S101 - a constant agreement, not user input
_WORD = re.compile(r"\w+|[^\w\s]", re.UNICODE)
#: A label that sorts as a number: an optional minus and ASCII digits, short enough
#: for int() (which refuses thousands of digits).
_INTEGER = re.compile(r"-?[0-9]{1,100}")


def tokenize(text: str, mode: str) -> list[str]:
    """The tokens of ``text`` split by ``mode`` (``word`` or ``char``).

    Examples
    --------
    >>> tokenize("ab c", "char")
    ['a', 'b', ' ', 'c']
    """
    if mode == "char":
        return list(text)
    if mode == "word":
        return _WORD.findall(text.lower())
    msg = f"unknown tokenisation {mode!r}"
    raise TrainingError(msg, hint=f"use one of: {', '.join(MODES)}")


@dataclass(frozen=True)
class Vocab:
    """Tokens by id: the reserved ones first, then the kept tokens.

    ``dropped`` counts the distinct training tokens that did not fit the size
    (they read as ``<unk>``).
    """

    tokens: list[str]
    mode: str = "word"
    dropped: int = field(default=0, compare=False)

    @classmethod
    def build(cls, texts: Iterable[list[str]], *, size: int, mode: str) -> Vocab:
        """The vocabulary of tokenised ``texts``, at most ``size`` ids in all.

        Raises
        ------
        TrainingError
            When ``size`` leaves no room for a token after the reserved ones.
        """
        if size <= len(RESERVED):
            msg = (f"a vocabulary of {size} ids has no room for words: ids 0-"
                   f"{len(RESERVED) - 1} are reserved ({', '.join(RESERVED)})")
            raise TrainingError(msg, hint="make the spec's vocab larger")
        counts = Counter(t for toks in texts for t in toks if t not in RESERVED)
        ranked = sorted(counts, key=lambda t: (-counts[t], t))
        room = size - len(RESERVED)
        return cls([*RESERVED, *ranked[:room]], mode, max(0, len(ranked) - room))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ids", {t: i for i, t in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens`` (``<unk>`` for a token not kept)."""
        ids: dict[str, int] = self._ids  # type: ignore[attr-defined]
        return [ids.get(t, UNK) for t in tokens]

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids`` up to the first ``<eos>``, reserved ids other than ``<unk>`` left out.

        Words are joined by spaces, characters by nothing.
        """
        out = []
        for i in ids:
            if i == EOS:
                break
            if 0 <= i < len(self.tokens) and (i >= len(RESERVED) or i == UNK):
                out.append(self.tokens[i])
        return ("" if self.mode == "char" else " ").join(out)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``data.json`` holds)."""
        return {"mode": self.mode, "tokens": list(self.tokens)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Vocab:
        """The inverse of :meth:`to_dict` (raises KeyError/TypeError/ValueError if bad)."""
        tokens = list(data["tokens"])
        if tokens[:len(RESERVED)] != list(RESERVED) or data["mode"] not in MODES \
                or not all(isinstance(t, str) for t in tokens):
            msg = "not a vocabulary"
            raise ValueError(msg)
        return cls(tokens, str(data["mode"]))


@dataclass(frozen=True)
class LabelMap:
    """Label names by class id (sorted names; integers sort as numbers)."""

    names: list[str]

    @classmethod
    def build(cls, labels: Iterable[str]) -> LabelMap:
        """The map of the distinct ``labels`` (names as text)."""
        distinct = set(labels)
        # ASCII digits only: str.isdigit accepts '²', and int() refuses it (and '--5')
        numeric = all(_INTEGER.fullmatch(n) for n in distinct)
        return cls(sorted(distinct, key=(lambda n: (int(n), n)) if numeric else None))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ids", {n: i for i, n in enumerate(self.names)})

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._ids  # type: ignore[attr-defined]

    def id(self, name: str) -> int:
        """The class id of ``name`` (KeyError when unknown)."""
        return int(self._ids[name])  # type: ignore[attr-defined]

    def name(self, i: int) -> str:
        """The label name of class ``i``; a class the data never named is ``<class i>``.

        That name never collides with a label: a spec may have more classes than
        the training data named, and labels are often integers written as text
        (``"3"``), so the class's bare number could be another class's label. A
        label that is itself ``<class i>`` pushes the name out to ``<<class i>>``.

        >>> LabelMap(["1", "2", "<class 3>"]).name(3), LabelMap(["1"]).name(0)
        ('<<class 3>>', '1')
        """
        if 0 <= i < len(self.names):
            return self.names[i]
        name = f"<class {i}>"
        while name in self:
            name = f"<{name}>"
        return name

    def names_for(self, classes: int) -> list[str]:
        """The names of classes ``0 .. classes-1``, each distinct (see :meth:`name`).

        >>> LabelMap(["1", "2", "3"]).names_for(4)
        ['1', '2', '3', '<class 3>']
        """
        return [self.name(i) for i in range(classes)]

    def to_dict(self) -> dict[str, Any]:
        """Plain data (what ``data.json`` holds)."""
        return {"names": list(self.names)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LabelMap:
        """The inverse of :meth:`to_dict`."""
        names = list(data["names"])
        if not all(isinstance(n, str) for n in names):
            msg = "not a label map"
            raise ValueError(msg)
        return cls(names)
