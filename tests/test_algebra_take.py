"""The formula functions take (a table read at computed positions) and floor: their
values against plain indexing, their located errors, and their Python export."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import attngraph
from attngraph.errors import AttnGraphError
from attngraph.lower.export.codegen import class_name

#: a learned scalar per head for each of 5 buckets of j − i (clamped), added to scores
SPEC = """\
attngraph: 1
name: take_example
dims: {d: 8, buckets: 5}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q:      {kind: queries, from: x, heads: 2}
  k:      {kind: keys, from: x, heads: 2}
  s:      {kind: scorer, fn: dot, query: q, key: k}
  bucket:
    kind: expr
    formula: "clamp(floor((j - i) / 2) + 2, 0, buckets - 1)"
    sizes: {queries: N, items: N}
  table:  {kind: param, shape: [buckets], heads: 2, init: normal, std: 1.0}
  bias:   {kind: expr, formula: "take(table, bucket, features)"}
  sb:     {kind: expr, formula: "s + bias"}
  first:  {kind: expr, formula: "take(table, 3, features)"}
outputs: {bias: bias, sb: sb, bucket: bucket, first: first}
"""


def test_take_reads_the_table_at_each_position() -> None:
    """bias[h, i, j] = table[h, bucket(i, j)] and bucket = clamp(⌊(j − i)/2⌋ + 2, 0, 4),
    for every head and pair; a constant position reads one entry per head; padded
    pairs are 0, as every formula's."""
    model = attngraph.compile(SPEC, seed=0)
    x = torch.randn(2, 7, 8)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 4])[:, None]
    with torch.no_grad():
        out = model(x=x, x_mask=mask)
    table = model.nodes["table"].value[0]  # (h, buckets)
    rel = torch.arange(7)[None, :] - torch.arange(7)[:, None]
    bucket = (torch.div(rel, 2, rounding_mode="floor") + 2).clamp(0, 4)
    assert torch.equal(out["bucket"][0], bucket.float())
    want = table[:, bucket]  # (h, N, N)
    assert torch.equal(out["bias"][0], want)
    real = mask[1][:, None] & mask[1][None, :]
    assert torch.equal(out["bias"][1], torch.where(real, want, torch.zeros(())))
    assert torch.equal(out["first"][0], table[:, 3])


def test_take_passes_gradients_to_the_entries_read() -> None:
    """Only the table entries some pair reads get a gradient, each the count of reads."""
    model = attngraph.compile(SPEC, seed=0)
    out = model(x=torch.randn(1, 3, 8))
    out["bias"].sum().backward()
    grad = model.nodes["table"].value.grad[0, 0]
    rel = torch.arange(3)[None, :] - torch.arange(3)[:, None]
    bucket = (torch.div(rel, 2, rounding_mode="floor") + 2).clamp(0, 4)
    assert grad.tolist() == torch.bincount(bucket.flatten(), minlength=5).float().tolist()


@pytest.mark.parametrize(("formula", "col", "message"), [
    ("take(table, bucket, items)", 34, "take reads x along the items, but x has heads, "
     "features"),
    ("take(table, pos(features), features)", 34, "take's positions run along the features"),
    ("take(table, bucket < 2, features)", 34, "take's positions are a truth value"),
    ("take(table, bucket)", 34, "take works along an axis"),
])
def test_take_errors_point_into_the_formula(formula: str, col: int, message: str) -> None:
    """A take of the wrong axis, of positions along that axis, of truth values, or
    without an axis is one error at the call in the formula (line, column), with a hint."""
    text = SPEC.replace('"take(table, bucket, features)"', f'"{formula}"')
    with pytest.raises(AttnGraphError) as err:
        attngraph.compile(text)
    d = err.value.diagnostics[0]
    assert message in d.message
    assert (d.loc.line, d.loc.col) == (15, col)
    assert d.hint


def test_floor_of_numbers_is_folded_and_of_values_computed() -> None:
    """floor(buckets / 2) and floor(-2.5) are numbers when compiling (the one floor
    left runs on a tensor); floor of a value rounds each entry down, negative ones too."""
    fl = '  fl: {kind: expr, formula: "floor(s) + floor(buckets / 2) - floor(-2.5)"}\n'
    text = SPEC.replace("outputs: {", fl + "outputs: {s: s, fl: fl, ")
    model = attngraph.compile(text, seed=0)
    assert [ins[1] for ins in model.nodes["fl"].program if ins[0] == "call"] == ["floor"]
    with torch.no_grad():
        out = model(x=torch.randn(1, 4, 8) * 3)
    assert bool((out["s"] < 0).any())
    assert torch.equal(out["fl"], torch.floor(out["s"]) + 5.0)


def test_the_python_export_computes_take_and_floor(tmp_path: Path) -> None:
    """The spec's readable PyTorch file, with the compiled model's state dict, gives
    the same outputs."""
    model = attngraph.compile(SPEC, seed=0).eval()
    path = tmp_path / "take_example.py"
    path.write_text(model.code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("take_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["take_example"] = module
    try:
        spec.loader.exec_module(module)
        exported = getattr(module, class_name("take_example"))()
    finally:
        del sys.modules["take_example"]
    exported.load_state_dict(model.state_dict())
    x = torch.randn(2, 5, 8)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None]
    with torch.no_grad():
        want = model(x=x, x_mask=mask)
        got = exported(x, x_mask=mask)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0)


def test_take_from_the_flat_table_equals_a_gather_and_refuses_a_position_outside() -> None:
    """take() indexes the (un-expanded) table at computed offsets (the fix of T5's
    backward, which had built a zero tensor of the result's size times the table's
    length): it equals a gather along the axis over a table with heads and a batch, in
    values and gradients, and a position outside 0 .. size-1 is refused as a gather
    refuses it, not read from the next row of the table."""
    from attngraph.lower.rules.algebra_take import PositionError, take

    gen = torch.Generator().manual_seed(0)
    table = torch.randn(2, 3, 5, generator=gen, requires_grad=True)  # (B, h, buckets)
    pos = torch.randint(0, 5, (2, 4, 4), generator=gen).float()      # (B, N, M)
    got = take(table, pos, 2, (1, -1, -1), (-1, 1, 2))                # (B, h, N, M)
    ref_table = table.detach().clone().requires_grad_(True)
    want = ref_table[:, :, None, None, :].expand(2, 3, 4, 4, 5).gather(
        -1, pos.long()[:, None, :, :, None].expand(2, 3, 4, 4, 1)).squeeze(-1)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    weights = torch.randn(got.shape, generator=gen)
    (got * weights).sum().backward()
    (want * weights).sum().backward()
    torch.testing.assert_close(table.grad, ref_table.grad, atol=1e-6, rtol=0)
    for outside in (5.0, -1.0):
        bad = pos.clone()
        bad[1, 0, 0] = outside
        with pytest.raises(PositionError, match=f"position {int(outside)} is outside"):
            take(table, bad, 2, (1, -1, -1), (-1, 1, 2))
    half = pos.clone()
    half[0, 1, 2] = 2.5
    with pytest.raises(PositionError, match="whole numbers, but one is 2.5"):
        take(table, half, 2, (1, -1, -1), (-1, 1, 2))


@pytest.mark.parametrize(("formula", "col", "message"), [
    # the positions as the bucket node computes them, shifted past the 5 entries
    ("take(table, clamp(floor((j - i) / 2) + 2, 0, 4) + 3, features)", 113,
     "take's positions run from 3 to 7, but the features axis of table has 5 entries "
     "(0 to 4)"),
    ("take(table, 5, features)", 77, "take's positions run from 5 to 5"),
    ("take(table, -1, features)", 77, "take's positions run from -1 to -1"),
    ("take(table, min(abs(i - j), buckets), features)", 77,
     "take's positions run from 0 to 5"),
    # a where whose condition the spans decide: the branch it always takes
    ("take(table, where(abs(i - j) < -1, 0, 9), features)", 77,
     "take's positions run from 9 to 9"),
    ("take(table, where(abs(i - j) > -1, -1e9, 0), features)", 77,
     "take's positions run from -1e+09 to -1e+09"),
    # either branch: the diagonal (j <= i) always takes the first
    ("take(table, where(j <= i, 9, 0), features)", 77, "take's positions run from 0 to 9"),
    # each branch where it is taken: bucket at most 2, then at least 2 less 3 (without
    # the condition, bucket - 3 would run from -3)
    ("take(table, where(bucket < 2, bucket, bucket - 3), features)", 77,
     "take's positions run from -1 to 2"),
    # positions whole by their formula alone: not the scores, not a quotient
    ("take(table, s, features)", 77, "take's positions must be whole numbers"),
    ("take(table, clamp(j / 2, 0, 4), features)", 77, "must be whole numbers"),
])
def test_positions_the_formula_bounds_outside_the_table_are_refused(
        formula: str, col: int, message: str) -> None:
    """Positions bounded by the formula itself (numbers, indices of a known size,
    clamps, min, floor, abs) that reach outside the table are one located error when
    the spec is read, not an index error when the forward runs."""
    text = SPEC.replace('"take(table, bucket, features)"', f'"{formula}"').replace(
        "  sb:     {kind: expr, formula: \"s + bias\"}\n", "")
    text = text.replace("outputs: {bias: bias, sb: sb,", "outputs: {bias: bias,")
    text = text.replace("  bias:   {kind: expr, formula:",
                        "  bias:   {kind: expr, sizes: {queries: N, items: N}, formula:")
    with pytest.raises(AttnGraphError) as err:
        attngraph.compile(text)
    d = err.value.diagnostics[0]
    assert message in d.message, d.message
    assert (d.loc.line, d.loc.col) == (15, col) and d.hint
    assert ("clamp(" if "run from" in message else "floor(") in d.hint


@pytest.mark.parametrize("formula", [
    "take(table, clamp(floor((j - i) / 2) + 2, 0, 4), features)",  # within 0 .. 4
    "take(table, where(abs(i - j) >= 0, 2, 9), features)",  # always its first branch
    # each branch within 0 .. 4 where it is taken: bucket + 2 where bucket is at most 2,
    # bucket - 2 where it is at least 2 (either alone would reach past the table)
    "take(table, where(bucket < 2, bucket + 2, bucket - 2), features)",
    "take(table, where(s > 0, 1, 3), features)",  # a node's values pick: both in range
    # the branch is read before one of what is compared (the index j): fuzz 3107/2467
    "take(table, where(j < s, bucket, 0), features)",
    "take(table, floor(s), features)",  # a node's values: only the forward knows them
    "take(table, min(abs(i - j), buckets - 1), features)",  # whole and within 0 .. 4
])
def test_positions_the_formula_cannot_bound_or_keeps_in_range_are_accepted(
        formula: str) -> None:
    """No refusal on a range the formula does not pin down: the check never refuses
    positions that may all be in range."""
    text = SPEC.replace('"take(table, bucket, features)"', f'"{formula}"').replace(
        "  bias:   {kind: expr, formula:",
        "  bias:   {kind: expr, sizes: {queries: N, items: N}, formula:")
    attngraph.compile(text)


def test_positions_another_formula_bounds_are_checked_where_they_are_read() -> None:
    """The bucket node clamps its values to 0 .. 4; a table of 3 entries read at them is
    refused at the take's positions (the name of the bucket node), one node back."""
    text = SPEC.replace("shape: [buckets]", "shape: [3]").replace(
        '  first:  {kind: expr, formula: "take(table, 3, features)"}\n', "").replace(
        ", first: first}", "}")
    with pytest.raises(AttnGraphError) as err:
        attngraph.compile(text)
    d = err.value.diagnostics[0]
    assert "take's positions run from 0 to 4, but the features axis of table has 3" in d.message
    assert (d.loc.line, d.loc.col) == (15, 46) and d.hint


@pytest.mark.parametrize(("positions", "message", "hint"), [
    ("floor(abs(s) * 100)", "is outside the table's axis of 5 entries (0 to 4)",
     "clamp(..., 0, 4)"),
    ("floor(s) - 50", "is outside the table's axis of 5 entries (0 to 4)",
     "clamp(..., 0, 4)"),
])
def test_positions_from_values_outside_the_table_are_a_located_error_at_run_time(
        positions: str, message: str, hint: str) -> None:
    """Positions computed from a node's values, which only the forward knows: one
    located error at the take's node naming a position and what to do, not an index
    error of torch's."""
    text = SPEC.replace('"take(table, bucket, features)"',
                        f'"take(table, {positions}, features)"')
    model = attngraph.compile(text, seed=0)
    with pytest.raises(AttnGraphError) as err, torch.no_grad():
        model(x=torch.randn(2, 6, 8) * 3)
    d = err.value.diagnostics[0]
    assert "node 'bias'" in d.message and message in d.message, d.message
    assert d.loc.line == 15 and d.hint and hint in d.hint


def test_a_where_narrows_entry_by_entry_only() -> None:
    """The condition of a where holds entry by entry: a branch that reads other entries
    (an operation over an axis, here a registered largest-over-the-axis whose range is
    its argument's) keeps the range it has without the condition, while an elementwise
    branch is narrowed."""
    from attngraph.algebra.formula import parse
    from attngraph.algebra.functions import FUNCTIONS, Function, register_function
    from attngraph.algebra.program import typecheck
    from attngraph.algebra.values import Env, Val

    env = Env(values={"b": Val(("queries", "items"), ("N", "N"), whole=True,
                               span=(0.0, 9.0))})
    with FUNCTIONS.scoped():
        register_function(Function("top", "max over the axis", "torch:amax", form="reduce",
                                   span=lambda args: args[0], keeps_whole=True))
        over = typecheck(parse("where(b >= 4, top(b, items), 4)"), env).val.span
        each = typecheck(parse("where(b >= 4, min(b, 7), 4)"), env).val.span
    assert over == (0.0, 9.0)  # the largest b over the items: any of 0 .. 9
    assert each == (4.0, 7.0)  # b itself, where b >= 4


LENGTH_AXIS = """
attngraph: 1
name: previous
dims: {d: 4}
inputs:
  x: {type: vectors, dim: d}
nodes:
  y: {kind: expr, formula: "FORMULA"}
outputs: {y: y}
"""


@pytest.mark.parametrize(("formula", "reach"), [
    ("take(x, -1, items)", "reach -1"),
    ("take(x, min(N, 2) - 3, items)", "are at most -1"),
    ("take(x, 0, items) + take(x, -1e9, items)", "reach -1e+09"),
])
def test_positions_below_zero_are_refused_along_an_axis_of_any_length(
        formula: str, reach: str) -> None:
    """Along the items (a length the batch decides) no position is known to be past the
    end, but one below 0 is no entry at any length: refused when the spec is read."""
    with pytest.raises(AttnGraphError) as err:
        attngraph.compile(LENGTH_AXIS.replace("FORMULA", formula))
    d = err.value.diagnostics[0]
    assert f"take's positions {reach}, below the first entry (0) of the items axis" \
        in d.message, d.message
    assert "max(" in d.hint


def test_positions_kept_at_zero_or_more_read_the_items() -> None:
    """Each example's last real item."""
    model = attngraph.compile(LENGTH_AXIS.replace("FORMULA", "take(x, max(N - 1, 0), items)"))
    x = torch.randn(2, 5, 4)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    torch.testing.assert_close(model(x=x, x_mask=mask)["y"], torch.stack([x[0, 4], x[1, 2]]))
