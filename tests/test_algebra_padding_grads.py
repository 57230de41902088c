"""A formula that divides by a masked sum gives finite gradients on a padded batch.

At a padded query row a masked sum over the items can be 0 (every item of the row is
zeroed), so ``s * dm / sqrt(sum(dm, items))`` is 0/0 there. The result is zeroed at
padded positions, but that alone leaves the division's backward (0 · ∞) to put NaN
into the gradient of ``s``, and through the scorer's matmul into every key and every
weight. An expression whose program can do that (a division, a power, a function
whose derivative is infinite at 0) zeroes the values it reads at their padded
positions first: no gradient reaches them (RetNet's retention, mechanisms/).
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from tests.codegen_support import assert_file_equals_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

SPEC = """
attngraph: 1
name: decayed
inputs:
  x: {type: vectors, dim: 8}
nodes:
  q:  {kind: queries, from: x, heads: 2}
  k:  {kind: keys, from: x, heads: 2}
  v:  {kind: values, from: x, heads: 2}
  s:  {kind: scorer, fn: scaled_dot, query: q, key: k}
  dm: {kind: expr, formula: "where(j <= i, 0.9 ^ relu(i - j), 0)", sizes: {queries: N, items: N}}
  r:  {kind: expr, formula: "s * dm / sqrt(sum(dm, items))"}
  z:  {kind: readout, weights: r, values: v, distribution: false}
outputs: {z: z}
"""


def _grads(model: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None
           ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    out = model(x=x, x_mask=mask)["z"] if mask is not None else model(x=x)["z"]
    (out if mask is None else out[mask]).pow(2).sum().backward()
    return x.grad, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("spec", [SPEC, ROOT / "mechanisms" / "retnet_retention.yaml"],
                         ids=["divided_by_a_masked_sum", "retnet_retention"])
def test_padding_gives_finite_gradients_equal_to_the_unpadded_ones(spec: object) -> None:
    model = attngraph.compile(spec, seed=0)
    d = model.graph.node("x").types[""].dims[-1]
    x = torch.randn(2, 5, d)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    gx, gp = _grads(model, x, mask)
    assert all(torch.isfinite(g).all() for g in (gx, *gp.values()))
    assert torch.equal(gx[1, 3:], torch.zeros_like(gx[1, 3:]))  # nothing reaches padding
    # the padded example's gradients are those of its real items alone
    gx1, _ = _grads(model, x[1:2, :3], None)
    torch.testing.assert_close(gx[1, :3], gx1[0], atol=1e-5, rtol=1e-4)


def test_the_exported_file_gives_the_same_finite_gradients() -> None:
    model = attngraph.compile(SPEC, seed=0)
    assert "zero_padding(" in model.code
    assert_file_equals_model(model, "decayed_export")


def test_a_formula_that_cannot_blow_up_reads_its_values_as_they_are() -> None:
    """Only a program that divides, raises to a power or calls a singular function
    zeroes what it reads: a sum of scores and a bias is left as written."""
    text = SPEC.replace('"s * dm / sqrt(sum(dm, items))"', '"s + dm"')
    model = attngraph.compile(text, seed=0)
    assert model.nodes["r"].in_pads == ()
    assert model.nodes["dm"].in_pads == ()
    assert attngraph.compile(SPEC, seed=0).nodes["r"].in_pads != ()


@pytest.mark.parametrize("singular", [True, False])
def test_a_registered_function_is_read_by_its_singular_trait(singular: bool) -> None:
    """The choice reads the function's trait, not its name: a copy of sqrt registered as
    ``root`` guards the formula's inputs exactly when it says ``singular``."""
    from dataclasses import replace

    from attngraph.algebra.functions import FUNCTIONS, register_function

    text = SPEC.replace('"s * dm / sqrt(sum(dm, items))"', '"s * root(sum(dm, items))"')
    with FUNCTIONS.scoped():
        register_function(replace(FUNCTIONS["sqrt"], name="root", singular=singular))
        model = attngraph.compile(text, seed=0)
    assert (model.nodes["r"].in_pads != ()) is singular
