"""Diagrams of an attngraph IR graph: two views, six formats; never imports torch.

>>> from renderers import render                              # doctest: +SKIP
>>> svg = render(graph, view="unrolled", format="svg")        # doctest: +SKIP

Views build a :class:`~renderers.diagram.Diagram`; formats serialise it. Both are
registries (:data:`VIEWS`, :data:`FORMATS`) filled by :func:`view` and :func:`format_`.
Only :mod:`renderers.backend` runs the ``dot`` program (svg, png, pdf).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attngraph.errors import RenderError, did_you_mean

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from renderers.diagram import Diagram

__all__ = [
    "render", "to_diagram", "show", "Show", "display", "VIEWS", "FORMATS", "view", "format_",
]

#: view name -> ``fn(graph, **options) -> Diagram``
VIEWS: dict[str, Callable[..., Diagram]] = {}
#: format name -> ``fn(diagram) -> str | bytes``
FORMATS: dict[str, Callable[[Diagram], str | bytes]] = {}


def view(name: str) -> Callable[[Callable[..., Diagram]], Callable[..., Diagram]]:
    """Register a view builder under ``name``."""

    def deco(fn: Callable[..., Diagram]) -> Callable[..., Diagram]:
        VIEWS[name] = fn
        return fn

    return deco


def format_(name: str) -> Callable[[Callable[[Diagram], Any]], Callable[[Diagram], Any]]:
    """Register a serialiser under ``name``."""

    def deco(fn: Callable[[Diagram], Any]) -> Callable[[Diagram], Any]:
        FORMATS[name] = fn
        return fn

    return deco


@view("unrolled")
def _unrolled(graph: Graph, *, items: int = 2, query: int = 1, **_: Any) -> Diagram:
    from renderers.unrolled import unrolled

    return unrolled(graph, items=items, query=query)


@view("architecture")
def _architecture(graph: Graph, *, expand_repeats: bool = False, **_: Any) -> Diagram:
    from renderers.architecture import architecture

    return architecture(graph, expand_repeats=expand_repeats)


@format_("dot")
def _dot(dg: Diagram) -> str:
    from renderers.dot import to_dot

    return to_dot(dg)


@format_("mermaid")
def _mermaid(dg: Diagram) -> str:
    from renderers.mermaid import to_mermaid

    return to_mermaid(dg)


@format_("json")
def _json(dg: Diagram) -> str:
    from renderers.json import to_json

    return to_json(dg)


def _binary(fmt: str) -> Callable[[Diagram], bytes]:
    def run(dg: Diagram) -> bytes:
        from renderers.backend import run_dot
        from renderers.dot import to_dot

        return run_dot(to_dot(dg), fmt)

    return run


for _fmt in ("svg", "png", "pdf"):
    FORMATS[_fmt] = _binary(_fmt)


def to_diagram(graph: Graph, view: str = "architecture", **options: Any) -> Diagram:
    """The diagram model of ``graph`` in ``view`` (before serialisation)."""
    if view not in VIEWS:
        msg = f"unknown view '{view}'"
        raise RenderError(msg, hint=did_you_mean(view, VIEWS))
    return VIEWS[view](graph, **options)


def render(graph: Graph, view: str = "architecture", format: str = "svg",  # noqa: A002
           **options: Any) -> str | bytes:
    """Draw ``graph``.

    Parameters
    ----------
    graph : Graph
        An inferred IR graph (:func:`attngraph.pipeline.load_spec`).
    view : {"architecture", "unrolled"}
        One node per spec node, or the per-item view of the reference figures.
    format : {"svg", "png", "pdf", "dot", "mermaid", "json"}
        svg is text; png and pdf are bytes; svg/png/pdf need Graphviz's ``dot``.
    **options
        ``items`` (drawn before the ellipsis, default 2), ``query`` (the query
        drawn for all-pairs weights, default 1), ``expand_repeats``.

    Returns
    -------
    str or bytes

    Raises
    ------
    RenderError
        Unknown view or format, or ``dot`` missing for svg/png/pdf.
    """
    if format not in FORMATS:
        msg = f"unknown format '{format}'"
        raise RenderError(msg, hint=did_you_mean(format, FORMATS))
    out = FORMATS[format](to_diagram(graph, view, **options))
    return out.decode("utf-8") if format == "svg" and isinstance(out, bytes) else out


class Show:
    """Shows a graph's diagram inline in a notebook (``_repr_svg_``)."""

    def __init__(self, graph: Graph, view: str = "architecture", **options: Any) -> None:
        self.graph, self.view, self.options = graph, view, options

    def _repr_svg_(self) -> str:
        out = render(self.graph, self.view, "svg", **self.options)
        return out if isinstance(out, str) else out.decode("utf-8")

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        try:
            return {"image/svg+xml": self._repr_svg_()}
        except RenderError:
            from renderers.mermaid import to_mermaid

            return {"text/plain": to_mermaid(to_diagram(self.graph, self.view, **self.options))}


def show(graph: Graph, view: str = "architecture", **options: Any) -> Show:
    """An object a notebook displays as the diagram of ``graph``."""
    return Show(graph, view, **options)


def display(graph: Graph, include: Any = None, exclude: Any = None) -> dict[str, str]:
    """A graph's notebook display: its architecture diagram.

    Registered as the ``attngraph.display`` entry point, which
    ``Graph._repr_mimebundle_`` looks up (the IR does not import the renderers).
    """
    return show(graph)._repr_mimebundle_(include, exclude)
