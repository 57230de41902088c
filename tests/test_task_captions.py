"""Tests of the ``digit_captions`` task (caption generation): the caption names the
canvas's digits in reading order, ``digit_tile`` says where each named digit is, the
``digit_attention`` metric reads the attention against it, and bad options are one
error."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.tasks.captions import EOS  # noqa: E402
from attngraph.train.tasks.images import _digits  # noqa: E402
from attngraph.train.tasks.lookup import TASKS, compute_metrics, get_task  # noqa: E402


def test_digit_captions_stand_for_caption_generation() -> None:
    """``attngraph catalog`` lists the task under its area."""
    assert TASKS["digit_captions"].area == "caption generation"


def test_each_caption_word_names_the_digit_in_its_tile_in_reading_order() -> None:
    """Every caption has 2-3 digits then <eos>; tiles rise (reading order); the tile
    of word t holds a shipped digit of the class the word names, other tiles are blank."""
    b = get_task("digit_captions", seed=4, rows=2, cols=3).batch(64)
    img, tgt, tile = b["image"], b["target"], b["digit_tile"]
    assert img.shape == (64, 1, 16, 24) and tgt.shape == tile.shape == (64, 4)
    imgs, labels = (torch.from_numpy(a) for a in _digits())
    counts = set()
    for i in range(64):
        n = int((tile[i] >= 0).sum())
        counts.add(n)
        assert bool((tgt[i, n:] == EOS).all()) and bool((tile[i, n:] == -1).all())
        assert tile[i, :n].tolist() == sorted(tile[i, :n].tolist())
        used = set()
        for t in range(n):
            y, x = divmod(int(tile[i, t]), 3)
            patch = img[i, 0, 8 * y:8 * y + 8, 8 * x:8 * x + 8]
            same = (imgs - patch).abs().flatten(1).amax(-1) < 1e-6
            assert bool(same.any()) and int(tgt[i, t]) - 1 in labels[same].tolist()
            used.add((y, x))
        for y in range(2):
            for x in range(3):
                if (y, x) not in used:
                    assert float(img[i, 0, 8 * y:8 * y + 8, 8 * x:8 * x + 8].abs().sum()) == 0
    assert counts == {2, 3}


def test_train_and_test_canvases_use_disjoint_source_digits() -> None:
    """No tile of the test split is a digit image the training split draws from."""
    task = get_task("digit_captions", seed=0, rows=1, cols=3, min_digits=3, max_digits=3)
    imgs, _ = _digits()
    test_rows = {imgs[i].tobytes() for i in range(0, len(imgs), 5)}
    for split, want in (("test", True), ("train", False)):
        b = task.batch(16, split=split)
        for i in range(16):
            for x in range(3):
                patch = b["image"][i, 0, :, 8 * x:8 * x + 8].numpy()
                assert (patch.tobytes() in test_rows) is want


def test_digit_attention_scores_only_the_digit_words() -> None:
    """Attention one-hot on each named digit's tile scores 1 whatever <eos> steps do;
    attention always on tile 0 scores the share of digit words whose digit is there."""
    task = get_task("digit_captions", seed=1)
    b = task.batch(32)
    tile = b["digit_tile"]
    att = torch.nn.functional.one_hot(tile.clamp(min=0), 6).float()
    att[tile < 0] = torch.nn.functional.one_hot(torch.tensor(5), 6).float()
    assert compute_metrics(task, {"attention": att}, b) == {"digit_attention": 1.0}
    first = torch.zeros(32, 4, 6)
    first[..., 0] = 1.0
    share = float((tile[tile >= 0] == 0).float().mean())
    got = compute_metrics(task, {"attention": first}, b)["digit_attention"]
    assert abs(got - share) < 1e-6 and got < 1


def test_digit_captions_refuse_more_digits_than_tiles() -> None:
    """Three digits on two tiles is refused with the numbers and a hint."""
    with pytest.raises(TrainingError) as exc:
        get_task("digit_captions", rows=1, cols=2, max_digits=3)
    assert "max_digits 3, 2 tiles" in exc.value.message and exc.value.hint
