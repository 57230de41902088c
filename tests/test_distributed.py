"""``--nproc 2``: two gloo ranks with DDP follow one process with the summed batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.train.run.distributed import free_port, launch
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store import checkpoints as ck

ROOT = Path(__file__).resolve().parents[1]


def _losses(run_dir: Path) -> list[float]:
    text = (run_dir / "metrics.jsonl").read_text()
    return [json.loads(ln)["loss"] for ln in text.splitlines() if '"train"' in ln]


@pytest.mark.slow  # two spawned processes import torch: ~30 s on 2 busy cores
def test_two_ranks_match_one_process_with_the_whole_batch(tmp_path: Path) -> None:
    """Each rank trains on half of every batch; the ranks end with identical parameters,
    and parameters and the (rank-averaged) loss curve match a single process that sees
    the whole batch, within float tolerance."""
    cfg = RunConfig(spec=str(ROOT / "specs" / "global_attention.yaml"), steps=5, batch=8,
                    eval_every=5, eval_size=16, quiet=True, out=str(tmp_path / "two"))
    two = launch(cfg, 2)
    one = run(RunConfig(**{**cfg.__dict__, "out": str(tmp_path / "one")}))
    assert two.world == 2 and two.rank_max_diff == 0.0
    a, b = ck.load_checkpoint(tmp_path / "two"), ck.load_checkpoint(tmp_path / "one")
    assert a.step == b.step == 5
    for k, v in b.model.items():
        assert float((a.model[k] - v).abs().max()) < 1e-5, k
    la, lb = _losses(tmp_path / "two"), _losses(tmp_path / "one")
    assert len(la) == len(lb) == 5
    assert max(abs(x - y) for x, y in zip(la, lb, strict=True)) < 1e-5
    assert lb[0] != lb[-1], "the parameters moved, so the comparison means something"
    assert two.metrics == pytest.approx(one.metrics, abs=1e-6)


def test_shards_are_disjoint_and_cover_the_batch() -> None:
    """The ranks' slices of a batch are disjoint, equal-sized and together the whole batch."""
    import torch

    from attngraph.train.run.ddp import shard as _shard

    batch = {"x": torch.arange(12).reshape(6, 2), "y": torch.arange(6)}
    parts = [_shard(batch, r, 3) for r in range(3)]
    assert [len(p["y"]) for p in parts] == [2, 2, 2]
    assert torch.equal(torch.cat([p["y"] for p in parts]), batch["y"])
    assert torch.equal(torch.cat([p["x"] for p in parts]), batch["x"])


def test_free_port_is_bindable() -> None:
    """free_port returns a port on 127.0.0.1 that can be bound again."""
    import socket

    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
    assert 1024 <= port <= 65535
