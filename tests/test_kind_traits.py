"""A package's kind that declares a built-in kind's traits is treated as that kind.

The passes, the analyses (``describe``'s sites and axes), the renderers and the
pictures read the traits a kind declares (:class:`attngraph.kinds.base.Kind`:
``body``, ``passthrough``, ``sums``, ``positions``, ``samples``, ``addresses``,
``table``, ``phrase``, ``site``, ``picture``), never its name. Each test here
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
