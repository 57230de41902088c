"""torch.compile(fullgraph=True) runs every catalog spec, loops and policies included,
forward and backward, and gives the outputs and gradients of the eager module."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attngraph
from attngraph.frontend import load_spec
from attngraph.lower.runtime.examples import random_inputs

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))


def _has(path: Path, *kinds: str) -> bool:
    return any(n.kind in kinds for _, n in load_spec(path).walk())


def test_the_catalog_has_loops_and_policies_to_compile() -> None:
    """The compile test covers recurrent decoders and a sampling policy too."""
    assert sum(_has(p, "loop") for p in SPECS) >= 4
    assert any(_has(p, "policy") for p in SPECS)


def _masked(graph: attngraph.Graph, inputs: dict[str, torch.Tensor]) -> None:
    """Pad the second example of every input with a variable length (positions into
    such an input then point at its real items)."""
    for node in graph.inputs:
        t = node.types[""]
        if node.spec.type in ("tokens", "vectors") and t.dims and isinstance(t.dims[0], str):
            n = inputs[node.id].shape[1]
            mask = torch.ones(2, n, dtype=torch.bool)
            mask[1, n - 2:] = False
            inputs[f"{node.id}_mask"] = mask
    for node in graph.inputs:  # positions point at real items of their input
        if node.spec.type == "positions" and f"{node.spec.of}_mask" in inputs:
            inputs[node.id] = inputs[node.id] % inputs[f"{node.spec.of}_mask"].sum(-1)[:, None]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_catalog_spec_compiles_fullgraph(path: Path, mode: str) -> None:
    """The spec's module traces as one graph (no graph breaks), with padding in the
    batch, and gives the same outputs; in training (teacher forcing) the same
    gradients too. A sampling policy is checked in eval (it takes the argmax).

    The eager backend checks the trace without needing a C++ toolchain per test; the
    inductor backend is measured in benchmarks/ (docs/performance.md)."""
    if mode == "train" and _has(path, "policy"):
        pytest.skip("a training policy samples: its draws differ between runs")
    graph = load_spec(path)
    model = attngraph.compile(graph, seed=0).train(mode == "train")
    inputs = random_inputs(graph, batch=2, length=6, generator=torch.Generator().manual_seed(0))
    _masked(graph, inputs)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    results = []
    for run in (model, compiled):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)  # a latent samples: the same draws in both runs
        out = run(**inputs)
        sum(v.sum() for v in out.values() if v.is_floating_point()).backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        results.append(({k: v.detach() for k, v in out.items()}, grads))
    (want, want_g), (got, got_g) = results
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=1e-5)
    assert set(got_g) == set(want_g)
    for k in want_g:
        torch.testing.assert_close(got_g[k], want_g[k], atol=1e-5, rtol=1e-5, msg=k)
