"""The training loop on data: DataLoader batches, epochs, resume, early stopping, devices."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch

from attngraph.errors import TrainingError
from attngraph.frontend import load_spec
from attngraph.train.data.batches import data_task, steps_per_epoch, train_stream
from attngraph.train.engine.device import pick_device
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store.checkpoints import load_checkpoint
from attngraph.train.tasks.lookup import get_task

ROOT = Path(__file__).resolve().parents[1]
GA = str(ROOT / "specs" / "global_attention.yaml")


def _texts(path: Path, n: int = 50) -> Path:
    rng = random.Random(0)
    rows = []
    for _ in range(n):
        label = rng.choice("abcd")
        words = rng.choices(["the", "of", "and", "to", "in"], k=rng.randint(2, 6))
        words.insert(rng.randrange(len(words) + 1), f"key{label}")
        rows.append({"text": " ".join(words), "label": label})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(tmp_path: Path, name: str, **kw: object) -> object:
    with open(tmp_path / f"{name}.log", "w") as log:
        return run(RunConfig(spec=GA, out=str(tmp_path / name), quiet=True, **kw),  # type: ignore[arg-type]
                   stream=log)


def test_a_builtin_task_streams_its_own_batches_through_a_dataloader() -> None:
    """The DataLoader over a built-in task yields exactly task.batch(size), in order,
    and leaves torch's global random state untouched."""
    a, b = get_task("needle", seed=3), get_task("needle", seed=3)
    before = torch.get_rng_state()
    stream = train_stream(a, 8, seed=3)
    for _ in range(3):
        got, want = next(stream), b.batch(8)
        assert got.keys() == want.keys()
        assert all(torch.equal(got[k], want[k]) for k in want)
    assert torch.equal(torch.get_rng_state(), before)


def test_epochs_visit_every_example_once_in_a_seeded_order(tmp_path: Path) -> None:
    """One epoch of batches holds every training example exactly once; the order
    depends on the seed and the epoch, and resuming mid-epoch gives the same batches."""
    task = data_task(load_spec(GA), str(_texts(tmp_path / "t.jsonl")), seed=5)
    per = steps_per_epoch(task, 8)
    assert per == -(-len(task.train) // 8)
    batches = [next(s) for s in [train_stream(task, 8, 5)] for _ in range(2 * per)]
    seen = sorted(tuple(r) for b in batches[:per] for r in b["tokens"].tolist())
    assert seen == sorted(tuple(r) for r in task.train.collate(list(task.train))["tokens"]
                          .tolist())
    assert not torch.equal(batches[0]["tokens"], batches[per]["tokens"])  # a new order
    later = train_stream(task, 8, 5, start=per + 1)
    assert torch.equal(next(later)["tokens"], batches[per + 1]["tokens"])


def test_a_resumed_data_run_equals_a_straight_one(tmp_path: Path) -> None:
    """12 steps straight, or 5 then a resume (without --data again) to 12, give the same
    parameters and the same data.json; the split and vocabulary are the stored ones."""
    data = str(_texts(tmp_path / "t.jsonl"))
    _run(tmp_path, "straight", data=data, steps=12, batch=8)
    _run(tmp_path, "resumed", data=data, steps=5, batch=8)
    _run(tmp_path, "resumed", steps=12, resume=True)
    a = load_checkpoint(tmp_path / "straight")
    b = load_checkpoint(tmp_path / "resumed")
    assert a.step == b.step == 12
    assert all(torch.equal(a.model[k], b.model[k]) for k in a.model)
    assert (tmp_path / "straight" / "data.json").read_text() == \
        (tmp_path / "resumed" / "data.json").read_text()


def test_early_stopping_after_patience_evaluations(tmp_path: Path) -> None:
    """With a learning rate too small to change anything, validation accuracy never
    improves after the first evaluation: --patience 2 stops at the third one."""
    data = str(_texts(tmp_path / "t.jsonl"))
    s = _run(tmp_path, "r", data=data, steps=40, batch=8, lr=1e-12, eval_every=2, patience=2)
    assert s.stopped_early == 6 and s.steps == 6  # type: ignore[attr-defined]
    lines = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text()
             .splitlines()]
    assert [ln["step"] for ln in lines if ln["split"] == "valid"] == [2, 4, 6]
    assert load_checkpoint(tmp_path / "r").step == 6
    assert "stopped early at step 6" in s.format()  # type: ignore[attr-defined]


def test_epochs_set_the_steps_and_evaluate_every_epoch(tmp_path: Path) -> None:
    """--epochs 2 over 45 training examples in batches of 8 is 2 × 6 steps, evaluated
    after each epoch on the 5 held-out examples."""
    data = str(_texts(tmp_path / "t.jsonl"))
    s = _run(tmp_path, "r", data=data, epochs=2, batch=8)
    assert s.steps == 12  # type: ignore[attr-defined]
    lines = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text()
             .splitlines()]
    assert [ln["step"] for ln in lines if ln["split"] == "valid"] == [6, 12]


def test_bf16_autocast_trains_on_cpu(tmp_path: Path) -> None:
    """--bf16 runs the passes under bfloat16 autocast: the losses are finite and the
    metrics are measured."""
    data = str(_texts(tmp_path / "t.jsonl"))
    s = _run(tmp_path, "r", data=data, steps=4, batch=8, bf16=True)
    lines = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text()
             .splitlines()]
    assert all(ln["loss"] == ln["loss"] and ln["loss"] < 1e3 for ln in lines
               if ln["split"] == "train")
    assert 0.0 <= s.metrics["accuracy"] <= 1.0  # type: ignore[attr-defined]


def test_devices_are_checked() -> None:
    """cpu and auto always work; an unknown device or a missing one is a clean error."""
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(TrainingError, match="unknown device"):
        pick_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(TrainingError, match="no cuda device"):
            pick_device("cuda")


@pytest.mark.gpu
def test_a_data_run_on_cuda_predicts_like_its_cpu_reload(tmp_path: Path) -> None:
    """Trained on cuda, a run reloads on the CPU and predicts what it predicts on cuda."""
    import attngraph

    data = str(_texts(tmp_path / "t.jsonl"))
    _run(tmp_path, "r", data=data, steps=10, batch=8, device="cuda")
    on_gpu = attngraph.load_run(tmp_path / "r", device="cuda").predict(data)
    on_cpu = attngraph.load_run(tmp_path / "r").predict(data)
    assert [r["prediction"] for r in on_gpu] == [r["prediction"] for r in on_cpu]
    for g, c in zip(on_gpu, on_cpu, strict=True):
        for k, p in c["probabilities"].items():
            assert g["probabilities"][k] == pytest.approx(p, abs=1e-4)


def test_tensorboard_scalars_when_it_is_installed(tmp_path: Path) -> None:
    """With TensorBoard installed (the `tensorboard` extra, part of `dev`), a run writes
    its training and validation figures as scalars into an event file in its directory
    (train/loss, valid/accuracy at the evaluated steps, equal to the metrics log's
    valid lines; no other split name)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data = str(_texts(tmp_path / "t.jsonl"))
    _run(tmp_path, "r", data=data, steps=4, batch=8, eval_every=2)
    acc = EventAccumulator(str(tmp_path / "r"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {t.split("/")[0] for t in tags} == {"train", "valid"}, tags
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.step for e in acc.Scalars("valid/accuracy")] == [2, 4]
    metrics = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text()
               .splitlines() if '"valid"' in ln]
    assert [e.value for e in acc.Scalars("valid/accuracy")] == pytest.approx(
        [m["accuracy"] for m in metrics], abs=1e-6)


def test_a_damaged_data_setting_in_the_checkpoint_is_refused(tmp_path: Path) -> None:
    """Resuming a data run whose checkpoint stores a damaged data setting is one error
    naming the checkpoint, before anything is trained."""
    data = str(_texts(tmp_path / "t.jsonl"))
    _run(tmp_path, "r", data=data, steps=2, batch=8)
    path = tmp_path / "r" / "checkpoint.pt"
    ck = torch.load(path, weights_only=True)
    ck["config"]["data"]["fields"] = "tokens=text"
    torch.save(ck, path)
    with pytest.raises(TrainingError) as info:
        _run(tmp_path, "r", steps=4, resume=True)
    d = info.value.diagnostics[0]
    assert "lacks valid data.fields" in d.message and d.loc.file == str(path)
    assert d.hint
