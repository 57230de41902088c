"""A package's kind that declares a built-in kind's traits is treated as that kind.

The passes, the analyses (``describe``'s sites and axes), the renderers and the
pictures read the traits a kind declares (:class:`attngraph.kinds.base.Kind`:
``body``, ``passthrough``, ``sums``, ``positions``, ``samples``, ``addresses``,
``table``, ``phrase``, ``site``, ``picture``, ``part``), never its name. Each test here
registers a copy of a built-in kind under another name (the same spec fields, shape
rule and traits), writes a catalog spec with the copy in place of the built-in, and
checks that every attention site, every axis and reason, the drawing and the tied
parameters come out as for the built-in (the copy's name read back as the
built-in's).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import create_model

from attngraph.analysis.axes import find_sites
from attngraph.frontend import loads_spec
from attngraph.ir.graph import Graph
from attngraph.kinds import KINDS
from attngraph.kinds.base import traits_of
from renderers.architecture import architecture

ROOT = Path(__file__).resolve().parent.parent
SPECS = [*sorted((ROOT / "specs").glob("*.yaml")),
         *sorted((ROOT / "specs" / "real").glob("*.yaml")),
         *sorted((ROOT / "mechanisms").glob("*.yaml"))]

#: a spec of a kind no catalog spec uses: dropout on the weights, read through it
DROPOUT = """\
attngraph: 1
name: dropped_weights
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
nodes:
  x: {kind: items, from: src}
  q: {kind: queries, from: x}
  k: {kind: keys, from: x}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  pd: {kind: dropout, from: p, p: 0.1}
  z: {kind: readout, weights: pd, values: x}
outputs: {z: z, p: pd}
"""

#: each trait family, with the built-in kinds that declare it
FAMILIES = {
    "body": ["block", "map", "repeat", "loop"],
    "passthrough": ["dropout"],
    "sums": ["add", "position_bias"],
    "positions": ["position", "position_bias", "rotary"],
    "samples": ["policy"],
    "addresses": ["address"],
    "table": ["embedding", "items"],
    "phrase": ["linear", "mlp"],
    "site": ["glimpse", "filterbank", "window"],
    "picture": ["glimpse", "window"],
}

CASES = sorted({(family, name) for family, names in FAMILIES.items() for name in names})

#: a linear tied to an embedding's table (the catalog's that do are over the size limits)
TIED = """\
attngraph: 1
name: tied
dims: {vocab: 11, d: 8}
inputs:
  tok: {type: tokens, vocab: vocab}
nodes:
  e:   {kind: embedding, from: tok, dim: d}
  out: {kind: linear, from: e, out: vocab, tie: e}
outputs: {out: out}
"""

#: the traits the lowering reads: (trait, built-in kind, a spec with a node of it); the
#: copy's model is the built-in's (``mul`` does not sum: its lowering, add's, multiplies)
LOWERED = [
    ("table", "embedding", "<tied>"),
    ("table", "items", "mechanisms/memory_network_3hop.yaml"),
    ("sums", "add", "mechanisms/sagan_block.yaml"),
    ("sums", "mul", "mechanisms/gau_squared_relu.yaml"),
    ("part", "prepare", "specs/bahdanau_translation.yaml"),  # the hoisting pass's U k
]


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(\bkind:\s*){name}(?![\w])")


def _spec_with(name: str) -> tuple[str, str] | None:
    """``(file, text)`` of the first catalog spec that uses kind ``name``."""
    pat = _pattern(name)
    path = next((p for p in SPECS if not p.name.endswith(".names.yaml")
                 and pat.search(p.read_text())), None)
    if path is None:
        return ("<dropout>", DROPOUT) if name == "dropout" else None
    return str(path), path.read_text()


@pytest.fixture
def copied() -> Iterator[None]:
    """Kind registrations made by a test, undone after it."""
    with KINDS.scoped():
        yield


def _copy(name: str) -> str:
    """Register ``plugin_<name>``: the built-in's spec fields, shape rule and traits,
    under a name nothing in attngraph knows."""
    new = f"plugin_{name}"
    k = KINDS[name]
    spec: Any = create_model(f"Plugin{k.spec.__name__}", __base__=k.spec,
                             kind=(Literal[new], ...))  # type: ignore[valid-type]
    KINDS.register(new, replace(k, name=new, spec=spec))
    return new


def _sites(graph: Graph) -> list[tuple[Any, ...]]:
    return [(s.id, s.form, s.chain, s.fn, s.formula, s.heads,
             tuple(o.text for o in s.query), tuple(o.text for o in s.keys),
             tuple(o.text for o in s.values),
             tuple((k, a.value, a.reason) for k, a in s.axes.items()),
             s.cost, tuple(sorted(s.params.items())))
            for s in find_sites(graph)]


@pytest.mark.parametrize(("family", "name"), CASES, ids=[f"{f}-{n}" for f, n in CASES])
def test_a_copy_declaring_the_trait_is_treated_as_the_builtin(
        copied: None, family: str, name: str) -> None:
    found = _spec_with(name)
    assert found is not None, f"no spec uses {name}"
    path, text = found
    assert getattr(KINDS[name], family) not in (None, False)
    new = _copy(name)
    assert getattr(traits_of(new), family) == getattr(KINDS[name], family)
    builtin = loads_spec(text, path, allow_large=True)
    plugin = loads_spec(_pattern(name).sub(rf"\g<1>{new}", text), path, allow_large=True)
    assert find_sites(builtin) or name not in FAMILIES["passthrough"]
    assert any(n.kind == new for g in (plugin, *plugin.blocks.values()) for n in g.nodes)

    def back(x: object) -> str:
        return repr(x).replace(new, name)

    assert back(_sites(plugin)) == back(_sites(builtin))
    assert plugin.params == builtin.params  # tied tables too
    assert back(architecture(plugin)) == back(architecture(builtin))


def test_a_copy_drawn_by_a_picture_is_found_by_it(copied: None) -> None:
    """The attention pictures find the window's weights and the glimpse's patch size
    through the ``picture`` trait."""
    from attngraph.train.pictures.image import _glimpse_size
    from attngraph.train.pictures.window import is_window_weights

    for name, check in (("window", lambda g: is_window_weights(g, "attention")),
                        ("glimpse", _glimpse_size)):
        found = _spec_with(name)
        assert found is not None
        path, text = found
        new = _copy(name)
        builtin = loads_spec(text, path, allow_large=True)
        plugin = loads_spec(_pattern(name).sub(rf"\g<1>{new}", text), path, allow_large=True)
        assert check(plugin) == check(builtin)
        assert check(builtin) not in (None, False)


def _renamed(graph: Graph, name: str, new: str) -> Graph:
    """``graph`` with each node of kind ``name`` (in bodies too) of kind ``new``."""
    def one(n: Any) -> Any:
        spec = n.spec.model_copy(update={"kind": new}) if n.kind == name else n.spec
        body = _renamed(n.body, name, new) if n.body is not None else None
        return replace(n, spec=spec, body=body)

    return graph.replace_nodes([one(n) for n in graph.nodes])


@pytest.mark.parametrize(("trait", "name", "path"), LOWERED, ids=[n for _, n, _ in LOWERED])
def test_a_copy_declaring_the_trait_lowers_as_the_builtin(
        copied: None, trait: str, name: str, path: str) -> None:
    """The lowering reads the traits too: a linear ties to a copy's ``table``, a copy of
    add sums and one of mul multiplies, a copy of ``prepare`` is a ``part`` of its
    scorer's work; the same parameters (tied ones listed once) and outputs."""
    torch = pytest.importorskip("torch")
    import attngraph
    from attngraph.lower.runtime.examples import random_inputs
    from attngraph.passes import OPTIMIZE

    text = TIED if path == "<tied>" else (ROOT / path).read_text()
    assert getattr(KINDS[name], trait) not in (None, False) or name == "mul"
    graph = OPTIMIZE(loads_spec(text, path, allow_large=True))
    new = _copy(name)
    plugin = _renamed(graph, name, new)
    assert any(n.kind == new for _, n in plugin.walk())
    models = [attngraph.compile(g, seed=0, fuse=False).eval() for g in (graph, plugin)]
    states = [m.state_dict() for m in models]
    assert list(states[0]) == list(states[1])
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])
    assert [n for n, _ in models[0].named_parameters()] == \
        [n for n, _ in models[1].named_parameters()]
    kw = random_inputs(graph, batch=2, length=5, generator=torch.Generator().manual_seed(1))
    outs = [m(**kw) for m in models]
    assert list(outs[0]) == list(outs[1])
    for k in outs[0]:
        torch.testing.assert_close(outs[1][k], outs[0][k])


#: the catalog's language model and GPT-2 at tiny sizes: every step trait but
#: ``relative`` (items, projections, norms, MLPs, adds, linears; positions; a repeat)
STEPPED = {
    "language_model": (ROOT / "specs" / "language_model.yaml").read_text(),
    "gpt2": re.sub(r"^dims: \{.*\}$", "dims: {vocab: 37, d: 32, heads: 4, ff: 64, layers: 2, "
                   "n: 32}", (ROOT / "specs" / "real" / "gpt2.yaml").read_text(), count=1,
                   flags=re.M),
}


@pytest.mark.parametrize("spec", sorted(STEPPED))
def test_a_copy_declaring_its_step_trait_is_cached_as_the_builtin(copied: None,
                                                                  spec: str) -> None:
    """Generation's key/value cache reads the ``step`` trait: a spec whose every kind
    with one is a copy (trait and all) is planned and generates as the built-in; a
    copy without the trait is refused until ``STEP_TRAITS`` registers it."""
    torch = pytest.importorskip("torch")
    import attngraph
    from attngraph.lower.decode.cache import STEP_TRAITS, CacheRefused, plan_cache

    graph = loads_spec(STEPPED[spec], f"<{spec}>", allow_large=True)
    stepped = sorted({n.kind for _, n in graph.walk() if traits_of(n).step is not None})
    assert {"norm", "position"} <= set(stepped)
    plugin = graph
    for name in stepped:
        plugin = _renamed(plugin, name, _copy(name))
    models = [attngraph.compile(g, seed=0).eval() for g in (graph, plugin)]

    def hows(plan: Any) -> list[tuple[str, str, tuple[Any, ...]]]:
        return [(s.step.node, s.how, tuple(hows(p) for p in s.inner)) for s in plan.sites]

    plans = [plan_cache(m, m.graph, {"tokens"}, "N") for m in models]
    assert hows(plans[1]) == hows(plans[0])
    ids = torch.tensor([[3, 5, 7], [2, 4, 0]])
    inputs = {"tokens": ids, "tokens_mask": ids != 0}
    outs = [attngraph.generate(m, inputs, max_length=4, beam=2) for m in models]
    assert torch.equal(outs[1].tokens, outs[0].tokens)
    torch.testing.assert_close(outs[1].scores, outs[0].scores)

    bare = "plugin_bare_norm"  # a copy of norm that does not declare its step trait
    spec_model: Any = create_model("PluginBareNorm", __base__=KINDS["norm"].spec,
                                   kind=(Literal["plugin_bare_norm"], ...))
    KINDS.register(bare, replace(KINDS["norm"], name=bare, spec=spec_model, step=None))
    model = attngraph.compile(_renamed(graph, "norm", bare), seed=0).eval()
    with pytest.raises(CacheRefused, match="has no step trait"):
        plan_cache(model, model.graph, {"tokens"}, "N")
    with STEP_TRAITS.scoped():
        STEP_TRAITS.register(bare, "pointwise")
        assert STEP_TRAITS[bare] == "pointwise" and STEP_TRAITS["norm"] == "pointwise"
        assert hows(plan_cache(model, model.graph, {"tokens"}, "N")) == hows(plans[0])
