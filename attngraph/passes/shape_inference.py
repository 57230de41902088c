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
    types = rule.shape(ctx)
    return replace(node, types=types, params=ctx.params, body=ctx.body_graph)


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


def _all_typed(graph: Graph) -> None:
    """Every node, in every body, has its types."""
    for _, n in graph.walk():
        if not n.types:
            msg = f"node '{n.id}' has no types after shape inference"
            raise ShapeError(msg, n.loc)


#: The pass form of :func:`infer_shapes`.
SHAPE_INFERENCE = Pass("infer_shapes", infer_shapes, _all_typed).register()
