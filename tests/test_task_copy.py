"""Tests of the ``copy_bits`` task (the NTM copy, algorithm learning): the target
repeats the input vectors after the delimiter, ``bit_accuracy`` scores the bits of
the recalled vectors, ``read_follows_write`` compares the read head with the write
head in the NTM's timing, and bad options are one error."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.tasks.base import BOS, IGNORE  # noqa: E402
from attngraph.train.tasks.lookup import TASKS, compute_metrics, get_task  # noqa: E402


def test_copy_bits_stands_for_algorithm_learning() -> None:
    """``attngraph catalog`` lists the task under its area."""
    assert TASKS["copy_bits"].area == "algorithm learning"


def test_the_target_is_the_input_vectors_again_after_the_delimiter() -> None:
    """L vectors (ids 1..2**bits), the delimiter 2**bits + 1, blanks to 2·max + 1 steps;
    the target is the same L vectors in order right after the delimiter, IGNORE
    elsewhere; L takes every value of min_length..max_length."""
    b = get_task("copy_bits", seed=3, bits=3, min_length=2, max_length=5).batch(256)
    seq, tgt = b["seq"], b["target"]
    assert seq.shape == tgt.shape == (256, 11)
    lengths = set()
    for i in range(256):
        n = int((seq[i] == 9).nonzero()[0, 0])  # the delimiter
        lengths.add(n)
        assert int((seq[i] == 9).sum()) == 1
        assert ((seq[i, :n] >= 1) & (seq[i, :n] <= 8)).all() and (seq[i, n + 1:] == BOS).all()
        assert torch.equal(tgt[i, n + 1:2 * n + 1], seq[i, :n])
        assert (tgt[i, :n + 1] == IGNORE).all() and (tgt[i, 2 * n + 1:] == IGNORE).all()
    assert lengths == {2, 3, 4, 5}
    assert len(torch.unique(seq[seq.ne(BOS) & seq.ne(9)])) == 8  # every vector occurs


def test_batches_are_seeded_and_the_test_batch_is_fixed() -> None:
    """The same seed gives the same stream; the test batch differs from the training ones."""
    a, b = get_task("copy_bits", seed=5), get_task("copy_bits", seed=5)
    assert torch.equal(a.batch(8)["seq"], b.batch(8)["seq"])
    assert torch.equal(a.batch(8, split="valid")["seq"], b.batch(8, split="valid")["seq"])
    assert not torch.equal(a.batch(8, split="valid")["seq"], a.batch(8)["seq"])


def _onehot(ids: list[list[int]], classes: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(ids), classes).float()


def test_bit_accuracy_counts_the_bits_of_the_predicted_vectors() -> None:
    """Target vector 0b101 (id 6): predicting 0b100 (id 5) gets 2 of 3 bits; the
    delimiter (not a vector) gets none; the exact vector all 3; unscored steps don't count."""
    task = get_task("copy_bits", bits=3, min_length=1, max_length=1)
    target = torch.tensor([[IGNORE, IGNORE, 6]] * 3)
    pred = [[0, 9, 5], [0, 9, 9], [3, 1, 6]]
    m = compute_metrics(task, {"logits": _onehot(pred, 10)}, {"target": target})
    assert m["bit_accuracy"] == pytest.approx((2 + 0 + 3) / 9, abs=1e-6)
    assert m["token_accuracy"] == pytest.approx(1 / 3, abs=1e-6)


def _follows(write: list[int], read: list[int], target: list[int], slots: int = 6) -> float:
    task = get_task("copy_bits", bits=2, min_length=1, max_length=3)
    out = {"write": _onehot([write], slots), "weights": _onehot([read], slots)}
    got = compute_metrics(task, out, {"target": torch.tensor([target])})["read_follows_write"]
    assert got is not None
    return float(got)


#: L = 2: two vectors, the delimiter at step 2, recalled at steps 3 and 4
_T2 = [IGNORE, IGNORE, IGNORE, 2, 4, IGNORE, IGNORE]


def test_read_follows_write_reads_each_written_slot_the_step_before_its_recall() -> None:
    """Writes at slots 4, 3; the reads at the delimiter and the first recall step (the
    ones the controller gets at recall steps 1 and 2) on 4, 3 score 1; on 4, 5 score 0.5;
    reads on the right slots one step late (at the recall steps themselves) score 0."""
    assert _follows([4, 3, 0, 0, 0, 0, 0], [0, 0, 4, 3, 0, 0, 0], _T2) == pytest.approx(1.0)
    assert _follows([4, 3, 0, 0, 0, 0, 0], [0, 0, 4, 5, 0, 0, 0], _T2) == pytest.approx(0.5)
    assert _follows([4, 3, 0, 0, 0, 0, 0], [0, 0, 0, 4, 3, 0, 0], _T2) == pytest.approx(0.0)


def test_writing_every_vector_into_one_slot_scores_zero() -> None:
    """A model that writes both vectors mostly into slot 1 and reads slot 1 (keeping the
    order elsewhere) does not read in the write order."""
    assert _follows([1, 1, 0, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0, 0], _T2) == 0.0


def test_read_follows_write_needs_both_heads() -> None:
    """Without the write weights (or with other shapes) the metric does not apply."""
    task = get_task("copy_bits", bits=2, min_length=1, max_length=3)
    batch = {"target": torch.tensor([_T2])}
    assert compute_metrics(task, {"weights": _onehot([[0] * 7], 6)}, batch).get(
        "read_follows_write") is None


def test_tokens_are_shown_as_bits() -> None:
    """Vectors as their bits, the delimiter as 'end', blanks as a dot."""
    task = get_task("copy_bits", bits=3)
    assert task.token_names("seq", [6, 1, 9, 0]) == ["101", "000", "end", "·"]


@pytest.mark.parametrize("opts", [{"bits": 0}, {"min_length": 4, "max_length": 3},
                                  {"min_length": 0}])
def test_bad_options_are_one_error(opts: dict[str, int]) -> None:
    """Bits outside 1..8 or lengths out of order are refused, naming the task."""
    with pytest.raises(TrainingError, match="copy_bits"):
        get_task("copy_bits", **opts)
