"""The exported Python of ``rotary`` and ``position_bias`` (``--format python``): every
configuration of the two kinds is written by its emit rule (no lowering class copied,
no memo, no runtime state) and the file equals the compiled model, outputs and
gradients to 1e-6, on padded batches: RoPE (bases, with and without heads, queries
and keys of different lengths, in a repeat and in a loop over steps), ALiBi (heads a
power of two or not, none), T5 buckets (bidirectional or causal, few buckets, a short
max_distance, none); the tables of the positions made once per forward. And the API
the rules make them with (:meth:`EmitCtx.prelude`, :meth:`EmitCtx.shared`): a value
made once is read by the nodes after that see it, in a loop's body too, and a rule
that declines leaves neither its prelude nor its values."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codegen_support import assert_file_equals_model, file_names, filled, load  # noqa: E402

import attngraph  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402

#: what a node that falls back to its lowering class brings into the file
FALLBACK_MARKS = ("class Rotary", "class PositionBias", "NodeModule", "Runtime", "memo",
                  "shared(", ", rt)", " rt.")

SELF = """attngraph: 1
name: {name}
dims: {{d: {d}}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  q: {{kind: queries, from: x{heads}}}
  k: {{kind: keys, from: x{heads}}}
  v: {{kind: values, from: x{heads}}}
{extra}
  z: {{kind: readout, weights: p, values: v, out: d}}
outputs: {{z: z, attention: p}}
"""

ROPE = """  rq: {{kind: rotary, from: q{base}}}
  rk: {{kind: rotary, from: k{kbase}}}
  s: {{kind: scorer, fn: scaled_dot, query: rq, key: rk}}
  p: {{kind: softmax, scores: s, mask: {{causal: true}}}}"""

BIAS = """  s: {{kind: scorer, fn: dot, query: q, key: k}}
  b: {{kind: position_bias, scores: s, {bias}}}
  p: {{kind: softmax, scores: b{mask}}}"""


def _rope(name: str, *, d: int = 16, heads: str = ", heads: 2", base: str = "",
          kbase: str | None = None) -> str:
    extra = ROPE.format(base=base, kbase=base if kbase is None else kbase)
    return SELF.format(name=name, d=d, heads=heads, extra=extra)


def _bias(name: str, bias: str, *, heads: str = ", heads: 4", causal: bool = False,
          d: int = 24) -> str:
    extra = BIAS.format(bias=bias, mask=", mask: {causal: true}" if causal else "")
    return SELF.format(name=name, d=d, heads=heads, extra=extra)


#: cross-attention: target queries [T] over source items [N] (N ≠ T)
CROSS = """attngraph: 1
name: {name}
dims: {{d: 16}}
inputs:
  x: {{type: vectors, dim: d}}
  y: {{type: vectors, dim: d, length: T}}
nodes:
  q: {{kind: queries, from: y, heads: 2}}
  k: {{kind: keys, from: x, heads: 2}}
  v: {{kind: values, from: x, heads: 2}}
  rq: {{kind: rotary, from: q}}
  rk: {{kind: rotary, from: k, base: 100}}
  s: {{kind: scorer, fn: dot, query: rq, key: rk}}
  b: {{kind: position_bias, scores: s, {bias}}}
  p: {{kind: softmax, scores: b}}
  z: {{kind: readout, weights: p, values: v, out: d}}
outputs: {{z: z, attention: p}}
"""

#: a stack of causal layers (unshared rounds), Llama-like
STACK = """attngraph: 1
name: {name}
dims: {{vocab: 23, d: 16, layers: 3}}
inputs:
  tokens: {{type: tokens, vocab: vocab}}
blocks:
  layer:
    inputs: [h]
    nodes:
      q: {{kind: queries, from: h, heads: 2, bias: false}}
      k: {{kind: keys, from: h, heads: 2, bias: false}}
      v: {{kind: values, from: h, heads: 2, bias: false}}
{layer}
      a: {{kind: readout, weights: p, values: v, out: d, bias: false}}
      r: {{kind: add, from: [h, a]}}
    outputs: {{h: r, attention: p}}
nodes:
  x: {{kind: items, from: tokens, embed: d}}
  stack: {{kind: repeat, block: layer, times: layers, from: x}}
  logits: {{kind: linear, from: stack, out: vocab}}
outputs: {{logits: logits, heads: stack.attention}}
"""

STACK_ROPE = """      rq: {kind: rotary, from: q}
      rk: {kind: rotary, from: k}
      s: {kind: scorer, fn: scaled_dot, query: rq, key: rk}
      p: {kind: softmax, scores: s, mask: {causal: true}}"""

STACK_BIAS = """      s: {{kind: scorer, fn: dot, query: q, key: k}}
      b: {{kind: position_bias, scores: s, {bias}}}
      p: {{kind: softmax, scores: b, mask: {{causal: true}}}}"""

#: a decoder stepping over the target, attending to rotated keys of the source
LOOP = """attngraph: 1
name: rope_loop
dims: {d: 8}
inputs:
  source: {type: vectors, dim: d}
  target: {type: vectors, dim: d, length: T}
blocks:
  step:
    inputs: [mem, state, y]
    nodes:
      h: {kind: add, from: [mem, state]}
      k: {kind: keys, from: h}
      rk: {kind: rotary, from: k}
      s: {kind: scorer, fn: dot, query: state, key: rk}
      a: {kind: softmax, scores: s}
      c: {kind: readout, weights: a, values: mem}
      i: {kind: concat, from: [c, y]}
      nxt: {kind: rnn, cell: gru, from: i, hidden: d, init: state}
    outputs: {out: nxt, attention: a, state: nxt}
nodes:
  dec:
    kind: loop
    body: step
    steps: target
    inputs: {mem: source}
    carry: {state: {zeros: d, next: state}}
    feed: {y: {from: target}}
outputs: {out: dec, attention: dec.attention}
"""

#: the loop, its keys rotated twice in the body, and the source's keys after it
LOOP_AND_AFTER = LOOP.replace("rope_loop", "rope_loop_and_after").replace(
    "      s: {kind: scorer, fn: dot, query: state, key: rk}",
    "      rr: {kind: rotary, from: rk}\n"
    "      s: {kind: scorer, fn: dot, query: state, key: rr}").replace(
    "outputs: {out: dec, attention: dec.attention}",
    "  kk: {kind: keys, from: source}\n"
    "  rkk: {kind: rotary, from: kk}\n"
    "outputs: {out: dec, attention: dec.attention, keys: rkk}")

CASES: dict[str, str] = {
    # RoPE
    "rope_heads": _rope("rope_heads"),
    "rope_no_heads": _rope("rope_no_heads", d=6, heads=""),
    "rope_pair_per_head": _rope("rope_pair_per_head", d=4, heads=", heads: 2"),
    "rope_bases": _rope("rope_bases", base=", base: 500000", kbase=", base: 2.5"),
    "rope_stack": STACK.format(name="rope_stack", layer=STACK_ROPE),
    "rope_loop": LOOP,
    "rope_loop_and_after": LOOP_AND_AFTER,
    # ALiBi
    "alibi_4": _bias("alibi_4", "fn: alibi", causal=True),
    "alibi_6": _bias("alibi_6", "fn: alibi", heads=", heads: 6"),
    "alibi_12": _bias("alibi_12", "fn: alibi", heads=", heads: 12", causal=True),
    "alibi_no_heads": _bias("alibi_no_heads", "fn: alibi", heads=""),
    "alibi_stack": STACK.format(name="alibi_stack", layer=STACK_BIAS.format(bias="fn: alibi")),
    # T5
    "t5_bidirectional": _bias("t5_bidirectional", "fn: t5"),
    "t5_causal": _bias("t5_causal", "fn: t5, bidirectional: false", causal=True),
    "t5_short": _bias("t5_short", "fn: t5, buckets: 8, max_distance: 5"),
    "t5_causal_short": _bias("t5_causal_short", "fn: t5, buckets: 4, max_distance: 3, "
                             "bidirectional: false", causal=True),
    "t5_no_heads": _bias("t5_no_heads", "fn: t5, buckets: 6, max_distance: 9", heads=""),
    "t5_stack": STACK.format(name="t5_stack", layer=STACK_BIAS.format(
        bias="fn: t5, buckets: 8, max_distance: 6, bidirectional: false")),
    # queries and items of different lengths
    "cross_alibi": CROSS.format(name="cross_alibi", bias="fn: alibi"),
    "cross_t5": CROSS.format(name="cross_t5", bias="fn: t5, buckets: 8, max_distance: 6"),
    "cross_t5_causal": CROSS.format(name="cross_t5_causal",
                                    bias="fn: t5, buckets: 8, bidirectional: false"),
}


def _model(name: str) -> Any:
    return attngraph.compile(loads_spec(CASES[name]), seed=0).eval()


def _inputs(model: Any, *, n: int = 11, t: int = 7, batch: int = 3) -> dict[str, Any]:
    """Random inputs, each length N items and T items (N ≠ T), padded: example 0 full,
    example 1 two items shorter, example 2 half as long."""
    g = torch.Generator().manual_seed(0)
    out: dict[str, Any] = {}
    for a in model.binder.args:
        if a.port:
            continue
        dims = [(t if d == "T" else n) if isinstance(d, str) else int(d) for d in a.t.dims]
        out[a.name] = torch.randint(0, a.high or 2, (batch, *dims), generator=g) \
            if a.t.dtype == "long" else torch.randn(batch, *dims, generator=g)
    for a in model.binder.args:
        if a.port == "mask":
            size = out[a.input].shape[1]
            lengths = torch.tensor([size, max(1, size - 2), max(1, size // 2)][:batch])
            out[a.name] = torch.arange(size)[None, :] < lengths[:, None]
    return out


def _assert_file_equals_model(model: Any, name: str, *, dtype: Any = None,
                              n: int = 11, t: int = 7) -> str:
    """The file of ``model`` (no copied lowering class) returns its outputs and gives its
    parameters and float inputs the same gradients, to 1e-6; the file's text."""
    code = model.code
    for mark in FALLBACK_MARKS:
        assert mark not in code, mark
    mod = load(code, f"relative_{name}")
    try:
        ours = filled(mod, model)
        if dtype is not None:
            model, ours = model.to(dtype), ours.to(dtype)
        inputs = _inputs(model, n=n, t=t)
        if dtype is not None:
            inputs = {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}
        floats = [k for k, v in inputs.items() if v.is_floating_point()]
        mine = {k: v.clone().requires_grad_(True) if k in floats else v
                for k, v in inputs.items()}
        theirs = {k: v.clone().requires_grad_(True) if k in floats else v
                  for k, v in inputs.items()}
        got, want = ours(**mine), model(**theirs)
        assert list(got) == list(want)
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
            torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6)
        names = file_names(mod, model)
        params = dict(ours.named_parameters(remove_duplicate=False))
        pairs = [(params[names[p]], w) for p, w in model.named_parameters()]
        pairs += [(mine[k], theirs[k]) for k in floats]
        gg = torch.autograd.grad(_loss(got), [a for a, _ in pairs], allow_unused=True)
        gw = torch.autograd.grad(_loss(want), [b for _, b in pairs], allow_unused=True)
        for a, b in zip(gg, gw, strict=True):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    finally:
        del sys.modules[f"relative_{name}"]
    return code


def _loss(out: dict[str, Any]) -> Any:
    return sum(v.square().mean() for v in out.values() if v.is_floating_point())


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_file_equals_the_compiled_model(name: str) -> None:
    """Outputs and gradients (parameters and inputs) to 1e-6, padded, float32."""
    _assert_file_equals_model(_model(name), name)


@pytest.mark.parametrize("name", ["rope_bases", "alibi_6", "t5_causal", "cross_t5",
                                  "rope_stack"])
def test_the_file_equals_the_compiled_model_in_float64(name: str) -> None:
    """In float64 too: the angles and the slopes in float64, as the lowerings make them."""
    _assert_file_equals_model(_model(name), f"{name}_64", dtype=torch.float64)


@pytest.mark.parametrize("name", ["t5_short", "t5_causal_short", "t5_stack"])
def test_distances_beyond_max_distance_share_the_last_bucket(name: str) -> None:
    """Sequences longer than max_distance: the far buckets (clamped) equal too."""
    _assert_file_equals_model(_model(name), f"{name}_long", n=23, t=19)


def _forward(code: str) -> str:
    return code[code.index("    def forward("):]


@pytest.mark.parametrize(("name", "call"), [("rope_stack", "rotary_tables("),
                                            ("alibi_stack", "alibi_slopes("),
                                            ("t5_stack", "t5_bucket(")])
def test_a_stack_makes_its_position_tables_once_before_the_layers(name: str, call: str) -> None:
    """The tables of the positions are made once per forward, before the ``for`` over
    the layers, and read by every layer's nodes."""
    forward = _forward(_model(name).code)
    assert forward.count(call) == 1
    assert forward.index(call) < forward.index("for i in range(3):")


def test_the_rotary_lines_read_as_written_by_hand() -> None:
    """The Llama-like stack: one RoPE table pair before the layers, each rotary node
    one line; the queries' and keys' tables of different lengths and bases apart."""
    forward = _forward(_model("rope_stack").code)
    assert ("        cos, sin = rotary_tables(tokens.shape[1], 8, 10000.0, dtype, "
            "tokens.device)  # (N, 8) each\n") in forward
    assert "            rq = rotate_pairs(q, cos, sin)  # (B, 2, N, 8)\n" in forward
    assert "            rk = rotate_pairs(k, cos, sin)  # (B, 2, N, 8)\n" in forward
    cross = _forward(_model("cross_t5").code)
    assert "rotary_tables(y.shape[1], 8, 10000.0, x.dtype, x.device)  # (T, 8) each" in cross
    assert "rotary_tables(x.shape[1], 8, 100.0, x.dtype, x.device)  # (N, 8) each" in cross
    assert "t5_bucket(j - i, bidirectional=True, buckets=8, max_distance=6)  # (T, N)" in cross


def test_a_loop_reads_the_tables_made_before_it() -> None:
    """In a loop over steps (keys made at every step, of the source's length) the tables
    are made once, before the loop's ``for``, and read by the nodes in its body and
    after it."""
    forward = _forward(_model("rope_loop").code)
    assert ("        cos, sin = rotary_tables(source.shape[1], 8, 10000.0, source.dtype, "
            "source.device)\n") in forward
    assert forward.index("rotary_tables(") < forward.index("for t in range(")
    assert "            rk = rotate_pairs(k, cos, sin)  # (B, N, 8)\n" in forward
    after = _forward(_model("rope_loop_and_after").code)
    assert after.count("rotary_tables(") == 1
    for line in ("            rr = rotate_pairs(rk, cos, sin)  # (B, N, 8)\n",
                 "        rkk = rotate_pairs(kk, cos, sin)  # (B, N, 8)\n"):
        assert line in after


@pytest.mark.parametrize("name", ["alibi_4", "t5_bidirectional", "rope_heads"])
def test_the_bias_and_rotary_lines(name: str) -> None:
    """The ALiBi bias, the T5 lookup (an ``nn.Embedding`` of the buckets) and the
    rotation as a person writes them."""
    code = _model(name).code
    want = {
        "alibi_4": ["alibi_slopes(4), dtype=torch.float64",
                    "b = s + alibi.to(s.dtype)  # (B, 4, N, N)"],
        "t5_bidirectional": ["self.b = nn.Embedding(32, 4)",
                             "b = s + self.b(bucket).permute(2, 0, 1).to(s.dtype)"],
        "rope_heads": ["rq = rotate_pairs(q, cos, sin)  # (B, 2, N, 8)"],
    }[name]
    for text in want:
        assert text in code, text


ROOT = Path(__file__).resolve().parent.parent
#: the catalog's files that hold rotary or position-bias nodes
HOLDERS = [p for folder in ("mechanisms", "specs", "specs/real")
           for p in sorted((ROOT / folder).glob("*.yaml"))
           if "kind: rotary" in p.read_text(encoding="utf-8")
           or "kind: position_bias" in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("path", HOLDERS, ids=[p.stem for p in HOLDERS])
def test_no_catalog_file_copies_a_relative_lowering(path: Path) -> None:
    """The mechanisms and real models that hold rotary or position-bias nodes export
    them by their emit rules: no copied lowering class, no shared values."""
    from codegen_support import small

    spec = loads_spec(small(path)) if path.parent.name == "real" else path
    code = attngraph.compile(spec, seed=0).code
    for mark in ("class Rotary", "class PositionBias", "shared("):
        assert mark not in code, mark


# -- the API: EmitCtx.prelude and EmitCtx.shared -------------------------------------------


def _rotary_rule(monkeypatch: pytest.MonkeyPatch, rule: Any) -> None:
    """Export with ``rule`` as the emit rule of ``rotary`` (the others as they are)."""
    from attngraph.lower.export.emit import writer

    own = writer.emit_rule
    monkeypatch.setattr(writer, "emit_rule", lambda kind: rule if kind == "rotary" else own(kind))


def test_a_rule_that_declines_leaves_no_prelude_and_no_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The queries' rule writes a prelude, a line and a value made once, then declines:
    none of it is in the file (the node's lowering class runs), and the keys' rule,
    asking for the same value, makes it (the first one was forgotten)."""
    from attngraph.lower.export.emit.relative import emit_rotary

    made: list[str] = []

    def make(ctx: Any) -> tuple[str, ...]:
        made.append(ctx.node.id)
        var = ctx.tmp("probe")
        ctx.prelude(f"# the probe of {ctx.node.id}\n{var} = 0")
        return (var,)

    def rule(ctx: Any) -> bool:
        ctx.shared(("probe",), lambda: make(ctx), top=True)
        if ctx.node.id == "rq":
            ctx.prelude("declined = 1")
            ctx.line("also_declined = 1")
            return False
        return emit_rotary(ctx)

    _rotary_rule(monkeypatch, rule)
    for name in ("rope_heads", "rope_stack"):
        made.clear()
        code = _model(name).code
        forward = code[code.rindex("    def forward("):]  # (the copied class's before)
        assert made == ["rq", "rk"]
        assert "declined" not in code and "the probe of rq" not in code
        assert forward.count("# the probe of rk\n") == 1
        assert forward.count("rotary_tables(") == 1  # the keys': the queries' is copied
        assert "class Rotary" in code
        assert_file_equals_model(_model(name), f"declined_{name}")


def test_a_value_made_once_is_read_by_the_nodes_after(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Made at forward's top level by the first rotary node (inside the repeat's ``for``:
    before it), a value is read by every rotary node after, of every layer."""
    from attngraph.lower.export.emit.relative import emit_rotary

    made: list[str] = []
    read: list[tuple[str, ...]] = []

    def make(ctx: Any) -> tuple[str, ...]:
        made.append(ctx.node.id)
        ctx.prelude("# the probe\nprobe = 0")
        return ("probe",)

    def rule(ctx: Any) -> bool:
        read.append(ctx.shared(("probe",), lambda: make(ctx), top=True))
        return emit_rotary(ctx)

    _rotary_rule(monkeypatch, rule)
    forward = _forward(_model("rope_stack").code)
    assert made == ["rq"] and read == [("probe",), ("probe",)]
    lines = forward.split("\n")
    at = lines.index("        # the probe")
    assert lines[at - 1:at + 2] == ["", "        # the probe", "        probe = 0"]
    assert forward.index("probe = 0") < forward.index("for i in range(3):")


def test_a_value_made_in_a_loop_body_is_read_there_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A value made in a loop's body (``top=False``: at the body's sizes) is read by the
    nodes after it in the body, and made again by a node after the loop."""
    from attngraph.lower.export.emit.relative import emit_rotary

    made: list[tuple[str, int]] = []
    read: dict[str, tuple[str, ...]] = {}

    def make(ctx: Any) -> tuple[str, ...]:
        made.append((ctx.node.id, ctx.scope.indent))
        var = ctx.tmp("local")
        ctx.line(f"{var} = 0  # made by {ctx.node.id}")
        return (var,)

    def rule(ctx: Any) -> bool:
        read[ctx.node.id] = ctx.shared(("local",), lambda: make(ctx))
        return emit_rotary(ctx)

    _rotary_rule(monkeypatch, rule)
    forward = _forward(_model("rope_loop_and_after").code)
    assert made == [("rk", 12), ("rkk", 8)]
    assert read["rk"] == read["rr"] != read["rkk"]
    assert f"            {read['rk'][0]} = 0  # made by rk\n" in forward
    assert f"        {read['rkk'][0]} = 0  # made by rkk\n" in forward
    assert forward.count("rotary_tables(") == 1  # the tables: before the loop, for all
