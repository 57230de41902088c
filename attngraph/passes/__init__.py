"""Passes ``Graph -> Graph`` on the IR, one file per pass, run by pipelines that are data.

- :mod:`attngraph.passes.base`: :class:`Pass`, :class:`Pipeline` (verify after each
  pass, print the IR after any), the :data:`PASSES` registry;
- :mod:`attngraph.passes.shape_inference`: ``infer_shapes``, every node's types;
- :mod:`attngraph.passes.fuse_attention`: scaled-dot scorer → softmax → readout
  becomes one fused ``attention`` node;
- :mod:`attngraph.passes.linear_attention`: φ(q)·φ(k) scorer → sum → readout
  becomes one ``linear_attention`` node that runs in linear time;
- :mod:`attngraph.passes.hoist`: work of a loop body that is the same at every
  step runs once, before the steps.

:data:`FRONT` is what :func:`attngraph.load_spec` runs after building the graph;
:data:`OPTIMIZE` what :func:`attngraph.compile` runs before lowering; :func:`as_run` the
passes of it that change what a forward holds, which the resource guard measures after.
"""

from attngraph.ir.graph import Graph
from attngraph.passes.base import PASSES, Pass, Pipeline
from attngraph.passes.fuse_attention import FUSE_ATTENTION
from attngraph.passes.hoist import HOIST_INVARIANTS
from attngraph.passes.linear_attention import LINEAR_ATTENTION
from attngraph.passes.shape_inference import SHAPE_INFERENCE

__all__ = ["FRONT", "OPTIMIZE", "PASSES", "Pass", "Pipeline", "as_run"]

#: After build and verify: every node's types and parameter count.
FRONT = Pipeline((SHAPE_INFERENCE,))
#: Before lowering: fusions, then hoisting out of loops.
OPTIMIZE = Pipeline((FUSE_ATTENTION, LINEAR_ATTENTION, HOIST_INVARIANTS))


def as_run(graph: Graph) -> Graph:
    """``graph`` as :func:`attngraph.compile` runs it, in what one forward holds: the
    passes of :data:`OPTIMIZE` that change how that grows (:attr:`Pass.resizes`), so
    that the resource guard does not refuse a kernel attention over a long sequence
    for the N×N scores it never makes. The others are left out (the guard measures
    the spec as written, fused or not)."""
    for p in OPTIMIZE.passes:
        if p.resizes:
            graph = p.run(graph)
    return graph
