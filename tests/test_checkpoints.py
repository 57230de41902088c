"""Checkpoints: atomic writes, spec hashes, refusal of another spec, exact resume,
loading as data only (weights_only), and one located error for every damaged file."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from attngraph.errors import TrainingError
from attngraph.frontend import load_spec
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store import checkpoints as ck

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"


def _cfg(out: Path, steps: int, **kw: object) -> RunConfig:
    return RunConfig(spec=str(GA), steps=steps, batch=8, out=str(out), eval_every=3,
                     checkpoint_every=3, eval_size=16, quiet=True, **kw)  # type: ignore[arg-type]


def test_hash_ignores_comments_but_not_the_mechanism(tmp_path: Path) -> None:
    """Comments and blank lines keep the spec hash; a changed dim changes it."""
    text = GA.read_text()
    commented = tmp_path / "commented.yaml"
    commented.write_text("# a new comment\n\n" + text)
    changed = tmp_path / "changed.yaml"
    changed.write_text(text.replace("d: 32", "d: 16"))
    base = ck.spec_hash(load_spec(GA))
    assert ck.spec_hash(load_spec(commented)) == base
    assert ck.spec_hash(load_spec(changed)) != base


def test_checkpoint_holds_spec_text_hash_and_state(tmp_path: Path) -> None:
    """A run's checkpoint has the spec text, its hash, the step, optimizer and RNG state."""
    run(_cfg(tmp_path, 4))
    c = ck.load_checkpoint(tmp_path, load_spec(GA))
    assert c.step == 4
    assert c.spec_text == GA.read_text()
    assert c.spec_hash == ck.spec_hash(load_spec(GA))
    assert c.optimizer["state"], "Adam moments are saved"
    assert c.rng["torch"] is not None and c.rng["task"] is not None


def test_loading_into_another_spec_fails_with_both_hashes(tmp_path: Path) -> None:
    """A checkpoint refuses a different spec, naming both hashes and how to fix it."""
    run(_cfg(tmp_path / "run", 2))
    other = tmp_path / "other.yaml"
    other.write_text(GA.read_text().replace("d: 32", "d: 16"))
    g = load_spec(other)
    with pytest.raises(TrainingError) as err:
        ck.load_checkpoint(tmp_path / "run", g)
    saved = ck.load_checkpoint(tmp_path / "run").spec_hash
    assert saved[:16] in err.value.message
    assert ck.spec_hash(g)[:16] in err.value.message
    assert err.value.hint and "--out" in err.value.hint


def test_resume_into_another_spec_fails(tmp_path: Path) -> None:
    """--resume with an edited mechanism raises TrainingError instead of loading."""
    run(_cfg(tmp_path / "run", 2))
    other = tmp_path / "other.yaml"
    other.write_text(GA.read_text().replace("classes: 4}", "classes: 5}"))
    cfg = RunConfig(spec=str(other), steps=4, out=str(tmp_path / "run"), resume=True,
                    quiet=True)
    with pytest.raises(TrainingError, match="different spec"):
        run(cfg)


def test_failed_write_leaves_the_old_checkpoint(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk while writing keeps the previous file intact, leaves no temp file
    and is a TrainingError naming the checkpoint."""
    run(_cfg(tmp_path, 2))
    before = (tmp_path / ck.CHECKPOINT).read_bytes()
    c = ck.load_checkpoint(tmp_path)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(TrainingError, match="no space left") as err:
        ck.save_checkpoint(tmp_path / ck.CHECKPOINT, c)
    assert err.value.loc.file == str(tmp_path / ck.CHECKPOINT)
    assert err.value.hint and "--resume" in err.value.hint
    assert (tmp_path / ck.CHECKPOINT).read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_missing_or_damaged_checkpoint_is_a_training_error(tmp_path: Path) -> None:
    """No file, or a file that is not a checkpoint, gives TrainingError with a hint."""
    with pytest.raises(TrainingError, match="no checkpoint"):
        ck.load_checkpoint(tmp_path)
    (tmp_path / ck.CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(TrainingError, match="cannot read"):
        ck.load_checkpoint(tmp_path)


class _Touch:
    """Unpickling this calls ``open(marker, "w")``: it creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


def test_a_crafted_pickle_runs_nothing_and_is_refused(tmp_path: Path) -> None:
    """A checkpoint.pt whose unpickling would create a file (as any code could run) is
    refused with a TrainingError naming the file; the file is not created. (The same
    file does create it under weights_only=False: the check has teeth.)"""
    import torch

    marker = tmp_path / "pwned"
    path = tmp_path / ck.CHECKPOINT
    run(_cfg(tmp_path, 2))
    good = torch.load(path, weights_only=True)
    torch.save({**good, "model": _Touch(marker)}, path)
    torch.load(path, weights_only=False)
    assert marker.exists(), "the crafted file runs code when fully unpickled"
    marker.unlink()
    with pytest.raises(TrainingError, match="refused to load") as err:
        ck.load_checkpoint(tmp_path)
    assert not marker.exists()
    assert err.value.loc.file == str(path)
    assert "a reference to io.open" in err.value.message
    assert "weights_only" not in err.value.format()  # no advice to load it unsafely
    with pytest.raises(TrainingError, match="refused to load"):
        run(_cfg(tmp_path, 4, resume=True))
    assert not marker.exists()


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.pop(key)


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


def _config_without(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["config"].pop(key)


def _rng_task(d: dict[str, Any]) -> None:
    d["rng"]["task"] = {"bit_generator": "PCG64", "state": "garbage"}


@pytest.mark.parametrize(("damage", "says"), [
    (_drop("model"), "lacks model"),
    (_drop("rng"), "lacks rng"),
    (_drop("config"), "lacks config"),
    (_set("config", {}), "config (the run's settings) is empty"),
    (_config_without("seed"), "config lacks valid seed"),
    (_set("step", "four"), "damaged step"),
    (_set("model", {"nodes.x.W": [1, 2]}), "damaged model"),
    (_set("optimizer", {"state": {}}), "damaged optimizer"),
    (_rng_task, "damaged rng"),
    (_set("format", 99), "not an attngraph checkpoint"),
], ids=["no-model", "no-rng", "no-config", "empty-config", "config-no-seed", "step",
        "model", "optimizer", "rng", "format"])
def test_a_damaged_checkpoint_is_one_located_error(
        tmp_path: Path, damage: Callable[[dict[str, Any]], None], says: str) -> None:
    """Every damaged key gives one TrainingError at the file, with a hint, on load and
    on resume; the run's files are left as they were."""
    import torch

    path = tmp_path / ck.CHECKPOINT
    run(_cfg(tmp_path, 2))
    data = torch.load(path, weights_only=True)
    damage(data)
    torch.save(data, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(TrainingError) as err:
        ck.load_checkpoint(tmp_path)
    assert says in err.value.message
    assert err.value.loc.file == str(path) and err.value.hint
    with pytest.raises(TrainingError, match=says.split(" (")[0]):
        run(_cfg(tmp_path, 4, resume=True))
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


@pytest.mark.parametrize("content", [b"", b"garbage", "half"], ids=["empty", "garbage",
                                                                     "truncated"])
def test_a_truncated_or_garbage_file_is_one_located_error(tmp_path: Path,
                                                          content: bytes | str) -> None:
    """An empty, garbage or half-written checkpoint.pt is a TrainingError at the file."""
    path = tmp_path / ck.CHECKPOINT
    run(_cfg(tmp_path, 2))
    whole = path.read_bytes()
    path.write_bytes(whole[:len(whole) // 2] if content == "half" else content)
    with pytest.raises(TrainingError, match="truncated or not a checkpoint") as err:
        ck.load_checkpoint(tmp_path)
    assert err.value.loc.file == str(path) and err.value.hint


def _reshape(d: dict[str, Any]) -> None:
    name = next(iter(d["model"]))
    d["model"][name] = d["model"][name].new_zeros(3, 5, 7)


def _reshape_moment(d: dict[str, Any]) -> None:
    st = next(iter(d["optimizer"]["state"].values()))
    st["exp_avg"] = st["exp_avg"].new_zeros(3, 5, 7)


def _rename(d: dict[str, Any]) -> None:
    name = next(iter(d["model"]))
    d["model"]["nodes.nowhere.W"] = d["model"].pop(name)


@pytest.mark.parametrize(("damage", "says"), [
    (_reshape, "has shape (3, 5, 7) here"),
    (_reshape_moment, "optimizer state of parameter 0: exp_avg has shape (3, 5, 7)"),
    (_rename, "unexpected nodes.nowhere.W"),
], ids=["parameter-shape", "adam-moment-shape", "missing-parameter"])
def test_a_checkpoint_that_does_not_fit_the_model_is_refused_on_resume(
        tmp_path: Path, damage: Callable[[dict[str, Any]], None], says: str) -> None:
    """A wrongly shaped or missing parameter (or optimizer moment) under the right spec
    hash is a TrainingError at the checkpoint naming the entry, before any file is
    touched."""
    import torch

    path = tmp_path / ck.CHECKPOINT
    run(_cfg(tmp_path, 2))
    data = torch.load(path, weights_only=True)
    damage(data)
    torch.save(data, path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(TrainingError,
                       match="does not fit the spec's model|optimizer state is damaged") as err:
        run(_cfg(tmp_path, 4, resume=True))
    assert says in err.value.message
    assert err.value.loc.file == str(path) and err.value.hint
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_checkpoints_hold_only_tensors_and_plain_data(tmp_path: Path) -> None:
    """A run's checkpoint loads with weights_only=True; its task stream and settings
    are plain data (no numpy objects) and its torch RNG state is a tensor."""
    import torch

    run(_cfg(tmp_path, 2))
    data = torch.load(tmp_path / ck.CHECKPOINT, weights_only=True)
    assert isinstance(data["rng"]["torch"], torch.Tensor)

    def plain(v: object) -> bool:
        if isinstance(v, dict):
            return all(isinstance(k, str) and plain(x) for k, x in v.items())
        if isinstance(v, list):
            return all(plain(x) for x in v)
        return v is None or type(v) in (bool, int, float, str)

    assert plain(data["rng"]["task"]) and plain(data["config"]) and plain(data["metrics"])


def _same_state(a: ck.Checkpoint, b: ck.Checkpoint) -> None:
    """Assert two checkpoints hold the same bits: parameters, optimizer, random states."""
    import torch

    assert a.model.keys() == b.model.keys()
    for k, v in a.model.items():
        assert torch.equal(v, b.model[k]), k
    for i, st in a.optimizer["state"].items():
        for name, v in st.items():
            assert torch.equal(v, b.optimizer["state"][i][name]), (i, name)
    assert torch.equal(a.rng["torch"], b.rng["torch"]) and a.rng["task"] == b.rng["task"]


def test_resume_equals_straight_run(tmp_path: Path) -> None:
    """N steps straight == N/2 steps, then --resume to N: the same bits (parameters,
    optimizer state, random states), the same losses."""
    run(_cfg(tmp_path / "straight", 8))
    run(_cfg(tmp_path / "split", 4))
    run(RunConfig(spec=str(GA), steps=8, out=str(tmp_path / "split"), resume=True,
                  quiet=True))
    a = ck.load_checkpoint(tmp_path / "straight")
    b = ck.load_checkpoint(tmp_path / "split")
    assert b.step == a.step == 8
    _same_state(a, b)
    def train_lines(d: str) -> list[str]:
        text = (tmp_path / d / "metrics.jsonl").read_text()
        return [ln for ln in text.splitlines() if '"train"' in ln]

    # the first half also evaluates at its last step, so compare the training lines
    assert len(train_lines("split")) == 8
    assert train_lines("straight") == train_lines("split")


def test_resume_of_a_hard_attention_spec_is_exact(tmp_path: Path) -> None:
    """Sampled glimpses resume exactly too: torch's RNG state travels in the checkpoint."""
    spec = str(ROOT / "specs" / "glimpse_hard.yaml")

    def cfg(out: str, steps: int, resume: bool = False) -> RunConfig:
        return RunConfig(spec=spec, steps=steps, batch=4, out=str(tmp_path / out),
                         eval_every=2, checkpoint_every=2, eval_size=4, quiet=True,
                         resume=resume)

    run(cfg("straight", 4))
    run(cfg("split", 2))
    run(cfg("split", 4, resume=True))
    a, b = ck.load_checkpoint(tmp_path / "straight"), ck.load_checkpoint(tmp_path / "split")
    _same_state(a, b)


def test_run_and_the_python_api_share_the_step_and_leave_the_rng_alone(tmp_path: Path) -> None:
    """The CLI's run and the Python API's train share one step, one set of defaults and
    one RNG policy: on the hard attention spec (whose policy samples from torch's RNG)
    they give the same losses, and neither changes the caller's RNG state."""
    import json

    import torch

    from attngraph.train.engine.loop import train

    spec = str(ROOT / "specs" / "glimpse_hard.yaml")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as run does for small models: the same float sums
    try:
        torch.manual_seed(123)
        state = torch.get_rng_state()
        run(RunConfig(spec=spec, steps=3, batch=4, eval_size=4, quiet=True, out=str(tmp_path)))
        assert torch.equal(torch.get_rng_state(), state)
        losses: list[float] = []
        train(spec, steps=3, batch=4, eval_size=4,
              callback=lambda _step, info: losses.append(info["loss"]))
        assert torch.equal(torch.get_rng_state(), state)
    finally:
        torch.set_num_threads(threads)
    text = (tmp_path / "metrics.jsonl").read_text()
    assert losses == [json.loads(ln)["loss"] for ln in text.splitlines() if '"train"' in ln]
