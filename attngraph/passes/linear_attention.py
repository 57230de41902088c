"""Pass: kernel attention written per item becomes linear-time attention.

A spec states linear attention (Katharopoulos et al. 2020) as the paper writes it,
per pair of items::

    fq: {kind: feature_map, from: q}            # φ(q)
    fk: {kind: feature_map, from: k}            # φ(k)
    s:  {kind: scorer, fn: dot, query: fq, key: fk}
    p:  {kind: softmax, scores: s, fn: sum}     # p_ij = s_ij / Σ_j s_ij
    z:  {kind: readout, weights: p, values: v}

which, lowered as written, forms the N×N scores. The pattern reads traits, not
names: a ``dot_product`` scorer function (``dot``, ``scaled_dot``: the constant
factor cancels in the ratio) of two ``positive`` feature maps, and a ``kernel``
normaliser (``sum``). When nothing else reads ``s`` or ``p``, this pass replaces the
chain by one ``linear_attention`` node that computes ``φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) /
φ(q_i)ᵀ Σ_j φ(k_j)`` with sums over the items (running sums when causal): O(N·d²)
time and no N×N tensor. The two forms are equal (a test
checks it); ``attngraph compile --print-after linear_attention`` shows the
rewritten graph.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds.activations import FEATURE_MAPS
from attngraph.kinds.attention import LinearAttentionSpec
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.kinds.scorers import SCORERS
from attngraph.passes.base import Pass
from attngraph.passes.fuse_attention import Link, infers_again, match_chain, plain_readout

__all__ = ["LINEAR_ATTENTION", "linear_attention"]


def _kernel_scorer(n: Node[Any]) -> bool:
    """A dot-product scorer function, of every query with every key."""
    s = n.spec
    info = named(s, SCORERS)
    return (info is not None and info.dot_product and s.pairs == "all"
            and n.edge("query") is not None)


def _sum(n: Node[Any]) -> bool:
    """A kernel normaliser over the items, with no mask but a causal one."""
    s = n.spec
    info = named(s, NORMALISERS)
    m = s.mask
    plain = m is None or (m.window is None and m.adjacency is None)
    return info is not None and info.kernel and s.axis == "items" and plain


#: φ(q)·φ(k) scorer -> kernel normaliser (causal or no mask) -> plain readout
KERNEL = (
    Link("scorer", where=_kernel_scorer),
    Link("softmax", via="scores", where=_sum),
    Link("readout", via="weights", where=plain_readout),
)


def _positive(graph: Graph, score: Node[Any]) -> bool:
    """The scorer's query and key are positive feature maps φ(q), φ(k)."""
    for role in ("query", "key"):
        e = score.edge(role)
        src = graph.node(e.src) if e is not None and e.src in graph else None
        phi = named(src.spec, FEATURE_MAPS) if src is not None else None
        if phi is None or not phi.positive:
            return False
    return True


def _aligned(graph: Graph, score: Node[Any], soft: Node[Any]) -> bool:
    """A causal chain needs query i to be item i: one length for queries and keys."""
    if not (soft.spec.mask and soft.spec.mask.causal):
        return True
    eq, ek = score.edge("query"), score.edge("key")
    if eq is None or ek is None:
        return False
    q, k = graph.node(eq.src).types[eq.port], graph.node(ek.src).types[ek.port]
    return q.rank == 2 and q.dims[0] == k.dims[0]


def _fuse(score: Node[Any], soft: Node[Any], read: Node[Any]) -> Node[Any]:
    ins: list[Edge] = [e for e in score.inputs if e.role.field in ("query", "key")]
    ins += [e for e in read.inputs if e.role.field == "values"]
    r = read.spec
    spec = LinearAttentionSpec(
        fused=f"{score.id}+{soft.id}+{read.id}", mask=soft.spec.mask, combine=r.combine,
        out=int(r.out) if r.out is not None else None, bias=r.bias, label=r.label,
    )
    return replace(read, spec=spec, inputs=tuple(ins), params=score.params + read.params)


def linear_attention(graph: Graph) -> Graph:
    """Replace every unobserved kernel attention chain by one ``linear_attention`` node."""
    nodes = list(graph.nodes)
    changed = False
    for i, n in enumerate(nodes):
        if n.body is not None:
            body = linear_attention(n.body)
            if body is not n.body:
                nodes[i] = replace(n, body=body)
                changed = True
    if changed:
        graph = graph.replace_nodes(nodes)
    matches = [m for m in match_chain(graph, KERNEL)
               if _positive(graph, m[0]) and _aligned(graph, m[0], m[1])]
    if not matches:
        return graph
    drop = {m.id for match in matches for m in match[:-1]}
    fused = {match[-1].id: _fuse(*match) for match in matches}
    return graph.replace_nodes([fused.get(n.id, n) for n in graph.nodes if n.id not in drop])


#: The pass form of :func:`linear_attention`.
LINEAR_ATTENTION = Pass("linear_attention", linear_attention, infers_again,
                        resizes=True).register()
