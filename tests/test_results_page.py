"""docs/training-results.md is the page of the stored measurements, and its
statement of the catalog's CI training time adds up the stored CPU seconds the
way the slow tests train: every row at seed 0, and the multi-seed specs again
at seeds 0, 1 and 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.train.report.results import RESULTS_JSON, RESULTS_MD, ci_seconds, page


def test_results_page_is_generated_from_the_stored_rows() -> None:
    """The page equals what `python -m attngraph.train.report.results --table` data makes;
    rerun the results command (or `attngraph docs`) when it is stale."""
    assert RESULTS_MD.read_text(encoding="utf-8") == page()


def test_ci_time_adds_every_training_the_slow_tests_do() -> None:
    """The stated total is the rows' seed-0 CPU seconds plus, for each multi-seed
    spec, its seed-0 figure again and its stored extra seeds' figures; it is on
    the page."""
    data = json.loads(RESULTS_JSON.read_text(encoding="utf-8"))
    cpu0 = {r["spec"]: r["cpu_s"] for r in data["rows"]}
    extra = data.get("seed_cpu_s", {})
    want = sum(cpu0.values())
    for spec, seeds in data.get("seeds", {}).items():
        want += cpu0[spec] + sum(extra.get(spec, {}).get(s, cpu0[spec]) for s in seeds)
    ci = ci_seconds()
    assert abs(ci["total"] - want) < 0.05 + 0.05 * len(cpu0)
    assert ci["multi_specs"] == len(data.get("seeds", {}))
    assert f"takes {ci['total']:g} CPU seconds" in RESULTS_MD.read_text(encoding="utf-8")


def test_page_option_rewrites_the_page_without_training(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m attngraph.train.report.results --page` writes the page of the stored file
    (what a merge of the JSON needs) and trains nothing."""
    from attngraph.train.report import results

    out = tmp_path / "page.md"
    monkeypatch.setattr(results, "RESULTS_MD", out)
    monkeypatch.setattr(results, "measure", lambda *a, **k: pytest.fail("trained"))
    assert results.main(["--page"]) == 0
    assert out.read_text(encoding="utf-8") == page()
