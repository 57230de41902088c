"""The ``glimpse`` kind: multi-resolution patches of an image at a location.

As in the recurrent attention model (Mnih et al., 2014); the sensor itself is
:mod:`attngraph.lower.glimpse`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, kind
from attngraph.spec.models import NodeModel, PosInt, Ref


class GlimpseSpec(NodeModel):
    """Patches of an image around a location ``loc`` in ``[-1, 1]``, at ``scales`` sizes."""

    kind: Literal["glimpse"]
    image: Ref
    loc: Ref
    size: PosInt
    scales: Annotated[int, Field(ge=1, le=8)] = 1


@kind("glimpse", GlimpseSpec, lowering="attngraph.lower.glimpse:GlimpseNode", role="sensor",
      style=Style("#f9cb9c", "box"))
def glimpse_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Image [C, H, W] at loc [2] in [-1, 1] -> [scales·C·size·size]."""
    img = ctx.need_rank("image", 3, "glimpse reads an image [C, H, W]")
    loc = ctx.t("loc")
    if loc.rank != 1 or loc.dims[0] != 2:
        ctx.fail(f"glimpse location is [2] (x, y in [-1, 1]), got {loc}", "loc")
    c = int(img.dims[0])
    s = ctx.spec
    if s.size * (2 ** (s.scales - 1)) > 4 * max(int(img.dims[1]), int(img.dims[2])):
        ctx.fail(f"glimpse of {s.size} px at {s.scales} scales is far larger than the image",
                 field="size")
    return {"": TensorType((s.scales * c * s.size * s.size,))}


