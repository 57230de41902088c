"""The front end as one function: ``load_spec(path) -> Graph`` (no torch).

It composes the stages: :func:`~attngraph.source.load` (YAML with positions) →
:func:`~attngraph.spec.validate.validate` (against the models of
:data:`attngraph.kinds.KINDS`) → :func:`~attngraph.ir.build.build` →
:func:`~attngraph.ir.verify.verify` → the :data:`~attngraph.passes.FRONT` passes
(shape inference) → the resource guard.
"""

from __future__ import annotations

from pathlib import Path

from attngraph.errors import SourceLoc, SpecError
from attngraph.ir.build import build
from attngraph.ir.graph import Graph
from attngraph.ir.verify import verify
from attngraph.kinds import spec_kinds
from attngraph.passes import FRONT, Pipeline
from attngraph.source import Document, load, loads
from attngraph.spec.validate import validate

__all__ = ["load_spec", "loads_spec", "check_resources", "MAX_PARAMS", "MAX_DIM"]

#: Parameter count over which a spec is refused unless ``allow_large``.
MAX_PARAMS = 2_000_000_000
#: Largest single dimension accepted unless ``allow_large``.
MAX_DIM = 1_000_000


def check_resources(graph: Graph, doc: Document | None = None) -> None:
    """Refuse graphs whose parameters or dims would exhaust the machine."""
    loc = doc.loc(()) if doc is not None else SourceLoc(graph.file)
    params = graph.params
    if params > MAX_PARAMS:
        msg = f"spec would have {params:,} parameters, over the limit of {MAX_PARAMS:,}"
        raise SpecError(
            msg,
            loc, "shrink dims, or pass --allow-large (allow_large=True) if you mean it",
        )
    for _path, n in graph.walk():
        for t in n.types.values():
            for d in t.dims:
                if isinstance(d, int) and d > MAX_DIM:
                    msg = (
                        f"node '{n.id}' has a dimension of {d:,}, over the limit of "
                        f"{MAX_DIM:,}"
                    )
                    raise SpecError(
                        msg, n.loc, "pass --allow-large if you mean it",
                    )


def _front(doc: Document, allow_large: bool, front: Pipeline) -> Graph:
    spec = validate(doc, spec_kinds())
    graph = front(verify(build(spec, doc)))
    if not allow_large:
        check_resources(graph, doc)
    return graph


def load_spec(path: str | Path, *, allow_large: bool = False,
              front: Pipeline = FRONT) -> Graph:
    """Read, validate, build, verify and shape-check a spec file.

    Parameters
    ----------
    path : str or Path
        A YAML spec.
    allow_large : bool, optional
        Accept specs over the parameter and dimension limits.
    front : Pipeline, optional
        The passes run after build and verify (default :data:`attngraph.passes.FRONT`;
        ``FRONT.with_print_after(...)`` prints the IR after them).

    Returns
    -------
    Graph
        The IR with every node's inferred types and parameter count.

    Raises
    ------
    AttnGraphError
        A :class:`SpecError`, :class:`GraphError` or :class:`ShapeError` holding
        every problem found, each located in the file.
    """
    return _front(load(path), allow_large, front)


def loads_spec(text: str, file: str = "<spec>", *, allow_large: bool = False,
               front: Pipeline = FRONT) -> Graph:
    """Like :func:`load_spec`, from YAML text."""
    return _front(loads(text, file), allow_large, front)
