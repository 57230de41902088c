"""Values the same for every example stay batch 1 through the expression lowering
(issue 27): a formula of the positions alone, and what a formula makes of it and of
parameters (T5's bucket of each pair of positions, the bias read from it), is computed
once a forward and handed on as a view over the batch, which the expressions reading
it see through. The numbers are those of the batch-expanded computation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.lower import algebra, memo  # noqa: E402
from attngraph.lower.runtime.memo import KEEP_BROADCAST, broadcast, unbroadcast  # noqa: E402
from attngraph.lower.runtime.module import Runtime  # noqa: E402

T5 = Path(__file__).resolve().parents[1] / "specs" / "real" / "t5.yaml"


def _t5_text() -> str:
    """specs/real/t5.yaml at a small size: 2 + 2 layers of 16, 8 buckets up to 20."""
    text = T5.read_text(encoding="utf-8")
    small = ("dims: {vocab: 40, d: 16, heads: 4, inner: 16, ff: 24, layers: 2, dlayers: 2, "
             "buckets: 8, distance: 20}")
    return re.sub(r"^dims: \{.*\}$", small, text, count=1, flags=re.M)


def _batch(padded: bool = True) -> dict[str, torch.Tensor]:
    """Source and target ids of 3 examples; ``padded``: with masks (padding last)."""
    g = torch.Generator().manual_seed(1)
    src = torch.randint(1, 40, (3, 9), generator=g)
    tgt = torch.randint(1, 40, (3, 7), generator=g)
    if not padded:
        return {"source": src, "target": tgt}
    sm = torch.arange(9)[None, :] < torch.tensor([9, 5, 2])[:, None]
    tm = torch.arange(7)[None, :] < torch.tensor([7, 7, 3])[:, None]
    return {"source": src, "source_mask": sm, "target": tgt, "target_mask": tm}


def _run(model: torch.nn.Module, padded: bool
         ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The outputs and every parameter's gradient of the sum of the outputs."""
    model.zero_grad(set_to_none=True)
    out = model(**_batch(padded))
    sum(v.sum() for v in out.values()).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in out.items()}, grads


@pytest.mark.parametrize("padded", [False, True])
def test_t5_bias_is_made_once_and_gives_the_expanded_numbers(
        monkeypatch: pytest.MonkeyPatch, padded: bool) -> None:
    """Without padding, T5's buckets and biases are batch-1 tensors viewed over the
    batch (stride 0); with it, each example's padded positions are zeroed (padding
    stays padding), one per example. Either way the model's outputs and gradients
    equal those of the expanded computation (every expression reading its inputs as
    they come)."""
    model = attngraph.compile(_t5_text(), seed=0)
    seen: dict[str, torch.Tensor] = {}
    for name in ("e_bucket", "d_bucket", "e_bias", "d_bias"):
        model.nodes[name].register_forward_hook(
            lambda mod, args, out, name=name: seen.__setitem__(name, out))
    out, grads = _run(model, padded)
    for name, value in seen.items():
        assert value.shape[0] == 3, name
        assert (value.stride(0) == 0) is not padded, name
    monkeypatch.setattr(algebra, "unbroadcast", lambda rt, x: x)  # the expanded form
    out_ref, grads_ref = _run(model, padded)
    assert seen["e_bias"].stride(0) != 0  # (made for every example this time)
    for k in out:
        assert torch.equal(out[k], out_ref[k]), k
    assert grads.keys() == grads_ref.keys()
    for k in grads:
        torch.testing.assert_close(grads[k], grads_ref[k], rtol=1e-5, atol=1e-6, msg=k)


SPEC = """
attngraph: 1
name: shared
dims: {d: 4, n: 6}
inputs:
  x: {type: vectors, dim: d}
nodes:
  pos:   {kind: expr, formula: "abs(i - j)", sizes: {queries: N, items: N}}
  w:     {kind: param, shape: [n], init: normal, std: 1.0}
  bias:  {kind: expr, formula: "take(w, pos, features) * 2"}
  q:     {kind: queries, from: x, dim: d}
  k:     {kind: keys, from: x, dim: d}
  s:     {kind: scorer, fn: dot, query: q, key: k}
  sb:    {kind: expr, formula: "s + bias"}
  total: {kind: expr, formula: "sum(bias, items)"}
outputs: {sb: sb, bias: bias, total: total}
"""


def test_outputs_keep_their_batch_and_padding() -> None:
    """A shared value asked for as an output has the batch's size: without padding one
    batch-1 tensor viewed over the batch, with it zero at each example's padding; and
    reduced over a padded axis, one result per example (its real items only)."""
    model = attngraph.compile(SPEC, seed=0)
    x = torch.randn(2, 5, 4)
    w = model.nodes["w"].value[0]
    pos = (torch.arange(5)[:, None] - torch.arange(5)[None, :]).abs()
    want = w[pos] * 2
    out = model(x=x)
    assert out["bias"].shape == (2, 5, 5) and out["sb"].shape == (2, 5, 5)
    assert out["bias"].stride(0) == 0
    torch.testing.assert_close(out["bias"][1], want)
    torch.testing.assert_close(out["total"], want.sum(-1).expand(2, 5))
    m = torch.tensor([[True] * 5, [True, True, False, False, False]])
    out = model(x=x, x_mask=m)
    torch.testing.assert_close(out["bias"][0], want)
    real = m[1][:, None] & m[1][None, :]
    torch.testing.assert_close(out["bias"][1], torch.where(real, want, 0.0))
    torch.testing.assert_close(out["total"][1], torch.where(real, want, 0.0).sum(-1))


def test_broadcast_remembers_its_source_and_unbroadcast_gives_it_back() -> None:
    """broadcast's view gives back the batch-1 tensor (the same object: its gradient is
    the batch's sum where it is read); a view over the batch that needs no gradient
    gives its first row; anything else is itself; at most KEEP_BROADCAST are kept."""
    rt = Runtime(batch=3)
    one = torch.randn(1, 4, requires_grad=True)
    view = broadcast(rt, one, 3)
    assert view.shape == (3, 4) and view.stride(0) == 0
    assert unbroadcast(rt, view) is one
    plain = torch.randn(3, 4, requires_grad=True)
    assert unbroadcast(rt, plain) is plain
    other = torch.randn(1, 4, requires_grad=True).expand(3, 4)  # not made by broadcast
    assert unbroadcast(rt, other) is other
    positions = torch.arange(4.0)[None].expand(3, 4)
    first = unbroadcast(rt, positions)
    assert first.shape == (1, 4) and torch.equal(first[0], positions[0])
    for _ in range(KEEP_BROADCAST):
        broadcast(rt, torch.randn(1, 4, requires_grad=True), 3)
    assert unbroadcast(rt, view) is view  # forgotten: read as it is
    assert len(rt.memo["broadcast"]) == KEEP_BROADCAST


def test_nothing_is_remembered_while_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under a trace the expressions read their inputs as they come (the traced program
    is the expanded one)."""
    monkeypatch.setattr(memo, "tracing", lambda: True)
    rt = Runtime(batch=3)
    one = torch.randn(1, 4, requires_grad=True)
    view = broadcast(rt, one, 3)
    assert "broadcast" not in rt.memo
    assert unbroadcast(rt, view) is view
    positions = torch.arange(4.0)[None].expand(3, 4)
    assert unbroadcast(rt, positions) is positions


def test_the_t5_spec_exports_under_torch_export() -> None:
    """The batch-1 form is an eager one: torch.export traces the expanded program, whose
    outputs equal the eager model's."""
    model = attngraph.compile(_t5_text(), seed=0).eval()
    batch = _batch()
    with torch.no_grad():
        want = model(**batch)
    prog = torch.export.export(model, (), kwargs=batch, strict=False)
    with torch.no_grad():
        got = prog.module()(**batch)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6, msg=k)
