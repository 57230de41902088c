"""Two work-arounds for torch's ONNX exporter (torch 2.13, onnxscript 0.7), used by
:func:`attngraph.lower.export.programs.export_onnx`.

- :func:`decompositions`: ``repeat_interleave`` by a symbolic count (a loop repeats
  its padding masks once per step, ``(B·T, N)``) as unsqueeze, expand and flatten;
  onnxscript's conversion expands it along the wrong axis, and onnxruntime refuses
  the shape at run time ("invalid expand shape").
- :func:`name_outputs`: the outputs named like the spec's; a value inside the graph
  that already has such a name (an output ``softmax`` beside torch's ``softmax``
  node, once the program takes masks) is renamed first, where the exporter's own
  renaming would break single assignment and ``onnx.checker`` refuses the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["decompositions", "name_outputs"]


def _repeat_interleave(x: Tensor, repeats: Any, dim: int | None = None,
                       output_size: Any = None) -> Tensor:
    """``x.repeat_interleave(repeats, dim)`` for an int (or symbolic) ``repeats``."""
    del output_size  # the size follows from the shapes
    if dim is None:
        x, dim = x.flatten(), 0
    dim %= x.dim()
    sizes = list(x.shape)
    return x.unsqueeze(dim + 1).expand(*sizes[:dim + 1], repeats,
                                       *sizes[dim + 1:]).flatten(dim, dim + 1)


def decompositions() -> dict[Any, Any]:
    """What to run on a program (``run_decompositions``) before converting it."""
    import torch

    return {torch.ops.aten.repeat_interleave.self_int: _repeat_interleave}


def name_outputs(model: Any, names: Sequence[str]) -> None:
    """Name the outputs of ``model`` (an ``onnx_ir.Model``) ``names``, in order,
    renaming first any other value (in the graph or a subgraph) that has one."""
    import onnx_ir as ir

    graph = model.graph
    outputs = list(graph.outputs)
    values = [*graph.inputs, *graph.initializers.values()]
    values += [v for node in ir.traversal.RecursiveGraphIterator(graph) for v in node.outputs]
    taken = {v.name for v in values if v.name} | set(names)
    wanted = set(names)
    inputs = list(graph.inputs)  # the user's names: never renamed
    for v in values:
        if v.name in wanted and not any(v is o for o in [*outputs, *inputs]):
            i = 1
            while f"{v.name}_{i}" in taken:
                i += 1
            v.name = f"{v.name}_{i}"
            taken.add(v.name)
    for value, name in zip(outputs, names, strict=True):
        value.name = name
