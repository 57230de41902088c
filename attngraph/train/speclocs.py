"""Where in a spec a training error points: the ``train:`` section, an input, an output.

The IR keeps the position of every node and edge, but not of the ``train:``
section or of the ``outputs:`` key. Each position carries the spec's text, so
:func:`spec_loc` parses that text again (cached) and asks the document for the
path, as the front end's own errors do. A graph made without positions (built
in code) gives just its file.

Examples
--------
>>> from attngraph.pipeline import loads_spec
>>> g = loads_spec(open("specs/global_attention.yaml").read(), "ga.yaml")
>>> str(spec_loc(g, "train", "task"))
'ga.yaml:35:9'
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from attngraph.errors import AttnGraphError, SourceLoc, TrainingError

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.source import Document

__all__ = ["spec_loc", "spec_text", "relocated"]


def spec_text(graph: Graph) -> str | None:
    """The text ``graph`` was read from (kept in its positions), or None."""
    for n in graph.nodes:
        if n.loc.text is not None:
            return n.loc.text
    for _, e in graph.outputs:
        if e.loc.text is not None:
            return e.loc.text
    return None


@functools.lru_cache(maxsize=8)
def _document(text: str, file: str) -> Document:
    from attngraph.source import loads

    return loads(text, file)


def spec_loc(graph: Graph, *path: str, key: bool = False) -> SourceLoc:
    """Position of ``path`` (keys from the document's root) in ``graph``'s spec.

    Parameters
    ----------
    graph : Graph
        A graph read from a spec.
    *path : str
        Keys from the root, e.g. ``"train", "options", "vocab"``; none for the
        document itself. A path the spec lacks gives its nearest ancestor.
    key : bool
        The position of the last key rather than of its value.

    Returns
    -------
    SourceLoc
        With the spec's text (so the error prints the line), or only the file
        when the graph holds no positions.
    """
    text = spec_text(graph)
    if text is None:
        return SourceLoc(graph.file)
    try:
        doc = _document(text, graph.file)
    except AttnGraphError:  # cannot happen for text the graph was built from
        return SourceLoc(graph.file)
    return doc.loc(path, key=key)


def relocated(exc: AttnGraphError, loc: SourceLoc) -> TrainingError:
    """``exc``'s message and hint as a TrainingError at ``loc``."""
    return TrainingError(exc.message, loc, exc.hint)
