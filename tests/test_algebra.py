"""The open algebra: the formula grammar, named axes, the ``expr`` and ``param`` kinds,
their numbers against hand-written PyTorch with padding, and a function registered
from outside reaching every stage."""

from __future__ import annotations

import math
from typing import Any

import pytest

import attngraph
from attngraph.algebra.formula import MAX_DEPTH, FormulaError, parse
from attngraph.algebra.functions import FUNCTIONS, Function, function_table, register_function
from attngraph.errors import ShapeError, SpecError

HEAD = """\
attngraph: 1
name: alg
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, heads: 2}
  k: {kind: keys, from: x, heads: 2}
  v: {kind: values, from: x, heads: 2}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
"""


def _spec(nodes: str, outputs: str) -> str:
    return HEAD + nodes + f"outputs: {outputs}\n"


def _error(text: str) -> Any:
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(text, "a.yaml")
    return info.value.diagnostics[0]


# -- the grammar --------------------------------------------------------------


@pytest.mark.parametrize(("text", "tree"), [
    ("-x^2", "-(x ^ 2)"),
    ("a - b - c", "((a - b) - c)"),
    ("a ^ b ^ c", "(a ^ (b ^ c))"),
    ("2 * x + y / 3", "((2 * x) + (y / 3))"),
    ("a ** 2 · b × c ÷ d − e", "((((a ^ 2) * b) * c) / d) - e"),
    ("√d", "sqrt(d)"),
    ("j <= i", "(j <= i)"),
    ("sum(p * v, items)", "sum((p * v), items)"),
    ("enc.state + 1", "(enc.state + 1)"),
])
def test_precedence_and_notation(text: str, tree: str) -> None:
    """Powers bind right to left above unary minus; papers' ·, ×, ÷, −, √ are read."""
    got = str(parse(text))
    assert got == tree or got == f"({tree})"


@pytest.mark.parametrize(("text", "offset", "start"), [
    ("a + ", 4, "the formula ends"),
    ("(a + b", 6, "expected ')'"),
    ("a $ b", 2, "unexpected character '$'"),
    ("a = b", 2, "unexpected character '='"),
    ("1e400", 0, "the number 1e400 is out of range"),
    ("2e9 * x", 0, "the number 2e9 is out of range"),
    ("a b", 2, "unexpected 'b'"),
    ("f(a,)", 4, "expected a value"),
    ("a < b < c", 6, "comparisons do not chain"),
    ("x.y(1)", 0, "'x.y' is not a function"),
    ("", 0, "the formula is empty"),
])
def test_syntax_errors_point_at_the_character(text: str, offset: int, start: str) -> None:
    """Each syntax error names what is wrong at the offending character, with a hint."""
    with pytest.raises(FormulaError) as info:
        parse(text)
    assert info.value.offset == offset
    assert info.value.message.startswith(start)


def test_nesting_is_refused_at_the_offending_character() -> None:
    """Past the depth limit the reader stops at the bracket that goes too deep (it never
    recurses without bound), and long formulas are refused before reading."""
    deep = "(" * (MAX_DEPTH + 5) + "x" + ")" * (MAX_DEPTH + 5)
    with pytest.raises(FormulaError) as info:
        parse(deep)
    assert "deeper than" in info.value.message
    assert info.value.offset == MAX_DEPTH  # the first bracket past the limit
    calls = "exp(" * 200 + "x" + ")" * 200
    with pytest.raises(FormulaError, match="deeper than"):
        parse(calls)
    with pytest.raises(FormulaError, match="over the limit"):
        parse("x+" * 1500 + "x")


def test_the_reader_never_evaluates_code() -> None:
    """Python in a formula is only names and calls: an unknown function, located."""
    spec = _spec('  a: {kind: expr, formula: "__import__(s)"}\n', "{a: a}")
    d = _error(spec)
    assert d.message == "node 'a': unknown function '__import__'"
    assert (d.loc.line, d.loc.col) == (11, 29)
    for text in ("__import__('os').system('x')", "s.__class__", "lambda: 1"):
        with pytest.raises((FormulaError, ShapeError)):
            attngraph.loads_spec(_spec(f'  a: {{kind: expr, formula: "{text}"}}\n', "{a: a}"))


# -- names, axes and located errors ---------------------------------------------


def test_unknown_name_is_located_inside_the_formula() -> None:
    """The column is the name's own, inside the quoted formula; the hint lists names."""
    d = _error(_spec('  a: {kind: expr, formula: "relu(s) / sqrt(dd)"}\n', "{a: a}"))
    assert (d.loc.line, d.loc.col) == (11, 44)
    assert "'dd' is not a node, input, dims name, length or index" in d.message
    assert "d" in (d.hint or "")


def test_a_name_that_is_two_things_is_an_error() -> None:
    """A node named like a dims entry is refused, never silently one or the other."""
    d = _error(_spec('  d: {kind: expr, formula: "s * 2"}\n  a: {kind: expr, formula: "s / d"}\n',
                     "{a: a}"))
    assert "'d' is both a node and a dims name" in d.message
    assert (d.loc.line, d.loc.col) == (12, 33)


def test_axes_meet_by_name_not_position() -> None:
    """A per-item bias [N] adds to every query's row of [N, N]; a [C] vector times an
    image [C, H, W] is refused (features are not channels) unless renamed."""
    g = attngraph.loads_spec(_spec(
        '  b: {kind: scorer, fn: mlp, key: x}\n  a: {kind: expr, formula: "s + b"}\n',
        "{a: a}"))
    assert str(g.node("a").type()) == "[N, N] ×2"
    image = """\
attngraph: 1
name: img
inputs:
  im: {type: image, channels: 4, height: 5, width: 4}
  g:  {type: vector, dim: 4}
nodes:
  y: {kind: expr, formula: "g * im"}
outputs: {y: y}
"""
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(image, "img.yaml")
    d = info.value.diagnostics[0]
    assert "4 axes" in d.message and "channels" in d.message
    assert (d.loc.line, d.loc.col) == (7, 31)
    renamed = image.replace('  y: {kind: expr, formula: "g * im"}',
                            '  gc: {kind: expr, formula: "g", axes: [channels]}\n'
                            '  y: {kind: expr, formula: "gc * im"}')
    g = attngraph.loads_spec(renamed)
    assert str(g.node("y").type()) == "[4, 5, 4]"


def test_sizes_must_agree() -> None:
    """Values over different lengths do not meet on their items axis."""
    spec = """\
attngraph: 1
name: two
inputs:
  a: {type: vectors, dim: 4}
  b: {type: vectors, dim: 4, length: M}
nodes:
  y: {kind: expr, formula: "a + b"}
outputs: {y: y}
"""
    with pytest.raises(ShapeError, match="the items axes differ, N and M"):
        attngraph.loads_spec(spec)


def test_reductions_and_indices() -> None:
    """max over the items drops the axis; i and j index the queries and items."""
    g = attngraph.loads_spec(_spec(
        '  m: {kind: expr, formula: "max(s, items)"}\n'
        '  c: {kind: expr, formula: "s * (j <= i)"}\n'
        '  h: {kind: expr, formula: "mean(s, heads)"}\n', "{m: m, c: c, h: h}"))
    assert str(g.node("m").type()) == "[N] ×2"
    assert str(g.node("c").type()) == "[N, N] ×2"
    assert str(g.node("h").type()) == "[N, N]"


# -- roles ---------------------------------------------------------------------


def test_weights_that_are_not_a_distribution_need_saying_so() -> None:
    """relu(s)² is not a distribution: a readout refuses it with a hint naming
    ``distribution: false``, and takes it once the spec says so; softmax(s, items)
    is a distribution; 3·p of a softmax p is not."""
    bad = _spec('  a: {kind: expr, formula: "relu(s) ^ 2"}\n'
                "  z: {kind: readout, weights: a, values: v}\n", "{z: z}")
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(bad)
    assert "distribution: false" in (info.value.diagnostics[0].hint or "")
    ok = bad.replace("values: v}", "values: v, distribution: false}")
    assert str(attngraph.loads_spec(ok).node("z").type()) == "[N, 8]"
    g = attngraph.loads_spec(_spec(
        '  p: {kind: expr, formula: "softmax(s, items)"}\n'
        "  z: {kind: readout, weights: p, values: v}\n"
        '  t: {kind: expr, formula: "3 * p"}\n', "{z: z, t: t}"))
    assert g.node("p").type().simplex and not g.node("t").type().simplex
    assert g.node("t").type().weights


def test_a_declared_distribution_is_read_as_one() -> None:
    """``distribution: true`` marks a hand-written normaliser; over no items it is refused."""
    g = attngraph.loads_spec(_spec(
        '  p: {kind: expr, formula: "exp(s - logsumexp(s, items))", distribution: true}\n'
        "  z: {kind: readout, weights: p, values: v}\n", "{z: z}"))
    assert g.node("p").type().simplex
    d = _error(_spec('  m: {kind: expr, formula: "max(s, items)", distribution: true}\n',
                     "{m: m}"))
    assert "distribution: true" in d.message


# -- numbers -------------------------------------------------------------------


def _mha(model: Any, x: Any, name: str) -> Any:
    sd = dict(model.named_parameters())
    y = x @ sd[f"nodes.{name}.proj.weight"].T + sd[f"nodes.{name}.proj.bias"]
    b, n, d = y.shape
    return y.reshape(b, n, 2, d // 2).transpose(1, 2)


def test_formulas_equal_their_hand_written_references_with_padding() -> None:
    """A zero-logit softmax, a decayed causal sum with a learned γ per head, squared-ReLU
    weights over N, and a masked max, each equal to PyTorch written by hand to 1e-5,
    at the real positions of a padded batch."""
    torch = pytest.importorskip("torch")
    spec = _spec(
        '  m: {kind: expr, formula: "max(s, items)"}\n'
        '  p: {kind: expr, formula: "exp(s - m) / (exp(-m) + sum(exp(s - m), items))"}\n'
        "  g: {kind: param, heads: 2, init: constant, value: 0.9, clamp: [0.0, 1.0]}\n"
        '  dec: {kind: expr, formula: "s * where(j <= i, g ^ relu(i - j), 0)"}\n'
        '  a: {kind: expr, formula: "relu(s) ^ 2 / N"}\n'
        "  z: {kind: readout, weights: a, values: v, distribution: false}\n",
        "{m: m, p: p, dec: dec, z: z}")
    model = attngraph.compile(attngraph.loads_spec(spec), seed=0).eval()
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    mask = torch.arange(5)[None, :] < torch.tensor([5, 3, 1])[:, None]
    got = model(x=x, x_mask=mask)
    q, k, v = (_mha(model, x, c) for c in "qkv")
    s = q @ k.transpose(-1, -2) / math.sqrt(4)
    keep = mask[:, None, None, :]
    real = (mask[:, None, :, None] & keep).expand(3, 2, 5, 5)
    e = torch.exp(s.masked_fill(~keep, float("-inf")))
    p = e / (1 + e.sum(-1, keepdim=True))
    m = s.masked_fill(~keep, float("-inf")).amax(-1)
    i, j = torch.arange(5)[:, None], torch.arange(5)[None, :]
    dec = s * torch.where(j <= i, 0.9 ** (i - j).clamp(min=0).float(), torch.zeros(()))
    n = mask.sum(-1).float()[:, None, None, None]
    a = torch.relu(s).pow(2).masked_fill(~keep, 0.0) / n
    z = (a @ v).transpose(1, 2).flatten(2)
    tol = {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(got["p"][real], p[real], **tol)
    torch.testing.assert_close(got["dec"][real], dec[real], **tol)
    rows = mask[:, None, :].expand(3, 2, 5)
    torch.testing.assert_close(got["m"][rows], m[rows], **tol)
    torch.testing.assert_close(got["z"][mask], z[mask], **tol)
    assert (got["p"][~real] == 0).all()  # padding stays padding


def test_params_count_seed_clamp_and_fix() -> None:
    """Learned params are counted (fixed ones are buffers, not counted), start as asked,
    are the same for one seed, and a clamp holds in the forward."""
    torch = pytest.importorskip("torch")
    spec = _spec(
        "  w: {kind: param, shape: [d, 3], init: normal, std: 0.5}\n"
        "  f: {kind: param, shape: [4], init: uniform, range: [-1, 1], fixed: true}\n"
        "  c: {kind: param, heads: 2, init: constant, value: 5.0, clamp: [0, 1]}\n"
        '  y: {kind: expr, formula: "s * c"}\n', "{y: y, w: w, f: f}")
    g = attngraph.loads_spec(spec)
    assert g.node("w").params == 24 and g.node("f").params == 0 and g.node("c").params == 2
    m1, m2 = attngraph.compile(g, seed=3), attngraph.compile(g, seed=3)
    assert sum(p.numel() for p in m1.parameters()) == g.params
    torch.testing.assert_close(m1.nodes.w.value, m2.nodes.w.value)
    torch.testing.assert_close(m1.nodes.f.value, m2.nodes.f.value)
    assert "nodes.f.value" in dict(m1.named_buffers())
    assert (m1.nodes.f.value.abs() <= 1).all()
    x = torch.randn(2, 3, 8)
    out = m1(x=x)
    s = out["y"]  # s * clamp(5, 0, 1) = s
    q, k = (_mha(m1, x, c) for c in "qk")
    torch.testing.assert_close(s, q @ k.transpose(-1, -2) / 2.0, atol=1e-5, rtol=1e-5)


def test_a_param_over_a_length_is_cut_to_the_batch() -> None:
    """A table [N, N] with max_len gives its first N rows and columns, read by a formula
    or by any kind (Synthesizer's random attention: a softmax of the table itself)."""
    torch = pytest.importorskip("torch")
    spec = _spec("  r: {kind: param, shape: [N, N], max_len: 16, axes: [queries, items]}\n"
                 '  y: {kind: expr, formula: "s + r"}\n'
                 "  p: {kind: softmax, scores: r}\n"
                 "  z: {kind: readout, weights: p, values: x}\n", "{y: y, z: z}")
    model = attngraph.compile(attngraph.loads_spec(spec), seed=0)
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out = model(x=x, x_mask=mask)
    assert out["y"].shape == (2, 2, 5, 5)
    r = model.nodes.r.value[0, :5, :5]
    p = torch.softmax(r.masked_fill(~mask[:, None, :], float("-inf")), -1)
    torch.testing.assert_close(out["z"][mask], (p @ x)[mask], atol=1e-5, rtol=1e-5)


# -- a function registered from outside -----------------------------------------


def squash(x: Any) -> Any:
    """x / (1 + |x|): a function a user's package registers."""
    return x / (1 + x.abs())


def test_a_registered_function_reaches_every_stage(tmp_path: Any) -> None:
    """One registration: validate accepts it, both views draw its formula, describe
    finds the site, the docs table lists it, and compile, the Python export and
    torch.export compute it."""
    torch = pytest.importorskip("torch")
    from attngraph.analysis.describe import describe
    from renderers import render

    with FUNCTIONS.scoped():
        register_function(Function("squash", "x / (1 + |x|)", squash, positive=False,
                                   doc="a soft sign"))
        spec = _spec('  a: {kind: expr, formula: "squash(s)"}\n'
                     "  z: {kind: readout, weights: a, values: v, distribution: false}\n",
                     "{z: z}")
        g = attngraph.loads_spec(spec)
        assert "squash(s)" in render(g, "architecture", "mermaid")
        assert render(g, "unrolled", "mermaid")
        site = describe(g).sites[0]
        assert "squash(s)" in site.axes["hardness"].reason
        assert "| `squash(x)` | x / (1 + \\|x\\|): a soft sign | elementwise |" in function_table()
        model = attngraph.compile(g, seed=0).eval()
        x = torch.randn(2, 4, 8)
        want = model(x=x)["z"]
        q, k, v = (_mha(model, x, c) for c in "qkv")
        s = q @ k.transpose(-1, -2) / 2.0
        ref = (squash(s) @ v).transpose(1, 2).flatten(2)
        torch.testing.assert_close(want, ref, atol=1e-5, rtol=1e-5)
        ns: dict[str, Any] = {}
        exec(compile(model.code, "gen.py", "exec"), ns)  # noqa: S102 - our own export
        twin = ns["Alg"]()
        twin.load_state_dict(model.state_dict())
        torch.testing.assert_close(twin.eval()(x)["z"], want)
        prog = torch.export.export(model, (), {"x": x})
        torch.testing.assert_close(prog.module()(x=x)["z"], want)
    assert "squash" not in FUNCTIONS


# -- defects the fuzzer found (each pins its located message) ---------------------


def test_a_truth_value_is_not_declared_a_distribution() -> None:
    """``distribution: true`` on a comparison is refused at the field (it compiled, then
    failed in the readout's matmul)."""
    d = _error(_spec('  p: {kind: expr, formula: "s > 0", distribution: true}\n', "{p: p}"))
    assert d.message.startswith("node 'p': distribution: true says the value sums to one")
    assert (d.loc.line, d.loc.col) == (11, 51)
    assert d.hint == "normalise it first, e.g. (s > 0) / sum(s > 0, items)"


def test_a_function_of_numbers_only_broadcasts() -> None:
    """relu(1) (a function no constant folder knows, of numbers only) adds to a value."""
    torch = pytest.importorskip("torch")
    g = attngraph.loads_spec(_spec('  y: {kind: expr, formula: "x + relu(1) * gelu(0.5)"}\n',
                                   "{y: y}"))
    x = torch.randn(2, 3, 8)
    y = attngraph.compile(g, seed=0)(x=x)["y"]
    torch.testing.assert_close(y, x + torch.nn.functional.gelu(torch.tensor(0.5)))


def test_a_long_chain_is_refused_at_the_operation_past_the_limit() -> None:
    """x + x + ... past MAX_OPERATIONS is one located error (it was a RecursionError)."""
    from attngraph.algebra.formula import MAX_OPERATIONS

    text = "x" + "+x" * 500
    d = _error(_spec(f'  y: {{kind: expr, formula: "{text}"}}\n', "{y: y}"))
    assert d.message == f"node 'y': the formula has more than {MAX_OPERATIONS} operations"
    assert d.loc.col == 29 + 2 * MAX_OPERATIONS + 1


def test_a_param_over_a_length_bounds_it() -> None:
    """max_len bounds the length for the guard (validate at a longer length refuses it),
    and a longer batch at run time says so instead of a narrow error."""
    torch = pytest.importorskip("torch")
    spec = _spec("  b: {kind: param, shape: [N], max_len: 2}\n"
                 '  y: {kind: expr, formula: "mean(x, features) + b"}\n', "{y: y}")
    with pytest.raises(SpecError) as info:  # the resource guard's refusal
        attngraph.loads_spec(spec, "a.yaml", length=5)
    d = info.value.diagnostics[0]
    assert "covers max_len 2 positions, but the length N is 5" in d.message
    model = attngraph.compile(attngraph.loads_spec(spec), seed=0)
    from attngraph.errors import LoweringError

    with pytest.raises(LoweringError, match="holds 2 positions .* but this batch has 5"):
        model(x=torch.randn(1, 5, 8))


def test_indices_over_declared_sizes_and_a_known_length() -> None:
    """A decay mask that reads no value runs its indices over ``sizes:`` (a length's size
    in the batch); N is each example's real items, with or without a mask."""
    torch = pytest.importorskip("torch")
    spec = _spec("  g: {kind: param, heads: 2, init: constant, value: 0.9}\n"
                 '  dm: {kind: expr, formula: "where(j <= i, g ^ relu(i - j), 0)", '
                 "sizes: {queries: N, items: N}}\n"
                 '  n: {kind: expr, formula: "N * 1"}\n', "{dm: dm, n: n}")
    model = attngraph.compile(attngraph.loads_spec(spec), seed=0)
    x = torch.randn(2, 4, 8)
    out = model(x=x, x_mask=torch.tensor([[True] * 4, [True] * 2 + [False] * 2]))
    i, j = torch.arange(4)[:, None], torch.arange(4)[None, :]
    want = torch.where(j <= i, 0.9 ** (i - j).clamp(min=0).float(), torch.zeros(()))
    torch.testing.assert_close(out["dm"][0, 1], want)
    assert out["n"].tolist() == [4.0, 2.0]
    assert model(x=x)["n"].tolist() == [4.0, 4.0]
    d = _error(_spec('  dm: {kind: expr, formula: "i - j"}\n', "{dm: dm}"))
    assert "sizes: {queries: N}" in (d.hint or "")


@pytest.mark.parametrize(("node", "col", "message", "hint"), [
    ('  y: {kind: expr, formula: "x / (2 - 2)"}\n', 31,
     "division by zero: the divisor is the constant 0", "divide by a value that is not 0"),
    ('  y: {kind: expr, formula: "x + 0 ^ -1"}\n', 35,
     "the constant part ^ of the formula has no value: 0.0 cannot be raised to a negative "
     "power", "check the numbers and dims it uses"),
    ('  y: {kind: expr, formula: "x (1)"}\n', 29, "'x' is a node, not a function",
     "join it with an operator, e.g. x * (...)"),
    ('  y: {kind: expr, formula: "x ,"}\n', 31, "unexpected ',' after a complete formula",
     "join it to the formula with an operator, or remove it"),
    ("  y: {kind: param, shape: [0]}\n", 27, "shape size 0 is out of range (1 to 1,000,000)",
     "write a size from 1 to 1,000,000, or a dims name"),
    ("  y: {kind: param, shape: [N], max_len: 65537}\n", 41,
     "max_len 65,537 is out of range (1 to 65,536)",
     "write a number of positions from 1 to 65,536"),
    ("  y: {kind: param, shape: [4, 4], axes: [items, items]}\n", 41,
     "axes names an axis twice (or heads: use the heads field)",
     "name each axis once; a head axis is the heads field"),
])
def test_certain_errors_are_located_with_a_hint(node: str, col: int, message: str,
                                                 hint: str) -> None:
    """What is certainly wrong (a constant zero divisor, 0 to a negative power, a node
    called as a function, a stray token, parameters out of range) is one located error
    with a hint (the fuzzer found these without one, or running into inf)."""
    spec = f"attngraph: 1\nname: e\ndims: {{d: 8}}\ninputs:\n  x: {{type: vectors, dim: d}}\n" \
        f"nodes:\n{node}outputs: {{y: y}}\n"
    d = _error(spec)
    assert (d.loc.line, d.loc.col) == (7, col), d.message
    assert d.message == f"node 'y': {message}"
    assert d.hint == hint


def test_the_words_of_nested_tokens_are_refused_outside_a_map() -> None:
    """A formula over [N, W] ids of nested tokens cannot see the words' padding (it
    crashed on the (B, N, W) mask): a located refusal pointing to a map."""
    spec = """\
attngraph: 1
name: nested
inputs:
  doc: {type: tokens, vocab: 100, nested: true}
nodes:
  f: {kind: expr, formula: "doc * 2"}
outputs: {f: f}
"""
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(spec, "n.yaml")
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (6, 29)
    assert "over the words W of nested tokens" in d.message
    assert "map" in (d.hint or "")


def test_project_takes_a_matrix_per_example() -> None:
    """project(W, x, axis) with W a value a node made (one matrix per example) maps each
    example with its own matrix, in the model and in its Python export (it took only a
    parameter's one matrix, and failed for a batch of more than one)."""
    torch = pytest.importorskip("torch")
    spec = """\
attngraph: 1
name: pj
inputs:
  x: {type: vectors, dim: 4}
nodes:
  s: {kind: scorer, fn: dot, query: x, key: x}
  y: {kind: expr, formula: "project(s, x, items)"}
outputs: {y: y}
"""
    model = attngraph.compile(attngraph.loads_spec(spec), seed=0)
    x = torch.randn(3, 5, 4)
    y = model(x=x)["y"]
    torch.testing.assert_close(y, (x @ x.transpose(1, 2)) @ x, atol=1e-5, rtol=1e-5)
    ns: dict[str, Any] = {}
    exec(compile(model.code, "gen.py", "exec"), ns)  # noqa: S102 - our own export
    torch.testing.assert_close(ns["Pj"]()(x)["y"], y)


def test_pos_numbers_the_heads() -> None:
    """pos(heads) over sizes: {heads: H} is each head's index: RetNet's fixed
    γ_h = 1 − 2^(−5−h), the same for every example of the batch."""
    torch = pytest.importorskip("torch")
    spec = _spec('  gamma: {kind: expr, formula: "1 - 2 ^ (-5 - pos(heads))", '
                 "sizes: {heads: 2}}\n", "{gamma: gamma}")
    g = attngraph.loads_spec(spec)
    assert str(g.node("gamma").type()) == "[] ×2"
    out = attngraph.compile(g, seed=0)(x=torch.randn(3, 4, 8))["gamma"]
    want = 1 - 2.0 ** (-5 - torch.arange(2.0))
    torch.testing.assert_close(out, want.expand(3, 2))


def test_describe_reads_a_causal_or_windowed_formula() -> None:
    """describe places weights a formula masks by its indices on the reach axis: j ≤ i is
    causal (every preceding item), |i − j| ≤ w a local window of w."""
    from attngraph.analysis.describe import describe

    causal = _spec('  a: {kind: expr, formula: "where(j <= i, sigmoid(s), 0)"}\n'
                   "  z: {kind: readout, weights: a, values: v, distribution: false}\n",
                   "{z: z}")
    reach = describe(attngraph.loads_spec(causal)).sites[0].axes["reach"]
    assert (reach.value, "precede" in reach.reason, "j ≤ i" in reach.reason) == \
        ("global", True, True)
    local = causal.replace("where(j <= i, sigmoid(s), 0)", "sigmoid(s) * (abs(i - j) <= 2)")
    reach = describe(attngraph.loads_spec(local)).sites[0].axes["reach"]
    assert reach.value == "local" and "window 2" in reach.reason


def test_ids_are_refused_in_a_formula() -> None:
    """Token ids are not numbers to compute with: a formula over them is one located
    error (softplus of long ids failed at run time, found by the fuzzer)."""
    spec = """\
attngraph: 1
name: ids
inputs:
  t: {type: tokens, vocab: 10}
nodes:
  y: {kind: expr, formula: "softplus(t)"}
outputs: {y: y}
"""
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(spec, "ids.yaml")
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (6, 38)
    assert d.message == "node 'y': 't' holds ids (long[N]), which a formula does not compute with"


def test_a_labels_input_counts_its_classes_not_a_stray_vocab() -> None:
    """A labels input's ids are below its classes; a vocab written there too (ignored, as
    fields that do not apply are) no longer sizes onehot and embedding smaller than the
    ids (the fuzzer's case: onehot failed at run time)."""
    torch = pytest.importorskip("torch")
    spec = """\
attngraph: 1
name: lab
inputs:
  y: {type: labels, classes: 4, vocab: 3}
nodes:
  y1: {kind: onehot, from: y}
  e: {kind: embedding, from: y, dim: 2}
outputs: {y1: y1, e: e}
"""
    g = attngraph.loads_spec(spec)
    assert str(g.node("y1").type()) == "[4]"
    model = attngraph.compile(g, seed=0)
    out = model(y=torch.tensor([3, 0]))
    assert out["y1"].shape == (2, 4) and out["e"].shape == (2, 2)
    assert sum(p.numel() for p in model.parameters()) == g.params == 8
