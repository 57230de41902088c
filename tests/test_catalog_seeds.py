"""The catalog across seeds: every catalog spec, trained with its own train section
at seeds 0 to 4, lands at least MARGIN above each figure of its stated target (the
five-seed test, marked ``seeds``: about 15 CPU minutes, run with ``pytest -m seeds
tests``); the specs measured at several seeds in docs/training-results.json vary by
at most the stated spread over seeds 0, 1 and 2
(:data:`attngraph.train.report.results.SEED_SPREAD`). The default
run checks seed 0 of every spec with the same margin (tests/test_catalog.py) and
seed 1 of the specs whose training is chaotic here."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from test_catalog import MARGIN

from attngraph.frontend import load_spec
from attngraph.train.report.results import RESULTS_JSON, SEED_SPREAD

SPECS = Path(__file__).resolve().parent.parent / "specs"
CATALOG = sorted(p.stem for p in SPECS.glob("*.yaml"))
#: the seeds the five-seed test trains every catalog spec at
SEEDS = (0, 1, 2, 3, 4)
#: the specs whose targets are recorded at seeds 1 and 2 in docs/training-results.json
#: (new catalog specs of issue 15), whose figures' spread over the seeds is checked
MULTI_SEED = ("caption_generation", "handwriting_generation", "image_generation", "language_model",
              "memory_network", "ntm_copy", "object_recognition", "pointer_sort",
              "speech_recognition")
#: the specs whose figures moved most between seeds and CPUs before their training
#: was retuned (issue 26): the default run checks their seed 1 as well
CHAOTIC = ("memory_network", "ntm_copy", "pointer_sort")


def _meets(name: str, seed: int, metrics: dict[str, float]) -> None:
    """Every target figure of ``name`` reached at least MARGIN above its target."""
    target = dict(load_spec(SPECS / f"{name}.yaml").train.target)
    short = {k: (metrics.get(k), round(v + MARGIN, 6)) for k, v in target.items()
             if metrics.get(k, float("-inf")) < v + MARGIN}
    assert not short, f"{name} at seed {seed}: (figure, least allowed): {short}"


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
@pytest.mark.parametrize("name", CHAOTIC)
def test_chaotic_spec_meets_its_target_with_the_margin_at_seed_1(
        name: str, trained_metrics: Callable[..., dict]) -> None:
    """The quick check of the five-seed test below: a spec whose figures jump between
    seeds (a plateau, then a sudden solution) reaches its target plus MARGIN at seed 1
    too (seed 0 is tests/test_catalog.py's)."""
    pytest.importorskip("attngraph.lower")
    _meets(name, 1, trained_metrics(SPECS / f"{name}.yaml", 1))


@pytest.mark.slow
@pytest.mark.seeds
@pytest.mark.parametrize("name", CATALOG)
def test_spec_meets_its_target_with_the_margin_at_five_seeds(
        name: str, trained_metrics: Callable[..., dict]) -> None:
    """Trained at seeds 0 to 4 on one torch thread, the spec reaches every figure of
    its target plus MARGIN at each seed; for the multi-seed specs each target figure's
    largest minus smallest over seeds 0, 1 and 2 (those recorded in
    docs/training-results.json) is at most SEED_SPREAD."""
    pytest.importorskip("attngraph.lower")
    runs = {s: trained_metrics(SPECS / f"{name}.yaml", s) for s in SEEDS}
    for seed, m in runs.items():
        _meets(name, seed, m)
    if name in MULTI_SEED:
        for k in dict(load_spec(SPECS / f"{name}.yaml").train.target):
            figures = [runs[s][k] for s in (0, 1, 2)]
            assert max(figures) - min(figures) <= SEED_SPREAD, (k, figures)
