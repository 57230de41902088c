"""Diagrams of an attngraph IR graph: two views, six formats; never imports torch.

>>> from renderers import render                              # doctest: +SKIP
>>> svg = render(graph, view="unrolled", format="svg")        # doctest: +SKIP

Views build a :class:`~renderers.diagram.Diagram`; formats serialise it. Both are
:class:`~attngraph.registry.Registry` instances (:data:`VIEWS`, :data:`FORMATS`),
filled by the decorators :func:`view` and :func:`format_`: a taken name is refused,
an unknown one is a :class:`~attngraph.errors.RenderError` with a "did you mean".

Where things are: the views in :mod:`renderers.architecture` and
:mod:`renderers.unrolled` (its boxes for blocks, repeats and loops in
:mod:`renderers.boxes`, what it draws of one node in :mod:`renderers.drawn`); the
diagram model in :mod:`renderers.diagram`; the formats in :mod:`renderers.dot`,
:mod:`renderers.mermaid` and :mod:`renderers.json`. Only :mod:`renderers.backend`
runs the ``dot`` program (svg, png, pdf). A kind's style and role are read from
:data:`attngraph.kinds.KINDS` through :mod:`renderers.traits`; no view keeps a
table of kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from attngraph.errors import RegistryError, RenderError
from attngraph.registry import Registry

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from renderers.diagram import Diagram

__all__ = [
    "render", "to_diagram", "show", "Show", "display", "VIEWS", "FORMATS", "view", "format_",
]

#: view name -> ``fn(graph, **options) -> Diagram``
VIEWS: Registry[Callable[..., Diagram]] = Registry("view")
#: format name -> ``fn(diagram) -> str | bytes``
FORMATS: Registry[Callable[[Diagram], str | bytes]] = Registry("format")

_F = TypeVar("_F", bound=Callable[..., Any])


def view(name: str) -> Callable[[_F], _F]:
    """Register a view builder under ``name`` (a taken name raises ``RegistryError``)."""
    return VIEWS.register(name)


def format_(name: str) -> Callable[[_F], _F]:
    """Register a serialiser under ``name`` (a taken name raises ``RegistryError``)."""
    return FORMATS.register(name)


def _lookup(registry: Registry[Any], name: str) -> Any:
    """``registry[name]``; an unknown name is a RenderError with the registry's hint."""
    try:
        return registry[name]
    except RegistryError as exc:
        raise RenderError(exc.message, hint=exc.hint) from None


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
    FORMATS.register(_fmt, _binary(_fmt))


def to_diagram(graph: Graph, view: str = "architecture", **options: Any) -> Diagram:
    """The diagram model of ``graph`` in ``view`` (before serialisation)."""
    build: Callable[..., Diagram] = _lookup(VIEWS, view)
    return build(graph, **options)


def render(graph: Graph, view: str = "architecture", format: str = "svg",  # noqa: A002
           **options: Any) -> str | bytes:
    """Draw ``graph``.

    Parameters
    ----------
    graph : Graph
        An inferred IR graph (:func:`attngraph.frontend.load_spec`).
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
    serialise: Callable[[Diagram], str | bytes] = _lookup(FORMATS, format)
    out = serialise(to_diagram(graph, view, **options))
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
