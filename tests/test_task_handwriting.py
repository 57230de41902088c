"""Tests of the ``handwriting`` task (handwriting generation): every letter is drawn
with its own stroke wherever it occurs, the model is fed the previous offsets, padding
is NaN in the targets, the metrics read the prediction and the window against the
letter being drawn, the ``window`` picture is drawn, and the window matters (slow:
the trained spec beats the same LSTM without it)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.frontend import load_spec  # noqa: E402
from attngraph.train.tasks.lookup import TASKS, compute_metrics, get_task  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def test_handwriting_stands_for_handwriting_generation_and_regresses() -> None:
    """``attngraph catalog`` lists the task under its area; training minimises squared error."""
    assert TASKS["handwriting"].area == "handwriting generation"
    assert TASKS["handwriting"].objective == "regress"


def test_each_letter_is_drawn_with_its_own_stroke_fed_one_step_late() -> None:
    """The offsets of letter u are that letter's stroke plus small noise at every
    occurrence; the pen input is the target one step late (zeros at step 0); targets are
    NaN, pen zeros and char_of_step -1 exactly past the string's end; lengths 2-4 occur."""
    task = get_task("handwriting", seed=3)
    b = task.batch(64)
    strokes = torch.from_numpy(task.strokes())
    s, u = task.opts["stroke"], task.opts["max_chars"]
    chars, target, pen = b["chars"], b["target"], b["pen"]
    assert chars.shape == (64, u) and target.shape == pen.shape == (64, u * s, 2)
    lengths = b["chars_mask"].sum(-1)
    assert set(lengths.tolist()) == {2, 3, 4}
    for i in range(64):
        n = int(lengths[i])
        assert bool((chars[i, :n] >= 1).all()) and bool((chars[i, n:] == 0).all())
        real = target[i, :n * s]
        want = strokes[chars[i, :n]].reshape(-1, 2)
        assert float((real - want).abs().max()) < 6 * task.opts["noise"]
        assert bool(target[i, n * s:].isnan().all()) and not bool(real.isnan().any())
        assert bool((pen[i, 0] == 0).all()) and torch.equal(pen[i, 1:n * s], real[:-1])
        assert bool((pen[i, n * s:] == 0).all())
        assert b["pen_mask"][i].tolist() == [t < n * s for t in range(u * s)]
        assert b["char_of_step"][i].tolist() == [t // s if t < n * s else -1
                                                 for t in range(u * s)]


def test_the_seed_fixes_the_strokes_and_the_splits_differ() -> None:
    """The same seed gives the same strokes and test set; another seed other strokes; the
    training stream is not the test set."""
    a, b = get_task("handwriting", seed=0), get_task("handwriting", seed=0)
    assert (a.strokes() == b.strokes()).all()
    assert not (a.strokes() == get_task("handwriting", seed=1).strokes()).all()
    t1, t2 = a.batch(8, split="valid"), b.batch(8, split="valid")
    assert torch.equal(t1["chars"], t2["chars"])
    assert not torch.equal(a.batch(8)["pen"], t1["pen"])


def test_trajectory_metrics_score_only_the_real_steps() -> None:
    """The true offsets score error 0 and fit 1 whatever is predicted at padding;
    predicting zeros scores the mean square of the offsets and a fit of at most 0."""
    task = get_task("handwriting", seed=0)
    b = task.batch(32)
    target = b["target"]
    perfect = torch.where(target.isnan(), torch.full_like(target, 50.0), target)
    m = compute_metrics(task, {"prediction": perfect}, b)
    assert m["trajectory_error"] == 0.0 and m["trajectory_fit"] == 1.0
    zero = compute_metrics(task, {"prediction": torch.zeros_like(target)}, b)
    real = target[~target.isnan()]
    assert zero["trajectory_error"] == pytest.approx(float((real ** 2).mean()), rel=1e-5)
    assert zero["trajectory_fit"] <= 0.0


def test_window_metrics_read_the_peak_against_the_letter_being_drawn() -> None:
    """A window one-hot on the letter being drawn scores alignment and monotonicity 1,
    whatever it does at padded steps; one always on the first letter scores the share
    of steps drawing it; a peak that moves back makes its example non-monotonic."""
    task = get_task("handwriting", seed=1)
    b = task.batch(32)
    of = b["char_of_step"]
    u = b["chars"].shape[1]
    att = torch.nn.functional.one_hot(of.clamp(min=0), u).float()
    att[of < 0] = torch.nn.functional.one_hot(torch.tensor(0), u).float()  # back at padding
    m = compute_metrics(task, {"attention": att}, b)
    assert m["window_alignment"] == 1.0 and m["window_monotonic"] == 1.0
    first = torch.zeros_like(att)
    first[..., 0] = 1.0
    share = float((of[of >= 0] == 0).float().mean())
    got = compute_metrics(task, {"attention": first}, b)["window_alignment"]
    assert abs(got - share) < 1e-6 and got < 1
    back = att.clone()
    back[0, 4] = torch.nn.functional.one_hot(torch.tensor(0), u).float()  # step 4: letter 1
    assert compute_metrics(task, {"attention": back}, b)["window_monotonic"] == 31 / 32


def test_handwriting_refuses_bad_options() -> None:
    """More letters asked at least than at most, or negative noise, is one error with the
    numbers."""
    with pytest.raises(TrainingError) as exc:
        get_task("handwriting", min_chars=4, max_chars=2)
    assert "min_chars 4, max_chars 2" in exc.value.message
    with pytest.raises(TrainingError, match="noise must be >= 0"):
        get_task("handwriting", noise=-0.1)


def test_the_window_view_draws_the_window_beside_the_trajectory(tmp_path: Path) -> None:
    """The spec's attention output is a window's weights, so attend picks the window
    view and writes a picture of it (letters named a, b, ...)."""
    import attngraph
    from attngraph.train.pictures.attend import draw, pick_view
    from attngraph.train.tasks.lookup import bind_inputs, task_for

    graph = load_spec(ROOT / "specs" / "handwriting_generation.yaml")
    task = task_for(graph, None, 0)
    model = attngraph.compile(graph, seed=0).eval()
    batch = task.batch(3, split="valid")
    with torch.no_grad():
        out = model(**bind_inputs(graph, task, batch))
    assert pick_view(graph, {k: v[0] for k, v in out.items()}) == ("window", "attention")
    path, view = draw(graph, task, out, batch, tmp_path / "w.png", example=1)
    assert view == "window" and path.read_bytes()[:8] == PNG and path.stat().st_size > 5000
    assert task.token_names("chars", [1, 2, 0]) == ["a", "b", "·"]


@pytest.mark.slow
def test_the_window_beats_the_same_lstm_without_it(trained_metrics: Callable[..., dict]) -> None:
    """Trained alike at seed 0, the spec's squared error is at most a third of that of
    the same LSTM reading the string's mean letter instead of the window
    (tests/data/handwriting_no_window.yaml), and its fit is higher by at least 0.05.
    The spec's training is the catalog test's, shared (``trained_metrics``)."""
    win = trained_metrics(ROOT / "specs" / "handwriting_generation.yaml", 0)
    base = trained_metrics(ROOT / "tests" / "data" / "handwriting_no_window.yaml", 0)
    assert win["trajectory_error"] * 3 <= base["trajectory_error"], (win, base)
    assert win["trajectory_fit"] - base["trajectory_fit"] >= 0.05, (win, base)
