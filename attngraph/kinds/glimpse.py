"""The sensors that look at part of an image: ``glimpse``, multi-resolution patches
at a location (the recurrent attention model, Mnih et al. 2014), and ``filterbank``,
DRAW's grid of Gaussian filters (Gregor et al. 2015). Lowered in
:mod:`attngraph.lower.glimpse`.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import SIZE, Ident, NodeModel, PosInt, Ref


class GlimpseSpec(NodeModel):
    """Patches of an image around a location ``loc`` in ``[-1, 1]``, at ``scales`` sizes."""

    kind: Literal["glimpse"]
    image: Ref
    """The image ``[C, H, W]`` to look at."""
    loc: Ref
    """Where to look: a location ``[2]``, (x, y) in [-1, 1], the image's corners at ±1."""
    size: PosInt
    """Side of each patch in pixels."""
    scales: Annotated[int, Field(ge=1, le=8)] = 1
    """Number of resolutions: square patches centred on ``loc``, the first ``size × size``
    pixels, each next one twice as wide and resized to ``size × size``."""


def _glimpse_work(ctx: WorkCtx) -> Work:
    """Bilinear samples of every pixel of every scale's patch (before it is pooled)."""
    s = ctx.spec
    c = ctx.n(ctx.t("image").dims[0])
    patches = [c * (s.size * 2**i) ** 2 for i in range(s.scales)]
    return Work(4 * sum(patches), inner=patches[-1])


@kind("glimpse", GlimpseSpec, lowering="attngraph.lower.glimpse:GlimpseNode", role="sensor",
      style=Style("#f9cb9c", "box"), work=_glimpse_work)
def glimpse_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Image [C, H, W] at loc [2] in [-1, 1] -> [scales·C·size·size]."""
    img = ctx.need_rank("image", 3, "glimpse reads an image [C, H, W]",
                         "give it an image input {type: image, height: H, width: W}")
    if img.dtype != "float" or img.heads:
        ctx.fail(f"glimpse reads an image [C, H, W] of pixels, got {img}", "image",
                 "give it an image input {type: image, height: H, width: W}")
    loc = ctx.t("loc")
    if loc.rank != 1 or loc.dims[0] != 2 or loc.dtype != "float":
        ctx.fail(f"glimpse location is [2] (x, y in [-1, 1]), got {loc}", "loc",
                 "predict it with {kind: linear, from: <state>, out: 2, act: tanh}")
    c, h, w = (ctx.fixed(x, f"the {what} of image '{ctx.edge('image').ref}'", "image")
               for x, what in zip(img.dims, ("channels", "height", "width"), strict=True))
    s = ctx.spec
    if s.size * (2 ** (s.scales - 1)) > 4 * max(h, w):
        ctx.fail(f"glimpse of {s.size} px at {s.scales} scales is far larger than the image",
                 hint=f"the largest patch, size·2^(scales-1), is at most 4 × {max(h, w)} px: "
                 "use a smaller size or fewer scales", field="size")
    return {"": TensorType((s.scales * c * s.size * s.size,))}




class FilterbankSpec(NodeModel):
    """DRAW's read: an N×N grid of Gaussian filters placed on the image by ``params``."""

    kind: Literal["filterbank"]
    image: Ref
    """The image ``[C, H, W]`` to read."""
    params: Ref
    """The grid's placement ``[5]``: (g̃x, g̃y, log σ², log δ̃, log γ), e.g. a linear of the decoder
    state."""
    size: Annotated[Union[Annotated[int, Field(ge=2, le=256)], Ident], SIZE]
    """The grid side N (N × N filters): a number or a dims name."""


def _filterbank_work(ctx: WorkCtx) -> Work:
    """F_Y x F_Xᵀ per channel: N·B·A + N·A·N multiply-adds; the filters N·(A + B)."""
    c, b, a = (ctx.n(x) for x in ctx.t("image").dims)
    n = ctx.spec.size
    return Work(c * (n * b * a + n * a * n) + n * (a + b), inner=c * n * a)


@kind("filterbank", FilterbankSpec, lowering="attngraph.lower.glimpse:Filterbank",
      role="sensor", style=Style("#f9cb9c", "box"), work=_filterbank_work)
def filterbank_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Image [C, B, A] and params [5] -> the read [C, N, N]; ports ``fx`` [N, A] and
    ``fy`` [N, B] (each row: weights over pixel columns or rows) and ``gamma`` [1]."""
    img = ctx.need_rank("image", 3, "filterbank reads an image [C, H, W]",
                         "give it an image input {type: image, height: H, width: W}")
    if img.dtype != "float" or img.heads:
        ctx.fail(f"filterbank reads an image [C, H, W] of pixels, got {img}", "image",
                 "give it an image input {type: image, height: H, width: W}")
    p = ctx.t("params")
    if p.rank != 1 or p.dims[0] != 5 or p.dtype != "float" or p.heads:
        ctx.fail(f"filterbank params are [5] (g̃x, g̃y, log σ², log δ̃, log γ), got {p}",
                 "params", "predict them with {kind: linear, from: <decoder state>, out: 5}")
    c, b, a = (ctx.fixed(x, f"the {what} of image '{ctx.edge('image').ref}'", "image")
               for x, what in zip(img.dims, ("channels", "height", "width"), strict=True))
    n = ctx.spec.size
    return {"": TensorType((c, n, n)), "fx": TensorType((n, a), simplex=True, weights=True),
            "fy": TensorType((n, b), simplex=True, weights=True), "gamma": TensorType((1,))}
