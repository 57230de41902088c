"""Every spec of ``mechanisms/`` through every command, and the properties of its module.

Per spec: ``validate`` passes and prints the parameter count of the compiled module;
both render views, ``describe`` and ``diff`` against its nearest catalog relative run
without a traceback; forward and backward are finite; and padding changes nothing:
an example computed alone equals the same example padded in a batch, on its real
positions. The comparison with a hand-written reference is in each mechanism's own
``tests/test_mechanism_<name>.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from mechanism_support import MECHANISMS, ROOT, TOL, relative

SPECS = sorted(MECHANISMS.glob("*.yaml"))


@pytest.fixture(scope="session")
def output_of(cli) -> Callable[..., str]:
    """``output_of(*args)``: what the command prints; it exits 0 without a traceback."""

    def run(*args: object) -> str:
        r = cli(*args, code=0)
        assert "Traceback" not in r.output
        return r.output

    return run


def test_every_mechanism_has_a_reference_test() -> None:
    """Each spec of the folder has its hand-written reference test."""
    for path in SPECS:
        assert (ROOT / "tests" / f"test_mechanism_{path.stem}.py").is_file(), path.name


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_mechanism_passes_every_command(path: Path, tmp_path: Path, output_of) -> None:
    """validate, both render views, describe, and diff against its catalog relative."""
    out = output_of("validate", path)
    assert "ok —" in out
    for view in ("architecture", "unrolled"):
        dot = tmp_path / f"{view}.dot"
        output_of("render", path, "--view", view, "-o", dot)
        assert dot.read_text(encoding="utf-8").startswith("digraph")
    assert "site" in output_of("describe", path)
    rel = ROOT / "specs" / f"{relative(path)}.yaml"
    assert rel.is_file(), f"{path.name} names a relative that is not in the catalog: {rel.name}"
    output_of("diff", rel, path)


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_mechanism_parameter_count_is_the_modules(path: Path, output_of) -> None:
    """The count validate prints equals the module's parameters (shared ones once)."""
    torch = pytest.importorskip("torch")
    import attngraph

    out = output_of("validate", path)
    printed = int(re.search(r"^parameters: ([\d,]+)$", out, re.M).group(1).replace(",", ""))
    model = attngraph.compile(path, seed=0)
    assert printed == sum(p.numel() for p in model.parameters())
    del torch


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_mechanism_padding_changes_nothing(path: Path) -> None:
    """Example 1 padded in a batch (and trained one step) gives what it gives alone."""
    torch = pytest.importorskip("torch")
    import attngraph
    from attngraph.lower.runtime.examples import random_inputs

    graph = attngraph.load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    full, short = 7, 4
    gen = torch.Generator().manual_seed(0)
    batch = random_inputs(graph, batch=2, length=full, generator=gen)
    for node in graph.inputs:
        if node.spec.type == "positions":  # example 1 has `short` real items to point at
            batch[node.id][1] %= short
    alone: dict[str, torch.Tensor] = {}
    padded = dict(batch)
    symbolic = False
    for node in graph.inputs:
        t = node.types[""]
        axes = [i + 1 for i, d in enumerate(t.dims) if isinstance(d, str)]
        x = batch[node.id]
        one = x[1:2]
        for ax in axes:
            one = one.narrow(ax, 0, short)
        alone[node.id] = one
        if axes and node.spec.type in ("tokens", "vectors", "graph", "positions"):
            symbolic = True
            mask = torch.ones(2, *[full] * len(axes), dtype=torch.bool)
            mask[1, short:] = False
            if len(axes) == 2:  # nested tokens: the words of example 1's sentences too
                mask[1, :, short:] = False
            padded[f"{node.id}_mask"] = mask
        adj = f"{node.id}_adjacency"
        if adj in batch:
            a = batch[adj][1:2, :short, :short]
            alone[adj] = a
    if not symbolic:
        pytest.skip("no input of variable length")
    with torch.no_grad():
        got = model(**padded)
        want = model(**alone)
    for name, ref in graph.outputs:
        t = graph.node(ref.src).types[ref.port]
        y = got[name][1:2]
        for i, d in enumerate(t.dims):
            if isinstance(d, str):
                y = y.narrow(i + 1 + (1 if t.heads else 0), 0, short)
        assert torch.isfinite(y).all(), name
        torch.testing.assert_close(y, want[name], **TOL, msg=f"output '{name}' changed")


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_mechanism_forward_backward_is_finite(path: Path) -> None:
    """A training-mode forward and backward on random inputs: finite outputs and grads."""
    torch = pytest.importorskip("torch")
    import attngraph
    from attngraph.lower.runtime.examples import random_inputs

    graph = attngraph.load_spec(path)
    model = attngraph.compile(graph, seed=0).train()
    out = model(**random_inputs(graph, batch=3, length=6,
                                generator=torch.Generator().manual_seed(1)))
    loss = sum(v.float().sum() for v in out.values() if v.is_floating_point())
    loss.backward()
    for name, v in out.items():
        assert torch.isfinite(v.float()).all(), name
    for name, p in model.named_parameters():
        assert p.grad is None or torch.isfinite(p.grad).all(), name
