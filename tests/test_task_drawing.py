"""Tests of the ``digit_drawing`` task (image generation): each image is one binarised
shipped digit at its ``position`` and the target is the image; the pixel baseline is
the exact NLL of independent pixels at the training frequencies; ``negative_elbo``
adds the KL to the Bernoulli NLL; ``elbo_gain`` compares the two; bad options are
one error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.tasks.drawing import _pool, pixel_probabilities  # noqa: E402
from attngraph.train.tasks.lookup import TASKS, compute_metrics, get_task  # noqa: E402


def test_digit_drawing_stands_for_image_generation() -> None:
    """``attngraph catalog`` lists the task under its area, trained as Bernoulli pixels."""
    assert TASKS["digit_drawing"].area == "image generation"
    assert TASKS["digit_drawing"].objective == "bernoulli"


def test_each_image_is_one_binarised_digit_at_its_position() -> None:
    """The target equals the image; the 8×8 window at ``position`` is a binarised digit
    of the split's pool and every pixel outside it is 0."""
    task = get_task("digit_drawing", seed=2, canvas=12)
    for split in ("train", "test"):
        b = task.batch(32, split=split)
        assert b["image"].shape == (32, 1, 12, 12)
        assert torch.equal(b["image"], b["target"])
        pool = torch.from_numpy(_pool(split))
        for i in range(32):
            y, x = b["position"][i].tolist()
            win = b["image"][i, 0, y:y + 8, x:x + 8]
            assert bool(((pool - win).abs().flatten(1).amax(-1) == 0).any())
            assert float(b["image"][i].sum()) == float(win.sum())


def test_pixel_probabilities_average_the_mean_digit_over_placements() -> None:
    """On a 9×9 canvas (4 placements) pixel (0, 0) is on only in the placement at (0, 0):
    a quarter of the mean digit's (0, 0); the centre pixel averages four."""
    mean = _pool("train").mean(0)
    p = pixel_probabilities(9)
    assert math.isclose(p[0, 0], max(mean[0, 0] / 4, 1e-3), rel_tol=1e-5)
    want = (mean[4, 4] + mean[4, 3] + mean[3, 4] + mean[3, 3]) / 4
    assert math.isclose(p[4, 4], want, rel_tol=1e-5)


def test_negative_elbo_is_the_bernoulli_nll_plus_the_kl() -> None:
    """Logits 0 cost log 2 per pixel: negative_elbo = 144 log 2 + Σ_t KL; the baseline is
    the NLL under the pixel frequencies; elbo_gain = 1 − negative_elbo / baseline."""
    task = get_task("digit_drawing", seed=0, canvas=12)
    b = task.batch(16, split="valid")
    kl = torch.rand(16, 6)
    m = compute_metrics(task, {"logits": torch.zeros(16, 1, 12, 12), "kl": kl}, b)
    assert math.isclose(m["negative_elbo"], 144 * math.log(2) + float(kl.sum(-1).mean()),
                        rel_tol=1e-5)
    p = torch.from_numpy(pixel_probabilities(12)).double()
    x = b["target"][:, 0].double()
    base = -(x * p.log() + (1 - x) * (1 - p).log()).sum((1, 2)).mean()
    assert math.isclose(m["pixel_baseline"], float(base), rel_tol=1e-6)
    assert math.isclose(m["elbo_gain"], 1 - m["negative_elbo"] / m["pixel_baseline"],
                        rel_tol=1e-9)
    # the independent-pixels model itself scores 0, and without a KL there is no bound
    logits = torch.logit(p.float()).expand(16, 1, 12, 12)
    m0 = compute_metrics(task, {"logits": logits, "kl": torch.zeros(16, 6)}, b)
    assert abs(m0["elbo_gain"]) < 1e-5
    assert "negative_elbo" not in compute_metrics(task, {"logits": logits}, b)


def test_bad_canvas_is_one_error() -> None:
    """A canvas smaller than a digit is refused by name."""
    with pytest.raises(TrainingError, match="needs 8 <= canvas <= 64"):
        get_task("digit_drawing", canvas=6)


def test_evaluation_of_a_sampling_model_is_repeatable_and_leaves_the_rng() -> None:
    """DRAW's latent samples in eval mode; evaluate draws on its own seeded generator,
    so two evaluations give the same negative ELBO and torch's RNG state is untouched."""
    import attngraph
    from attngraph.frontend import load_spec
    from attngraph.train.engine.step import evaluate

    graph = load_spec(Path(__file__).resolve().parents[1] / "specs" / "image_generation.yaml")
    task = get_task("digit_drawing", seed=0, canvas=12)
    model = attngraph.compile(graph, seed=0)
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    first, second = evaluate(model, graph, task, 16), evaluate(model, graph, task, 16)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert first == second and first["negative_elbo"] > first["pixel_baseline"] * 0.5
