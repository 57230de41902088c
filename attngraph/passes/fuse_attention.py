"""Fusion pass: dot-product scorer -> softmax -> readout becomes one ``attention`` node.

The pattern is data (:data:`ATTENTION`): a chain of kinds, each link read through
one field of the next node, with a predicate per node. The predicates read the
traits of the functions the nodes name, never their names: a scorer function that
is a ``fusable`` dot product (q·k/√d, or q·k where it is not ``scaled``:
:class:`~attngraph.kinds.scorers.ScorerInfo`),
a ``fusable`` normaliser (softmax over the items), a readout whose activation is
the ``identity``. So a scorer function a package registers with those traits is
fused like ``scaled_dot`` (and ``dot``). A chain matches when
every intermediate value (the scores, the weights) is used by the next link only
and is not a declared output. The fused node keeps the readout's id, reads the
scorer's ``query``/``key``, the readout's ``values`` and the softmax's adjacency
mask, and is lowered to one ``torch.nn.functional.scaled_dot_product_attention``
call. The pass recurses into block, repeat and loop bodies. After it, the
pipeline checks that inferring the fused graph's shapes again gives the same
types (the fused kind has a shape rule of its own, in :mod:`attngraph.kinds.attention`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from attngraph.errors import LoweringError
from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds.activations import ACTIVATIONS
from attngraph.kinds.attention import FusedAttentionSpec
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.kinds.scorers import SCORERS
from attngraph.passes.base import Pass
from attngraph.passes.shape_inference import infer_shapes

__all__ = ["Link", "ATTENTION", "FUSE_ATTENTION", "fuse_attention", "match_chain", "plain_readout"]


@dataclass(frozen=True)
class Link:
    """One node of a chain pattern: its kind, a predicate, and the field that reads
    the previous link (``None`` for the first)."""

    kind: str
    via: str | None = None
    where: Callable[[Node[Any]], bool] = lambda n: True


def _scaled_dot(n: Node[Any]) -> bool:
    """A scorer whose function is a fusable dot product, of every query with every key."""
    s = n.spec
    info = named(s, SCORERS)
    learned = getattr(s.query, "learned", None)
    has_query = n.edge("query") is not None
    return (info is not None and info.dot_product and info.fusable and s.pairs == "all"
            and learned is None and has_query)


def _softmax(n: Node[Any]) -> bool:
    """A fusable normaliser (softmax, which SDPA computes) over the items."""
    info = named(n.spec, NORMALISERS)
    return info is not None and info.fusable and n.spec.axis == "items"


def plain_readout(n: Node[Any]) -> bool:
    """A readout that only sums and merges heads (``out`` allowed): no renormalising, no
    offset or activation after it, which the fused nodes do not do."""
    s = n.spec
    act = named(s, ACTIVATIONS)
    return not s.normalize and not s.offset and (act is None or act.identity)


#: fusable dot-product scorer -> fusable normaliser over the items -> plain readout
ATTENTION = (
    Link("scorer", where=_scaled_dot),
    Link("softmax", via="scores", where=_softmax),
    Link("readout", via="weights", where=plain_readout),
)


def _uses(graph: Graph) -> dict[str, int]:
    """How many edges (and outputs) read each node."""
    count: dict[str, int] = {}
    for n in graph.nodes:
        for e in n.inputs:
            count[e.src] = count.get(e.src, 0) + 1
    for _, e in graph.outputs:
        count[e.src] = count.get(e.src, 0) + 1
    return count


def match_chain(graph: Graph, chain: tuple[Link, ...]) -> list[list[Node[Any]]]:
    """Every match of ``chain`` in ``graph``, as lists of nodes in chain order."""
    uses = _uses(graph)
    outputs = {e.src for _, e in graph.outputs}
    matches = []
    for last in graph.nodes:
        if last.kind != chain[-1].kind or not chain[-1].where(last):
            continue
        found = [last]
        ok = True
        for i in range(len(chain) - 1, 0, -1):
            e = found[0].edge(chain[i].via or "")
            if e is None or e.port or e.detach or e.src not in graph:
                ok = False
                break
            prev = graph.node(e.src)
            if (prev.kind != chain[i - 1].kind or not chain[i - 1].where(prev)
                    or uses.get(prev.id, 0) != 1 or prev.id in outputs):
                ok = False
                break
            found.insert(0, prev)
        if ok:
            matches.append(found)
    return matches


def _fuse(score: Node[Any], soft: Node[Any], read: Node[Any]) -> Node[Any]:
    """The fused node replacing one match."""
    ins: list[Edge] = [e for e in score.inputs if e.role.field in ("query", "key")]
    ins += [e for e in read.inputs if e.role.field == "values"]
    ins += [e for e in soft.inputs if e.role.field == "mask"]
    r = read.spec
    info = named(score.spec, SCORERS)
    spec = FusedAttentionSpec(
        fused=f"{score.id}+{soft.id}+{read.id}", mask=soft.spec.mask,
        temperature=soft.spec.temperature, scaled=info is None or info.scaled,
        combine=r.combine,
        out=int(r.out) if r.out is not None else None, bias=r.bias, label=r.label,
    )
    return replace(read, spec=spec, inputs=tuple(ins), params=score.params + read.params)


def fuse_attention(graph: Graph) -> Graph:
    """Replace every unobserved scaled-dot attention chain by one fused node.

    Parameters
    ----------
    graph : Graph
        An inferred graph.

    Returns
    -------
    Graph
        The rewritten graph (the same object when nothing matched and no body
        changed).
    """
    nodes = list(graph.nodes)
    changed = False
    for i, n in enumerate(nodes):
        if n.body is not None:
            body = fuse_attention(n.body)
            if body is not n.body:
                nodes[i] = replace(n, body=body)
                changed = True
    if changed:
        graph = graph.replace_nodes(nodes)
    matches = match_chain(graph, ATTENTION)
    if not matches:
        return graph
    drop = {m.id for match in matches for m in match[:-1]}
    fused = {match[-1].id: _fuse(*match) for match in matches}
    return graph.replace_nodes([fused.get(n.id, n) for n in graph.nodes if n.id not in drop])


def infers_again(graph: Graph) -> None:
    """Inferring the fused graph again gives every node the types it has."""
    again = infer_shapes(graph.replace_nodes(
        [replace(n, types={}) if not n.is_input else n for n in graph.nodes]))
    for n, m in zip(graph.nodes, again.nodes, strict=True):
        if dict(n.types) != dict(m.types) or n.params != m.params:
            msg = (f"node '{n.id}' ({n.kind}) has types {dict(n.types)} after fusion but "
                   f"{dict(m.types)} when inferred again")
            raise LoweringError(msg, n.loc)


#: The pass form of :func:`fuse_attention`.
FUSE_ATTENTION = Pass("fuse_attention", fuse_attention, infers_again).register()
