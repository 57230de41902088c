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
:data:`OPTIMIZE` what :func:`attngraph.compile` runs before lowering.
"""

from attngraph.passes.base import PASSES, Pass, Pipeline
from attngraph.passes.fuse_attention import FUSE_ATTENTION
from attngraph.passes.hoist import HOIST_INVARIANTS
from attngraph.passes.linear_attention import LINEAR_ATTENTION
from attngraph.passes.shape_inference import SHAPE_INFERENCE

__all__ = ["FRONT", "OPTIMIZE", "PASSES", "Pass", "Pipeline"]

#: After build and verify: every node's types and parameter count.
FRONT = Pipeline((SHAPE_INFERENCE,))
#: Before lowering: fusions, then hoisting out of loops.
OPTIMIZE = Pipeline((FUSE_ATTENTION, LINEAR_ATTENTION, HOIST_INVARIANTS))
