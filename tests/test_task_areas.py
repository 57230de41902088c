"""Tests of the tasks that stand for the language modeling, speech recognition and
algorithm learning areas (``repeat_copy``, ``utterances``, ``pointer_sort``): each
task's defining property, its metrics against hand-made outputs, and that every
built-in task names its application area for ``attngraph catalog``."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.tasks.lookup import IGNORE, TASKS, compute_metrics, get_task  # noqa: E402


def test_every_builtin_task_names_its_application_area() -> None:
    """Each built-in task has an area; the new areas are among them."""
    areas = {TASKS[n].area for n in TASKS}
    assert all(TASKS[n].area for n in TASKS), [n for n in TASKS if not TASKS[n].area]
    assert {"language modeling", "speech recognition", "algorithm learning",
            "text translation", "graph modeling", "memory recall"} <= areas


def test_repeat_copy_repeats_the_first_half_and_targets_the_next_token() -> None:
    """The second half equals the first; target[i] = tokens[i+1]; copy_pos points at
    the token each copied next token repeats."""
    b = get_task("repeat_copy", seed=3, vocab=12, length=6).batch(16)
    tok, tgt, pos = b["tokens"], b["target"], b["copy_pos"]
    assert tok.shape == (16, 12) and int(tok.min()) >= 1 and int(tok.max()) < 12
    assert torch.equal(tok[:, :6], tok[:, 6:])
    assert torch.equal(tgt[:, :-1], tok[:, 1:]) and bool((tgt[:, -1] == IGNORE).all())
    keep = pos >= 0
    assert keep.sum(-1).tolist() == [6] * 16
    rows = torch.arange(16)[:, None].expand_as(pos)
    assert torch.equal(tok[rows[keep], pos[keep]], tgt[keep])


def test_copy_metrics_score_only_the_copied_half() -> None:
    """Perfect logits on the copied half and wrong ones elsewhere give copy_accuracy 1;
    attention on copy_pos gives copy_attention 1, attention on the diagonal 0."""
    task = get_task("repeat_copy", seed=0, vocab=10, length=4)
    b = task.batch(8)
    tgt = b["target"].clamp(min=0)
    logits = torch.nn.functional.one_hot((tgt + 1) % 10, 10).float()
    keep = b["copy_pos"] >= 0
    logits[keep] = torch.nn.functional.one_hot(tgt[keep], 10).float()
    att = torch.zeros(8, 2, 8, 8)
    for i in range(8):
        j = int(b["copy_pos"][0, i])
        att[:, :, i, j if j >= 0 else i] = 1.0
    m = compute_metrics(task, {"logits": logits, "attention": att}, b)
    assert m == {"copy_accuracy": 1.0, "copy_attention": 1.0}
    diag = torch.eye(8).expand(8, 8, 8)
    assert compute_metrics(task, {"attention": diag}, b) == {"copy_attention": 0.0}


def test_utterances_say_each_token_over_its_segment() -> None:
    """Segments tile the real frames in order; each frame lies nearer its token's
    prototype than any other; consecutive tokens differ; padding is zero and last."""
    task = get_task("utterances", seed=1, vocab=6, length=4, dim=16, noise=0.3)
    b = task.batch(32)
    proto = torch.from_numpy(task.prototypes())
    s, e, tgt, mask = b["segment_start"], b["segment_end"], b["target"], b["frames_mask"]
    assert torch.equal(s[:, 1:], e[:, :-1]) and bool((s[:, 0] == 0).all())
    assert bool(((e - s) >= 2).all() and ((e - s) <= 5).all())
    assert torch.equal(mask.sum(-1), e[:, -1])
    assert bool((tgt[:, 1:] != tgt[:, :-1]).all()) and int(tgt.min()) >= 1
    assert bool((b["frames"][~mask] == 0).all())
    for i in range(32):
        for t in range(4):
            f = b["frames"][i, int(s[i, t]):int(e[i, t])]
            nearest = torch.cdist(f, proto[1:]).argmin(-1) + 1
            assert bool((nearest == tgt[i, t]).all())


def test_utterance_metrics_read_the_alignment() -> None:
    """Attention on each segment's first frame scores 1 on both metrics; attention
    stuck on frame 0 is monotonic but inside a segment only at step 0; attention
    moving backwards is not monotonic."""
    task = get_task("utterances", seed=0, length=3)
    b = task.batch(4)
    n = b["frames"].shape[1]
    onehot = torch.nn.functional.one_hot(b["segment_start"], n).float()
    m = compute_metrics(task, {"attention": onehot}, b)
    assert m == {"segment_attention": 1.0, "monotonic": 1.0}
    first = torch.zeros(4, 3, n)
    first[..., 0] = 1.0
    m = compute_metrics(task, {"attention": first}, b)
    assert m["monotonic"] == 1.0 and abs(m["segment_attention"] - 1 / 3) < 1e-6
    back = onehot.flip(1)
    assert compute_metrics(task, {"attention": back}, b)["monotonic"] == 0.0


def test_utterances_refuse_bad_durations() -> None:
    """min_frames above max_frames is refused, naming both."""
    with pytest.raises(TrainingError, match="min_frames 4, max_frames 2"):
        get_task("utterances", min_frames=4, max_frames=2)


def test_pointer_sort_targets_point_at_the_numbers_in_ascending_order() -> None:
    """Numbers are distinct; gathering them at the target positions sorts them."""
    b = get_task("pointer_sort", seed=2, vocab=20, length=7).batch(64)
    src, ptr = b["source"], b["target"]
    assert all(len(set(r.tolist())) == 7 for r in src)
    assert torch.equal(torch.gather(src, 1, ptr), src.sort(-1).values)


def test_pointer_sort_refuses_more_numbers_than_ids() -> None:
    """Asking for more distinct numbers than ids fails with a hint."""
    with pytest.raises(TrainingError) as exc:
        get_task("pointer_sort", vocab=5, length=6)
    assert "length <= vocab - 1" in exc.value.message and exc.value.hint
