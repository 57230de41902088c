"""Which items a normaliser may weigh (``mask:``): causal, a window, an adjacency, a
padding. Read by the softmax and the fused attention kinds."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from attngraph.spec.models import Model, Ref

__all__ = ["MaskSpec"]


class MaskSpec(Model):
    """Masks a softmax may apply on top of the inputs' padding."""

    causal: bool = False
    """Query i attends only to items j <= i (needs scores ``[M, N]``)."""
    window: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    """Query i attends only to items j with ``|i - j| <= window`` (needs scores ``[M, N]``)."""
    adjacency: Ref | None = None
    """A graph input (or a bool ``[N, N]`` value): query i attends only to the nodes j with
    ``adjacency[i, j]``, its in-neighbours (edges j → i)."""
    self_loops: bool = True
    """adjacency: each node also attends to itself, whether or not the graph has the loop."""
