"""The slow seed test: the catalog specs measured at seeds 1 and 2 as well (those
in the ``seeds`` part of docs/training-results.json) reach their stated targets at
seeds 0, 1 and 2, and each target figure varies over the three seeds by at most
the stated spread (:data:`attngraph.train.results.SEED_SPREAD`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.pipeline import load_spec
from attngraph.train.results import RESULTS_JSON, SEED_SPREAD

SPECS = Path(__file__).resolve().parent.parent / "specs"
#: the specs whose targets are checked at three seeds (new catalog specs of issue 15)
MULTI_SEED = ("caption_generation", "handwriting_generation", "image_generation", "language_model",
              "memory_network", "ntm_copy", "object_recognition", "pointer_sort",
              "speech_recognition")


def test_the_multi_seed_specs_are_recorded_at_every_seed() -> None:
    """docs/training-results.json holds seeds 1 and 2 of every multi-seed spec, each
    meeting its target, and the seed-0 row of each."""
    data = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    rows = {r["spec"]: r for r in data["rows"]}
    for name in MULTI_SEED:
        target = dict(load_spec(SPECS / f"{name}.yaml").train.target)
        assert rows[name]["target"] == target and rows[name]["met"], name
        for seed in ("1", "2"):
            got = data["seeds"][name][seed]
            assert all(got[k] >= v for k, v in target.items()), (name, seed, got)


@pytest.mark.slow
@pytest.mark.parametrize("name", MULTI_SEED)
def test_spec_meets_its_target_at_three_seeds_within_the_spread(name: str) -> None:
    """Trained at seeds 0, 1 and 2 on one torch thread, the spec meets every target
    at each seed, and each target figure's largest minus smallest is at most
    SEED_SPREAD."""
    import torch

    from attngraph.train.loop import train

    pytest.importorskip("attngraph.lower")
    graph = load_spec(SPECS / f"{name}.yaml")
    target = dict(graph.train.target)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        runs = [train(graph, seed=s).metrics for s in (0, 1, 2)]
    finally:
        torch.set_num_threads(before)
    for seed, m in enumerate(runs):
        assert all(m.get(k, float("-inf")) >= v for k, v in target.items()), (seed, m, target)
    for k in target:
        figures = [m[k] for m in runs]
        assert max(figures) - min(figures) <= SEED_SPREAD, (k, figures)
