"""The front end as one function: ``load_spec(path) -> Graph`` (no torch).

It composes the stages: :func:`~attngraph.source.load` (YAML with positions) →
:func:`~attngraph.spec.validate.validate` (against the models of
:data:`attngraph.kinds.KINDS`) → :func:`~attngraph.ir.build.build` →
:func:`~attngraph.ir.verify.verify` → the :data:`~attngraph.passes.FRONT` passes
(shape inference) → the resource guard (:func:`attngraph.guard.check_resources`).
Both are public as ``attngraph.load_spec`` and ``attngraph.loads_spec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from attngraph.guard import check_resources
from attngraph.ir.build import build
from attngraph.ir.graph import Graph
from attngraph.ir.verify import verify
from attngraph.kinds import spec_kinds
from attngraph.passes import FRONT, Pipeline
from attngraph.source import Document, load, loads
from attngraph.spec.validate import validate

__all__ = ["load_spec", "loads_spec"]


def _front(doc: Document, allow_large: bool, front: Pipeline, batch: int | None,
           length: int | Mapping[str, int] | None) -> Graph:
    spec = validate(doc, spec_kinds())
    graph = front(verify(build(spec, doc)))
    if not allow_large:
        check_resources(graph, doc, batch=batch, length=length)
    return graph


def load_spec(path: str | Path, *, allow_large: bool = False, front: Pipeline = FRONT,
              batch: int | None = None, length: int | Mapping[str, int] | None = None,
              ) -> Graph:
    """Read, validate, build, verify and shape-check a spec file.

    Parameters
    ----------
    path : str or Path
        A YAML spec.
    allow_large : bool, optional
        Accept specs over the resource limits (:func:`attngraph.guard.check_resources`).
    front : Pipeline, optional
        The passes run after build and verify (default :data:`attngraph.passes.FRONT`;
        ``FRONT.with_print_after(...)`` prints the IR after them).
    batch : int, optional
        The batch the resource guard assumes (default
        :data:`attngraph.guard.ASSUMED_BATCH`).
    length : int or mapping, optional
        The size the guard gives every symbolic length, or each by name (default
        :data:`attngraph.guard.ASSUMED_LENGTH`); pass what the forward will use.

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
    return _front(load(path), allow_large, front, batch, length)


def loads_spec(text: str, file: str = "<spec>", *, allow_large: bool = False,
               front: Pipeline = FRONT, batch: int | None = None,
               length: int | Mapping[str, int] | None = None) -> Graph:
    """Like :func:`load_spec`, from YAML text."""
    if not isinstance(text, str):
        from attngraph.errors import SourceLoc, SpecError

        hint = "decode it first: text.decode('utf-8')" if isinstance(text, bytes) else \
            "give the YAML as a str, or load_spec(path) for a file"
        msg = f"loads_spec takes the spec's YAML text (a str), not {type(text).__name__}"
        raise SpecError(msg, SourceLoc(str(file)), hint)
    return _front(loads(text, file), allow_large, front, batch, length)
