"""The schedule a lowered graph walks: its steps (:class:`Step`), the order the nodes are
lowered in, the values each step reads for the last time, and the checks of one step's
run (a plugin's output, the hooks that make a node's call take the slow path)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.nn.modules import module as _torch_module

from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds.base import traits_of

__all__ = ["Step", "StepInput", "last_uses"]


class StepInput(NamedTuple):
    """One input of a scheduled node: the role it fills, the value it reads
    (``id`` or ``id.port``), and whether the gradient stops there."""

    role: str
    key: str
    detach: bool


class Step(NamedTuple):
    """One scheduled node: its id, its kind, its inputs, and its module's key in
    :class:`~attngraph.lower.runtime.names.NodeDict`."""

    node: str
    kind: str
    inputs: tuple[StepInput, ...]
    key: str


def _port(e: Edge, graph: Graph) -> str:
    """The port an edge reads; ``adjacency: g`` names a graph input's adjacency."""
    if e.role.field == "mask" and not e.port and "adjacency" in graph.node(e.src).types:
        return "adjacency"
    return e.port


def _key(src: str, port: str) -> str:
    return f"{src}.{port}" if port else src


def last_uses(schedule: list[Step], keep: set[str]) -> tuple[tuple[str, ...], ...]:
    """For each node of ``schedule``, the values it reads for the last time (none of
    ``keep``, which are read after the schedule): what :meth:`GraphModule._exec` may
    forget after running it."""
    last: dict[str, int] = {}
    for i, st in enumerate(schedule):
        for inp in st.inputs:
            last[inp.key] = i
    made = {st.node for st in schedule}
    out: list[list[str]] = [[] for _ in schedule]
    for k, i in last.items():
        if k not in keep and k.split(".")[0] in made:
            out[i].append(k)
    return tuple(tuple(d) for d in out)


def _no_global_hooks() -> bool:
    """No module hook is registered for every module, and no ``jit.trace`` is running
    (both go through ``Module.__call__``)."""
    return not (_torch_module._global_forward_hooks or _torch_module._global_forward_pre_hooks
                or _torch_module._global_backward_hooks
                or _torch_module._global_backward_pre_hooks or torch._C._get_tracing_state())


def _lowering_order(graph: Graph) -> list[Node[Any]]:
    """``graph.order()`` as it was before the hoisting pass added ``prepare`` nodes (the
    nodes whose kind does a ``part`` of another's work): each one comes just before the
    node whose part it is. Parameters are made in this order, so a seed gives the same
    weights with and without the pass."""
    prepared = {n.id: n for n in graph.nodes if traits_of(n).part}
    if not prepared:
        return graph.order()

    def through(e: Edge) -> Edge:
        return prepared[e.src].inputs[0] if e.src in prepared else e

    bare = graph.replace_nodes([replace(n, inputs=tuple(through(e) for e in n.inputs))
                                for n in graph.nodes if n.id not in prepared])
    before: dict[str, list[Node[Any]]] = {}
    for p in prepared.values():
        before.setdefault(p.spec.of, []).append(p)
    return [m for n in bare.order() for m in (*before.get(n.id, ()), graph.node(n.id))]


def _plugin_output(out: Any, ports: frozenset[str]) -> str | None:
    """What is wrong with the output of a plugin's module for a node of ``ports``
    (``""`` the default one): a tensor for a node of one port, else a dict of exactly
    its ports' tensors; None when it is right."""
    if isinstance(out, Tensor) and ports == frozenset({""}):
        return None
    if (isinstance(out, dict) and set(out) == ports
            and all(isinstance(v, Tensor) for v in out.values())):
        return None
    want = ("a tensor" if ports == frozenset({""}) else
            "a dict of tensors for the ports " + ", ".join(repr(p) for p in sorted(ports)))
    got = (f"a dict with keys {sorted(map(str, out))}" if isinstance(out, dict)
           else type(out).__name__)
    return f"forward returned {got}, not {want}"
