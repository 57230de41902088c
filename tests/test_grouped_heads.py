"""Grouped-query attention without a copy of the keys and values per query head: the
fused node passes SDPA the grouped heads (``enable_gqa``), the readout multiplies each
group's weights by its value head. Values and gradients equal those of the repeated
heads (:func:`attngraph.lower.rules.attention.group_heads`)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.lower.rules.attention import FusedAttention, Readout, grouped_matmul  # noqa: E402
from attngraph.lower.runtime.memo import tracing  # noqa: E402

MECHANISMS = Path(__file__).resolve().parents[1] / "mechanisms"
SPEC = (MECHANISMS / "grouped_query_attention.yaml").read_text(encoding="utf-8")
#: 8 query heads over 2 key and value heads; over one (multi-query attention)
SPECS = {"gqa": SPEC,
         "mqa": (MECHANISMS / "multi_query_attention.yaml").read_text(encoding="utf-8")}


def _compare(model: torch.nn.Module, kind: type, inputs: dict[str, torch.Tensor]) -> None:
    """The model's outputs and gradients with its ``kind`` nodes grouped, and with them
    reading repeated heads: equal (to float rounding)."""
    mods = [m for m in model.modules() if isinstance(m, kind)]
    assert mods and all(m.grouped for m in mods)
    results = []
    for grouped in (True, False):
        for m in mods:
            m.grouped = grouped
        model.zero_grad(set_to_none=True)
        out = model(**inputs)
        sum(v.sum() * (i + 1) for i, v in enumerate(out.values())).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        results.append(({k: v.detach() for k, v in out.items()}, grads))
    (out, grads), (out_ref, grads_ref) = results
    for k in out:
        torch.testing.assert_close(out[k], out_ref[k], rtol=1e-5, atol=1e-6, msg=k)
    for k in grads:
        torch.testing.assert_close(grads[k], grads_ref[k], rtol=1e-5, atol=1e-5, msg=k)


@pytest.mark.parametrize("mask", ["{causal: true}", "{window: 2}", None])
@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("name", list(SPECS))
def test_fused_sdpa_reads_grouped_heads(mask: str | None, padded: bool, name: str) -> None:
    """The fused node (weights not asked for) with causal, window or no mask, padded or
    not: SDPA's own grouped heads give the repeated heads' numbers and gradients."""
    spec = SPECS[name].replace("outputs: {z: z, attention: p}", "outputs: {z: z}")
    spec = spec.replace("{causal: true}", mask) if mask else spec.replace(
        ", mask: {causal: true}", "")
    model = attngraph.compile(spec, seed=0)
    x = torch.randn(3, 7, 32)
    inputs = {"x": x}
    if padded:
        inputs["x_mask"] = torch.arange(7)[None, :] < torch.tensor([7, 4, 1])[:, None]
    _compare(model, FusedAttention, inputs)


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("name", list(SPECS))
def test_readout_reads_grouped_heads(padded: bool, name: str) -> None:
    """The explicit chain (the weights an output): the grouped readout gives the repeated
    values' numbers and gradients."""
    model = attngraph.compile(SPECS[name], seed=0)
    inputs = {"x": torch.randn(3, 7, 32)}
    if padded:
        inputs["x_mask"] = torch.arange(7)[None, :] < torch.tensor([7, 4, 2])[:, None]
    _compare(model, Readout, inputs)


def test_grouped_matmul_is_the_product_with_repeated_heads() -> None:
    """Query head j reads value head j // (h / h_kv), as group_heads repeats them."""
    w = torch.softmax(torch.randn(2, 6, 5, 4, dtype=torch.float64), -1).requires_grad_()
    v = torch.randn(2, 3, 4, 7, dtype=torch.float64, requires_grad=True)
    z = grouped_matmul(w, v)
    want = w @ v.repeat_interleave(2, dim=1)
    torch.testing.assert_close(z, want)
    g = torch.randn_like(z)
    torch.testing.assert_close(torch.autograd.grad(z, (w, v), g),
                               torch.autograd.grad(want, (w, v), g))


def test_grouped_heads_are_repeated_while_tracing() -> None:
    """Under a trace (torch.export, ONNX, torch.compile) the repeated heads are what the
    program holds: the grouped forms are eager ones."""
    assert not tracing()
    model = attngraph.compile(SPEC.replace("outputs: {z: z, attention: p}",
                                           "outputs: {z: z}"), seed=0).eval()
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        want = model(x=x)["z"]
    prog = torch.export.export(model, (), kwargs={"x": x}, strict=False)
    sdpa = [n for n in prog.graph.nodes if "scaled_dot_product" in str(n.target)]
    assert len(sdpa) == 1 and not sdpa[0].kwargs.get("enable_gqa", False)
    assert sdpa[0].args[1].meta["val"].shape[1] == 8  # the keys, a head per query head
    with torch.no_grad():
        torch.testing.assert_close(prog.module()(x=x)["z"], want, rtol=1e-5, atol=1e-6)
