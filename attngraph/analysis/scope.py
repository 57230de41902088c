"""Where a value comes from: trace a node's inputs back through projections and
across block, repeat and loop boundaries to the nodes that *originate* it.

A body (block/repeat/loop) is read inside a :class:`Scope` that knows the node
owning it, so a body input such as a loop's ``h`` resolves to the outer node it
is bound to (``inputs: {h: enc}``). A loop's carried state stops the trace: it
is "the previous step's" value, which is what tells a Bahdanau decoder (query
from the previous state) from a Luong one (query from the current state).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds import KINDS, SCORERS
from attngraph.kinds.base import BodyRun, traits_of
from attngraph.kinds.choices import named

__all__ = ["Scope", "Origin", "origins", "qid", "Scoring", "scoring", "role"]



def role(n: Node[Any]) -> str:
    """The role of a node's kind in a mechanism (``scorer``, ``weights``, ``readout``...)."""
    return "input" if n.is_input else KINDS[n.kind].role


@dataclass(frozen=True)
class Scoring:
    """What a scoring node computes: its function's name, formula, and whether the
    scores depend on the keys' content (not on positions only)."""

    fn: str
    formula: str
    content: bool


def scoring(n: Node[Any]) -> Scoring:
    """The :class:`Scoring` of a node of role ``scorer``: a ``scorer`` node's function
    (:data:`attngraph.kinds.SCORERS`), or a user's scoring kind (its name and doc)."""
    info = named(n.spec, SCORERS)
    if info is not None:
        return Scoring(info.name, info.formula, info.content)
    return Scoring(n.kind, KINDS[n.kind].doc or n.kind, True)


@dataclass(frozen=True)
class Scope:
    """A graph being read, with the chain of body-owning nodes around it."""

    graph: Graph
    path: tuple[str, ...] = ()
    parent: Scope | None = None
    owner: Node | None = None

    def child(self, node: Node) -> Scope:
        """The scope of ``node``'s body."""
        assert node.body is not None  # only called for nodes with bodies
        return Scope(node.body, (*self.path, node.id), self, node)

    def enclosing(self, body: BodyRun) -> list[tuple[str, Node]]:
        """Enclosing body owners that run their body as ``body`` says (``steps``: the
        loops), with their qualified ids, innermost first."""
        out: list[tuple[str, Node]] = []
        s: Scope | None = self
        while s is not None and s.owner is not None and s.parent is not None:
            if traits_of(s.owner).body == body:
                out.append((qid(s.parent, s.owner.id), s.owner))
            s = s.parent
        return out


def qid(scope: Scope, nid: str) -> str:
    """A node id qualified by its enclosing body nodes: ``dec/score``."""
    return "/".join((*scope.path, nid))


@dataclass(frozen=True)
class Origin:
    """A node that originates a value: its qualified id, a kind tag and a phrase.

    ``kind`` is the node's kind, or ``carry`` (a loop's carried state: the
    previous step's value), ``learned`` (a learned query vector), or ``input``.
    """

    qid: str
    kind: str
    text: str
    bidirectional: bool | None = None
    step: str | None = None
    port: str = ""


def _rnn_text(n: Node, port: str, scope: Scope, current: bool) -> str:
    s = n.spec
    cell, both = getattr(s, "cell", n.kind), bool(getattr(s, "bidirectional", False))
    what = f"{cell}, {'bidirectional' if both else 'unidirectional'}"
    if current:
        return f"rnn '{n.id}' ({cell} step): the state of the current step"
    return f"rnn '{n.id}'{' state' if port == 'state' else ''} ({what})"


def _outer_edges(scope: Scope, name: str) -> tuple[list[Edge], bool]:
    """Edges of the owning node that bind body input ``name``; True if it is carried."""
    owner = scope.owner
    if owner is None:
        return [], False
    runs = traits_of(owner).body
    if runs == "steps":
        if name in owner.spec.carry:
            return [], True
        es = [e for e in owner.inputs if e.role.field in ("inputs", "feed") and e.role.key == name]
        return es, False
    if runs == "rounds":
        return owner.edges("from"), False
    es = [e for e in owner.edges("from") if e.role.key in (None, name)]
    return es, False


def origins(
    scope: Scope, edge: Edge | None, _seen: frozenset[str] = frozenset()
) -> list[Origin]:
    """The nodes that originate the value on ``edge``, in first-seen order.

    Parameters
    ----------
    scope : Scope
        The graph ``edge`` belongs to.
    edge : Edge
        An input edge of a node of ``scope.graph``.

    Returns
    -------
    list of Origin
        Sources reached through kinds marked ``transparent`` (they reshape or mix
        what flows through them without making a new source: projections,
        linear layers, norms, sums) and across body boundaries; deduplicated by
        qualified id.
    """
    if edge is None:
        return []
    key = qid(scope, edge.ref)
    if key in _seen or edge.src not in scope.graph:
        return []
    seen = _seen | {key}
    n = scope.graph.node(edge.src)
    out: list[Origin] = []
    if n.is_input and scope.owner is not None:
        outer, carried = _outer_edges(scope, n.id)
        if carried:
            nxt = scope.owner.spec.carry[n.id].next
            return [Origin(qid(scope, n.id), "carry",
                           f"'{n.id}', the state carried from the previous step "
                           f"(body output '{nxt}' of loop '{scope.owner.id}')", step="previous")]
        assert scope.parent is not None
        for e in outer:
            out.extend(origins(scope.parent, e, seen))
        return _dedup(out)
    if n.is_input:
        typ = n.spec.type if n.spec is not None else "input"
        return [Origin(qid(scope, n.id), "input", f"input '{n.id}' ({typ})")]
    if KINDS[n.kind].transparent:
        if getattr(n.spec, "learned", None) is not None:
            return [Origin(qid(scope, n.id), "learned",
                           f"{n.spec.learned} learned query vector(s) '{n.id}'")]
        for e in n.inputs:
            out.extend(origins(scope, e, seen))
        phrase = traits_of(n).phrase
        if phrase is not None:  # a layer of its own: say it, keep where it comes from
            out = [replace(o, text=f"{phrase} '{n.id}' of {o.text}") for o in out]
        return _dedup(out)
    if role(n) == "recurrent":
        current = bool(scope.enclosing("steps")) and n.type("").rank == 1
        return [Origin(qid(scope, n.id), n.kind, _rnn_text(n, edge.port, scope, current),
                       bidirectional=bool(getattr(n.spec, "bidirectional", False)),
                       step="current" if current else None, port=edge.port)]
    return [Origin(qid(scope, n.id), n.kind, f"{n.kind} '{n.id}'")]


def _dedup(xs: list[Origin]) -> list[Origin]:
    seen: set[str] = set()
    out = []
    for o in xs:
        if o.qid not in seen:
            seen.add(o.qid)
            out.append(o)
    return out
