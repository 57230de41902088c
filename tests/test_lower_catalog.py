"""Every catalog spec compiles, runs and learns; loops; the ``compile`` command."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.kinds import KINDS  # noqa: E402
from attngraph.lower.runtime.examples import random_inputs  # noqa: E402

SPECS = sorted(Path(__file__).resolve().parents[1].glob("specs/*.yaml"))
def _graph_or_skip(path: Path) -> attngraph.Graph:
    g = attngraph.load_spec(path)
    missing = {n.kind for _, n in g.walk() if not n.is_input and KINDS[n.kind].lowering is None}
    assert not missing, f"kinds without a lowering: {sorted(missing)}"
    return g


def _loss(model: torch.nn.Module, inputs: dict, targets: dict) -> torch.Tensor:
    torch.manual_seed(0)  # the same samples (policies, dropout) at every step
    out = model(**inputs)
    return sum(((out[k] - t) ** 2).mean() for k, t in targets.items())


def _sgd_lowers_loss(model: torch.nn.Module, graph: attngraph.Graph, steps: int = 5) -> None:
    gen = torch.Generator().manual_seed(0)
    inputs = random_inputs(graph, batch=4, length=5, generator=gen)
    with torch.no_grad():
        out = model(**inputs)
    name = "logits" if "logits" in out else next(iter(out))
    targets = {name: torch.randn(out[name].shape, generator=gen)}
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    first = _loss(model, inputs, targets).item()
    for _ in range(steps):
        opt.zero_grad()
        _loss(model, inputs, targets).backward()
        opt.step()
    last = _loss(model, inputs, targets).item()
    assert last < first, (first, last)


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_catalog_spec_runs_and_sgd_lowers_the_loss(path: Path) -> None:
    """Each catalog spec compiles, returns its declared outputs with the declared
    shapes, and a few SGD steps lower a regression loss on random data."""
    g = _graph_or_skip(path)
    model = attngraph.compile(g, seed=0)
    inputs = random_inputs(g, batch=2, length=5)
    out = model(**inputs)
    assert set(out) == {name for name, _ in g.outputs}
    for name, e in g.outputs:
        t = g.node(e.src).types[e.port]
        assert out[name].dim() == 1 + (1 if t.heads else 0) + t.rank, name
    _sgd_lowers_loss(model, g)


INLINE = {
    "additive_pool": """
attngraph: 1
name: additive_pool
inputs:
  x: {type: vectors, dim: 6}
nodes:
  s: {kind: scorer, fn: mlp, key: x, hidden: 8}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x, out: 3}
outputs: {logits: z}
""",
    "cosine_location": """
attngraph: 1
name: cosine_location
inputs:
  q: {type: vector, dim: 6}
  x: {type: vectors, dim: 6}
nodes:
  c: {kind: scorer, fn: cosine, beta: learned, query: q, key: x}
  l: {kind: scorer, fn: location, mode: gaussian, query: q, key: x, sigma: 2.0}
  s: {kind: add, from: [c, l]}
  p: {kind: softmax, scores: s, temperature: 0.5}
  z: {kind: readout, weights: p, values: x}
  logits: {kind: linear, from: z, out: 2}
outputs: {logits: logits}
""",
    "image_patches": """
attngraph: 1
name: image_patches
inputs:
  img: {type: image, channels: 3, height: 8, width: 8}
nodes:
  x: {kind: items, from: img, patches: [4, 4], dim: 12}
  pos: {kind: position, from: x, dim: 12, encoding: learned}
  h: {kind: add, from: [x, pos]}
  q: {kind: queries, from: h, proj: mlp, hidden: 16, heads: 3}
  k: {kind: keys, from: h, heads: 3}
  v: {kind: values, from: h, heads: 3}
  s: {kind: scorer, fn: general, query: q, key: k, pairs: aligned}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v, combine: mean}
  d: {kind: dropout, from: z, p: 0.1}
  logits: {kind: linear, from: d, out: 4}
outputs: {logits: logits}
""",
}


@pytest.mark.parametrize("name", sorted(INLINE))
def test_inline_spec_sgd_lowers_the_loss(name: str) -> None:
    """Scorer fns mlp/cosine/location/general(aligned), patches, learned positions,
    mlp projections and mean-combined heads train: SGD lowers the loss."""
    g = attngraph.loads_spec(INLINE[name])
    _sgd_lowers_loss(attngraph.compile(g, seed=0), g)


DECODER = """
attngraph: 1
name: decoder
dims: {vocab: 9, d: 8}
inputs:
  src: {type: vectors, dim: d}
  tgt: {type: tokens, vocab: vocab, length: T}
blocks:
  step:
    inputs: [enc, state, y]
    nodes:
      e: {kind: embedding, from: y, dim: d, vocab: vocab}
      h: {kind: rnn, cell: gru, from: e, hidden: d, init: state}
      s: {kind: scorer, fn: dot, query: h, key: enc}
      a: {kind: softmax, scores: s}
      c: {kind: readout, weights: a, values: enc}
      cat: {kind: concat, from: [c, h]}
      logits: {kind: linear, from: cat, out: vocab}
    outputs: {logits: logits, attention: a, state: h}
nodes:
  dec:
    kind: loop
    body: step
    steps: tgt
    inputs: {enc: src}
    carry: {state: {zeros: d, next: state}}
    feed: {y: {from: tgt, start: 0, feedback: logits}}
outputs: {logits: dec.logits, attention: dec.attention, final: dec.final_state}
"""


def test_loop_teacher_forcing_in_training_greedy_in_eval() -> None:
    """In training step t reads tgt[t-1] (a change at t=2 alters steps 3.. only);
    in eval the loop feeds back its own argmax and ignores tgt."""
    model = attngraph.compile(DECODER, seed=0)
    src = torch.randn(2, 4, 8)
    tgt = torch.randint(0, 9, (2, 5))
    tgt2 = tgt.clone()
    tgt2[:, 2] = (tgt[:, 2] + 1) % 9
    a = model(src=src, tgt=tgt)
    b = model(src=src, tgt=tgt2)
    assert a["logits"].shape == (2, 5, 9) and a["attention"].shape == (2, 5, 4)
    assert a["final"].shape == (2, 8)
    torch.testing.assert_close(a["logits"][:, :3], b["logits"][:, :3])
    assert not torch.allclose(a["logits"][:, 3:], b["logits"][:, 3:])
    model.eval()
    a, b = model(src=src, tgt=tgt), model(src=src, tgt=tgt2)
    torch.testing.assert_close(a["logits"], b["logits"])


def test_loop_attention_respects_source_padding() -> None:
    """Inside a loop body, attention over the encoder ignores padded source items."""
    model = attngraph.compile(DECODER, seed=0)
    src = torch.randn(2, 4, 8)
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    out = model(src=src, src_mask=mask, tgt=torch.randint(0, 9, (2, 3)))
    assert (out["attention"][1, :, 2:] == 0).all()
    torch.testing.assert_close(out["attention"].sum(-1), torch.ones(2, 3))


def test_compile_command_prints_parameters_and_output_shapes(tmp_path: Path, cli) -> None:
    """`attngraph compile SPEC` lists parameters per node and the output shapes."""
    spec = tmp_path / "dec.yaml"
    spec.write_text(DECODER)
    res = cli("compile", spec, "--batch", "3", "--length", "4", code=0)
    assert "nodes.h.cell.weight_ih (24, 8)" in res.output
    assert "logits (3, 4, 9)" in res.output


def test_compile_command_reports_errors_located(tmp_path: Path, cli) -> None:
    """`attngraph compile` on a broken spec prints FILE:LINE:COL and exits 1."""
    spec = tmp_path / "bad.yaml"
    spec.write_text(DECODER.replace("fn: dot", "fn: dott"))
    res = cli("compile", spec, code=1)
    assert f"{spec}:" in res.output and "did you mean 'dot'" in res.output
