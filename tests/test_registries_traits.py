"""A normaliser, an activation, a feature map and a dot-product scorer function
registered from here reach every stage, as a custom kind does (test_custom_kind.py).

Each is one registration plus its function: nothing in attngraph names them. They
validate (a typo gets a did-you-mean naming them), draw in both views, are
described, are listed by the JSON Schema and the docs tables, compile to the right
numbers and export to a standalone file; the scorer, registered ``dot_product`` and
``fusable``, is fused like ``scaled_dot``, and a ``positive`` feature map feeds linear
attention. The passes, ``describe`` and the renderers read the entries' traits: no
module of theirs compares a function's name with a registered one.
"""

from __future__ import annotations

import math
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import Tensor, nn  # noqa: E402

import attngraph  # noqa: E402
from attngraph.errors import ShapeError, SpecError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.kinds import (  # noqa: E402
    ACTIVATIONS,
    FEATURE_MAPS,
    NORMALISERS,
    SCORERS,
    ActivationInfo,
    FeatureMapInfo,
    NormaliserInfo,
    ScorerInfo,
    register_activation,
    register_feature_map,
    register_normaliser,
    register_scorer,
)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "spec-language.md"


def squared_ratio(z: Tensor, mask: Tensor | None) -> Tensor:
    """s_i² / Σ_j s_j² over the real items; a fully masked row gives zeros."""
    w = z * z if mask is None else z * z * mask.to(z.dtype)
    total = w.sum(-1, keepdim=True)
    return w / torch.where(total > 0, total, torch.ones_like(total))


def softsign2(x: Tensor) -> Tensor:
    """x / (1 + |x|)."""
    return x / (1 + x.abs())


class ScaledDotProduct(nn.Module):
    """q·k/√d, as a package would write it (built from its attribute, as the export
    builds it)."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-1, -2)) * self.scale  # (B, [h,] M, N)


SPEC = """\
attngraph: 1
name: registered_choices
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
nodes:
  x: {kind: items, from: src}
  q: {kind: queries, from: x}
  k: {kind: keys, from: x}
  s: {kind: scorer, fn: my_scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, fn: sqratio}
  z: {kind: readout, weights: p, values: x, act: softsign2}
  h: {kind: mlp, from: z, hidden: 16, out: 4, act: softsign2}
  o: {kind: linear, from: h, out: 4, act: softsign2}
outputs: {o: o, p: p}
"""

#: the registered scorer -> softmax -> plain readout, whose weights nothing reads
FUSABLE = """\
attngraph: 1
name: fusable_choice
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
nodes:
  x: {kind: items, from: src}
  q: {kind: queries, from: x, heads: 2}
  k: {kind: keys, from: x, heads: 2}
  v: {kind: values, from: x, heads: 2}
  s: {kind: scorer, fn: my_scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: {causal: true}}
  z: {kind: readout, weights: p, values: v}
outputs: {z: z}
"""

KERNEL = """\
attngraph: 1
name: kernel_choice
inputs:
  x: {type: vectors, dim: 8}
nodes:
  fq: {kind: feature_map, from: x, fn: PHI}
  fk: {kind: feature_map, from: x, fn: PHI}
  s:  {kind: scorer, fn: my_scaled_dot, query: fq, key: fk}
  p:  {kind: softmax, scores: s, fn: sum}
  z:  {kind: readout, weights: p, values: x}
outputs: {z: z}
"""


@pytest.fixture
def registered() -> Iterator[None]:
    """The new entries, registered for this test only."""
    with NORMALISERS.scoped(), ACTIVATIONS.scoped(), SCORERS.scoped(), FEATURE_MAPS.scoped():
        register_normaliser(NormaliserInfo("sqratio", "s_i² / Σ_j s_j²", impl=squared_ratio))
        register_activation(ActivationInfo("softsign2", "x / (1 + |x|)", impl=softsign2))
        register_scorer(ScorerInfo("my_scaled_dot", "q·k/√d (mine)", same_size=True,
                                   make=lambda dq, dk, h: ScaledDotProduct(dk ** -0.5),
                                   dot_product=True, fusable=True))
        register_feature_map(FeatureMapInfo("softplus_phi", "ln(1 + eˣ)",
                                            impl="torch.nn.functional:softplus",
                                            positive=True))
        register_feature_map(FeatureMapInfo("tanh_phi", "tanh x", impl="torch:tanh"))
        yield
    for name, reg in (("sqratio", NORMALISERS), ("softsign2", ACTIVATIONS),
                      ("my_scaled_dot", SCORERS), ("softplus_phi", FEATURE_MAPS)):
        assert name not in reg


def test_unknown_without_registration_and_with_a_did_you_mean() -> None:
    """Before registration the names are refused at their field; the message says
    which registry, the hint lists the known names."""
    with pytest.raises(SpecError) as e:
        loads_spec(SPEC)
    messages = [d.message for d in e.value.diagnostics]
    assert "node 's': fn: 'my_scaled_dot' is not a scorer function" in messages
    assert "node 'p': fn: 'sqratio' is not a normaliser" in messages
    assert "node 'z': act: 'softsign2' is not an activation" in messages


def test_validates_and_a_typo_names_it(registered: None, tmp_path: Path, cli) -> None:
    """The spec validates (CLI too) with each name in the IR dump; a typo of a
    registered name gets a did-you-mean that names it."""


    g = loads_spec(SPEC)
    dump = str(g)
    for text in ("fn=my_scaled_dot", "fn=sqratio", "act=softsign2"):
        assert text in dump, text
    path = tmp_path / "s.yaml"
    path.write_text(SPEC, encoding="utf-8")
    cli("validate", path, code=0)
    with pytest.raises(SpecError) as e:
        loads_spec(SPEC.replace("fn: sqratio", "fn: sqratoi"))
    d = e.value.diagnostics[0]
    assert (d.message, d.hint) == ("node 'p': fn: 'sqratoi' is not a normaliser",
                                   "did you mean 'sqratio'?")


def test_draws_in_both_views(registered: None) -> None:
    """Architecture view: the scorer and normaliser names on their boxes; unrolled
    view: the weights drawn per pair as for a softmax (the function changes nothing
    in the drawing)."""
    import json

    from renderers import render, to_diagram

    g = loads_spec(SPEC)
    arch = to_diagram(g, "architecture")
    assert "my_scaled_dot" in arch.node("s").detail
    assert "sqratio" in arch.node("p").detail
    assert "sqratio" in render(g, "architecture", "mermaid")
    unrolled = to_diagram(g, "unrolled")
    plain = to_diagram(loads_spec(SPEC.replace("fn: sqratio", "fn: softmax")), "unrolled")
    assert [n.id for n in unrolled.nodes] == [n.id for n in plain.nodes]
    assert unrolled.edge_labels() == plain.edge_labels()
    assert any(n.kind == "softmax" for n in unrolled.nodes)
    assert json.loads(render(g, "unrolled", "json"))["nodes"]


def test_describe_reads_their_traits(registered: None) -> None:
    """describe names the scorer with its formula and the normaliser with its formula;
    a sparse normaliser is said to be sparse."""
    from attngraph.analysis.describe import describe

    site = describe(loads_spec(SPEC)).sites[0]
    assert (site.fn, site.formula) == ("my_scaled_dot", "q·k/√d (mine)")
    hard = site.axes["hardness"].reason
    assert "sqratio(scores)" in hard and "s_i² / Σ_j s_j²" in hard and "sparse" not in hard
    assert "via fn my_scaled_dot" in site.axes["basis"].reason
    with NORMALISERS.scoped():
        register_normaliser(NormaliserInfo("sqratio0", "s_i²", impl=squared_ratio,
                                           sparse=True))
        site = describe(loads_spec(SPEC.replace("sqratio", "sqratio0"))).sites[0]
        assert "sparse, many weights exactly 0" in site.axes["hardness"].reason


def test_in_the_json_schema_and_the_docs_tables(registered: None) -> None:
    """The schema's enums list the new names; each docs table has a row for them with
    their traits; the field reference, which names the registries, does not change."""
    from attngraph.commands.docs import reference_page
    from attngraph.kinds.reference import field_reference
    from attngraph.kinds.schema import json_schema
    from attngraph.kinds.tables import (
        activation_table,
        feature_map_table,
        normaliser_table,
        scorer_table,
    )

    defs = json_schema()["$defs"]
    assert "sqratio" in defs["SoftmaxSpec"]["properties"]["fn"]["enum"]
    assert "my_scaled_dot" in defs["ScorerSpec"]["properties"]["fn"]["enum"]
    assert "softplus_phi" in defs["FeatureMapSpec"]["properties"]["fn"]["enum"]
    for model in ("LinearSpec", "MlpSpec", "ReadoutSpec"):
        assert "softsign2" in defs[model]["properties"]["act"]["enum"], model
    assert "| `sqratio` | s_i² / Σ_j s_j² |" in normaliser_table()
    assert "| `softsign2` | x / (1 + \\|x\\|) |" in activation_table()
    assert "| `softplus_phi` | ln(1 + eˣ) | yes |" in feature_map_table()
    row = next(r for r in scorer_table().splitlines() if r.startswith("| `my_scaled_dot` |"))
    assert "a dot product" in row and "fusable" in row
    page = reference_page(DOC.read_text(encoding="utf-8"), str(DOC))
    for name in ("sqratio", "softsign2", "my_scaled_dot", "softplus_phi"):
        assert f"| `{name}` |" in page, name
    with NORMALISERS.scoped(), ACTIVATIONS.scoped(), SCORERS.scoped(), FEATURE_MAPS.scoped():
        for reg, name in ((NORMALISERS, "sqratio"), (ACTIVATIONS, "softsign2"),
                          (SCORERS, "my_scaled_dot"), (FEATURE_MAPS, "softplus_phi")):
            reg.unregister(name)
        before = field_reference(json_schema())
    assert field_reference(json_schema()) == before


def _own_state(model: Any) -> dict[str, Tensor]:
    return {k: v.detach() for k, v in model.state_dict().items()}


def test_compiles_to_the_reference(registered: None) -> None:
    """Weights are (q·k/√d)² over their row sum over the real items; the readout, the
    mlp's hidden layer and the linear layer apply softsign2: equal to a hand-written
    forward to 1e-6, with padding."""
    model = attngraph.compile(SPEC, seed=0).eval()
    w = _own_state(model)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    with torch.no_grad():
        got = model(src=x, src_mask=mask)
    q = x @ w["nodes.q.proj.weight"].T + w["nodes.q.proj.bias"]
    k = x @ w["nodes.k.proj.weight"].T + w["nodes.k.proj.bias"]
    s = (q @ k.transpose(1, 2)) / math.sqrt(8) * mask[:, None, :]
    p = s * s / (s * s).sum(-1, keepdim=True)
    z = softsign2(p @ x)
    h = softsign2(z @ w["nodes.h.net.0.weight"].T + w["nodes.h.net.0.bias"])
    h = h @ w["nodes.h.net.2.weight"].T + w["nodes.h.net.2.bias"]
    o = softsign2(h @ w["nodes.o.weight"].T + w["nodes.o.bias"])
    torch.testing.assert_close(got["p"], p, atol=1e-6, rtol=0)
    torch.testing.assert_close(got["o"][mask], o[mask], atol=1e-6, rtol=0)


def test_exports_to_a_standalone_file(registered: None) -> None:
    """``model.code`` calls the registered functions and the scorer's module class (as
    imports of the package that defines them, here this test module: the export copies
    attngraph's code only) and, with the compiled state dict, returns the compiled
    model's outputs."""
    from attngraph.lower.export.codegen import class_name

    model = attngraph.compile(SPEC, seed=0).eval()
    code = model.code
    assert f"from {__name__} import ScaledDotProduct, softsign2, squared_ratio" in code
    assert "squared_ratio(" in code and "softsign2(" in code  # called, by their names
    assert "import attngraph" not in code and "from attngraph" not in code
    mod = types.ModuleType("registered_export")
    sys.modules[mod.__name__] = mod
    try:
        exec(compile(code, "registered_export.py", "exec"), mod.__dict__)  # noqa: S102
        ours = getattr(mod, class_name(model.graph.name))()
        ours.load_state_dict(model.state_dict())
        ours.eval()
        x = torch.randn(2, 5, 8)
        with torch.no_grad():
            got, want = ours(x), model(src=x)
        for key in want:
            torch.testing.assert_close(got[key], want[key], atol=1e-6, rtol=0)
    finally:
        del sys.modules[mod.__name__]


def test_a_fusable_dot_product_scorer_is_fused(registered: None, tmp_path: Path, cli) -> None:
    """The registered fusable scorer -> softmax -> readout becomes one attention node
    (``compile --print-after fuse_attention`` shows it) equal to the explicit chain; a
    scorer without the trait is not fused."""

    from attngraph.passes.fuse_attention import fuse_attention

    g = loads_spec(FUSABLE)
    assert [n.kind for n in fuse_attention(g).nodes if n.id == "z"] == ["attention"]
    path = tmp_path / "f.yaml"
    path.write_text(FUSABLE, encoding="utf-8")
    r = cli("compile", path, "--print-after", "fuse_attention", code=0)
    assert "%z = attention(fused=s+p+z" in r.output
    fused = attngraph.compile(FUSABLE, seed=3).eval()
    plain = attngraph.compile(FUSABLE, seed=3, fuse=False).eval()
    x = torch.randn(2, 6, 8)
    mask = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])
    with torch.no_grad():
        a, b = fused(src=x, src_mask=mask)["z"], plain(src=x, src_mask=mask)["z"]
    torch.testing.assert_close(a[mask], b[mask], atol=1e-5, rtol=1e-5)
    with SCORERS.scoped():
        register_scorer(ScorerInfo("my_dot_unfused", "q·k/√d", same_size=True,
                                   make=lambda dq, dk, h: ScaledDotProduct(dk ** -0.5),
                                   dot_product=True))
        g = loads_spec(FUSABLE.replace("my_scaled_dot", "my_dot_unfused"))
        assert fuse_attention(g) is g


def test_a_positive_feature_map_feeds_linear_attention(registered: None) -> None:
    """A registered positive feature map with the dot-product scorer and fn sum runs
    as linear attention, equal to the pairwise form; a map that is not positive is
    refused at the scores."""
    from attngraph.passes.linear_attention import linear_attention

    spec = KERNEL.replace("PHI", "softplus_phi")
    assert [n.kind for n in linear_attention(loads_spec(spec)).nodes if n.id == "z"] == [
        "linear_attention"]
    fast = attngraph.compile(spec, seed=0).eval()
    slow = attngraph.compile(spec, seed=0, fuse=False).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(fast(x=x)["z"], slow(x=x)["z"], atol=1e-5, rtol=1e-5)
    with pytest.raises(ShapeError) as e:
        loads_spec(KERNEL.replace("PHI", "tanh_phi"))
    assert "must not be negative" in str(e.value)
    assert "softplus_phi" in (e.value.hint or "")


def test_a_normaliser_that_needs_k_takes_k_and_ties() -> None:
    """A registered ``needs_k`` normaliser requires ``k``, accepts ``ties``, and is
    called with both; the others refuse them, naming every normaliser that takes k."""
    calls: list[tuple[int, str]] = []

    def first_k(z: Tensor, mask: Tensor | None, k: int, ties: str) -> Tensor:
        calls.append((k, ties))
        return torch.softmax(z, -1)

    spec = SPEC.replace("fn: my_scaled_dot", "fn: scaled_dot").replace(
        "act: softsign2", "act: relu")
    with NORMALISERS.scoped():
        register_normaliser(NormaliserInfo("first_k", "the first k", impl=first_k,
                                           needs_k=True))
        with pytest.raises(ShapeError, match="'k' is missing"):
            loads_spec(spec.replace("fn: sqratio", "fn: first_k"))
        model = attngraph.compile(spec.replace("fn: sqratio", "fn: first_k, k: 3, ties: keep"),
                                  seed=0)
        model(src=torch.randn(1, 4, 8))
        assert calls == [(3, "keep")]
        with pytest.raises(ShapeError) as e:
            loads_spec(spec.replace("fn: sqratio", "fn: softmax, k: 3"))
        assert "'k' applies to fn first_k or topk, not softmax" in str(e.value)


#: a comparison of a function field with a string, or a table keyed by strings
_COMPARE = r"""\b(fn|act)\b[^\n=]*?(==|!=)\s*["']({names})["']"""
_MEMBER = r"""\b(fn|act)\b[^\n]*?\bin\s*[(\[{{]\s*["']({names})["']"""
_TABLE = r"""\{{\s*["']({names})["']\s*:"""


def test_passes_analyses_and_renderers_name_no_function() -> None:
    """No module of the passes, the analyses or the renderers compares a scorer
    function, normaliser, feature map or activation with a registered name, or keeps
    a table keyed by them: they read the entries' traits."""
    names = sorted({*NORMALISERS, *SCORERS, *FEATURE_MAPS, *ACTIVATIONS})
    alt = "|".join(map(re.escape, names))
    patterns = [re.compile(p.format(names=alt)) for p in (_COMPARE, _MEMBER, _TABLE)]
    found = []
    for folder in ("attngraph/passes", "attngraph/analysis", "renderers"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if any(p.search(line) for p in patterns):
                    found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, "\n".join(found)
    # the check has teeth: it finds the tests the passes made before
    assert patterns[0].search('return s.fn == "scaled_dot" and s.pairs == "all"')
    assert patterns[1].search('s.fn in ("dot", "scaled_dot")')
    assert patterns[2].search('extra = {"sparsemax": " (sparse)"}')


def test_committed_tables_are_up_to_date() -> None:
    """docs/spec-language.md holds, between each table's markers, what the registries
    say now (run `attngraph docs` after registering a built-in)."""
    from attngraph.kinds.tables import TABLES, with_tables

    text = DOC.read_text(encoding="utf-8")
    for t in TABLES:
        assert text.count(t.start) == 1 and text.count(t.end) == 1, t.start
    assert with_tables(text) == text
