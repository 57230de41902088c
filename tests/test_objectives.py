"""A task's objective decides what training minimises: each objective equals its
hand-written formula, skips what it says it skips, and a spec without the objective's
output is refused at its ``outputs:``; a model's ``.loss`` terms join the loss."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.registry import RegistryError  # noqa: E402
from attngraph.train.engine.step import check_fits, reward_of, task_loss  # noqa: E402
from attngraph.train.tasks.base import IGNORE, TASKS, Task, register_task  # noqa: E402
from attngraph.train.tasks.objectives import OBJECTIVES, model_terms  # noqa: E402


def test_classify_is_cross_entropy_skipping_ignored() -> None:
    logits = torch.randn(3, 5, 7)
    target = torch.randint(0, 7, (3, 5))
    target[1, 2:] = IGNORE
    keep = target != IGNORE
    ref = F.cross_entropy(logits[keep], target[keep])
    assert torch.allclose(task_loss({"logits": logits}, target), ref, atol=1e-6)


def test_classify_reward_is_every_scored_prediction_right() -> None:
    logits = torch.tensor([[[0.0, 1.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 1.0]]])
    target = torch.tensor([[1, 0], [1, IGNORE]])
    assert reward_of({"logits": logits}, target).tolist() == [1.0, 1.0]
    target = torch.tensor([[1, 1], [0, IGNORE]])
    assert reward_of({"logits": logits}, target).tolist() == [0.0, 0.0]


def test_regress_is_squared_error_over_the_scored_targets() -> None:
    pred = torch.randn(4, 6, 2)
    target = torch.randn(4, 6, 2)
    target[2, 3:] = float("nan")
    keep = ~target.isnan()
    ref = ((pred - target)[keep] ** 2).mean()
    got = task_loss({"prediction": pred}, target, objective="regress")
    assert torch.allclose(got, ref, atol=1e-6)
    # padding changes nothing: whatever is predicted there
    pred2 = pred.clone()
    pred2[2, 3:] = 1e3
    assert torch.allclose(task_loss({"prediction": pred2}, target, objective="regress"), got)
    r = reward_of({"prediction": pred}, target, objective="regress")
    assert torch.allclose(r[2], -((pred[2] - target[2])[keep[2]] ** 2).mean(), atol=1e-6)


def test_bernoulli_is_summed_binary_cross_entropy_per_example() -> None:
    logits = torch.randn(3, 1, 4, 4)
    target = torch.rand(3, 1, 4, 4).round()
    p = torch.sigmoid(logits)
    nll = -(target * p.log() + (1 - target) * (1 - p).log()).sum((1, 2, 3))
    got = task_loss({"logits": logits}, target, objective="bernoulli")
    assert torch.allclose(got, nll.mean(), atol=1e-5)
    assert torch.allclose(reward_of({"logits": logits}, target, objective="bernoulli"), -nll,
                          atol=1e-5)
    # all-zero logits: log 2 nats per value
    zero = task_loss({"logits": torch.zeros(2, 8)}, torch.ones(2, 8), objective="bernoulli")
    assert math.isclose(float(zero), 8 * math.log(2), rel_tol=1e-6)


def test_a_missing_or_misshapen_output_is_refused() -> None:
    with pytest.raises(TrainingError, match="named 'prediction'"):
        task_loss({"logits": torch.zeros(2, 3)}, torch.zeros(2, 3), objective="regress")
    with pytest.raises(TrainingError, match="output 'prediction' has shape"):
        task_loss({"prediction": torch.zeros(2, 4)}, torch.zeros(2, 3), objective="regress")
    with pytest.raises(RegistryError):
        OBJECTIVES["regression"]


def test_model_terms_sum_loss_entries_over_steps_and_average_over_batch() -> None:
    model = torch.nn.Module()
    assert model_terms(model) == 0.0
    model.aux = {"z.loss": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),  # [B, T]
                 "w.loss": torch.tensor([1.0, 3.0]),  # [B]
                 "p.log_prob": torch.tensor([5.0, 5.0])}  # not a loss term
    assert float(model_terms(model)) == pytest.approx((3 + 7) / 2 + 2)


_REGRESS_SPEC = """\
attngraph: 1
name: tiny_regress
inputs:
  x: {type: vector, dim: 3}
nodes:
  y: {kind: linear, from: x, out: 2}
outputs: {OUT: y}
train: {task: tiny_regress_task, steps: 2}
"""


def test_check_fits_asks_for_the_objectives_output() -> None:
    with TASKS.scoped():
        @register_task("tiny_regress_task")
        class TinyRegress(Task):
            provides: ClassVar[Mapping[str, str]] = {"x": "vector"}
            objective = "regress"
            metrics = ()

            def sample(self, rng: Any, size: int, split: str) -> dict[str, Any]:
                x = rng.standard_normal((size, 3)).astype("float32")
                return {"x": x, "target": x[:, :2]}

        bad = loads_spec(_REGRESS_SPEC.replace("OUT", "logits"), "tiny.yaml")
        with pytest.raises(TrainingError, match="named 'prediction'") as err:
            check_fits(bad, TinyRegress(seed=0))
        assert err.value.loc is not None and err.value.loc.file == "tiny.yaml"
        good = loads_spec(_REGRESS_SPEC.replace("OUT", "prediction"), "tiny.yaml")
        check_fits(good, TinyRegress(seed=0))
