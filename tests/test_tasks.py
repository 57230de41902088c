"""Tests of the built-in training tasks: registry, seeding, shapes and each
task's defining property."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.registry import RegistryError  # noqa: E402
from attngraph.train.tasks.lookup import (  # noqa: E402
    BOS,
    IGNORE,
    METRICS,
    TASKS,
    Task,
    bind_inputs,
    compute_metrics,
    get_task,
    register_metric,
    register_task,
)

ALL = sorted(TASKS)


def test_registry_lists_every_builtin_task() -> None:
    """The registry holds the tasks the catalog needs."""
    assert {"needle", "reversal", "copy", "sorting", "cluttered_digits", "karate", "sbm",
            "associative_recall"} <= set(TASKS)


def test_unknown_task_gets_did_you_mean() -> None:
    """An unknown task name fails with the closest known name and the full list."""
    with pytest.raises(TrainingError) as exc:
        get_task("revesal")
    assert "did you mean 'reversal'" in exc.value.hint
    assert "sorting" in exc.value.hint


def test_unknown_task_lists_the_sorted_names() -> None:
    """The registry itself refuses an unknown name with a did-you-mean and every
    known task, sorted; get_task turns that into a TrainingError with the same hint."""
    with pytest.raises(RegistryError) as exc:
        TASKS["sortng"]
    assert exc.value.message == "unknown task 'sortng'"
    assert exc.value.hint == f"did you mean 'sorting'? (known: {', '.join(sorted(TASKS))})"
    with pytest.raises(TrainingError) as err:
        get_task("sortng")
    assert err.value.hint == exc.value.hint


def test_a_taken_task_name_is_refused() -> None:
    """Registering a second task under a built-in task's name fails and keeps the first."""
    before = TASKS["needle"]
    with TASKS.scoped(), pytest.raises(RegistryError, match="task 'needle' is registered"):
        @register_task("needle")
        class Other(Task):
            pass
    assert TASKS["needle"] is before
    assert before.name == "needle"


def test_a_taken_metric_name_is_refused() -> None:
    """Registering a second metric under a taken name fails and keeps the first."""
    before = METRICS["accuracy"]
    with METRICS.scoped(), pytest.raises(RegistryError, match="metric 'accuracy' is registered"):
        register_metric("accuracy")(lambda outputs, batch, task: 1.0)
    assert METRICS["accuracy"] is before


def test_a_registered_task_and_metric_are_found_until_the_scope_ends() -> None:
    """A task registered by a user is made by get_task and scores its own metric;
    a scoped registration is gone afterwards."""
    with TASKS.scoped(), METRICS.scoped():
        @register_metric("always_one")
        def always_one(outputs: object, batch: object, task: object) -> float:
            return 1.0

        @register_task("constant")
        class Constant(Task):
            provides = {"x": "tokens"}
            metrics = ("always_one",)
            defaults = {"length": 3}

            def sample(self, rng: object, size: int, split: str) -> dict[str, object]:
                import numpy as np

                x = np.ones((size, self.opts["length"]), dtype=np.int64)
                return {"x": x, "target": x[:, 0]}

        task = get_task("constant", seed=0, length=2)
        assert task.name == "constant" and task.batch(4)["x"].shape == (4, 2)
        assert compute_metrics(task, {}, task.batch(4)) == {"always_one": 1.0}
    assert "constant" not in TASKS and "always_one" not in METRICS


def test_unknown_and_mistyped_options_are_refused() -> None:
    """Options a task does not have, or of the wrong type, fail with the option named."""
    with pytest.raises(TrainingError, match="no option 'lenght'") as exc:
        get_task("needle", lenght=4)
    assert "length" in exc.value.hint
    with pytest.raises(TrainingError, match="option 'length' must be int"):
        get_task("needle", length="4")


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal tensors, a NaN (a regression target's padding) equal to a NaN."""
    if a.is_floating_point():
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    return torch.equal(a, b)


@pytest.mark.parametrize("name", ALL)
def test_same_seed_same_batches(name: str) -> None:
    """Two tasks with one seed give identical batch streams; another seed differs."""
    a, b, c = get_task(name, seed=3), get_task(name, seed=3), get_task(name, seed=4)
    for _ in range(2):
        ba, bb, bc = a.batch(5), b.batch(5), c.batch(5)
        assert ba.keys() == bb.keys()
        for k in ba:
            assert _same(ba[k], bb[k]), k
    differs = any(not _same(ba[k], bc[k]) for k in ba)
    assert differs or name == "karate"  # karate's graph is fixed; only its split moves


@pytest.mark.parametrize("name", ALL)
def test_test_split_is_fixed_and_unlike_train(name: str) -> None:
    """The test batch is the same on every call, and is not the first training batch."""
    t = get_task(name, seed=0)
    x, y = t.batch(6, split="valid"), t.batch(6, split="valid")
    for k in x:
        assert _same(x[k], y[k])
    train = t.batch(6)
    assert any(not _same(train[k], x[k]) for k in x)


@pytest.mark.parametrize("name", ALL)
def test_provided_fields_and_target_exist_with_batch_axis(name: str) -> None:
    """Every provided field and the target are tensors with the batch size first; the
    target is class ids (int64) for a classify task, floats for the others."""
    t = get_task(name, seed=0)
    b = t.batch(7)
    for f in (*t.provides, t.target):
        assert f in b
        assert b[f].shape[0] == 7
    want = torch.int64 if t.objective == "classify" else torch.float32
    assert b[t.target].dtype == want


def test_needle_class_is_set_by_the_needle_word() -> None:
    """Exactly one needle word per document; its id is class + 1, at needle_pos."""
    t = get_task("needle", seed=1, vocab=20, classes=3, length=9)
    b = t.batch(64)
    tok, y, pos = b["tokens"], b["target"], b["needle_pos"]
    assert tok.shape == (64, 9) and tok.dtype == torch.int64
    is_needle = (tok >= 1) & (tok <= 3)
    assert torch.equal(is_needle.sum(1), torch.ones(64, dtype=torch.long))
    assert torch.equal(tok[torch.arange(64), pos], y + 1)
    assert int(tok.max()) < 20 and int(tok.min()) >= 1
    assert set(y.tolist()) == {0, 1, 2}


def test_needle_at_fixes_the_position() -> None:
    """With needle_at, every needle sits at that position."""
    b = get_task("needle", seed=0, needle_at=3).batch(32)
    assert torch.equal(b["needle_pos"], torch.full((32,), 3))


@pytest.mark.parametrize(("name", "fn"), [
    ("reversal", lambda s: s.flip(-1)),
    ("copy", lambda s: s),
    ("sorting", lambda s: s.sort(-1).values),
])
def test_sequence_task_targets(name: str, fn: object) -> None:
    """reversal/copy/sorting targets are the transformed source, source_pos says where
    each target token comes from; BOS never occurs."""
    b = get_task(name, seed=2, vocab=9, length=6).batch(16)
    assert b["source"].shape == b["target"].shape == (16, 6)
    assert torch.equal(b["target"], fn(b["source"]))  # type: ignore[operator]
    assert torch.equal(b["source"].gather(1, b["source_pos"]), b["target"])
    assert int(b["source"].min()) > BOS and int(b["source"].max()) < 9


def test_associative_recall_answer_is_the_value_of_the_query_key() -> None:
    """The last target is the value stored after the key that is queried; others ignored."""
    t = get_task("associative_recall", seed=0, keys=5, values=6, pairs=4)
    b = t.batch(32)
    seq, tgt = b["seq"], b["target"]
    assert seq.shape == tgt.shape == (32, 10)
    assert bool((tgt[:, :-1] == IGNORE).all())
    assert bool((seq[:, 8] == 5 + 6 + 1).all())  # the separator
    for row, ans in zip(seq.tolist(), tgt[:, -1].tolist(), strict=True):
        keys, vals = row[0:8:2], row[1:8:2]
        assert len(set(keys)) == 4
        assert ans == vals[keys.index(row[-1])]


def test_cluttered_digit_lies_inside_the_canvas() -> None:
    """Without clutter, the canvas holds exactly the digit's pixels in its 8x8 window."""
    from attngraph.train.tasks.images import _digits

    b = get_task("cluttered_digits", seed=0, canvas=24, clutter=0).batch(16)
    img, pos = b["image"], b["position"]
    assert img.shape == (16, 1, 24, 24) and img.dtype == torch.float32
    assert bool(((pos >= 0) & (pos <= 24 - 8)).all())
    imgs, labels = _digits()
    for i in range(16):
        y, x = pos[i].tolist()
        window = img[i, 0, y:y + 8, x:x + 8]
        assert float(window.sum()) == pytest.approx(float(img[i].sum()))
        match = [j for j in range(len(labels))
                 if torch.equal(torch.as_tensor(imgs[j]), window)]
        assert match and int(labels[match[0]]) == int(b["target"][i])


def test_clutter_adds_ink_outside_the_digit() -> None:
    """With clutter, pixels outside the digit's window are lit in most images."""
    b = get_task("cluttered_digits", seed=0, canvas=40, clutter=6).batch(16)
    outside = 0
    for i in range(16):
        y, x = b["position"][i].tolist()
        img = b["image"][i, 0].clone()
        img[y:y + 8, x:x + 8] = 0
        outside += int(img.sum() > 0)
    assert outside >= 12
    assert float(b["image"].max()) <= 1.0


def test_karate_graph_labels_and_split() -> None:
    """34 members, symmetric adjacency, train and test nodes disjoint and covering all."""
    t = get_task("karate", seed=0, train_per_class=3)
    tr, te = t.batch(2), t.batch(2, split="valid")
    adj = tr["graph_adjacency"][0]
    assert adj.shape == (34, 34) and adj.dtype == torch.bool and torch.equal(adj, adj.T)
    assert int(adj.sum()) == 2 * 78  # Zachary's 78 friendships
    a, b = tr["target"][0], te["target"][0]
    assert int((a != IGNORE).sum()) == 6
    assert bool(((a == IGNORE) ^ (b == IGNORE)).all())
    labels = torch.where(a != IGNORE, a, b)
    assert int(labels[0]) == 0 and int(labels[33]) == 1  # Mr. Hi and the officer


def test_sbm_edges_are_denser_within_blocks() -> None:
    """Stochastic block model graphs have more edges inside communities than across."""
    b = get_task("sbm", seed=0, nodes=30, p_in=0.4, p_out=0.05).batch(4, split="valid")
    lab, adj = b["target"], b["graph_adjacency"]
    same = lab[:, :, None] == lab[:, None, :]
    assert float(adj[same].float().mean()) > 3 * float(adj[~same].float().mean())
    assert torch.equal(adj, adj.transpose(1, 2))


GA = """
attngraph: 1
name: ga
dims: {vocab: 32, d: 8, classes: 4}
inputs:
  words: {type: tokens, vocab: vocab}
nodes:
  x: {kind: items, from: words, embed: d}
  s: {kind: scorer, fn: additive, query: {learned: d}, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, attention: p}
"""


def test_bind_inputs_matches_by_type_and_checks_vocab() -> None:
    """A task's tokens field feeds a tokens input of any name; ids over vocab fail."""
    g = loads_spec(GA)
    t = get_task("needle", seed=0)
    kw = bind_inputs(g, t, t.batch(3))
    assert set(kw) == {"words"}
    big = get_task("needle", seed=0, vocab=40)
    with pytest.raises(TrainingError, match="vocab is 32"):
        bind_inputs(g, big, big.batch(64))


def test_bind_inputs_refuses_a_missing_input_type() -> None:
    """A spec whose input type the task does not give fails naming what it gives."""
    g = loads_spec(GA)
    t = get_task("cluttered_digits", seed=0)
    with pytest.raises(TrainingError, match="no 'tokens' data") as exc:
        bind_inputs(g, t, t.batch(2))
    assert "image" in exc.value.hint


def test_metrics_score_only_non_ignored_targets() -> None:
    """Accuracy skips IGNORE targets; attention_peak compares the argmax with needle_pos."""
    t = get_task("associative_recall", seed=0)
    b = t.batch(4)
    logits = torch.zeros(4, b["seq"].shape[1], 16)
    ans = b["target"][:, -1]
    logits[torch.arange(4), -1, ans] = 1.0
    logits[0, -1, ans[0]] = -1.0  # one wrong answer
    m = compute_metrics(t, {"logits": logits}, b)
    assert m["accuracy"] == pytest.approx(0.75)
    n = get_task("needle", seed=0, length=5)
    nb = n.batch(2)
    att = torch.nn.functional.one_hot(nb["needle_pos"], 5).float()
    out = {"logits": torch.zeros(2, 4), "attention": att}
    assert compute_metrics(n, out, nb)["attention_peak"] == 1.0


def test_alignment_metric_rewards_the_anti_diagonal_on_reversal() -> None:
    """An anti-diagonal alignment scores 1 on reversal, a diagonal one 0 (for N=4)."""
    t = get_task("reversal", seed=0, length=4)
    b = t.batch(3)
    anti = torch.eye(4).flip(-1).expand(3, 4, 4)
    diag = torch.eye(4).expand(3, 4, 4)
    logits = torch.zeros(3, 4, 12)
    assert compute_metrics(t, {"logits": logits, "attention": anti}, b)["alignment"] == 1.0
    assert compute_metrics(t, {"logits": logits, "attention": diag}, b)["alignment"] == 0.0


def test_alignment_metric_on_soft_and_summary_alignments() -> None:
    """A soft alignment whose mass peaks on the anti-diagonal (spread over neighbours,
    with a head axis) scores 1 on reversal; one that always reads the last source
    word, as a decoder leaning on the encoder's final state does, scores 1/N."""
    t = get_task("reversal", seed=0, length=6)
    b = t.batch(2)
    anti = torch.eye(6).flip(-1)
    soft = torch.softmax(3.0 * anti + torch.rand(6, 6), -1)  # peak 3 above noise < 1
    att = soft.expand(2, 2, 6, 6)  # (B, h, T, N)
    logits = torch.zeros(2, 6, 12)
    assert compute_metrics(t, {"logits": logits, "attention": att}, b)["alignment"] == 1.0
    last = torch.zeros(2, 6, 6)
    last[..., -1] = 1.0
    got = compute_metrics(t, {"logits": logits, "attention": last}, b)["alignment"]
    assert got == pytest.approx(1 / 6)


def test_glimpse_hit_counts_a_glimpse_inside_the_digit_box() -> None:
    """glimpse_hit is 1 for glimpses at the digit's centre, 0 at the canvas centre (on
    no box's inside) and at the digit's opposite corner of the canvas."""
    task = get_task("cluttered_digits", seed=0, canvas=32, grid=8)
    b = task.batch(64, split="valid")
    pos = b["position"].float()
    centre = torch.stack([(pos[:, 1] + 4) / 32 * 2 - 1, (pos[:, 0] + 4) / 32 * 2 - 1], -1)
    start = torch.zeros(64, 1, 2)
    on = torch.cat([start, centre[:, None]], 1)  # (B, 2, 2)
    assert compute_metrics(task, {"locations": on}, b)["glimpse_hit"] == 1.0
    assert compute_metrics(task, {"locations": start}, b)["glimpse_hit"] == 0.0
    assert compute_metrics(task, {"locations": -on}, b)["glimpse_hit"] == 0.0


def test_tile_peak_reads_attention_over_the_grid_of_tiles() -> None:
    """tile_peak is 1 when attention peaks on the digit's 8×8 tile, 0 one tile over,
    and does not apply when digits do not sit on whole tiles."""
    task = get_task("cluttered_digits", seed=0, canvas=32, grid=8)
    b = task.batch(64, split="valid")
    tile = b["position"] // 8
    idx = tile[:, 0] * 4 + tile[:, 1]
    att = torch.nn.functional.one_hot(idx, 16).float()
    assert compute_metrics(task, {"attention": att}, b)["tile_peak"] == 1.0
    other = torch.nn.functional.one_hot((idx + 1) % 16, 16).float()
    assert compute_metrics(task, {"attention": other}, b)["tile_peak"] == 0.0
    loose = get_task("cluttered_digits", seed=0, canvas=32, grid=1)
    assert "tile_peak" not in compute_metrics(loose, {"attention": att}, loose.batch(64))
