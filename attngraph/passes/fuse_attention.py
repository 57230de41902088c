"""Fusion pass: scaled-dot scorer -> softmax -> readout becomes one ``attention`` node.

The pattern is data (:data:`ATTENTION`): a chain of kinds, each link read through
one field of the next node, with a predicate per node. A chain matches when
every intermediate value (the scores, the weights) is used by the next link only
and is not a declared output. The fused node keeps the readout's id, reads the
scorer's ``query``/``key``, the readout's ``values`` and the softmax's adjacency
mask, and is lowered to one ``torch.nn.functional.scaled_dot_product_attention``
call. The pass recurses into block, repeat and loop bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import BaseModel, ConfigDict

from attngraph.ir.graph import Edge, Graph, Node
from attngraph.spec.models import MaskSpec

__all__ = ["Link", "ATTENTION", "FusedAttentionSpec", "fuse_attention", "match_chain"]


@dataclass(frozen=True)
class Link:
    """One node of a chain pattern: its kind, a predicate, and the field that reads
    the previous link (``None`` for the first)."""

    kind: str
    via: str | None = None
    where: Callable[[Node], bool] = lambda n: True


def _scaled_dot(n: Node) -> bool:
    s = n.spec
    learned = getattr(s.query, "learned", None)
    has_query = n.edge("query") is not None
    return s.fn == "scaled_dot" and s.pairs == "all" and learned is None and has_query


#: scaled-dot scorer -> softmax (not sparsemax) -> readout
ATTENTION = (
    Link("scorer", where=_scaled_dot),
    Link("softmax", via="scores", where=lambda n: n.spec.fn == "softmax"),
    Link("readout", via="weights"),
)


class FusedAttentionSpec(BaseModel):
    """Spec of a fused attention node: what the three fused nodes specified."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["attention"] = "attention"
    fused: str
    mask: MaskSpec | None = None
    temperature: float = 1.0
    combine: Literal["concat", "mean"] = "concat"
    out: int | None = None
    bias: bool = True
    label: str | None = None


def _uses(graph: Graph) -> dict[str, int]:
    """How many edges (and outputs) read each node."""
    count: dict[str, int] = {}
    for n in graph.nodes:
        for e in n.inputs:
            count[e.src] = count.get(e.src, 0) + 1
    for _, e in graph.outputs:
        count[e.src] = count.get(e.src, 0) + 1
    return count


def match_chain(graph: Graph, chain: tuple[Link, ...]) -> list[list[Node]]:
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


def _fuse(score: Node, soft: Node, read: Node) -> Node:
    """The fused node replacing one match."""
    ins: list[Edge] = [e for e in score.inputs if e.role in ("query", "key")]
    ins += [e for e in read.inputs if e.role == "values"]
    ins += [e for e in soft.inputs if e.role == "mask.adjacency"]
    r = read.spec
    spec = FusedAttentionSpec(
        fused=f"{score.id}+{soft.id}+{read.id}", mask=soft.spec.mask,
        temperature=soft.spec.temperature, combine=r.combine,
        out=int(r.out) if r.out is not None else None, bias=r.bias, label=r.label,
    )
    return replace(read, kind="attention", spec=spec, inputs=tuple(ins),
                   params=score.params + read.params)


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
