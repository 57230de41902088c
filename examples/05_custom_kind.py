"""A node kind of your own, in one module: ``scale`` multiplies its input by a constant.

Importing this module registers the kind (its spec model, shape rule, lowering
and traits, all below); a spec may then write ``{kind: scale, from: x, by: 0.5}``
and ``validate``, ``render`` (both views), ``describe``, ``diff`` and ``compile``
know it, without a change to attngraph. ``python examples/05_custom_kind.py``
checks, draws, describes and runs a spec that uses it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds import RuleCtx, Style, kind
from attngraph.spec.models import NodeModel, PosFloat, Ref


class ScaleSpec(NodeModel):
    """``{kind: scale, from: <node>, by: <number>}``: unknown fields are refused."""

    kind: Literal["scale"]
    from_: Ref = Field(alias="from")
    by: PosFloat = 1.0


def lower_scale(ctx: Any) -> Any:
    """The PyTorch module of a ``scale`` node; torch is imported only to compile."""
    from torch import Tensor

    from attngraph.lower.runtime import NodeModule, Runtime

    class Scale(NodeModule):
        def __init__(self, by: float) -> None:
            super().__init__()
            self.by = by

        def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
            return x["from"] * self.by  # same shape as the input

    return Scale(float(ctx.spec.by))


@kind("scale", ScaleSpec, lowering=lower_scale, role="support",
      style=Style("#e6e6fa", "box"), transparent=True)
def scale_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """y = c·x: the input's type, no parameters."""
    t = ctx.t("from")
    if t.dtype != "float":
        ctx.fail(f"scale multiplies float features, but '{ctx.edge('from').ref}' is {t}",
                 "from", "embed token ids first (items with embed:)")
    return {"": t}


SPEC = """\
attngraph: 1
name: scaled_self_attention
dims: {d: 8}
inputs:
  src: {type: vectors, dim: d}
nodes:
  x: {kind: items, from: src}
  xs: {kind: scale, from: x, by: 0.5}
  s: {kind: scorer, fn: dot, query: xs, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
outputs: {z: z, p: p}
"""


def main() -> dict[str, Any]:
    """Check, draw (both views), describe and run :data:`SPEC`; return what each gave."""
    import torch

    import attngraph
    from attngraph.analysis.describe import describe
    from renderers import render

    graph = attngraph.loads_spec(SPEC, "scaled_self_attention.yaml")
    model = attngraph.compile(graph, seed=0)
    out = model(src=torch.randn(2, 5, 8))
    return {
        "graph": graph,
        "architecture": render(graph, "architecture", "mermaid"),
        "unrolled": render(graph, "unrolled", "mermaid"),
        "description": describe(graph),
        "outputs": out,
    }


if __name__ == "__main__":
    res = main()
    print(res["graph"])
    print(res["architecture"])
    print(res["description"].sites[0].axes["source"])
