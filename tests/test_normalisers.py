"""The normalisers of a softmax node: entmax-1.5, top-k, sparsemax, and the
normalisation over the queries with a renormalising readout (Slot Attention)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import attngraph  # noqa: E402
from attngraph.errors import ShapeError  # noqa: E402
from attngraph.lower.rules.normalisers import (  # noqa: E402
    masked_entmax15,
    masked_sparsemax,
    masked_topk,
)

TOL = {"atol": 1e-5, "rtol": 1e-5}


def _entmax15_bisect(z: torch.Tensor) -> torch.Tensor:
    """Entmax-1.5 of one row by bisection on τ: Σ max(z/2 - τ, 0)² = 1."""
    z = z.double() / 2
    lo, hi = z.max() - 1, z.max()
    for _ in range(100):
        tau = (lo + hi) / 2
        if (torch.clamp(z - tau, min=0) ** 2).sum() > 1:
            lo = tau
        else:
            hi = tau
    return torch.clamp(z - (lo + hi) / 2, min=0) ** 2


def _sparsemax_bisect(z: torch.Tensor) -> torch.Tensor:
    z = z.double()
    lo, hi = z.max() - 1, z.max()
    for _ in range(100):
        tau = (lo + hi) / 2
        if torch.clamp(z - tau, min=0).sum() > 1:
            lo = tau
        else:
            hi = tau
    return torch.clamp(z - (lo + hi) / 2, min=0)


def _masked_rows() -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    torch.manual_seed(0)
    lengths = [9, 5, 1, 0]
    z = torch.randn(4, 9) * 3
    return z, torch.arange(9)[None, :] < torch.tensor(lengths)[:, None], lengths


@pytest.mark.parametrize(("fn", "ref"), [(masked_entmax15, _entmax15_bisect),
                                         (masked_sparsemax, _sparsemax_bisect)])
def test_sorting_normalisers_equal_their_definition(fn, ref) -> None:
    """The sort-based weights equal the definition solved by bisection, per real row."""
    z, mask, lengths = _masked_rows()
    p = fn(z, mask)
    for b, n in enumerate(lengths):
        if n:
            torch.testing.assert_close(p[b, :n].double(), ref(z[b, :n]), **TOL)
        assert (p[b, n:] == 0).all()
    assert (p[3] == 0).all()


def test_entmax15_is_sparse_and_between_softmax_and_sparsemax() -> None:
    """Entmax-1.5 gives exact zeros, but fewer than sparsemax on the same scores."""
    z = torch.linspace(-3, 3, 40)[None]
    ent, sp = masked_entmax15(z, None), masked_sparsemax(z, None)
    assert 0 < (ent == 0).sum() < (sp == 0).sum()


def test_topk_keeps_k_highest_and_is_softmax_over_them() -> None:
    """Top-k weights: exactly k non-zero (fewer real items: all of them), softmax there."""
    z, mask, lengths = _masked_rows()
    p = masked_topk(z, mask, 3)
    for b, n in enumerate(lengths):
        kept = (p[b] > 0).sum().item()
        assert kept == min(3, n)
        if n:
            top = z[b, :n].topk(min(3, n))
            want = torch.softmax(top.values, -1)
            torch.testing.assert_close(p[b, top.indices], want, **TOL)


def test_normaliser_gradients_are_finite_with_padding() -> None:
    """Backward through every normaliser with a fully masked row gives finite gradients."""
    z, mask, _ = _masked_rows()
    for fn in (masked_entmax15, masked_sparsemax, lambda a, m: masked_topk(a, m, 2)):
        zz = z.clone().requires_grad_(True)
        (fn(zz, mask) * torch.randn(4, 9)).sum().backward()
        assert torch.isfinite(zz.grad).all()


SLOTS = """
attngraph: 1
name: slots
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
nodes:
  x:     {kind: items, from: src}
  slots: {kind: queries, learned: 3, dim: d}
  s:     {kind: scorer, fn: dot, query: slots, key: x}
  p:     {kind: softmax, scores: s, axis: queries}
  upd:   {kind: readout, weights: p, values: x, normalize: true}
outputs: {updates: upd, attention: p}
"""


def test_softmax_over_queries_and_renormalised_readout() -> None:
    """Each real item's weights sum to 1 over the slots; padded items get 0; the readout
    is (p + ε)-weighted mean over the real items, as Slot Attention computes it."""
    model = attngraph.compile(SLOTS, seed=0)
    x = torch.randn(2, 6, 8)
    mask = torch.arange(6)[None, :] < torch.tensor([6, 4])[:, None]
    out = model(src=x, src_mask=mask)
    p = out["attention"]
    slots = model.state_dict()["nodes.slots.weight"]
    dots = torch.einsum("kd,bnd->bkn", slots, x)
    want = dots.softmax(1) * mask[:, None, :]
    torch.testing.assert_close(p, want, **TOL)
    w = (want + 1e-8) * mask[:, None, :]
    torch.testing.assert_close(out["updates"], (w / w.sum(-1, keepdim=True)) @ x, **TOL)


def test_padded_queries_take_no_part_in_a_softmax_over_queries() -> None:
    """With queries of a padded length, padded queries get 0 and the real ones sum to 1."""
    spec = """
attngraph: 1
name: over_queries
inputs:
  a: {type: vectors, dim: 4, length: M}
  b: {type: vectors, dim: 4}
nodes:
  s: {kind: scorer, fn: dot, query: a, key: b}
  p: {kind: softmax, scores: s, axis: queries}
outputs: {p: p}
"""
    model = attngraph.compile(spec, seed=0)
    mask = torch.tensor([[True, True, False]])
    p = model(a=torch.randn(1, 3, 4), a_mask=mask, b=torch.randn(1, 5, 4))["p"]
    torch.testing.assert_close(p[0, :2].sum(0), torch.ones(5), **TOL)
    assert (p[0, 2] == 0).all()


@pytest.mark.parametrize(("line", "where", "msg", "hint"), [
    ("p: {kind: softmax, scores: s, fn: topk}", "12:37", "'k' is missing", "k: <how many>"),
    ("p: {kind: softmax, scores: s, k: 2}", "12:36", "'k' applies to fn topk", "fn: topk"),
    ("p: {kind: softmax, scores: one, axis: queries}", "12:30",
     "a softmax over the queries needs scores [M, N]", "normalise over the items"),
])
def test_normaliser_fields_are_checked_located(line: str, where: str, msg: str,
                                               hint: str) -> None:
    """Misused normaliser fields give one located error with a hint."""
    spec = SLOTS.replace("p:     {kind: softmax, scores: s, axis: queries}", line).replace(
        "  upd:   {kind: readout, weights: p, values: x, normalize: true}\n", "").replace(
        "outputs: {updates: upd, attention: p}", "outputs: {p: p}").replace(
        "  s:     {kind: scorer",
        "  one:   {kind: scorer, fn: mlp, key: x}\n  s:     {kind: scorer")
    with pytest.raises(ShapeError) as e:
        attngraph.loads_spec(spec)
    text = str(e.value)
    assert f":{where}:" in text and msg in text and hint in (e.value.hint or ""), text


def test_readout_of_weights_over_queries_needs_normalize() -> None:
    """A readout of weights normalised over the queries says to add normalize: true."""
    with pytest.raises(ShapeError) as e:
        attngraph.loads_spec(SLOTS.replace(", normalize: true", ""))
    assert "do not sum to one over the items (they are normalised over the queries" in str(e.value)
    assert "normalize: true" in (e.value.hint or "")


def test_fn_sum_needs_kernel_scores() -> None:
    """fn sum of scores that may be negative is refused at the scores, with the fix."""
    spec = SLOTS.replace("axis: queries", "fn: sum").replace(", normalize: true", "")
    with pytest.raises(ShapeError) as e:
        attngraph.loads_spec(spec)
    assert ":11:34:" in str(e.value) and "must not be negative" in str(e.value)
    assert "feature_map" in (e.value.hint or "")


def test_kernel_attention_with_observed_weights_keeps_the_pairwise_form() -> None:
    """When the weights are an output, no linear_attention node is made; they sum to 1."""
    spec = """
attngraph: 1
name: observed
inputs:
  x: {type: vectors, dim: 8}
nodes:
  fq: {kind: feature_map, from: x, fn: relu}
  fk: {kind: feature_map, from: x}
  s:  {kind: scorer, fn: scaled_dot, query: fq, key: fk}
  p:  {kind: softmax, scores: s, fn: sum}
  z:  {kind: readout, weights: p, values: x}
outputs: {z: z, p: p}
"""
    model = attngraph.compile(spec, seed=0)
    assert "LinearAttention" not in [type(m).__name__ for m in model.nodes.values()]
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    p = model(x=torch.randn(2, 5, 8), x_mask=mask)["p"]
    torch.testing.assert_close(p.sum(-1)[mask], torch.ones(7), **TOL)
    assert (p[1, :, 2:] == 0).all()
