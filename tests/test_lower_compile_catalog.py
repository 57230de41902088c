"""torch.compile(fullgraph=True) runs every catalog spec without loops or policies."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attngraph
from attngraph.lower.examples import random_inputs
from attngraph.pipeline import load_spec

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))


def _plain(path: Path) -> bool:
    g = load_spec(path)
    return not any(n.kind in ("loop", "policy") for _, n in g.walk())


PLAIN = [p for p in SPECS if _plain(p)]


def test_there_are_plain_specs() -> None:
    """The catalog has specs without loops or policies for the compile test to cover."""
    assert len(PLAIN) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("path", PLAIN, ids=[p.stem for p in PLAIN])
def test_catalog_spec_compiles_fullgraph(path: Path) -> None:
    """The spec's module traces as one graph (no graph breaks) and gives the same outputs.

    The eager backend checks the trace without needing a C++ toolchain per test; the
    inductor backend is measured in benchmarks/ (docs/performance.md)."""
    graph = load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    inputs = random_inputs(graph, batch=2, length=6)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        want = model(**inputs)
        got = compiled(**inputs)
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k])
