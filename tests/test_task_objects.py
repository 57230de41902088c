"""Tests of the ``digit_rows`` task (multiple object recognition): the labels are the
row's digits from left to right, ``digit_tile`` says where each one is, the
``digit_attention`` metric reads it, and bad options are one error."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.tasks.images import _digits  # noqa: E402
from attngraph.train.tasks.lookup import TASKS, compute_metrics, get_task  # noqa: E402


def test_digit_rows_stand_for_multiple_object_recognition() -> None:
    """``attngraph catalog`` lists the task under its area."""
    assert TASKS["digit_rows"].area == "multiple object recognition"


def test_each_label_is_the_digit_in_its_tile_left_to_right() -> None:
    """Tiles are distinct and rise; tile t holds a shipped digit of class target[t];
    the other tiles are blank."""
    b = get_task("digit_rows", seed=3, cols=5, count=3).batch(64)
    img, tgt, tile = b["image"], b["target"], b["digit_tile"]
    assert img.shape == (64, 1, 8, 40) and tgt.shape == tile.shape == (64, 3)
    assert bool((tile[:, 1:] > tile[:, :-1]).all())
    imgs, labels = (torch.from_numpy(a) for a in _digits())
    for i in range(64):
        for t in range(3):
            x = 8 * int(tile[i, t])
            same = (imgs - img[i, 0, :, x:x + 8]).abs().flatten(1).amax(-1) < 1e-6
            assert bool(same.any()) and int(tgt[i, t]) in labels[same].tolist()
        blank = [c for c in range(5) if c not in tile[i].tolist()]
        assert all(float(img[i, 0, :, 8 * c:8 * c + 8].abs().sum()) == 0 for c in blank)
    assert set(tile.flatten().tolist()) == set(range(5))


def test_digit_attention_reads_the_tile_of_each_step() -> None:
    """Attention on each digit's tile scores 1; on the tile to its right, 0."""
    task = get_task("digit_rows", seed=0, cols=4, count=2)
    b = task.batch(16)
    tile = b["digit_tile"]
    right = torch.nn.functional.one_hot(tile, 5).float()
    assert compute_metrics(task, {"attention": right[..., :4]}, b) == {"digit_attention": 1.0}
    wrong = torch.nn.functional.one_hot(tile + 1, 5).float()[..., :4]
    assert compute_metrics(task, {"attention": wrong}, b) == {"digit_attention": 0.0}


def test_digit_rows_refuse_more_digits_than_columns() -> None:
    """Four digits in three columns is refused with the numbers and a hint."""
    with pytest.raises(TrainingError) as exc:
        get_task("digit_rows", cols=3, count=4)
    assert "count 4, cols 3" in exc.value.message and exc.value.hint
