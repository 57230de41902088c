"""diff: two specs aligned by role; axes, site details and nodes in only one."""

from __future__ import annotations

import json
import time
from pathlib import Path

from attngraph import loads_spec
from attngraph.analysis.diff import diff, render_diff, to_dict

HEAD = """
attngraph: 1
name: {name}
dims: {{d: 16, vocab: 20}}
"""

ITEMS = HEAD + """inputs: {{v: {{type: vectors, dim: d}}}}
nodes:
  x: {{kind: items, from: v}}
{nodes}
outputs: {{z: z}}
"""

GLOBAL = """  s: {kind: scorer, fn: additive, query: {learned: d}, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
"""
MULTIHEAD = """  q: {kind: queries, learned: 1, dim: d, heads: 4}
  k: {kind: keys, from: x, heads: 4}
  vv: {kind: values, from: x, heads: 4}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: vv}
"""
QK = """  q: {kind: queries, from: x}
  k: {kind: keys, from: x}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s%s}
  z: {kind: readout, weights: p, values: %s}
"""
QKV = QK.replace("  s:", "  vv: {kind: values, from: x}\n  s:")
GRAPH = HEAD.format(name="gat") + """inputs: {g: {type: graph, dim: d}}
nodes:
  x: {kind: items, from: g}
""" + QK % (", mask: {adjacency: g}", "x") + "outputs: {z: z}\n"

SEQ2SEQ = HEAD + """inputs:
  src: {{type: tokens, vocab: vocab}}
  tgt: {{type: labels, per_item: true, length: T, classes: vocab}}
blocks:
  step:
    inputs: [h, s, y]
    nodes:
{body}
    outputs: {{logits: logits, s_next: s_next, a: a}}
nodes:
  x: {{kind: items, from: src, embed: d}}
  enc: {{kind: rnn, from: x, hidden: {enc_hidden}, bidirectional: {bidir}}}
  s0: {{kind: linear, from: enc.state, out: d, act: tanh}}
  dec: {{kind: loop, body: step, steps: tgt, inputs: {{h: enc}},
         carry: {{s: {{init: s0, next: s_next}}}}, feed: {{y: {{from: tgt}}}}}}
outputs: {{logits: dec.logits, attention: dec.a}}
"""
BAHDANAU_BODY = """      score: {{kind: scorer, fn: additive, query: s, key: h}}
      a: {{kind: softmax, scores: score}}
      c: {{kind: readout, weights: a, values: h}}
      e: {{kind: embedding, from: y, dim: d, vocab: vocab}}
      inp: {{kind: concat, from: [e, c]}}
      s_next: {{kind: rnn, from: inp, hidden: d, init: s}}
      logits: {{kind: linear, from: s_next, out: vocab}}"""
LUONG_BODY = """      e: {{kind: embedding, from: y, dim: d, vocab: vocab}}
      s_next: {{kind: rnn, from: e, hidden: d, init: s}}
      score: {{kind: scorer, fn: general, query: s_next, key: h}}
      a: {{kind: softmax, scores: score}}
      c: {{kind: readout, weights: a, values: h}}
      cat: {{kind: concat, from: [c, s_next]}}
      logits: {{kind: linear, from: cat, out: vocab}}"""

SOFT_GLIMPSE = """  s: {kind: scorer, fn: mlp, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
"""
HARD_GLIMPSE = """  s: {kind: scorer, fn: mlp, key: x}
  p: {kind: policy, scores: s, dist: categorical, estimator: reinforce}
  z: {kind: readout, weights: p, values: x}
"""


def items(nodes: str, name: str) -> str:
    """A vectors-input spec with items x and the given nodes."""
    return ITEMS.format(name=name, nodes=nodes)


def seq2seq(name: str, body: str, bidir: bool) -> str:
    """An encoder-decoder spec whose decoder step is ``body``."""
    return SEQ2SEQ.format(name=name, body=body.format(), bidir=str(bidir).lower(),
                          enc_hidden=8 if bidir else 16)


def axes(d, i: int = 0) -> dict[str, tuple[str | None, str | None]]:  # noqa: ANN001
    """Axis name -> (value in a, value in b) for site pair i."""
    return {k: (va, vb) for k, va, vb in d.sites[i].axes}


def details(d, i: int = 0) -> dict[str, tuple[str, str]]:  # noqa: ANN001
    """What -> (a, b) for the differing details of site pair i."""
    return {w: (va, vb) for w, va, vb in d.sites[i].details}


def timed_diff(a: str, b: str):  # noqa: ANN201
    """diff of two spec texts, asserting it takes under one second."""
    ga, gb = loads_spec(a), loads_spec(b)
    diff(ga, gb)  # warm imports (networkx, scipy) before timing
    t = time.perf_counter()
    d = diff(ga, gb)
    assert time.perf_counter() - t < 1.0
    return d


def test_global_vs_multihead() -> None:
    """Global vs multi-head: only the heads axis differs; scorer and heads details differ."""
    d = timed_diff(items(GLOBAL, "glob"), items(MULTIHEAD, "mh"))
    ax = axes(d)
    assert ax["heads"] == ("single-head", "multi-head")
    assert [k for k, (va, vb) in ax.items() if va != vb] == ["heads"]
    assert details(d)["scorer"] == ("additive", "scaled_dot")
    assert details(d)["heads"] == ("1", "4")
    assert {"q", "k", "vv"} <= set(d.only_b)


def test_queries_keys_vs_queries_keys_values() -> None:
    """q/k vs q/k/v: the same axes; the values node exists in only the second."""
    d = timed_diff(items(QK % ("", "x"), "qk"), items(QKV % ("", "vv"), "qkv"))
    assert all(va == vb for va, vb in axes(d).values())
    assert d.only_b == ("vv",)
    assert d.only_a == ()
    assert ("q", "q") in d.same and ("k", "k") in d.same


def test_intra_vs_local() -> None:
    """Intra-attention vs its windowed form: reach global vs local, cost and mask differ."""
    d = timed_diff(items(QK % ("", "x"), "intra"),
                   items(QK % (", mask: {window: 2}", "x"), "local"))
    assert axes(d)["reach"] == ("global", "local")
    assert details(d)["cost"] == ("O(N²·d) with d = 16", "O(N·w·d) with d = 16, w = 5")
    changed = {(x, y): f for x, y, f in d.changed}
    assert changed[("p", "p")] == (("mask", None, {"window": 2}),)


def test_bahdanau_vs_luong() -> None:
    """Bahdanau vs Luong: additive vs general, previous vs current state, bi- vs unidirectional."""
    d = timed_diff(seq2seq("bahdanau", BAHDANAU_BODY, True),
                   seq2seq("luong", LUONG_BODY, False))
    det = details(d)
    assert det["scorer"] == ("additive", "general")
    assert det["query from"] == ("the previous step's state ('dec/s')",
                                 "the current step's rnn state ('dec/s_next')")
    assert det["encoder (keys)"] == ("bidirectional", "unidirectional")
    assert all(va == vb for va, vb in axes(d).values())
    changed = {(x, y): {k: (va, vb) for k, va, vb in f} for x, y, f in d.changed}
    assert changed[("enc", "enc")]["bidirectional"] == (True, False)
    assert ("dec/score", "dec/score") in changed


def test_soft_vs_hard() -> None:
    """Softmax vs categorical policy: hardness soft vs hard, the weights nodes matched."""
    d = timed_diff(items(SOFT_GLIMPSE, "soft"), items(HARD_GLIMPSE, "hard"))
    assert axes(d)["hardness"] == ("soft", "hard")
    assert [k for k, (va, vb) in axes(d).items() if va != vb] == ["hardness"]
    changed = {(x, y): f for x, y, f in d.changed}
    assert changed[("p", "p")] == (("kind", "softmax", "policy"),)


def test_graph_attention_vs_intra() -> None:
    """Graph attention vs intra-attention: the adjacency mask makes it local; input types differ."""
    d = timed_diff(GRAPH, items(QK % ("", "x"), "intra"))
    assert axes(d)["reach"] == ("local", "global")
    changed = {(x, y): {k: (va, vb) for k, va, vb in f} for x, y, f in d.changed}
    assert changed[("g", "v")]["type"] == ("graph", "vectors")


def test_identical_specs_have_no_differences() -> None:
    """A spec diffed with itself: every node the same, nothing changed or unmatched."""
    g = loads_spec(seq2seq("bahdanau", BAHDANAU_BODY, True))
    d = diff(g, g)
    assert d.changed == () and d.only_a == () and d.only_b == ()
    assert all(x == y for x, y in d.same)
    assert d.sites[0].details == ()


def test_formats_and_cli(tmp_path: Path, cli) -> None:
    """diff renders as text, markdown and JSON; the CLI prints the JSON form."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(items(QK % ("", "x"), "intra"), encoding="utf-8")
    b.write_text(items(QK % (", mask: {window: 2}", "x"), "local"), encoding="utf-8")
    res = cli("diff", a, b, "--format", "json", code=0)
    data = json.loads(res.output)
    assert data["sites"][0]["axes"]["reach"] == {"a": "global", "b": "local", "same": False}
    d = diff(loads_spec(a.read_text()), loads_spec(b.read_text()))
    assert to_dict(d) == data
    assert "reach       differs  global vs local" in render_diff(d, "text")
    assert "| reach | global | local | differs |" in render_diff(d, "markdown")


def test_a_stop_gradient_is_a_difference() -> None:
    """Reading an input with ``detach: true`` (a stop-gradient) is a setting of the
    reference: the node that reads it is listed as differing, by that input."""
    detached = GLOBAL.replace("key: x}", "key: {ref: x, detach: true}}")
    assert detached != GLOBAL
    d = diff(loads_spec(items(GLOBAL, "a")), loads_spec(items(detached, "b")))
    assert [(x, y, f) for x, y, f in d.changed] == [("s", "s", (("key.detach", False, True),))]
    assert "s ↔ s: key.detach False vs True" in render_diff(d)
    assert diff(loads_spec(items(detached, "a")), loads_spec(items(detached, "b"))).changed == ()


def test_an_output_layer_matches_the_output_layer_not_a_block_projection() -> None:
    """GPT-2 against Llama: each model's output layer is the other's, though Llama's
    layer block holds three linears more (a node of a block's body and one outside it
    pair only at a cost)."""
    root = Path(__file__).resolve().parents[1] / "specs" / "real"
    d = diff(loads_spec((root / "gpt2.yaml").read_text()),
             loads_spec((root / "llama.yaml").read_text()))
    pairs = dict(d.alignment.pairs)
    assert pairs["logits"] == "logits" and pairs["nf"] == "nf"
    assert all(a.count("/") == b.count("/") for a, b in d.alignment.pairs)
    assert {"stack/gate", "stack/up", "stack/down"} <= set(d.alignment.only_b)
