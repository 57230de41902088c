"""The parameter count the front end reports (validate, describe, the resource guard)
is the compiled module's, shared parameters once: for every catalog spec, every
mechanism and every whole spec of the language reference."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import attngraph  # noqa: E402
from fuzz.seeds import seeds  # noqa: E402

SEEDS = seeds()


@pytest.mark.parametrize("seed", SEEDS, ids=[s.name for s in SEEDS])
def test_reported_parameters_are_the_modules(seed) -> None:  # noqa: ANN001
    """graph.params == the number of distinct parameter elements of the module."""
    graph = attngraph.loads_spec(seed.text, seed.name)
    model = attngraph.compile(graph, seed=0)
    assert graph.params == sum(p.numel() for p in model.parameters())
