"""``infer_shapes(graph) -> Graph``: symbolic shape inference, an ordinary pass.

Each kind's shape rule (:class:`~attngraph.kinds.base.Kind`) sees a
:class:`~attngraph.kinds.base.RuleCtx` with the types of its inputs and returns
the types of its output ports; it may add to the node's parameter count. A rule
that finds a mismatch raises a located :class:`~attngraph.errors.ShapeError`;
inference goes on with the nodes that do not depend on the failed one, and all
problems are raised together. Inference is idempotent: a graph a later pass
rewrote (a fused attention node) is inferred again the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from attngraph.errors import AttnGraphError, Diagnostic, ShapeError, did_you_mean
from attngraph.ir.graph import Graph, Node
from attngraph.kinds import KINDS, RuleCtx
from attngraph.kinds.base import traits_of
from attngraph.kinds.hooks import call_hook, count, hook_name, port_types
from attngraph.passes.base import Pass

__all__ = ["infer_shapes", "SHAPE_INFERENCE"]


def _infer_node(node: Node[Any], graph: Graph, done: dict[str, Node[Any]],
                ids: Mapping[str, int]) -> Node[Any]:
    if node.is_input and node.types:
        return node
    rule = KINDS.get(node.kind)
    if rule is None:
        msg = f"node '{node.id}': no shape rule for kind '{node.kind}'"
        raise ShapeError(msg, node.loc, did_you_mean(node.kind, KINDS))
    ctx = RuleCtx(node, graph, done, infer_shapes, ids)
    what = f"the shape rule of kind '{node.kind}'"
    types = call_hook(rule.shape, ctx, node=node, what=what, error=ShapeError,
                      expect=port_types)
    if count(ctx.params) is not None or not isinstance(ctx.body_graph, (Graph, type(None))):
        where = hook_name(rule.shape)
        msg = (f"node '{node.id}': {what} set ctx.params to {ctx.params!r}"
               if count(ctx.params) else f"node '{node.id}': {what} set ctx.body_graph to "
               f"a {type(ctx.body_graph).__name__}, not a Graph") + f" (in {where})"
        raise ShapeError(msg, node.loc, f"add whole numbers >= 0 to ctx.params in {where}")
    return replace(node, types=dict(types), params=ctx.params, body=ctx.body_graph)


def infer_shapes(graph: Graph, *, ids: Mapping[str, int] | None = None) -> Graph:
    """Give every node its port types and parameter count.

    Parameters
    ----------
    graph : Graph
        A verified graph (see :func:`attngraph.ir.verify.verify`).
    ids : mapping, optional
        For a block body: how many token ids each input bound to ids may take
        (an embedding in the body checks its table against it).

    Returns
    -------
    Graph
        The same graph with ``types``, ``params`` and instantiated ``body`` set.

    Raises
    ------
    ShapeError
        One diagnostic per node whose shapes do not fit (nodes downstream of a
        failed node are skipped, not reported again).
    """
    done: dict[str, Node[Any]] = {}
    failed: set[str] = set()
    diags: list[Diagnostic] = []
    for node in graph.order():
        if any(e.src in failed for e in node.inputs):
            failed.add(node.id)
            continue
        try:
            done[node.id] = _infer_node(node, graph, done, ids or {})
        except AttnGraphError as exc:
            diags.extend(exc.diagnostics)
            failed.add(node.id)
    _sharing(graph, done, diags)
    for name, e in graph.outputs:
        if e.src in done and e.port not in done[e.src].types:
            ports = sorted(p for p in done[e.src].types if p)
            diags.append(Diagnostic(
                e.loc, f"output '{name or 'output'}': '{e.src}' has no port '{e.port}'",
                did_you_mean(e.port, ports) if ports
                else f"'{e.src}' has one output: write '{e.src}' without a port",
            ))
    if diags:
        raise ShapeError(diags[0].message, diagnostics=diags)
    return graph.replace_nodes([done[n.id] for n in graph.nodes])


def _sharing(graph: Graph, done: dict[str, Node[Any]], diags: list[Diagnostic]) -> None:
    """Check ``share`` (same kind, same parameters) and a linear's ``tie`` (an embedding
    table of its shape); the parameters they reuse are counted once, at their owner."""
    for nid, n in list(done.items()):
        if n.spec is None or n.is_input:
            continue
        target = getattr(n.spec, "share", None)
        if isinstance(target, str):  # (a repeat's share is a flag of its own)
            problem = _share_problem(n, target, graph, done)
            if problem:
                diags.append(Diagnostic(n.where("share"), f"node '{nid}': {problem[0]}",
                                        problem[1]))
            else:
                done[nid] = replace(n, params=0)
        tie = getattr(n.spec, "tie", None)
        if tie is not None:
            problem = _tie_problem(n, tie, graph, done)
            if problem:
                diags.append(Diagnostic(n.where("tie"), f"node '{nid}': {problem[0]}",
                                        problem[1]))
            else:
                vocab, d = _table_shape(done[tie]) or (0, 0)
                done[nid] = replace(done[nid], params=done[nid].params - vocab * d)


def _share_problem(n: Node[Any], target: str, graph: Graph,
                   done: dict[str, Node[Any]]) -> tuple[str, str] | None:
    """Why ``n`` cannot use the parameters of ``target``, or None."""
    if target not in graph or graph.node(target).is_input:
        return (f"share names '{target}', which is not a node here",
                did_you_mean(target, [m.id for m in graph.nodes if not m.is_input
                                      and m.id != n.id]))
    if target == n.id:
        return ("a node cannot share its own parameters", "name another node of its kind")
    if target not in done:
        return (f"share names '{target}', whose shapes did not check", "fix that node first")
    t = done[target]
    if t.kind != n.kind or getattr(t.spec, "block", None) != getattr(n.spec, "block", None):
        block = getattr(t.spec, "block", None)
        what = f"{t.kind} '{target}'" + (f" (block {block})" if block is not None else "")
        return (f"share: {n.kind} '{n.id}' cannot use the parameters of {what}",
                "share parameters between nodes of one kind (and one block)")
    if isinstance(getattr(t.spec, "share", None), str):
        return (f"share names '{target}', which shares those of '{t.spec.share}'",
                f"name the owner: share: {t.spec.share}")
    if not t.params or t.params != n.params:
        return (f"share: '{n.id}' would have {n.params:,} parameters of its own, '{target}' "
                f"has {t.params:,}", "share between nodes whose parameters have one shape "
                "(the same sizes and input sizes)")
    return None


def _table_shape(t: Node[Any]) -> tuple[int, int] | None:
    """``(vocab, d)`` of the lookup table ``t`` holds (its kind's ``table`` trait: an
    embedding, items with ``embed``), or None."""
    rule = traits_of(t).table
    return rule(t) if rule is not None else None


def _tie_problem(n: Node[Any], target: str, graph: Graph,
                 done: dict[str, Node[Any]]) -> tuple[str, str] | None:
    """Why linear ``n`` cannot take the table of ``target`` as its weight, or None."""
    t = done.get(target)
    shape = _table_shape(t) if t is not None else None
    if shape is None:
        return (f"tie names '{target}', which is not an embedding or items with embed",
                did_you_mean(target, [m.id for m in done.values()
                                      if traits_of(m).table is not None]) if done else "")
    vocab, dim = shape
    e = n.edge("from")
    d_in = done[e.src].types[e.port].dims[-1] if e is not None and e.src in done else None
    if (int(n.spec.out), d_in) != (vocab, dim):
        return (f"tie: the table of '{target}' is [{vocab}, {dim}], but this layer maps "
                f"{d_in} features to {n.spec.out}", f"give it out: {vocab} and input "
                f"features of size {dim}")
    return None


def _all_typed(graph: Graph) -> None:
    """Every node, in every body, has its types."""
    for _, n in graph.walk():
        if not n.types:
            msg = f"node '{n.id}' has no types after shape inference"
            raise ShapeError(msg, n.loc)


#: The pass form of :func:`infer_shapes`.
SHAPE_INFERENCE = Pass("infer_shapes", infer_shapes, _all_typed).register()
