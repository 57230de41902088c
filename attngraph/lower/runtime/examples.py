"""Random inputs of a graph's declared types: for ``attngraph compile`` and tests."""

from __future__ import annotations

import torch
from torch import Tensor

from attngraph.ir.graph import Graph

__all__ = ["random_inputs"]


def random_inputs(graph: Graph, *, batch: int = 2, length: int = 5,
                  generator: torch.Generator | None = None) -> dict[str, Tensor]:
    """One batch of random inputs: ids below ``vocab``, normal floats, random graphs.

    Every symbolic length becomes ``length``. Masks are left out (all items real).
    """
    g = generator
    kw: dict[str, Tensor] = {}
    for n in graph.inputs:
        s, t = n.spec, n.types[""]
        dims = [length if isinstance(d, str) else int(d) for d in t.dims]
        if t.dtype == "long":
            # the range forward checks: a labels input's classes, a tokens input's vocab,
            # the items positions point at
            high = length if s.type == "positions" else \
                int((s.classes if s.type == "labels" else s.vocab) or s.vocab or s.classes or 2)
            kw[n.id] = torch.randint(0, high, (batch, *dims), generator=g)
        else:
            kw[n.id] = torch.randn(batch, *dims, generator=g)
        if "adjacency" in n.types:
            adj = torch.rand(batch, dims[0], dims[0], generator=g) > 0.5
            kw[f"{n.id}_adjacency"] = adj | adj.transpose(1, 2)
    return kw
