"""Tokenising, vocabularies and label maps: reserved ids, the size cap, round trips."""

from __future__ import annotations

import json

import pytest

from attngraph.errors import TrainingError
from attngraph.train.data.vocab import EOS, PAD, RESERVED, UNK, LabelMap, Vocab, tokenize
from attngraph.train.tasks.base import BOS


def test_word_and_char_tokenisation() -> None:
    """Words are lower-cased with punctuation split off; characters keep everything."""
    assert tokenize("Don't STOP, now!", "word") == ["don", "'", "t", "stop", ",", "now", "!"]
    assert tokenize("Ab c", "char") == ["A", "b", " ", "c"]
    with pytest.raises(TrainingError, match="unknown tokenisation"):
        tokenize("x", "bpe")


def test_reserved_ids_agree_with_the_decoders_start_id() -> None:
    """Id 0 is BOS (a loop's feed.start), then pad, unk, eos; words follow by frequency."""
    assert RESERVED.index("<bos>") == BOS == 0
    assert (PAD, UNK, EOS) == (1, 2, 3)
    v = Vocab.build([["b", "a", "b"], ["c", "a", "b"]], size=10, mode="word")
    assert v.tokens == [*RESERVED, "b", "a", "c"]  # b thrice, a twice, c once
    assert v.encode(["a", "zzz"]) == [5, UNK]


def test_the_vocabulary_is_capped_at_the_spec_size() -> None:
    """A vocabulary never exceeds its size: the rarest tokens are dropped (read as unk)."""
    v = Vocab.build([list("aaabbc")], size=6, mode="char")
    assert len(v) == 6 and v.tokens[4:] == ["a", "b"] and v.dropped == 1
    assert v.encode(["c"]) == [UNK]
    with pytest.raises(TrainingError, match="no room for words"):
        Vocab.build([["a"]], size=4, mode="word")


def test_vocab_round_trips_through_json() -> None:
    """to_dict -> JSON -> from_dict gives the same vocabulary; decode stops at eos."""
    v = Vocab.build([tokenize("the cat sat on the mat", "word")], size=20, mode="word")
    back = Vocab.from_dict(json.loads(json.dumps(v.to_dict())))
    assert back == v and back.encode(["cat"]) == v.encode(["cat"])
    ids = v.encode(tokenize("the cat sat", "word"))
    assert v.decode([BOS, *ids, EOS, *v.encode(["mat"])]) == "the cat sat"
    c = Vocab.build([list("ab")], size=8, mode="char")
    assert c.decode(c.encode(list("ba"))) == "ba"
    with pytest.raises(ValueError):
        Vocab.from_dict({"mode": "word", "tokens": ["x", *RESERVED]})


def test_label_map_orders_names_and_maps_back() -> None:
    """Labels sort by name (numerically when all are integers) and map to ids and back."""
    m = LabelMap.build(["10", "9", "2", "9"])
    assert m.names == ["2", "9", "10"]
    assert [m.id(n) for n in m.names] == [0, 1, 2]
    assert m.name(2) == "10" and m.name(7) == "<class 7>"  # never a label's name
    assert LabelMap.from_dict(json.loads(json.dumps(m.to_dict()))) == m
