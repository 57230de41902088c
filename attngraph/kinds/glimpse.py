"""The sensors that look at part of an image: ``glimpse``, multi-resolution patches
at a location (the recurrent attention model, Mnih et al. 2014), and ``filterbank``,
DRAW's grid of Gaussian filters (Gregor et al. 2015), which reads a patch of an
image or, given a ``patch`` instead, writes one onto an image. Lowered in
:mod:`attngraph.lower.rules.glimpse`.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal, Union

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import FIXED_IMAGE, RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import SIZE, Ident, NodeModel, PosInt, Ref, Size


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


@kind("glimpse", GlimpseSpec, lowering="attngraph.lower.rules.glimpse:GlimpseNode", role="sensor",
      emit="attngraph.lower.export.emit.sensors:emit_glimpse",
      style=Style("#f9cb9c", "box"), work=_glimpse_work,
      site="attngraph.analysis.sensor_sites:glimpse_site", picture="glimpses")
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
    c, h, w = (ctx.fixed(x, f"the {what} of image '{ctx.edge('image').ref}'", "image",
                         FIXED_IMAGE)
               for x, what in zip(img.dims, ("channels", "height", "width"), strict=True))
    s = ctx.spec
    if s.size * (2 ** (s.scales - 1)) > 4 * max(h, w):
        ctx.fail(f"glimpse of {s.size} px at {s.scales} scales is far larger than the image",
                 hint=f"the largest patch, size·2^(scales-1), is at most 4 × {max(h, w)} px: "
                 "use a smaller size or fewer scales", field="size")
    return {"": TensorType((s.scales * c * s.size * s.size,))}




class FilterbankSpec(NodeModel):
    """DRAW's attention: an N×N grid of Gaussian filters placed on an image by ``params``;
    it reads an ``image`` (an N×N patch) or writes a ``patch`` (onto an image)."""

    kind: Literal["filterbank"]
    image: Ref | None = None
    """Read: the image ``[C, H, W]`` to read."""
    canvas: Ref | None = None
    """Read: DRAW's canvas ``[C, H, W]`` (logits, the image's shape): the read also reads the error
    image x̂ = x − σ(canvas) with the same filters, after the image's channels."""
    patch: Ref | None = None
    """Write (instead of ``image``): the patch ``[C·N·N]`` (e.g. a linear of the decoder state) or
    ``[C, N, N]`` to write onto an image of ``height`` × ``width``."""
    height: Size | None = None
    """Write: the written image's height H; a size."""
    width: Size | None = None
    """Write: the written image's width W; a size."""
    params: Ref
    """The grid's placement ``[5]``: (g̃x, g̃y, log σ², log δ̃, log γ), e.g. a linear of the decoder
    state."""
    size: Annotated[Union[Annotated[int, Field(ge=2, le=256)], Ident], SIZE]
    """The grid side N (N × N filters): a number or a dims name."""


def _filterbank_work(ctx: WorkCtx) -> Work:
    """F_Y x F_Xᵀ (or F_Yᵀ w F_X) per channel and image: N·B·A + N·A·N multiply-adds; the
    filters N·(A + B)."""
    out = ctx.out()
    if ctx.spec.patch is not None:
        c, b, a = (ctx.n(x) for x in out.dims)
    else:
        c, b, a = (ctx.n(x) for x in ctx.t("image").dims)
        c *= 2 if ctx.spec.canvas is not None else 1
    n = ctx.spec.size
    return Work(c * (n * b * a + n * a * n) + n * (a + b), inner=c * n * a)


def _write_shape(ctx: RuleCtx, n: int) -> tuple[int, int, int]:
    """The written image (C, H, W): ``patch`` [C·N·N] or [C, N, N], ``height``, ``width``."""
    s = ctx.spec
    for name in ("canvas",):
        if getattr(s, name) is not None:
            ctx.fail(f"'{name}' belongs to a read; a write takes a patch", field=name,
                     hint=f"drop '{name}', or read with image: <image> instead of patch")
    if s.height is None or s.width is None:
        ctx.fail("a filterbank write needs the size of the image it writes",
                 hint="add height: H and width: W (e.g. the image input's)", field="patch")
    p = ctx.t("patch")
    if p.dtype != "float" or p.heads or p.rank not in (1, 3):
        ctx.fail(f"a filterbank writes a patch [C·N·N] or [C, N, N], got {p}", "patch",
                 f"predict it with {{kind: linear, from: <decoder state>, out: {n * n}}}")
    if p.rank == 3:
        c, h, w = (ctx.fixed(x, "the patch's size", "patch") for x in p.dims)
        if (h, w) != (n, n):
            ctx.fail(f"the patch is {h}×{w}, but the grid is {n}×{n}", "patch",
                     f"write a patch [C, {n}, {n}], or set size: {h}")
        return c, int(s.height), int(s.width)
    k = ctx.fixed(p.dims[0], "the patch's size", "patch")
    if k % (n * n):
        ctx.fail(f"a patch of {k} values is not C × {n}×{n} (the grid's N×N per channel)",
                 "patch", f"predict out: {n * n} values per channel (size {n})")
    return k // (n * n), int(s.height), int(s.width)


@kind("filterbank", FilterbankSpec, lowering="attngraph.lower.rules.glimpse:Filterbank",
      emit="attngraph.lower.export.emit.sensors:emit_filterbank",
      role="sensor", style=Style("#f9cb9c", "box"), work=_filterbank_work,
      site="attngraph.analysis.sensor_sites:filterbank_site")
def filterbank_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Read: image [C, B, A] and params [5] -> [C, N, N] ([2C, N, N] with a canvas: x, then
    x̂). Write: patch [C·N·N] and params [5] -> [C, H, W]. Ports ``flat`` (the result as
    one vector), ``fx`` [N, A] and ``fy`` [N, B] (each row: weights over pixel columns or
    rows) and ``gamma`` [1]."""
    s = ctx.spec
    n = s.size
    if (s.image is None) == (s.patch is None):
        ctx.fail("a filterbank reads an image or writes a patch: give one of 'image' and "
                 "'patch'", field="patch" if s.patch is not None else None,
                 hint="image: <image> to read it, or patch: <values> with height and width "
                 "to write them")
    p = ctx.t("params")
    if p.rank != 1 or p.dims[0] != 5 or p.dtype != "float" or p.heads:
        ctx.fail(f"filterbank params are [5] (g̃x, g̃y, log σ², log δ̃, log γ), got {p}",
                 "params", "predict them with {kind: linear, from: <decoder state>, out: 5}")
    if s.patch is not None:
        c, b, a = _write_shape(ctx, n)
        out = TensorType((c, b, a))
    else:
        for name in ("height", "width"):
            if getattr(s, name) is not None:
                ctx.fail(f"'{name}' sizes a write; a read takes its image's", field=name,
                         hint=f"drop '{name}'")
        img = ctx.need_rank("image", 3, "filterbank reads an image [C, H, W]",
                             "give it an image input {type: image, height: H, width: W}")
        if img.dtype != "float" or img.heads:
            ctx.fail(f"filterbank reads an image [C, H, W] of pixels, got {img}", "image",
                     "give it an image input {type: image, height: H, width: W}")
        c, b, a = (ctx.fixed(x, f"the {what} of image '{ctx.edge('image').ref}'", "image",
                             FIXED_IMAGE)
                   for x, what in zip(img.dims, ("channels", "height", "width"), strict=True))
        if s.canvas is not None:
            cv = ctx.t("canvas")
            if cv.dims != img.dims or cv.dtype != "float" or cv.heads:
                ctx.fail(f"the canvas is the image's logits, {img}, got {cv}", "canvas",
                         "carry it in a loop: {zeros_like: <image>, next: <canvas output>}")
            c *= 2
        out = TensorType((c, n, n))
    return {"": out, "flat": TensorType((math.prod(out.dims),)),
            "fx": TensorType((n, a), simplex=True, weights=True),
            "fy": TensorType((n, b), simplex=True, weights=True), "gamma": TensorType((1,))}
