"""Fusion pass (placeholder until the pattern lands): returns the graph unchanged."""

from __future__ import annotations

from attngraph.ir.graph import Graph


def fuse_attention(graph: Graph) -> Graph:
    """Identity for now."""
    return graph
