"""Shape inference: the mechanisms of the reference figures and multi-head attention."""

from __future__ import annotations

from attngraph.frontend import loads_spec

HEAD = """attngraph: 1
name: {name}
dims: {{d: 16, vocab: 50, classes: 3}}
inputs:
  tokens: {{type: tokens, vocab: vocab}}
nodes:
  x: {{kind: items, from: tokens, embed: d}}
"""


def shapes(text: str) -> dict[str, str]:
    """Default-port type of every non-input node, as text."""
    g = loads_spec(text, "t.yaml")
    return {n.id: str(n.types[""]) for n in g.nodes if not n.is_input}


def test_items_weights_z() -> None:
    """Items -> weights p_i -> z: scores [N], weights [N], z [d]."""
    text = HEAD.format(name="simple") + (
        "  s: {kind: scorer, fn: mlp, key: x}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: x}\n"
        "outputs: {z: z, p: p}\n"
    )
    assert shapes(text) == {"x": "[N, 16]", "s": "[N]", "p": "[N]", "z": "[16]"}


def test_with_context_vectors() -> None:
    """Context vectors c_i added to the items keep [N, d]; weights still [N]."""
    text = HEAD.format(name="context") + (
        "  c: {kind: position, from: x, dim: d}\n"
        "  xc: {kind: add, from: [x, c]}\n"
        "  s: {kind: scorer, fn: additive, query: {learned: d}, key: xc}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: xc}\n"
        "outputs: {z: z}\n"
    )
    assert shapes(text) == {
        "x": "[N, 16]", "c": "[N, 16]", "xc": "[N, 16]", "s": "[N]", "p": "[N]", "z": "[16]",
    }


def test_queries_keys_aligned() -> None:
    """Per-item queries and keys scored in aligned pairs give one score per item."""
    text = HEAD.format(name="qk") + (
        "  q: {kind: queries, from: x, dim: 8}\n"
        "  k: {kind: keys, from: x, dim: 8}\n"
        "  s: {kind: scorer, fn: dot, query: q, key: k, pairs: aligned}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: x}\n"
        "outputs: {z: z}\n"
    )
    assert shapes(text) == {
        "x": "[N, 16]", "q": "[N, 8]", "k": "[N, 8]", "s": "[N]", "p": "[N]", "z": "[16]",
    }


def test_queries_keys_values() -> None:
    """Values of another size set the readout's size: z is [d_v]."""
    text = HEAD.format(name="qkv") + (
        "  q: {kind: queries, from: x, dim: 8}\n"
        "  k: {kind: keys, from: x, dim: 8}\n"
        "  v: {kind: values, from: x, dim: 4}\n"
        "  s: {kind: scorer, fn: dot, query: q, key: k, pairs: aligned}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: v}\n"
        "outputs: {z: z}\n"
    )
    got = shapes(text)
    assert (got["v"], got["z"]) == ("[N, 4]", "[4]")


def test_intra_attention_all_pairs() -> None:
    """Every item attends to every item: scores and weights [N, N], z_i [N, d]."""
    text = HEAD.format(name="intra") + (
        "  s: {kind: scorer, fn: scaled_dot, query: x, key: x, pairs: all}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: x}\n"
        "outputs: {z: z}\n"
    )
    assert shapes(text) == {"x": "[N, 16]", "s": "[N, N]", "p": "[N, N]", "z": "[N, 16]"}


def test_multihead_self_attention() -> None:
    """h heads split d: q/k/v [N, d/h] ×h, scores [N, N] ×h, concat gives [N, d]."""
    text = HEAD.format(name="mhsa") + (
        "  q: {kind: queries, from: x, heads: 4}\n"
        "  k: {kind: keys, from: x, heads: 4}\n"
        "  v: {kind: values, from: x, heads: 4}\n"
        "  s: {kind: scorer, fn: scaled_dot, query: q, key: k}\n"
        "  p: {kind: softmax, scores: s, mask: {causal: true}}\n"
        "  z: {kind: readout, weights: p, values: v, combine: concat, out: d}\n"
        "outputs: {z: z, attention: p}\n"
    )
    g = loads_spec(text, "t.yaml")
    got = {n.id: str(n.types[""]) for n in g.nodes if not n.is_input}
    assert got == {
        "x": "[N, 16]", "q": "[N, 4] ×4", "k": "[N, 4] ×4", "v": "[N, 4] ×4",
        "s": "[N, N] ×4", "p": "[N, N] ×4", "z": "[N, 16]",
    }
    # q, k, v: 16*16+16 each; out: 16*16+16; embedding 50*16
    assert g.params == 4 * (16 * 16 + 16) + 50 * 16


def test_mean_combine_and_learned_queries() -> None:
    """K learned queries give [K, d]; combine: mean keeps the per-head size."""
    text = HEAD.format(name="learned") + (
        "  q: {kind: queries, learned: 3, dim: 16, heads: 2}\n"
        "  k: {kind: keys, from: x, heads: 2}\n"
        "  s: {kind: scorer, fn: dot, query: q, key: k}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: k, combine: mean}\n"
        "outputs: {z: z}\n"
    )
    got = shapes(text)
    assert (got["q"], got["s"], got["z"]) == ("[3, 8] ×2", "[3, N] ×2", "[3, 8]")


def test_rnn_ports_and_loop_stacking() -> None:
    """rnn gives out [N, 2h] and state [2h]; a loop stacks body outputs over T."""
    text = """attngraph: 1
name: dec
dims: {d: 8, vocab: 20}
inputs:
  src: {type: tokens, vocab: vocab}
  tgt: {type: tokens, vocab: vocab, length: T}
blocks:
  step:
    inputs: [y, s, ann]
    nodes:
      e: {kind: embedding, from: y, dim: d, vocab: vocab}
      h: {kind: rnn, from: e, hidden: 16, init: s}
      sc: {kind: scorer, fn: additive, query: h.state, key: ann}
      a: {kind: softmax, scores: sc}
      c: {kind: readout, weights: a, values: ann}
      o: {kind: linear, from: c, out: vocab}
    outputs: {logits: o, state: h.state, align: a}
nodes:
  x: {kind: items, from: src, embed: d}
  enc: {kind: rnn, from: x, hidden: 8, bidirectional: true}
  dec:
    kind: loop
    body: step
    steps: tgt
    inputs: {ann: enc.out}
    carry: {s: {init: enc.state, next: state}}
    feed: {y: {from: tgt, feedback: logits, start: 1}}
outputs: {logits: dec.logits, alignment: dec.align}
"""
    g = loads_spec(text, "t.yaml")
    enc = g.node("enc")
    assert (str(enc.types["out"]), str(enc.types["state"])) == ("[N, 16]", "[16]")
    dec = g.node("dec")
    assert str(dec.types["logits"]) == "[T, 20]"
    assert str(dec.types["align"]) == "[T, N]"
    assert dec.types["align"].simplex
    assert dec.body is not None and str(dec.body.node("c").types[""]) == "[16]"


def test_repeat_keeps_shape_and_counts_rounds() -> None:
    """repeat K rounds of a shape-preserving block has K times the block's parameters."""
    text = """attngraph: 1
name: enc
dims: {d: 8}
inputs:
  v: {type: vectors, dim: d}
blocks:
  layer:
    inputs: [h]
    nodes:
      s: {kind: scorer, fn: scaled_dot, query: h, key: h}
      p: {kind: softmax, scores: s}
      z: {kind: readout, weights: p, values: h}
      f: {kind: linear, from: z, out: d}
      r: {kind: add, from: [h, f]}
    output: r
nodes:
  stack: {kind: repeat, block: layer, times: 3, from: v}
  shared: {kind: repeat, block: layer, times: 3, from: v, share: true}
outputs: {h: stack, h2: shared}
"""
    g = loads_spec(text, "t.yaml")
    assert str(g.node("stack").types[""]) == "[N, 8]"
    assert g.node("stack").params == 3 * (8 * 8 + 8)
    assert g.node("shared").params == 8 * 8 + 8


def test_ir_dump_is_stable_golden() -> None:
    """str(graph) is the stable one-line-per-node dump tests use as golden text."""
    text = HEAD.format(name="golden") + (
        "  s: {kind: scorer, fn: additive, query: {learned: d}, key: x}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: {ref: x, detach: true}}\n"
        "  logits: {kind: linear, from: z, out: classes}\n"
        "outputs: {logits: logits, attention: p}\n"
    )
    assert str(loads_spec(text, "t.yaml")) == "\n".join([
        "graph golden:",
        "  %tokens = input(type=tokens, vocab=50, length=N) : long[N]; mask: bool[N]  @5:11",
        "  %x = items(embed=16, from=%tokens) : [N, 16]  @7:6",
        "  %s = scorer(query=learned[16], fn=additive, key=%x) : [N]  @8:6",
        "  %p = softmax(scores=%s) : [N]  @9:6",
        "  %z = readout(weights=%p, values=~%x) : [16]  @10:6",
        "  %logits = linear(out=3, from=%z) : [3]  @11:11",
        "  return logits=%logits, attention=%p",
    ])


def test_block_takes_a_graph_adjacency() -> None:
    """A block input bound to g.adjacency can mask a softmax inside the block."""
    text = """attngraph: 1
name: gat2
dims: {d: 8}
inputs:
  g: {type: graph, dim: d}
blocks:
  gat:
    inputs: [h, adj]
    nodes:
      s: {kind: scorer, fn: dot, query: h, key: h}
      a: {kind: softmax, scores: s, mask: {adjacency: adj}}
      z: {kind: readout, weights: a, values: h}
    output: z
nodes:
  h0: {kind: items, from: g}
  h1: {kind: block, block: gat, from: {h: h0, adj: g.adjacency}}
  h2: {kind: block, block: gat, from: {h: h1, adj: g.adjacency}}
outputs: {h: h2}
"""
    g = loads_spec(text, "t.yaml")
    assert str(g.node("h2").types[""]) == "[N, 8]"
    assert g.node("h1").body is not None
    assert str(g.node("h1").body.node("a").types[""]) == "[N, N]"
