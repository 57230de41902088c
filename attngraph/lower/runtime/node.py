"""What a lowered node is: a :class:`NodeModule` (the interface a kind's lowering
implements, see :mod:`attngraph.lower.runtime.module`) and the :class:`Runtime` one
forward shares between its nodes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["NodeModule", "Runtime", "input_sizes"]


@dataclass
class Runtime:
    """Per-forward state shared by every node: padding masks and extra tensors."""

    #: symbolic length -> bool mask (B, L), True = real item
    masks: dict[str, Tensor] = field(default_factory=dict)
    #: symbolic length -> its size in this batch (padded), read off the inputs
    sizes: dict[str, Any] = field(default_factory=dict)
    #: extra tensors exposed by nodes, keyed ``"<node id>.<name>"``
    aux: dict[str, Tensor] = field(default_factory=dict)
    #: batch size (of the first input)
    batch: int = 1
    #: dtype of float tensors made at run time (a loop's zero state...): the float
    #: inputs', else the parameters'
    dtype: torch.dtype = field(default_factory=torch.get_default_dtype)
    #: device of tensors made at run time: the inputs'
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    #: tensors a node records once per call (per loop step), stacked into ``aux`` on
    #: axis 1 by :meth:`finish`
    steps: dict[str, list[Tensor]] = field(default_factory=dict)
    #: values of the positions alone (rotary angles, causal masks) made once per forward
    #: and read by every node and round that asks: name -> [(key, value), ...]
    #: (:func:`attngraph.lower.runtime.memo.shared`); runtimes derived with ``replace`` share it
    memo: dict[str, list[tuple[tuple[Any, ...], Tensor]]] = field(default_factory=dict)

    def finish(self) -> dict[str, Tensor]:
        """``aux`` with the per-step records stacked: ``[B, T, ...]`` each."""
        for key, seq in self.steps.items():
            self.aux[key] = torch.stack(seq, 1)
        self.steps.clear()
        return self.aux


def input_sizes(args: Any, vals: dict[str, Tensor]) -> dict[str, Any]:
    """The size of each symbolic length in a batch: ``{"N": x.shape[1], ...}`` from the
    bound inputs (``args``: an input binder's arguments; ``vals``: their values)."""
    sizes: dict[str, Any] = {}
    for a in args:
        x = vals.get(a.input)
        if a.port or x is None:
            continue
        for i, d in enumerate(a.t.dims):
            if isinstance(d, str) and 1 + i < x.dim():
                sizes.setdefault(d, x.shape[1 + i])
    return sizes


class NodeModule(nn.Module):
    """Base class of lowered nodes (see the module docstring for the contract).

    A node whose output is ``after_linear(F.linear(x["from"], W, b))`` may say so
    by returning ``(W, b)`` from :meth:`fusable_linear`: the graph then computes
    the nodes that read the same value this way (queries, keys and values of
    self-attention) with one matmul over their stacked weights.
    """

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]:
        raise NotImplementedError

    def fusable_linear(self) -> tuple[Tensor, Tensor | None] | None:
        """``(weight, bias)`` of a plain linear on ``from``, or None (the default)."""
        return None

    def after_linear(self, y: Tensor, rt: Runtime) -> Tensor:
        """What the node does after its linear (see :meth:`fusable_linear`)."""
        return y
