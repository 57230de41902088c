"""Defects of the language found in review, each pinned by the property it broke: how
shapes broadcast, what a loop's ``steps`` names, padded positions, whose name a shared
parameter has, which types are distributions, hints that can be followed, what
``describe`` calls a site, float64 tables, the additive scorer's bias and top-k ties."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.analysis.describe import describe  # noqa: E402
from attngraph.errors import AttnGraphError  # noqa: E402
from attngraph.frontend import load_spec, loads_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOL = {"atol": 1e-5, "rtol": 1e-5}


def _spec(inputs: str, nodes: str, outputs: str, dims: str = "") -> str:
    """A spec: its inputs from line 4 (5 with dims), then `nodes:` and the nodes."""
    return ("attngraph: 1\nname: t\n" + (f"dims: {dims}\n" if dims else "") + "inputs:\n"
            + inputs + "nodes:\n" + nodes + f"outputs: {outputs}\n")


def _error(text: str) -> tuple[int, int, str, str]:
    """(line, col, message, hint) of the one error ``text`` gives."""
    with pytest.raises(AttnGraphError) as e:
        loads_spec(text)
    d = e.value.diagnostics[0]
    return d.loc.line, d.loc.col, d.message, d.hint or ""


# 1. broadcasting follows meaning: a vector [C] is one value per channel of an image

IMAGE = "  img: {type: image, channels: 4, height: 3, width: W}\n  v: {type: vector, dim: V}\n"


@pytest.mark.parametrize("kind", ["mul", "add"])
def test_a_channel_vector_scales_the_channels_of_an_image(kind: str) -> None:
    """A vector [C] against an image [C, H, W] is one value per channel, even when the
    width happens to equal C (it scaled the width columns): img ⊙ v[c] per channel."""
    text = _spec(IMAGE.replace("W}", "4}").replace("V}", "4}"),
                 f"  m: {{kind: {kind}, from: [img, v]}}\n", "{m: m}")
    g = loads_spec(text)
    assert g.node("m").types[""].dims == (4, 3, 4)
    model = attngraph.compile(g, seed=0)
    img, v = torch.randn(2, 4, 3, 4), torch.randn(2, 4)
    want = img * v[:, :, None, None] if kind == "mul" else img + v[:, :, None, None]
    torch.testing.assert_close(model(img=img, v=v)["m"], want)


def test_a_vector_that_is_not_the_channels_is_refused_with_a_hint() -> None:
    """A vector of the image's width (not its channels) is refused at its reference,
    saying what a vector means for an image, with a hint that names both fixes."""
    text = _spec(IMAGE.replace("W}", "5}").replace("V}", "5}"),
                 "  m: {kind: mul, from: [img, v]}\n", "{m: m}")
    assert _error(text) == (
        7, 30, "node 'm': 'v' [5] cannot mul an image [4, 3, 5]: a vector is one value per "
        "channel (an image's features come first), and it has 4 channels",
        "give a vector of the 4 channels (e.g. a linear with out: 4); to weight the "
        "positions, give a map [3, 5]")


def test_a_vector_still_scales_every_item_feature_by_feature() -> None:
    """Items [N, d] times a vector [d]: each item scaled feature by feature, as before."""
    text = _spec("  x: {type: vectors, dim: 3}\n  v: {type: vector, dim: 3}\n",
                 "  m: {kind: mul, from: [x, v]}\n", "{m: m}")
    model = attngraph.compile(loads_spec(text), seed=0)
    x, v = torch.randn(2, 5, 3), torch.randn(2, 3)
    torch.testing.assert_close(model(x=x, v=v)["m"], x * v[:, None, :])


# 2. steps: a name that is both a dims entry and a node

LOOP = """attngraph: 1
name: t
dims: {k: 3}
inputs:
  src: {type: vectors, dim: 4}
blocks:
  b:
    inputs: [c]
    nodes:
      n: {kind: add, from: [c, c]}
    outputs: {n: n}
nodes:
  NODE
  l: {kind: loop, body: b, steps: k, carry: {c: {zeros: 4, next: n}}}
outputs: {l: l}
"""


def test_steps_naming_both_a_dims_entry_and_a_node_is_an_error() -> None:
    """steps: k with k both under dims and a node is ambiguous (it looped over the
    node's length): one located error whose hint says to rename one."""
    text = LOOP.replace("NODE", "k: {kind: items, from: src}")
    assert _error(text) == (
        14, 35, "node 'l': steps 'k' is both an entry of dims (3) and a node or input",
        "rename one of them: steps: <dims name> runs that many steps, steps: <node> one "
        "step per item of its first axis")
    # renamed, each meaning holds: the dims entry runs 3 steps, the node one per item
    assert loads_spec(LOOP.replace("NODE", "x: {kind: items, from: src}")
                      ).node("l").types[""].dims == (3, 4)
    g = loads_spec(LOOP.replace("NODE", "x: {kind: items, from: src}")
                   .replace("steps: k", "steps: x"))
    assert g.node("l").types[""].dims == ("N", 4)


# 3. padded entries of positions

GATHER = _spec("  points: {type: vectors, dim: 2}\n"
               "  picks: {type: positions, of: points, length: K}\n",
               "  x: {kind: items, from: points}\n"
               "  chosen: {kind: gather, from: x, index: picks}\n", "{chosen: chosen}")


def test_padded_positions_may_hold_anything() -> None:
    """Positions past the items (or negative, an ignore index) at padded entries are
    not read: gather runs and its real entries are the items at the real positions."""
    model = attngraph.compile(loads_spec(GATHER), seed=0)
    pts = torch.randn(2, 3, 2)
    picks = torch.tensor([[2, 0, 99], [1, -100, 7]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    out = model(points=pts, picks=picks, picks_mask=mask)["chosen"]
    torch.testing.assert_close(out[0, :2], pts[0, [2, 0]])
    torch.testing.assert_close(out[1, :1], pts[1, [1]])
    with pytest.raises(AttnGraphError, match="position 7 at example 1, entry 0"):
        model(points=pts, picks=torch.tensor([[2, 0, 1], [7, 0, 0]]), picks_mask=mask)


def test_a_loop_fed_padded_positions_runs_on_the_real_ones() -> None:
    """A pointer network fed padded targets of any value gives, at the real steps,
    what it gives with the padding at position 0."""
    graph = load_spec(ROOT / "mechanisms" / "pointer_network.yaml")
    model = attngraph.compile(graph, seed=0).eval()
    pts = torch.randn(2, 4, 2)
    targets = torch.tensor([[3, 1, 0, 2], [2, 0, -1, 50]])
    mask = torch.tensor([[True] * 4, [True, True, False, False]])
    with torch.no_grad():
        got = model(points=pts, targets=targets, targets_mask=mask)["pointer"]
        want = model(points=pts, targets=targets.masked_fill(~mask, 0),
                     targets_mask=mask)["pointer"]
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1, :2], want[1, :2])


# 4. the owner of shared parameters holds their name

SHARED = _spec("  a: {type: vectors, dim: 8}\n  b: {type: vectors, dim: 8, length: M}\n",
               "  user:  {kind: linear, from: a, out: 8, share: owner}\n"
               "  owner: {kind: linear, from: b, out: 8}\n", "{x: user, y: owner}")
TIED = _spec("  h: {type: vector, dim: 8}\n  tok: {type: tokens, vocab: 20}\n",
             "  out: {kind: linear, from: h, out: 20, tie: e}\n"
             "  e: {kind: embedding, from: tok, dim: 8}\n", "{out: out, e: e}")


@pytest.mark.parametrize(("text", "names"), [
    (SHARED, ["nodes.owner.weight", "nodes.owner.bias"]),
    (TIED, ["nodes.e.weight", "nodes.out.bias"]),
])
def test_named_parameters_name_the_owner(text: str, names: list[str]) -> None:
    """A shared (share) or tied (tie) parameter is listed once, under the node that
    owns it, even when a node that uses it comes first: weights mapped by name load."""
    model = attngraph.compile(loads_spec(text), seed=0)
    assert [k for k, _ in model.named_parameters()] == names
    fresh = attngraph.compile(loads_spec(text), seed=1)
    fresh.load_state_dict(dict(model.named_parameters()), strict=False)
    for k, p in fresh.named_parameters():
        assert torch.equal(p, model.get_parameter(k)), k


def test_compile_says_the_user_shares_the_owners_parameters(tmp_path: Path, cli) -> None:
    """`attngraph compile` counts the parameters at the owner and says the user shares
    those of the owner, as validate and the docs do."""
    path = tmp_path / "t.yaml"
    path.write_text(SHARED, encoding="utf-8")
    r = cli("compile", path, code=0)
    rows = {line.split()[0]: line for line in r.output.splitlines() if line.startswith("  ")}
    assert rows["owner"].split()[2] == "72" and "weight (8, 8), bias (8,)" in rows["owner"]
    assert rows["user"].split()[2] == "0" and rows["user"].endswith("shares those of owner")


# 5. gain and mul of weights are not distributions

WEIGHTS = _spec("  src: {type: vectors, dim: 8}\n",
                "  s: {kind: scorer, fn: mlp, key: src}\n  p: {kind: softmax, scores: s}\n"
                "  g: NODE\n  z: {kind: readout, weights: g, values: src}\n", "{z: z}")


@pytest.mark.parametrize("node", ["{kind: gain, from: p, init: 3.0}",
                                  "{kind: mul, from: [p, p]}"])
def test_scaled_weights_are_not_a_distribution(node: str) -> None:
    """γ·p (and p ⊙ p) no longer sum to one: the type is not simplex, so a readout
    refuses to take them as a distribution, at its weights."""
    text = WEIGHTS.replace("NODE", node)
    t = loads_spec(text.replace("  z: {kind: readout, weights: g, values: src}\n", "")
                   .replace("{z: z}", "{g: g}")).node("g").types[""]
    assert not t.simplex
    line, col, message, _ = _error(text)
    assert (line, col) == (9, 31)
    assert message.startswith("node 'z': weights 'g' ")


def test_gain_keeps_the_weights_mark() -> None:
    """γ·p are still the weights of a normaliser over the items (not a distribution)."""
    text = WEIGHTS.replace("NODE", "{kind: gain, from: p}").replace(
        "  z: {kind: readout, weights: g, values: src}\n", "").replace("{z: z}", "{g: g}")
    t = loads_spec(text).node("g").types[""]
    assert (t.simplex, t.weights) == (False, True)


# 6. hints that can be followed

ITEMS = ("  x: {type: vectors, dim: 8}\n  y: {type: vectors, dim: 8, length: M}\n"
         "  v: {type: vector, dim: 3}\n")


def test_one_item_is_added_to_every_item() -> None:
    """[N, d] + [1, d] (one learned item) validates and adds that item to every item
    (it was refused, with a hint to project by a linear)."""
    text = _spec(ITEMS, "  one: {kind: queries, learned: 1, dim: 8}\n"
                 "  s: {kind: add, from: [x, one]}\n", "{s: s, one: one}")
    g = loads_spec(text)
    assert g.node("s").types[""].dims == ("N", 8)
    model = attngraph.compile(g, seed=0)
    x = torch.randn(2, 5, 8)
    out = model(x=x, y=x, v=torch.randn(2, 3))
    torch.testing.assert_close(out["s"], x + out["one"])


@pytest.mark.parametrize(("nodes", "col", "message", "hint", "followed"), [
    ("  s: {kind: add, from: [x, y]}\n", 6,
     "node 's': add needs inputs of one shape, got [N, 8], [M, 8]; N and M are lengths, "
     "known only when a batch arrives, which no linear can change",
     "if 'x' and 'y' hold the same items, declare one length on both inputs (length: "
     "...); otherwise pool 'y' into one vector [d] ({kind: pool, from: y}), which "
     "broadcasts over the items",
     "  py: {kind: pool, from: y}\n  s: {kind: add, from: [x, py]}\n"),
    ("  s: {kind: add, from: [x, v]}\n", 6,
     "node 's': add needs inputs of one shape, got [N, 8], [3]",
     "project 'v' to 8 features with a linear ({kind: linear, from: v, out: 8}) and add "
     "that",
     "  pv: {kind: linear, from: v, out: 8}\n  s: {kind: add, from: [x, pv]}\n"),
    ("  sc: {kind: scorer, fn: mlp, key: x}\n  s: {kind: mul, from: [sc, x]}\n", 6,
     "node 's': mul needs inputs of one shape, got [N], [N, 8]; N is a length, known only "
     "when a batch arrives, which no linear can change",
     "shapes meet at their last axis (the features) and only an axis of size 1 "
     "stretches, so one value per item [N] cannot scale items [N, d]; a readout "
     "(weights: <a softmax over the items>, values: <the items>) sums weighted items",
     "  sc: {kind: scorer, fn: mlp, key: x}\n  p: {kind: softmax, scores: sc}\n"
     "  s: {kind: readout, weights: p, values: x}\n"),
])
def test_shape_hints_can_be_followed(nodes: str, col: int, message: str, hint: str,
                                     followed: str) -> None:
    """A shape mismatch says which axis cannot meet which, and its hint, followed as
    written, gives a spec that validates: a linear for two feature sizes, never for a
    length (N, M), which only a pool, a shared length or a readout deals with."""
    line = 7 + nodes.count("\n")
    assert _error(_spec(ITEMS, nodes, "{s: s}")) == (line, col, message, hint)
    assert loads_spec(_spec(ITEMS, followed, "{s: s}")).node("s").types[""].rank >= 1


def test_write_hint_does_not_project_a_length() -> None:
    """An NTM write's erase vector from weights over items [N]: the hint says no linear
    maps a length and how to make one vector, not "project it with a linear"."""
    text = _spec(ITEMS, "  m: {kind: memory, slots: 4, width: 8}\n"
                 "  sc: {kind: scorer, fn: mlp, key: m}\n  w: {kind: softmax, scores: sc}\n"
                 "  e: {kind: scorer, fn: mlp, key: x}\n"
                 "  s: {kind: write, memory: m, weights: w, erase: e, add: x}\n", "{s: s}")
    assert _error(text) == (
        12, 50, "node 's': erase vector must be [8], got [N]",
        "'e' holds one value per item (N, a length known only when a batch arrives, which "
        "no linear can map): read the items out with such weights (a readout gives [d]), "
        "then a linear with out: 8")


# 7. describe: a softmax over any axis is a site

FEATURES = _spec("  h: {type: vector, dim: 8}\n",
                 "  a: {kind: linear, from: h, out: 8}\n  w: {kind: softmax, scores: a}\n"
                 "  y: {kind: mul, from: [w, h]}\n", "{y: y}")


def test_a_feature_wise_softmax_is_an_attention_site() -> None:
    """A softmax over the features of a linear, whose weights scale a vector, is one
    attention site, described as weights over those features from no scorer."""
    (site,) = describe(loads_spec(FEATURES)).sites
    assert (site.id, site.form, site.chain) == ("w", "weights", ("a", "w", "y"))
    axes = {k: (a.value, a.reason) for k, a in site.axes.items()}
    assert axes["basis"] == ("content", "no scorer: the scores 'a' are computed from a "
                             "linear projection 'a' of input 'h' (vector), and the weights "
                             "range over the 8 features of 'a'")
    assert axes["source"][0] == "self" and "no query and no keys" in axes["source"][1]
    assert axes["reach"] == ("global", "every one of the 8 features of 'a' gets a weight")
    assert axes["exposure"] == ("implicit", "weights 'w' are internal (not a declared "
                                "output), read by 'y' (mul)")
    assert site.cost.expr == "O(k)" and [o.qid for o in site.values] == ["h"]


def test_weights_read_through_a_dropout_are_one_site() -> None:
    """Weights a readout reads through a dropout belong to the readout's site only."""
    text = _spec("  x: {type: vectors, dim: 8}\n",
                 "  s: {kind: scorer, fn: mlp, key: x}\n  p: {kind: softmax, scores: s}\n"
                 "  d: {kind: dropout, from: p}\n  z: {kind: readout, weights: d, values: x}\n",
                 "{z: z}")
    assert [(s.id, s.form) for s in describe(loads_spec(text)).sites] == [("z", "readout")]


# 8. fixed tables in float64 after model.double()

def _double(text: str, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    model = attngraph.compile(loads_spec(text), seed=0).double()
    with torch.no_grad():
        return model(**inputs)


def _sinusoid64(n: int, d: int) -> torch.Tensor:
    pe = torch.zeros(n, d, dtype=torch.float64)
    for p in range(n):
        for i in range(0, d, 2):
            angle = p / 10000.0 ** (i / d)
            pe[p, i], pe[p, i + 1] = math.sin(angle), math.cos(angle)
    return pe


@pytest.mark.parametrize("source", ["src", "x"])
def test_sinusoid_after_double_is_the_float64_formula(source: str) -> None:
    """After model.double(), sinusoidal positions (of float items, or of token ids)
    equal sin/cos of p / 10000^(i/d) in float64 to 1e-12."""
    text = _spec("  src: {type: tokens, vocab: 10}\n",
                 f"  x: {{kind: items, from: src, embed: 16}}\n"
                 f"  pos: {{kind: position, from: {source}, dim: 16}}\n", "{pos: pos}")
    out = _double(text, src=torch.randint(0, 10, (2, 60)))["pos"]
    assert out.dtype == torch.float64
    torch.testing.assert_close(out[0], _sinusoid64(60, 16), atol=1e-12, rtol=0)


def test_other_tables_after_double_are_their_float64_formulas() -> None:
    """Rotary angles, ALiBi slopes and patch centres, after model.double(), equal their
    formulas in float64 to 1e-12 (they were float32 values cast)."""
    text = _spec("  x: {type: vectors, dim: 6}\n"
                 "  img: {type: image, channels: 1, height: 3, width: 3}\n",
                 "  q: {kind: queries, from: x, heads: 3, dim: 6, bias: false}\n"
                 "  r: {kind: rotary, from: q, base: 7}\n"
                 "  s: {kind: scorer, fn: dot, query: q, key: q}\n"
                 "  b: {kind: position_bias, scores: s, fn: alibi}\n"
                 "  px: {kind: items, from: img}\n"
                 "  c: {kind: position, from: px, encoding: xy}\n",
                 "{q: q, r: r, s: s, b: b, c: c}")
    x = torch.randn(1, 5, 6, dtype=torch.float64)
    out = _double(text, x=x, img=torch.randn(1, 1, 3, 3, dtype=torch.float64))
    q, n = out["q"][0], torch.arange(5, dtype=torch.float64)[:, None]
    theta = 7.0 ** (-torch.arange(0, 2, 2, dtype=torch.float64) / 2)
    cos, sin = (n * theta).cos(), (n * theta).sin()
    a, b = q[..., 0::2], q[..., 1::2]
    rot = torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)
    torch.testing.assert_close(out["r"][0], rot, atol=1e-12, rtol=0)
    # three heads: 2^-8/2, its square, then the odd ones of eight heads (2^-1, ...)
    slopes = torch.tensor([2 ** -4, 2 ** -8, 2 ** -2], dtype=torch.float64)
    dist = (n - n.T).abs()
    torch.testing.assert_close(out["b"][0] - out["s"][0], -slopes[:, None, None] * dist,
                               atol=1e-12, rtol=0)
    third = torch.tensor([-2 / 3, 0.0, 2 / 3], dtype=torch.float64)
    want = torch.stack(torch.meshgrid(third, third, indexing="ij")[::-1], -1).reshape(9, 2)
    torch.testing.assert_close(out["c"][0], want, atol=1e-12, rtol=0)


# 9. the additive scorer without its bias

ADDITIVE = _spec("  src: {type: vectors, dim: 6}\n  h: {type: vector, dim: 5}\n",
                 "  s: {kind: scorer, fn: additive, query: h, key: src, hidden: 4BIAS}\n"
                 "  p: {kind: softmax, scores: s}\n"
                 "  z: {kind: readout, weights: p, values: src}\n", "{z: z, p: p}")


@pytest.mark.parametrize(("bias", "count"), [("", 5 * 4 + 6 * 4 + 4 + 4),
                                             (", bias: false", 5 * 4 + 6 * 4 + 4)])
def test_additive_bias_switch_counts_its_parameters(bias: str, count: int) -> None:
    """bias: false drops b (hidden per head): validate's count is the module's."""
    g = loads_spec(ADDITIVE.replace("BIAS", bias))
    model = attngraph.compile(g, seed=0)
    assert g.node("s").params == count == sum(p.numel() for p in model.parameters())


def test_additive_without_bias_equals_the_reference_with_padding() -> None:
    """vᵀ tanh(W h + U x_i), softmax over the real items, Σ p_i x_i: equal to a
    hand-written PyTorch reference to 1e-5, padded items weighted 0."""
    model = attngraph.compile(loads_spec(ADDITIVE.replace("BIAS", ", bias: false")), seed=0)
    s = model.nodes["s"]
    assert s.b is None
    x, h = torch.randn(2, 5, 6), torch.randn(2, 5)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 3])[:, None]
    out = model(src=x, h=h, src_mask=mask)
    e = torch.tanh((h @ s.W)[:, None, :] + x @ s.U) @ s.v  # (B, N)
    p = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(out["p"], p, **TOL)
    torch.testing.assert_close(out["z"], (p[..., None] * x).sum(1), **TOL)


def test_a_decoder_step_without_bias_equals_the_unhoisted_one() -> None:
    """In a loop, the hoisted decoder step (U k prepared once) without b gives what
    the plain lowering gives."""
    text = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 6}
  tgt: {type: vectors, dim: 6, length: T}
blocks:
  step:
    inputs: [y, s, enc]
    nodes:
      e: {kind: scorer, fn: additive, query: s, key: enc, bias: false}
      a: {kind: softmax, scores: e}
      c: {kind: readout, weights: a, values: enc}
      s2: {kind: rnn, from: y, hidden: 6, init: s}
    outputs: {s: s2, a: a}
nodes:
  dec:
    kind: loop
    body: step
    steps: tgt
    inputs: {enc: src}
    feed: {y: {from: tgt}}
    carry: {s: {zeros: 6, next: s}}
outputs: {a: dec.a}
"""
    g = loads_spec(text)
    x, y = torch.randn(2, 5, 6), torch.randn(2, 3, 6)
    mask = torch.arange(5)[None, :] < torch.tensor([5, 2])[:, None]
    fast = attngraph.compile(g, seed=0)(src=x, tgt=y, src_mask=mask)["a"]
    plain = attngraph.compile(g, seed=0, fuse=False)(src=x, tgt=y, src_mask=mask)["a"]
    torch.testing.assert_close(fast, plain, **TOL)


def test_bias_false_on_a_scorer_without_a_bias_is_refused() -> None:
    """bias: false on fn dot (no bias to drop) is a located error, not ignored."""
    text = _spec("  src: {type: vectors, dim: 6}\n  h: {type: vector, dim: 6}\n",
                 "  s: {kind: scorer, fn: dot, query: h, key: src, bias: false}\n", "{s: s}")
    assert _error(text) == (7, 56, "node 's': fn 'dot' (q·k) has no bias to drop",
                            "drop 'bias: false'; fn additive and mlp have a bias inside "
                            "the tanh")


# 10. top-k ties

TOPK = _spec("  src: {type: vectors, dim: 1}\n  h: {type: vector, dim: 1}\n",
             "  s: {kind: scorer, fn: dot, query: h, key: src}\n"
             "  p: {kind: softmax, scores: s, fn: topk, k: 2TIES}\n", "{p: p}")


def _topk_reference(s: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """Softmax over every real score at least the k-th highest real one; 0 elsewhere."""
    out = torch.zeros_like(s)
    for b in range(s.shape[0]):
        real = s[b][mask[b]]
        if real.numel() == 0:
            continue
        kth = real.topk(min(k, real.numel())).values[-1]
        keep = mask[b] & (s[b] >= kth)
        out[b][keep] = torch.softmax(s[b][keep], -1)
    return out


def test_topk_keep_ties_equals_the_reference_with_padding() -> None:
    """ties: keep gives every real score tied with the k-th highest weight (padding
    none), equal to a hand-written reference on scores with many ties."""
    model = attngraph.compile(loads_spec(TOPK.replace("TIES", ", ties: keep")), seed=0)
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 3, (8, 6, 1), generator=gen).float()
    mask = torch.arange(6)[None, :] < torch.randint(0, 7, (8,), generator=gen)[:, None]
    h = torch.ones(8, 1)
    got = model(src=x, h=h, src_mask=mask)["p"]
    torch.testing.assert_close(got, _topk_reference(x[..., 0], mask, 2), **TOL)
    row = model(src=torch.tensor([[[1.0], [2.0], [2.0], [0.0], [2.0]]]), h=torch.ones(1, 1),
                src_mask=torch.tensor([[True, True, True, True, False]]))["p"]
    torch.testing.assert_close(row, torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]]))


def test_topk_first_is_the_default_and_keeps_exactly_k() -> None:
    """Without ties (or ties: first) exactly k items keep weight, the first of the tied."""
    x = torch.tensor([[[1.0], [2.0], [2.0], [0.0], [2.0]]])
    for ties in ("", ", ties: first"):
        model = attngraph.compile(loads_spec(TOPK.replace("TIES", ties)), seed=0)
        torch.testing.assert_close(model(src=x, h=torch.ones(1, 1))["p"],
                                   torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]]))


def test_ties_on_another_normaliser_is_refused() -> None:
    """ties applies to fn topk only: elsewhere a located error at the field."""
    text = TOPK.replace(", fn: topk, k: 2TIES", ", ties: keep")
    assert _error(text) == (8, 39, "node 'p': 'ties' applies to fn topk, not softmax",
                            "drop 'ties', or set fn: topk")


# 9. a readout reads weights [N] or [M, N]: weights over a third axis (a bias over
#    steps broadcast into the scores) were accepted and failed when the forward ran


def test_weights_of_three_axes_are_refused_at_the_readout() -> None:
    """Scores [steps, queries, items] softmaxed and read out: one located error at the
    readout's weights, not a size mismatch between the batch and a length at run time."""
    text = _spec(
        "  x: {type: vectors, dim: d}\n",
        "  v: {kind: values, from: x}\n"
        "  e: {kind: scorer, fn: dot, query: v, key: v}\n"
        "  b: {kind: param, shape: [N], max_len: ell, axes: [steps]}\n"
        "  s: {kind: expr, formula: \"e + b\"}\n"
        "  p: {kind: softmax, scores: s}\n"
        "  z: {kind: readout, weights: p, values: v}\n",
        "{z: z}", dims="{d: 4, ell: 8}")
    line, col, message, hint = _error(text)
    assert (line, col) == (12, 31)
    assert "weights 'p' are [N, N, N]" in message and "[M, N]" in message
    assert "reduce the other axes" in hint
