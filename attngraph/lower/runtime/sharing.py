"""Parameters one node's module takes from another's: ``share`` (the owner's module
itself) and a linear's ``tie`` (a lookup table as its weight), with the owners listed
first so that the state dict names them."""

from __future__ import annotations

from typing import Any

from torch import nn

from attngraph.errors import LoweringError
from attngraph.ir.graph import Graph, Node
from attngraph.kinds.base import traits_of
from attngraph.lower.runtime.names import NodeDict, module_key

__all__: list[str] = []


def _share_parameters(graph: Graph, mods: NodeDict) -> None:
    """Nodes with ``share`` run their owner's module (one set of parameters, listed once
    by ``parameters()``); a linear with ``tie`` takes an embedding's table as its weight."""
    for node in graph.nodes:
        target = getattr(node.spec, "share", None) if node.spec is not None else None
        if isinstance(target, str):  # (a repeat's share is a flag of its own)
            mine = [tuple(p.shape) for p in mods[node.id].parameters()]
            theirs = [tuple(p.shape) for p in mods[target].parameters()]
            if mine != theirs:  # the shape rule compares counts; this, the shapes
                msg = (f"node '{node.id}': share: its parameters {mine} are not those of "
                       f"'{target}' {theirs}")
                raise LoweringError(msg, node.where("share"),
                                    "share between nodes of one kind with the same sizes")
            mods[node.id] = mods[target]
        tie = getattr(node.spec, "tie", None) if node.spec is not None else None
        if tie is not None:
            mods[node.id].weight = _table(graph.node(tie), mods[tie])
    _owners_first(graph, mods)


def _table(node: Node[Any], owner: nn.Module) -> nn.Parameter:
    """The lookup table ``[vocab, d]`` of ``node`` (its kind's ``table`` trait) among the
    parameters of its module ``owner``: the first of that shape (an embedding's
    ``weight``; the ``embed`` table of items, made before their projection)."""
    rule = traits_of(node).table
    shape = rule(node) if rule is not None else None
    for p in owner.parameters():
        if shape is not None and tuple(p.shape) == shape:
            return p
    msg = f"node '{node.id}': its module holds no lookup table {shape or '[vocab, d]'} to tie to"
    raise LoweringError(msg, node.loc, "tie a linear to an embedding, or to items with embed")


def _owners_first(graph: Graph, mods: NodeDict) -> None:
    """Register each owner of parameters before the nodes that use them (``share``,
    ``tie``): torch lists a shared parameter once, under the first module path that
    holds it, so ``named_parameters()`` and the state dict name the owner."""
    order: dict[str, None] = {}

    def place(nid: str, seen: frozenset[str]) -> None:
        if nid in order or nid in seen or nid not in mods:
            return
        spec = graph.node(nid).spec
        for target in (getattr(spec, "share", None), getattr(spec, "tie", None)):
            if isinstance(target, str):  # (a repeat's share is a flag of its own)
                place(target, seen | {nid})
        order[nid] = None

    for nid in mods.keys():
        place(nid, frozenset())
    placed = {module_key(nid): mods._modules[module_key(nid)] for nid in order}
    mods._modules.clear()
    mods._modules.update(placed)
