"""Checkpoints: atomic writes, spec hashes, refusal of another spec, exact resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph.errors import TrainingError
from attngraph.pipeline import load_spec
from attngraph.train import checkpoints as ck
from attngraph.train.runner import RunConfig, run

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
    """A crash while writing keeps the previous file intact and leaves no temp file."""
    import torch

    run(_cfg(tmp_path, 2))
    before = (tmp_path / ck.CHECKPOINT).read_bytes()
    c = ck.load_checkpoint(tmp_path)

    def boom(*a: object, **k: object) -> None:
        msg = "disk full"
        raise OSError(msg)

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError, match="disk full"):
        ck.save_checkpoint(tmp_path / ck.CHECKPOINT, c)
    assert (tmp_path / ck.CHECKPOINT).read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_missing_or_damaged_checkpoint_is_a_training_error(tmp_path: Path) -> None:
    """No file, or a file that is not a checkpoint, gives TrainingError with a hint."""
    with pytest.raises(TrainingError, match="no checkpoint"):
        ck.load_checkpoint(tmp_path)
    (tmp_path / ck.CHECKPOINT).write_bytes(b"not a checkpoint")
    with pytest.raises(TrainingError, match="cannot read"):
        ck.load_checkpoint(tmp_path)


def test_resume_equals_straight_run(tmp_path: Path) -> None:
    """N steps straight == N/2 steps, then --resume to N: parameters to 1e-6, same losses."""
    run(_cfg(tmp_path / "straight", 8))
    run(_cfg(tmp_path / "split", 4))
    run(RunConfig(spec=str(GA), steps=8, out=str(tmp_path / "split"), resume=True,
                  quiet=True))
    a = ck.load_checkpoint(tmp_path / "straight")
    b = ck.load_checkpoint(tmp_path / "split")
    assert b.step == a.step == 8
    for k, v in a.model.items():
        assert (v - b.model[k]).abs().max() <= 1e-6, k
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
    assert max(float((v - b.model[k]).abs().max()) for k, v in a.model.items()) <= 1e-6


def test_run_and_the_python_api_share_the_step_and_leave_the_rng_alone(tmp_path: Path) -> None:
    """The CLI's run and the Python API's train share one step, one set of defaults and
    one RNG policy: on the hard attention spec (whose policy samples from torch's RNG)
    they give the same losses, and neither changes the caller's RNG state."""
    import json

    import torch

    from attngraph.train.loop import train

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
