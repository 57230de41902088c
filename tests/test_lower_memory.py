"""External memory modules: initial memory, the erase/add write and NTM location
addressing, checked against their defining properties."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import attngraph  # noqa: E402
from attngraph.lower.rules.memory import (  # noqa: E402
    CONSTANT_INIT,
    Address,
    Memory,
    Write,
    circular_shift,
    ntm_address,
    sharpen,
    write_memory,
)


def _rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _simplex(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.softmax(_rand(*shape, seed=seed), -1)


def test_memory_initial_contents() -> None:
    """constant fills 1e-6, zeros fills 0, learned is one parameter shared across the batch."""
    m = Memory(5, 3)(2)
    assert m.shape == (2, 5, 3) and torch.equal(m, torch.full((2, 5, 3), CONSTANT_INIT))
    assert torch.equal(Memory(5, 3, "zeros")(4), torch.zeros(4, 5, 3))
    assert not list(Memory(5, 3).parameters())
    learned = Memory(5, 3, "learned")
    assert [p.shape for p in learned.parameters()] == [(5, 3)]
    m = learned(3)
    assert torch.equal(m[0], m[2])
    m.sum().backward()
    assert torch.equal(learned.initial.grad, torch.full((5, 3), 3.0))


def test_write_with_full_erase_replaces_one_slot_exactly() -> None:
    """e = 1 (erase = +inf) and w one-hot at slot j: slot j becomes a, the others stay."""
    mem = _rand(2, 6, 4)
    j = torch.tensor([1, 4])
    w = torch.nn.functional.one_hot(j, 6).float()
    add = _rand(2, 4, seed=1)
    new = Write()(mem, w, torch.full((2, 4), float("inf")), add)
    for b in range(2):
        assert torch.equal(new[b, j[b]], add[b])
        others = [s for s in range(6) if s != j[b]]
        assert torch.equal(new[b, others], mem[b, others])


def test_write_is_the_erase_add_formula() -> None:
    """M' = M ⊙ (1 - w eᵀ) + w aᵀ with soft weights, elementwise."""
    mem, w = _rand(3, 5, 4), _simplex(3, 5, seed=1)
    erase, add = _rand(3, 4, seed=2), _rand(3, 4, seed=3)
    e = torch.sigmoid(erase)
    want = torch.empty_like(mem)
    for b in range(3):
        want[b] = mem[b] * (1 - torch.outer(w[b], e[b])) + torch.outer(w[b], add[b])
    torch.testing.assert_close(write_memory(mem, w, erase, add), want)


def test_write_with_no_erase_adds_and_zero_weights_keep() -> None:
    """e = 0 (erase = -inf) adds a to the addressed slot; zero weights change nothing."""
    mem, add = _rand(1, 3, 2), _rand(1, 2, seed=1)
    w = torch.tensor([[0.0, 1.0, 0.0]])
    new = write_memory(mem, w, torch.full((1, 2), float("-inf")), add)
    torch.testing.assert_close(new[0, 1], mem[0, 1] + add[0])
    assert torch.equal(write_memory(mem, torch.zeros(1, 3), _rand(1, 2), add), mem)


def test_address_gate_one_no_shift_gamma_one_returns_content() -> None:
    """g = 1, all shift mass on offset 0 and γ = 1 give back the content weights."""
    c, prev = _simplex(4, 7), _simplex(4, 7, seed=1)
    shift = torch.tensor([[0.0, 1.0, 0.0]]).expand(4, 3)
    out = ntm_address(c, prev, torch.ones(4), shift, torch.ones(4))
    torch.testing.assert_close(out, c)


def test_address_gate_zero_keeps_previous_weights() -> None:
    """g = 0 (no shift, γ = 1) ignores the content and returns the previous weights."""
    c, prev = _simplex(2, 5), _simplex(2, 5, seed=1)
    shift = torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0]]).expand(2, 5)
    torch.testing.assert_close(ntm_address(c, prev, torch.zeros(2), shift, torch.ones(2)), prev)


def test_circular_shift_by_one_rolls_weights() -> None:
    """All shift mass on +1 moves each weight to the next slot, the last wrapping to the first."""
    w = _simplex(3, 6)
    plus_one = torch.tensor([[0.0, 0.0, 1.0]]).expand(3, 3)
    torch.testing.assert_close(circular_shift(w, plus_one), torch.roll(w, 1, dims=-1))
    minus_two = torch.tensor([[1.0, 0, 0, 0, 0]]).expand(3, 5)
    torch.testing.assert_close(circular_shift(w, minus_two), torch.roll(w, -2, dims=-1))


def test_sharpen_concentrates_on_the_largest_weight() -> None:
    """γ = 1 changes nothing; a large γ approaches the one-hot of the argmax."""
    w = _simplex(2, 5)
    torch.testing.assert_close(sharpen(w, torch.ones(2)), w)
    hard = sharpen(w, torch.full((2,), 200.0))
    torch.testing.assert_close(hard, torch.nn.functional.one_hot(w.argmax(-1), 5).float())


def test_address_module_outputs_are_weights_with_finite_gradients() -> None:
    """Address from a controller gives non-negative weights summing to 1, with finite grads
    even when the content weights have exact zeros."""
    torch.manual_seed(0)
    addr = Address(control_dim=8, shifts=2)
    assert sum(p.numel() for p in addr.parameters()) == (8 + 1) * (1 + 5 + 1)
    c = torch.zeros(4, 6)
    c[:, 0] = 1.0
    ctl = _rand(4, 8).requires_grad_()
    out = addr(c, torch.zeros(4, 6), ctl)
    assert (out >= 0).all()
    torch.testing.assert_close(out.sum(-1), torch.ones(4))
    (out * _rand(4, 6, seed=1)).sum().backward()
    grads = [ctl.grad, *(p.grad for p in addr.parameters())]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


# --- end to end: a compiled read/write loop -------------------------------------------

NTM = """\
attngraph: 1
name: tiny_ntm
dims: {vocab: 10, e: 8, hs: 16, slots: 6, width: 5}
inputs:
  seq: {type: tokens, vocab: vocab, length: T}
blocks:
  step:
    inputs: [x, mem, h, w, r]
    nodes:
      x_emb:  {kind: embedding, from: x, dim: e, vocab: vocab}
      xin:    {kind: concat, from: [x_emb, r]}
      ctrl:   {kind: rnn, cell: gru, from: xin, hidden: hs, init: h}
      key:    {kind: linear, from: ctrl, out: width, act: tanh}
      sim:    {kind: scorer, fn: cosine, query: key, key: mem, beta: learned}
      wc:     {kind: softmax, scores: sim}
      wl:     {kind: address, content: wc, prev: w, control: ctrl, shifts: 1}
      read:   {kind: readout, weights: wl, values: mem}
      erase:  {kind: linear, from: ctrl, out: width}
      addv:   {kind: linear, from: ctrl, out: width, act: tanh}
      mem2:   {kind: write, memory: mem, weights: wl, erase: erase, add: addv}
      logits: {kind: linear, from: ctrl, out: vocab}
    outputs: {logits: logits, memory: mem2, state: ctrl, weights: wl, read: read}
nodes:
  m0: {kind: memory, slots: slots, width: width, init: INIT}
  ntm:
    kind: loop
    body: step
    steps: seq
    feed: {x: {from: seq}}
    carry:
      mem: {init: m0, next: memory}
      h:   {zeros: hs, next: state}
      w:   {zeros: slots, next: weights}
      r:   {zeros: width, next: read}
outputs: {logits: ntm.logits, weights: ntm.weights, reads: ntm.read, memory: ntm.final_mem}
"""


@pytest.mark.parametrize("init", ["constant", "learned"])
def test_compiled_memory_loop_reads_and_writes(init: str) -> None:
    """An NTM-style loop runs: per-step weights are distributions over slots, each read is
    the weighted sum of the memory, the memory changes, and gradients reach every parameter."""
    import attngraph
    from attngraph.lower.runtime.module import Runtime

    model = attngraph.compile(attngraph.loads_spec(NTM.replace("INIT", init)), seed=0)
    seq = torch.randint(0, 10, (3, 7))
    out = model(seq=seq)
    assert out["logits"].shape == (3, 7, 10) and out["weights"].shape == (3, 7, 6)
    assert out["memory"].shape == (3, 6, 5) and out["reads"].shape == (3, 7, 5)
    assert (out["weights"] >= 0).all()
    torch.testing.assert_close(out["weights"].sum(-1), torch.ones(3, 7))
    m0 = model.nodes["m0"]({}, Runtime(batch=3))
    assert not torch.allclose(out["memory"], m0)
    # step 0 reads the initial memory with its weights
    torch.testing.assert_close(out["reads"][:, 0],
                               (out["weights"][:, 0, :, None] * m0).sum(1))
    (out["logits"].sum() + out["memory"].sum()).backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or p.grad.abs().sum() == 0]
    assert not missing
    assert "nodes.ntm.nodes.wl.proj.weight" in dict(model.named_parameters())


def test_address_over_padded_items_is_padding_invariant() -> None:
    """Addressing items of a padded input: the same example alone and padded gives the
    same weights and logits; shifts wrap around the real items; pads get no weight."""
    spec = """
attngraph: 1
name: addr
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
  h: {type: vector, dim: d}
nodes:
  x:  {kind: items, from: src}
  s:  {kind: scorer, fn: cosine, query: h, key: x}
  wc: {kind: softmax, scores: s}
  w:  {kind: address, content: wc, prev: wc, control: h, shifts: 1}
  r:  {kind: readout, weights: w, values: x}
  logits: {kind: linear, from: r, out: 3}
outputs: {logits: logits, w: w}
"""
    model = attngraph.compile(spec, seed=0)
    x, h = torch.randn(1, 4, 8), torch.randn(1, 8)
    alone = model(src=x, h=h)
    padded = model(src=torch.cat([x, torch.randn(1, 3, 8)], 1), h=h,
                   src_mask=torch.tensor([[True] * 4 + [False] * 3]))
    torch.testing.assert_close(padded["logits"], alone["logits"], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(padded["w"][:, :4], alone["w"], atol=1e-6, rtol=1e-6)
    assert (padded["w"][:, 4:] == 0).all()


SHIFTER = """\
attngraph: 1
name: shifter
dims: {slots: 6}
inputs:
  seq: {type: tokens, vocab: 4, length: T}
blocks:
  step:
    inputs: [x, mem, w]
    nodes:
      ctrl: {kind: embedding, from: x, dim: 3, vocab: 4}
      key:  {kind: linear, from: ctrl, out: 5}
      sim:  {kind: scorer, fn: cosine, query: key, key: mem}
      wc:   {kind: softmax, scores: sim}
      wl:   {kind: address, content: wc, prev: w, control: ctrl, shifts: 1}
    outputs: {weights: wl}
nodes:
  m0: {kind: memory, slots: slots, width: 5}
  loop:
    kind: loop
    body: step
    steps: seq
    inputs: {mem: m0}
    feed: {x: {from: seq}}
    carry: {w: {START, next: weights}}
outputs: {weights: loop.weights}
"""


@pytest.mark.parametrize("start", ["onehot: slots", "zeros: slots"])
def test_location_addressing_moves_a_onehot_start_and_keeps_zeros_uniform(start: str) -> None:
    """With the gate closed, a shift of +1 and strong sharpening, weights that start
    one-hot on slot 0 (carry ``onehot``) sit on slot t + 1 at step t; weights that start
    at zero stay uniform at every step (content weights over a constant memory are
    uniform too), so location addressing alone cannot pick a slot."""
    model = attngraph.compile(attngraph.loads_spec(SHIFTER.replace("START", start)), seed=0)
    proj = model.nodes["loop"].nodes["wl"].proj
    with torch.no_grad():
        proj.weight.zero_()
        proj.bias.copy_(torch.tensor([-50.0, -50.0, -50.0, 50.0, 50.0]))  # g, shifts, γ
    w = model(seq=torch.zeros(2, 8, dtype=torch.long))["weights"]
    want = (torch.eye(6)[[(t + 1) % 6 for t in range(8)]] if start.startswith("onehot")
            else torch.full((8, 6), 1 / 6))
    torch.testing.assert_close(w, want.expand(2, 8, 6), atol=1e-6, rtol=0)


def test_a_onehot_carry_starts_on_the_first_slot() -> None:
    """With the gate closed and no shift, the weights keep the carry's first value:
    e_0 at every step, for every example."""
    model = attngraph.compile(SHIFTER.replace("START", "onehot: slots"), seed=0)
    proj = model.nodes["loop"].nodes["wl"].proj
    with torch.no_grad():
        proj.weight.zero_()
        proj.bias.copy_(torch.tensor([-50.0, -50.0, 50.0, -50.0, 0.0]))  # g, shifts, γ
    w = model(seq=torch.randint(0, 4, (3, 4)))["weights"]
    torch.testing.assert_close(w, torch.eye(6)[0].expand(3, 4, 6), atol=1e-6, rtol=0)
