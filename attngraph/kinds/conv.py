"""Convolutions over items and images, and items back to an image map.

``conv`` is a 1-D convolution over the items of ``[N, d]`` (or of weights ``[N]``,
one channel: location-aware attention's F * α) that keeps N, or a 2-D convolution of
an image ``[C, H, W]`` (1×1 included). ``to_image`` turns one item per pixel
``[H·W, C]`` back into ``[C, H, W]``. Lowered in :mod:`attngraph.lower.rules.conv`.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import (
    FIXED_IMAGE,
    RuleCtx,
    Style,
    Work,
    WorkCtx,
    elementwise_work,
    kind,
)
from attngraph.spec.models import SIZE, Ident, NodeModel, Ref, Size

__all__ = ["ConvSpec", "ToImageSpec"]

#: 1–64, or a dims name
_Kernel = Annotated[Union[Annotated[int, Field(ge=1, le=64)], Ident], SIZE]


class ConvSpec(NodeModel):
    """A convolution over items (1-D, N kept) or over an image (2-D)."""

    kind: Literal["conv"]
    from_: Ref = Field(alias="from")
    """What to convolve: weights ``[N]`` or items ``[N, d]`` (1-D over the items), or an image
    ``[C, H, W]`` (2-D)."""
    out: Size
    """Output channels (features); a size."""
    kernel: _Kernel
    """Kernel width (1-D) or side (2-D), a number or a dims name; odd over items, so that N is
    kept."""
    stride: _Kernel = 1
    """Image only: the step between positions, a number or a dims name."""
    padding: Annotated[int, Field(ge=0, le=64)] | None = None
    """Image only: zeros around the image on each side (``kernel // 2`` if unset, which keeps the
    size at stride 1)."""
    bias: bool = True
    """Whether the convolution has a bias."""


class ToImageSpec(NodeModel):
    """Items, one per pixel ``[H·W, C]`` row by row, back to an image ``[C, H, W]``."""

    kind: Literal["to_image"]
    from_: Ref = Field(alias="from")
    """Items ``[H·W, C]``, one per pixel row by row (a fixed number of them)."""
    height: Size
    """The image height H; a size."""
    width: Size
    """The image width W (H·W must be the number of items); a size."""


def _conv_work(ctx: WorkCtx) -> Work:
    """Every output element costs its kernel's inputs; the inputs each output position
    reads are unfolded into one buffer (C·k·k per position, im2col) while it runs."""
    out = ctx.out()
    per = ctx.node.params // max(int(ctx.spec.out), 1)
    positions = ctx.elements(out) // max(int(ctx.spec.out), 1)
    return Work(ctx.elements(out) * per + ctx.elements(out), inner=positions * per)


@kind("conv", ConvSpec, lowering="attngraph.lower.rules.conv:Conv", role="support",
      emit="attngraph.lower.export.emit.images:emit_conv",
      style=Style("#d9ead3", "box"), work=_conv_work)
def conv_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N] or [N, d] -> [N, out]; [C, H, W] -> [out, H', W']."""
    s = ctx.spec
    t = ctx.t("from")
    k = s.kernel
    if t.dtype != "float" or t.heads or t.rank not in (1, 2, 3):
        ctx.fail(f"conv reads weights [N], items [N, d] or an image [C, H, W], got {t}",
                 "from", "merge heads first" if t.heads else "give it float items or an image")
    if t.rank in (1, 2):
        if k % 2 == 0:
            ctx.fail(f"a convolution over items keeps N, so its kernel is odd, got {k}",
                     field="kernel", hint=f"use kernel: {k + 1} (or {k - 1})")
        for name in ("stride", "padding"):
            if name in s.model_fields_set:
                ctx.fail(f"'{name}' applies to a 2-D convolution of an image; over items the "
                         "stride is 1 and N is kept", field=name, hint=f"drop '{name}'")
        c = 1 if t.rank == 1 else ctx.features("from")
        ctx.params += c * k * s.out + (s.out if s.bias else 0)
        return {"": TensorType((t.dims[0], s.out))}
    c, h, w = (ctx.fixed(x, f"the {what} of the image", "from", FIXED_IMAGE)
               for x, what in zip(t.dims, ("channels", "height", "width"), strict=True))
    pad = k // 2 if s.padding is None else s.padding
    h2, w2 = (h + 2 * pad - k) // s.stride + 1, (w + 2 * pad - k) // s.stride + 1
    if h2 < 1 or w2 < 1:
        ctx.fail(f"a {k}×{k} kernel does not fit an image of {h}×{w} (padding {pad})",
                 field="kernel", hint="use a smaller kernel or more padding")
    ctx.params += c * k * k * s.out + (s.out if s.bias else 0)
    return {"": TensorType((s.out, h2, w2))}


@kind("to_image", ToImageSpec, lowering="attngraph.lower.rules.conv:ToImage", role="support",
      emit="attngraph.lower.export.emit.images:emit_to_image",
      work=elementwise_work, transparent=True)
def to_image_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[H·W, C] -> [C, H, W]."""
    s = ctx.spec
    t = ctx.t("from")
    if t.dtype != "float" or t.rank != 2 or t.heads:
        ctx.fail(f"to_image reads one item per pixel [H·W, C], got {t}", "from",
                 "give it items [N, C] (merge heads in the readout first)")
    n = ctx.fixed(t.dims[0], "the number of pixels", "from",
                  "to_image needs a fixed number of items, height × width: read items "
                  "made from an image")
    if n != s.height * s.width:
        ctx.fail(f"{n} items are not a {s.height}×{s.width} image ({s.height * s.width} "
                 "pixels)", "from", "give height and width whose product is the number of "
                 "items")
    return {"": TensorType((ctx.features("from"), s.height, s.width))}
