"""Helpers of the export tests (pt2, ONNX, jit.trace): inputs at a shape other than
the one a program was traced at, with a different size for each symbolic length."""

from __future__ import annotations

from typing import Any

import torch

from attngraph.lower.examples import random_inputs


def symbols(graph: Any) -> list[str]:
    """The symbolic lengths of the graph's inputs, sorted (``["N", "T"]``)."""
    return sorted({d for n in graph.inputs for t in n.types.values() for d in t.dims
                   if isinstance(d, str)})


def new_inputs(graph: Any, *, batch: int, lengths: tuple[int, ...],
               seed: int) -> dict[str, torch.Tensor]:
    """Random inputs with the i-th symbolic length (sorted) of size ``lengths[i]``
    (cycled): e.g. a source of 11 items and a target of 6 steps, so that a program
    that tied two lengths together, or fixed one, is caught."""
    syms = symbols(graph)
    out: dict[str, torch.Tensor] = {}
    for node in graph.inputs:
        mine = [d for t in node.types.values() for d in t.dims if isinstance(d, str)]
        size = lengths[syms.index(mine[0]) % len(lengths)] if mine else lengths[0]
        drawn = random_inputs(graph, batch=batch, length=size,
                              generator=torch.Generator().manual_seed(seed))
        out.update({k: v for k, v in drawn.items()
                    if k == node.id or k.startswith(f"{node.id}_")})
    return out


def positional(model: Any, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The inputs in the order of the model's signature (how programs take them)."""
    return [inputs[k] for k in model._positional if k in inputs]
