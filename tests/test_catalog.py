"""The catalog test: every spec in specs/ validates, is documented, names a
registered task, compiles and runs a forward on a batch of its task; the slow
test trains each spec to its stated target plus a margin (the trained figures are
shared with tests/test_catalog_seeds.py through the ``trained_metrics`` fixture)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from attngraph.frontend import load_spec
from attngraph.source import load

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))
IDS = [p.stem for p in SPECS]
#: specs known not to reach their stated target yet, with why (not run: they are slow)
SHORT_OF_TARGET: dict[str, str] = {}
#: the no-attention model of the same size that hard attention must beat
GLIMPSE_BASELINE = Path(__file__).resolve().parent / "data" / "glimpse_hard_baseline.yaml"
#: How far above its target every figure of a catalog spec must land (at seed 0 here,
#: at seeds 0-4 in tests/test_catalog_seeds.py). Another CPU rounds differently and
#: moves the figures: every catalog spec clears its target by this much at seeds 0-4
#: on an Intel Xeon both as trained and with its initial weights perturbed by 1e-7,
#: which emulates that (issue 26; the specs' train comments give the figures).
MARGIN = 0.02


def _train_params() -> list[object]:
    return [
        pytest.param(p, id=p.stem, marks=pytest.mark.xfail(
            reason=SHORT_OF_TARGET[p.stem], run=False)) if p.stem in SHORT_OF_TARGET
        else pytest.param(p, id=p.stem)
        for p in SPECS
    ]


def _compile():  # noqa: ANN202
    """``attngraph.lower.compile``, or skip when the lowering is not there yet."""
    lower = pytest.importorskip("attngraph.lower")
    fn = getattr(lower, "compile", None)
    if fn is None:
        pytest.skip("attngraph.lower has no compile yet")
    return fn


def test_catalog_is_not_empty() -> None:
    """The catalog ships the mechanisms of the literature (at least 15 specs)."""
    assert len(SPECS) >= 15


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_spec_validates_with_types_title_summary_and_task(path: Path) -> None:
    """The spec loads without error, has a title and summary, a type on every node
    (inside blocks and loops too), a name matching its file, comments that teach,
    and a train section naming a registered task with a target."""
    from attngraph.train.tasks.lookup import TASKS

    g = load_spec(path)
    assert g.name == path.stem
    assert g.title and g.summary
    for _, node in g.walk():
        assert node.types, f"node {node.id} has no inferred type"
    assert g.train is not None and g.train.task in TASKS
    assert g.train.target, "a catalog spec states the figure it trains to"
    text = load(path).text
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 5


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_spec_task_options_are_accepted(path: Path) -> None:
    """The task options of the train section are options the task has."""
    from attngraph.train.tasks.lookup import get_task

    g = load_spec(path)
    task = get_task(g.train.task, seed=0, **g.train.options)
    assert task.opts.items() >= dict(g.train.options).items()


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_spec_compiles_and_runs_on_its_task(path: Path) -> None:
    """The compiled module takes a batch of its task (inputs bound by type) and
    returns every declared output with the batch axis first, the output its task's
    objective reads fitting the task's targets, and a finite loss."""
    import torch

    from attngraph.train.engine.loop import task_loss
    from attngraph.train.tasks.lookup import bind_inputs, compute_metrics, get_task

    compile_ = _compile()
    g = load_spec(path)
    task = get_task(g.train.task, seed=0, **g.train.options)
    batch = task.batch(3)
    model = compile_(g, seed=0)
    out = model(**bind_inputs(g, task, batch))
    assert set(out) == {name for name, _ in g.outputs}
    for v in out.values():
        assert v.shape[0] == 3
    loss = task_loss(out, batch[task.target], objective=task.objective)
    assert torch.isfinite(loss)
    metrics = compute_metrics(task, out, batch)
    assert set(task.metrics) & set(metrics)


@pytest.mark.slow
@pytest.mark.parametrize("path", _train_params())
def test_spec_trains_to_its_target(path: Path, trained_metrics: Callable[..., dict]) -> None:
    """Trained with its own train section at seed 0 on one torch thread, the spec
    reaches every figure of its stated target plus MARGIN."""
    _compile()
    g = load_spec(path)
    metrics = trained_metrics(path, 0)
    target = dict(g.train.target)
    assert all(metrics.get(k, float("-inf")) >= v + MARGIN for k, v in target.items()), \
        f"{metrics} < {target} + {MARGIN}"


def test_glimpse_baseline_is_the_hard_model_without_its_policy() -> None:
    """The no-attention baseline has the hard attention model's task, options, train
    settings, glimpse sensor and core, no policy, and about its parameter count."""
    compile_ = _compile()
    hard = load_spec(SPECS[IDS.index("glimpse_hard")])
    base = load_spec(GLIMPSE_BASELINE)
    assert base.train.model_dump() == hard.train.model_dump() | {"target": base.train.target}
    kinds = {n.kind for _, n in base.walk()}
    assert "policy" not in kinds and "glimpse" in kinds
    n_hard = sum(p.numel() for p in compile_(hard, seed=0).parameters())
    n_base = sum(p.numel() for p in compile_(base, seed=0).parameters())
    assert 0.75 <= n_base / n_hard <= 1.25


@pytest.mark.slow
def test_hard_attention_beats_chance_and_the_no_attention_baseline(
        trained_metrics: Callable[..., dict]) -> None:
    """The recurrent attention model (REINFORCE glimpses) classifies cluttered digits
    far above chance (0.1) and clearly above the same-size model whose glimpse stays
    at the centre of the canvas, and its policy puts a glimpse on the digit far more
    often than a random choice of cells would (1 - (15/16)² ≈ 0.12)."""
    _compile()
    hard = trained_metrics(SPECS[IDS.index("glimpse_hard")], 0)
    base = trained_metrics(GLIMPSE_BASELINE, 0)
    assert hard["accuracy"] >= 0.5, hard
    assert hard["accuracy"] >= base["accuracy"] + 0.1, (hard, base)
    assert hard["glimpse_hit"] >= 0.3, hard
    assert base["glimpse_hit"] == 0.0, base


def test_training_does_not_depend_on_the_global_rng() -> None:
    """Two short trainings of the hard attention model (whose policy samples from
    torch's global RNG) at the same seed give the same losses, even when other
    random numbers were drawn between them."""
    import torch

    _compile()
    from attngraph.train.engine.loop import train

    path = SPECS[IDS.index("glimpse_hard")]
    seen: list[list[float]] = []
    for _ in range(2):
        losses: list[float] = []
        train(path, steps=3, batch=4, eval_size=4, seed=1,
              callback=lambda _step, info, out=losses: out.append(info["loss"]))
        seen.append(losses)
        torch.randn(7)
    assert seen[0] == seen[1]
