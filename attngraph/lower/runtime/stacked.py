"""Stacked projections: the nodes that read one value through a fusable linear of the
same input size (the queries, keys and values of self-attention) run as one
``F.linear`` over their stacked weights (see :meth:`NodeModule.fusable_linear`)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.lower.runtime.names import NodeDict
from attngraph.lower.runtime.node import NodeModule, Runtime
from attngraph.lower.runtime.steps import Step

__all__: list[str] = []


def _linear_groups(schedule: list[Step], nodes: NodeDict,
                   stage: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Nodes reading the same value through a fusable linear with the same input
    size and bias use, keyed by the first one's id (only groups of two or more).
    The nodes of a group run at one stage of a loop (a node that runs before or
    after the steps joins no group: the loop may run it per step instead)."""
    found: dict[tuple[str, bool, int, bool, str], list[str]] = {}
    for nid, _, ins, _ in schedule:
        if len(ins) != 1 or ins[0].role != "from":
            continue
        mod = nodes[nid]
        lin = mod.fusable_linear() if isinstance(mod, NodeModule) else None
        if lin is None:
            continue
        weight, bias = lin
        if stage.get(nid) in ("before", "after"):
            continue
        group = (ins[0].key, ins[0].detach, int(weight.shape[1]), bias is not None,
                 stage.get(nid, "step"))
        found.setdefault(group, []).append(nid)
    return {g[0]: tuple(g) for g in found.values() if len(g) > 1}


def _linear_of(nid: str, mod: nn.Module) -> tuple[NodeModule, Tensor, Tensor | None]:
    """A grouped node's module with the weight and bias of its linear."""
    if isinstance(mod, NodeModule):
        lin = mod.fusable_linear()
        if lin is not None:
            return mod, lin[0], lin[1]
    msg = f"node '{nid}' is computed in a stacked linear but has no fusable linear"
    raise LoweringError(msg)


def _run_linear_group(mods: list[tuple[str, nn.Module]], x: dict[str, Tensor],
                      rt: Runtime) -> dict[str, Tensor]:
    """One ``F.linear`` over the stacked weights, split back per node."""
    import torch.nn.functional as F

    lins = [_linear_of(nid, m) for nid, m in mods]
    weight, bias = _stacked(mods[0][1], lins)
    y = F.linear(x["from"], weight, bias)
    parts = y.split([int(w.shape[0]) for _, w, _ in lins], dim=-1)
    return {nid: m.after_linear(p, rt)
            for (nid, _), (m, _, _), p in zip(mods, lins, parts, strict=True)}


def _stacked(owner: nn.Module, lins: list[tuple[Any, Tensor, Tensor | None]]
             ) -> tuple[Tensor, Tensor | None]:
    """The group's weights (and biases) stacked. Without autograd (decoding, evaluation)
    the stack is kept on the group's first module while no weight has changed: an
    in-place change (an optimiser step, ``load_state_dict``) bumps a tensor's version,
    which the key holds, so a stale stack is never used; with autograd it is made anew
    (the gradient flows through the ``cat``)."""
    def stack() -> tuple[Tensor, Tensor | None]:
        biases = [b for _, _, b in lins if b is not None]
        return (torch.cat([w for _, w, _ in lins]),
                torch.cat(biases) if lins[0][2] is not None else None)

    tensors = [t for _, w, b in lins for t in (w, b) if t is not None]
    if torch.is_grad_enabled() or torch.compiler.is_compiling() or torch.jit.is_tracing() \
            or any(type(t) not in (Tensor, nn.Parameter) for t in tensors):
        return stack()  # (tracing and exporting see fake tensors: no storage to key on)
    key = tuple((id(t), t._version, t.data_ptr(), t.dtype, t.device) for t in tensors)
    kept = owner.__dict__.get("_stacked_linear")
    if kept is None or kept[0] != key:
        kept = (key, *stack())
        owner.__dict__["_stacked_linear"] = kept
    return kept[1], kept[2]
