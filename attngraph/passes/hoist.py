"""Pass: a loop's steps do only the work that has to be done step by step.

A loop's ``inputs`` reach every step unchanged; its carries and feeds change. The
pass sorts the nodes of a loop's body by when they need to run (``Node.runs``):

- ``once``: a node whose inputs are all unchanging values (the loop's inputs, or
  nodes computed from them alone) gives the same result at every step, when its
  kind is pure (no sampling, nothing but its outputs:
  :attr:`~attngraph.kinds.base.Kind.pure`). It runs once per call, before the
  steps: a hand-written decoder projects the encoder's states once, not once per
  target word.
- a node that reads a changing value may still have a part that reads an
  unchanging one alone: an additive score vᵀ tanh(W s_t + U h_j) maps every key
  h_j by U whatever the query. A kind says so with its ``hoist`` rule; the pass then
  adds a ``once`` node of kind ``prepare`` (id ``<node>:<role>``) that computes
  that part with the node's own parameters, and the node reads the prepared value.
- ``before``: a pure node that reads only what the loop feeds it (and other
  ``before`` nodes), not its carried state, can run on every step's feed at once
  before the steps when the feeds are known in advance: a feed read from an input,
  or one with ``feedback`` under teacher forcing (the embedding of the previous
  target word). While a feedback is read, what depends on it runs at each step.
- ``after``: a pure node on which no carried state depends (the output layer of a
  decoder, its logits) need not run inside the steps: it runs once after them, on
  the values of every step together (a batch of B·T rows), which is one large
  matrix product in place of T small ones. It reads only values made at each step
  (step nodes, carries, feeds) or other ``after`` nodes, and only ``after`` nodes
  read it. When a ``feedback`` feeds a node's output to the next step (greedy
  decoding), the loop runs that node and what it needs at each step; with teacher
  forcing nothing reads it during the steps, and it runs after them.
- ``step``: everything else.

Parameters stay where they were (``nodes.dec.nodes.score.U``), so state dicts do
not depend on the pass. ``attngraph compile --print-after hoist_invariants`` shows
the result (``once`` and ``after`` at the end of a node's line); a test checks that
each catalog model equals the one compiled without the pass.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from attngraph.errors import LoweringError
from attngraph.ir.graph import Edge, Graph, Node, Role, TensorType
from attngraph.kinds import KINDS
from attngraph.kinds.base import traits_of
from attngraph.kinds.hooks import call_hook
from attngraph.kinds.scorers import PrepareSpec
from attngraph.passes.base import Pass

__all__ = ["HOIST_INVARIANTS", "hoist_invariants", "pure", "recurrent"]


def pure(node: Node[Any]) -> bool:
    """Whether the node, and every node of its body, is of a pure kind."""
    if node.is_input:
        return True
    if node.kind not in KINDS:
        return False
    trait = KINDS[node.kind].pure
    if callable(trait):
        trait = call_hook(trait, node, node=node, error=LoweringError,
                          what=f"the purity rule (pure=) of kind '{node.kind}'",
                          expect=lambda v: None if isinstance(v, bool) else "True or False")
    if not trait:
        return False
    return node.body is None or all(pure(m) for m in node.body.nodes)


def _split(value: Any) -> str | None:
    """What a hoisting rule returns: None, or (an input role, the prepared value's type)."""
    ok = value is None or (isinstance(value, tuple) and len(value) == 2
                           and isinstance(value[0], str) and isinstance(value[1], TensorType))
    return None if ok else "None or a tuple (role, TensorType)"


def ancestors(body: Graph, ids: set[str]) -> set[str]:
    """``ids`` and every node of ``body`` they read, directly or not."""
    seen: set[str] = set()
    todo = [i for i in ids if i in body]
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        todo += [e.src for e in body.node(nid).inputs if e.src in body]
    return seen


def recurrent(loop: Node[Any], body: Graph) -> set[str]:
    """The body's nodes that a carried state depends on (the recurrence)."""
    outs = dict(body.outputs)
    nexts = {outs[c.next].src for c in loop.spec.carry.values() if c.next in outs}
    return ancestors(body, nexts)


def _once(body: Graph, fixed: set[str]) -> Graph:
    """Mark the nodes of ``body`` that depend only on the inputs ``fixed``; add the
    prepared parts of the others."""
    same = {n.id for n in body.nodes if n.is_input and n.id in fixed}
    ids = {n.id for n in body.nodes}
    out: dict[str, list[Node[Any]]] = {n.id: [n] for n in body.nodes}
    changed = False
    for n in body.order():
        if n.is_input:
            continue
        if pure(n) and all(e.src in same for e in n.inputs):
            same.add(n.id)
            out[n.id] = [replace(n, runs="once")]
            changed = True
            continue
        rule = KINDS[n.kind].hoist if n.kind in KINDS else None
        split = call_hook(rule, n, body, node=n, error=LoweringError, expect=_split,
                          what=f"the hoisting rule (hoist=) of kind '{n.kind}'") \
            if rule is not None and pure(n) else None
        if split is None:
            continue
        role, typ = split
        e = n.edge(role)
        pid = f"{n.id}:{role}"
        if e is None or e.src not in same or pid in ids:
            continue
        spec = PrepareSpec(kind="prepare", of=n.id, role=role, **{"from": e.ref},
                           dim=int(typ.dims[-1]), heads=typ.heads)
        prep = Node(pid, spec, (Edge(Role("from"), e.src, e.port, e.detach, e.loc),),
                    n.loc, types={"": typ}, runs="once")
        moved = tuple(Edge(x.role, pid, "", False, x.loc) if x is e else x for x in n.inputs)
        out[n.id] = [prep, replace(n, inputs=moved)]
        changed = True
    if not changed:
        return body
    return body.replace_nodes([m for n in body.nodes for m in out[n.id]])


def _before(loop: Node[Any], body: Graph) -> Graph:
    """Mark the nodes that read only the loop's feeds (and each other)."""
    known = {n.id for n in body.nodes if n.is_input and n.id in loop.spec.feed}
    before: set[str] = set()
    for n in body.order():
        if n.is_input or n.runs != "step" or not pure(n) or not n.inputs:
            continue
        if all(e.src in known or e.src in before for e in n.inputs):
            before.add(n.id)
    if not before:
        return body
    return body.replace_nodes([replace(n, runs="before") if n.id in before else n
                               for n in body.nodes])


def _after(loop: Node[Any], body: Graph) -> Graph:
    """Mark the nodes no carry depends on that can run after the steps."""
    rec = recurrent(loop, body)
    fixed = {n.id for n in body.nodes if (n.is_input and n.id in loop.spec.inputs)
             or n.runs == "once"}
    readers: dict[str, set[str]] = {n.id: set() for n in body.nodes}
    for n in body.nodes:
        for e in n.inputs:
            readers[e.src].add(n.id)
    after: set[str] = set()
    for n in reversed(body.order()):
        if n.is_input or n.id in rec or n.runs != "step" or not pure(n):
            continue
        if any(e.src in fixed for e in n.inputs) or not readers[n.id] <= after:
            continue
        after.add(n.id)
    if not after:
        return body
    return body.replace_nodes([replace(n, runs="after") if n.id in after else n
                               for n in body.nodes])


def hoist_invariants(graph: Graph) -> Graph:
    """Sort the nodes of every loop body in ``graph`` by when they run (bodies first).

    Parameters
    ----------
    graph : Graph
        An inferred graph.

    Returns
    -------
    Graph
        The rewritten graph (the same object when nothing changed).
    """
    nodes = list(graph.nodes)
    changed = False
    for i, n in enumerate(nodes):
        if n.body is None:
            continue
        body = hoist_invariants(n.body)
        if traits_of(n).body == "steps":  # a body run once a step: a loop
            body = _after(n, _before(n, _once(body, set(n.spec.inputs))))
        if body is not n.body:
            nodes[i] = replace(n, body=body)
            changed = True
    return graph.replace_nodes(nodes) if changed else graph


def _check(graph: Graph) -> None:
    """``once`` nodes read only the loop's inputs and other ``once`` nodes, ``before``
    nodes only its feeds and other ``before`` nodes; ``after`` nodes are off the
    recurrence and only ``after`` nodes read them."""
    for n in graph.nodes:
        if n.body is None:
            continue
        _check(n.body)
        marked = [m for m in n.body.nodes if m.runs != "step"]
        if not marked:
            continue
        if traits_of(n).body != "steps":
            msg = f"node '{marked[0].id}' of '{n.id}' ({n.kind}) runs {marked[0].runs}"
            raise LoweringError(msg, marked[0].loc, "only a loop's body has stages")
        fixed = set(n.spec.inputs) | {m.id for m in n.body.nodes if m.runs == "once"}
        fed = set(n.spec.feed) | {m.id for m in n.body.nodes if m.runs == "before"}
        rec = recurrent(n, n.body)
        for m in marked:
            if m.runs in ("once", "before"):
                allowed = fixed if m.runs == "once" else fed
                bad = [e.ref for e in m.inputs if e.src not in allowed]
                if bad:
                    what = "the loop's inputs" if m.runs == "once" else "its feeds"
                    msg = (f"node '{m.id}' runs {m.runs} the steps of '{n.id}' but reads "
                           f"{', '.join(bad)}, which is not one of {what}")
                    raise LoweringError(msg, m.loc)
            elif m.id in rec or any(r.runs != "after" for r in n.body.nodes
                                    if any(e.src == m.id for e in r.inputs)):
                msg = f"node '{m.id}' runs after the steps of '{n.id}' but a step needs it"
                raise LoweringError(msg, m.loc)


#: The pass form of :func:`hoist_invariants`.
HOIST_INVARIANTS = Pass("hoist_invariants", hoist_invariants, _check).register()
