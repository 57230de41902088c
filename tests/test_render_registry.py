"""Views and formats are registries: taken names are refused, unknown ones suggest names."""

from __future__ import annotations

import pytest

from attngraph.errors import RegistryError, RenderError
from attngraph.frontend import loads_spec
from renderers import FORMATS, VIEWS, format_, render, to_diagram, view
from renderers.diagram import Diagram, DNode

SPEC = """
attngraph: 1
name: reg
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  s: {kind: scorer, fn: mlp, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
outputs: {z: z}
"""


def test_the_built_in_views_and_formats_are_registered() -> None:
    """Two views and six formats, listed sorted by the registries."""
    assert list(VIEWS) == ["architecture", "unrolled"]
    assert list(FORMATS) == ["dot", "json", "mermaid", "pdf", "png", "svg"]


def test_a_view_under_a_taken_name_is_refused() -> None:
    """Registering a second 'unrolled' view fails and leaves the first in place."""
    first = VIEWS["unrolled"]
    with VIEWS.scoped(), pytest.raises(RegistryError, match="view 'unrolled' is registered"):
        view("unrolled")(lambda graph, **_: Diagram(name="x", view="unrolled"))
    assert VIEWS["unrolled"] is first


def test_a_format_under_a_taken_name_is_refused() -> None:
    """Registering a second 'dot' format fails and leaves the first in place."""
    first = FORMATS["dot"]
    with FORMATS.scoped(), pytest.raises(RegistryError, match="format 'dot' is registered"):
        format_("dot")(lambda dg: "")
    assert FORMATS["dot"] is first


def test_an_unknown_view_is_a_render_error_suggesting_names() -> None:
    """A misspelt view is a RenderError whose hint names the view meant and the known ones."""
    g = loads_spec(SPEC)
    with pytest.raises(RenderError) as err:
        to_diagram(g, "unroled")
    assert err.value.message == "unknown view 'unroled'"
    assert err.value.hint is not None
    assert "did you mean 'unrolled'?" in err.value.hint
    assert "architecture, unrolled" in err.value.hint


def test_an_unknown_format_is_a_render_error_suggesting_names() -> None:
    """A misspelt format is a RenderError naming the format meant, before any drawing."""
    g = loads_spec(SPEC)
    with pytest.raises(RenderError) as err:
        render(g, "no-such-view", "mermiad")
    assert err.value.message == "unknown format 'mermiad'"
    assert err.value.hint is not None and "did you mean 'mermaid'?" in err.value.hint


def test_a_registered_view_and_format_draw_until_the_scope_ends() -> None:
    """A view and a format added in a scope are used by render, and gone after it."""
    with VIEWS.scoped(), FORMATS.scoped():

        @view("ids")
        def _ids(graph: object, **_: object) -> Diagram:
            dg = Diagram(name="ids", view="ids")
            for n in getattr(graph, "nodes", ()):
                dg.add(DNode(id=n.id, base=n.id))
            return dg

        @format_("list")
        def _list(dg: Diagram) -> str:
            return ",".join(n.id for n in dg.nodes)

        assert render(loads_spec(SPEC), "ids", "list") == "x,s,p,z"
    assert "ids" not in VIEWS and "list" not in FORMATS
    with pytest.raises(RenderError):
        render(loads_spec(SPEC), "ids", "dot")
