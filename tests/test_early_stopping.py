"""Early stopping keeps the best weights: the run's model is its best evaluation's."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from attngraph.errors import TrainingError
from attngraph.train.run.runner import RunConfig, RunSummary, run
from attngraph.train.store import checkpoints as ck

ROOT = Path(__file__).resolve().parents[1]
GA = str(ROOT / "specs" / "global_attention.yaml")
#: a learning rate so large that validation accuracy peaks at step 2 and then falls
FAST = {"batch": 8, "lr": 0.5, "eval_every": 1, "eval_size": 64, "quiet": True}


def _run(out: Path, **kw: Any) -> RunSummary:
    return run(RunConfig(spec=GA, out=str(out), **{**FAST, **kw}), stream=io.StringIO())


def _valid(out: Path) -> list[dict[str, Any]]:
    lines = [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]
    return [ln for ln in lines if ln["split"] == "valid"]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_saved_model_is_the_best_steps_weights(tmp_path: Path) -> None:
    """A run whose validation accuracy gets worse after its best evaluation stops
    after --patience worse ones and saves, as its model, exactly the parameters a
    straight run to the best step has; the summary and the console name that step,
    and load_run (predict, evaluate) gets those weights."""
    import attngraph

    s = _run(tmp_path / "es", steps=20, patience=3)
    curve = _valid(tmp_path / "es")
    accs = [ln["accuracy"] for ln in curve]
    best = curve[accs.index(max(accs))]["step"]
    assert accs[-1] < max(accs)  # the figure did get worse: the property is tested
    assert s.best_step == best and s.stopped_early == best + 3 == curve[-1]["step"]
    assert s.metrics == {k: v for k, v in curve[accs.index(max(accs))].items()
                         if k not in ("step", "split")}
    assert s.last_step == curve[-1]["step"] and s.last_metrics is not None
    assert s.last_metrics["accuracy"] == accs[-1]
    assert f"kept the weights of step {best}, the best validation accuracy" in s.format()

    _run(tmp_path / "straight", steps=best)
    want = ck.load_checkpoint(tmp_path / "straight").model
    saved = ck.load_checkpoint(tmp_path / "es")
    assert _same(saved.model, want)
    assert saved.resume_model is not None and not _same(saved.resume_model, want)
    assert saved.best is not None and saved.best["step"] == best
    loaded = attngraph.load_run(tmp_path / "es").model.state_dict()
    assert _same({k: v.cpu() for k, v in loaded.items()}, want)
    summary = json.loads((tmp_path / "es" / "summary.json").read_text())
    assert summary["best_step"] == best and summary["metrics"] == s.metrics


def test_a_killed_run_resumes_to_the_same_best(tmp_path: Path) -> None:
    """Stopped between its best step and the stop, then resumed, a run keeps the same
    best so far and count of worse evaluations: its checkpoint equals one straight
    run's (best weights, last weights, the best's record, the step)."""
    _run(tmp_path / "straight", steps=20, patience=3)
    a = ck.load_checkpoint(tmp_path / "straight")
    assert a.best is not None
    cut = a.best["step"] + 2  # past the best, before the stop
    _run(tmp_path / "split", steps=cut, patience=3)
    s = _run(tmp_path / "split", steps=20, resume=True)  # the stored patience goes on
    b = ck.load_checkpoint(tmp_path / "split")
    assert b.step == a.step == s.stopped_early
    assert _same(b.model, a.model) and b.best == a.best
    assert a.resume_model is not None and b.resume_model is not None
    assert _same(b.resume_model, a.resume_model)
    assert _valid(tmp_path / "split") == _valid(tmp_path / "straight")


def test_resume_after_an_early_stop_trains_on_from_the_last_step(tmp_path: Path) -> None:
    """--resume of a run that stopped early trains on from its last step's weights
    (not the best's), with a fresh count of --patience evaluations; the best kept
    stays unless beaten."""
    s = _run(tmp_path / "r", steps=20, patience=3)
    stopped = s.stopped_early
    assert stopped is not None
    before = ck.load_checkpoint(tmp_path / "r")
    s2 = _run(tmp_path / "r", steps=stopped + 2, resume=True)
    steps = [ln["step"] for ln in _valid(tmp_path / "r")]
    assert steps[-3:] == [stopped, stopped + 1, stopped + 2]
    assert s2.stopped_early is None  # three more evaluations are allowed
    after = ck.load_checkpoint(tmp_path / "r")
    assert after.step == stopped + 2
    curve = {ln["step"]: ln["accuracy"] for ln in _valid(tmp_path / "r")}
    best_step = max(curve, key=lambda k: (curve[k], -k))
    assert s2.best_step == best_step
    if best_step == before.best["step"]:  # type: ignore[index]
        assert _same(after.model, before.model)


def test_without_patience_the_last_weights_are_the_model(tmp_path: Path) -> None:
    """--patience 0 keeps the last step's weights and records no best step."""
    s = _run(tmp_path / "r", steps=4)
    c = ck.load_checkpoint(tmp_path / "r")
    assert s.best_step is None and c.best is None and c.resume_model is None
    assert "kept the weights" not in s.format()


def test_a_lower_is_better_metric_keeps_its_lowest_figure() -> None:
    """Early stopping reads the metric's direction: for trajectory_error (lower is
    better) the smallest figure is the best one."""
    from attngraph.train.run.earlystop import Patience

    model = torch.nn.Linear(1, 1)
    stop = Patience(2, "trajectory_error")
    for step, err in ((1, 0.5), (2, 0.2), (3, 0.3), (4, 0.4)):
        with torch.no_grad():
            model.weight.fill_(step)
        if stop.stop({"trajectory_error": err}, step, model):
            break
    assert (stop.best_step, stop.step) == (2, 4)
    stop.restore(model)
    assert float(model.weight.detach()) == 2.0


def test_a_damaged_best_record_is_refused(tmp_path: Path) -> None:
    """A checkpoint whose best-step record is damaged is one error naming the file."""
    _run(tmp_path / "r", steps=6, patience=2)
    path = tmp_path / "r" / "checkpoint.pt"
    data = torch.load(path, weights_only=True)
    assert data["best"] is not None
    data["best"]["step"] = "two"
    torch.save(data, path)
    with pytest.raises(TrainingError) as info:
        ck.load_checkpoint(path)
    d = info.value.diagnostics[0]
    assert d.loc.file == str(path) and "best" in d.message and d.hint


def test_a_checkpoint_of_an_earlier_version_still_resumes(tmp_path: Path) -> None:
    """A checkpoint without the best-step entries (written before them) loads and
    resumes as before."""
    _run(tmp_path / "r", steps=3)
    path = tmp_path / "r" / "checkpoint.pt"
    data = torch.load(path, weights_only=True)
    del data["best"], data["resume_model"]
    torch.save(data, path)
    s = _run(tmp_path / "r", steps=5, resume=True)
    assert s.steps == 5 and ck.load_checkpoint(path).step == 5
