"""Shape rules of glimpses and memories: glimpse, memory, write, address."""

from __future__ import annotations

from attngraph.ir.graph import TensorType
from attngraph.ir.shapes import RuleCtx
from attngraph.kinds.registry import shape_rule


@shape_rule("glimpse")
def glimpse_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Image [C, H, W] at loc [2] in [-1, 1] -> [scales·C·size·size]."""
    img, loc = ctx.t("image"), ctx.t("loc")
    if img.rank != 3:
        ctx.fail(f"glimpse reads an image [C, H, W], got {img}", "image")
    if loc.rank != 1 or loc.dims[0] != 2:
        ctx.fail(f"glimpse location is [2] (x, y in [-1, 1]), got {loc}", "loc")
    c = int(img.dims[0])
    s = ctx.spec
    if s.size * (2 ** (s.scales - 1)) > 4 * max(int(img.dims[1]), int(img.dims[2])):
        ctx.fail(f"glimpse of {s.size} px at {s.scales} scales is far larger than the image",
                 field="size")
    return {"": TensorType((s.scales * c * s.size * s.size,))}


@shape_rule("memory")
def memory_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Slots [S, width]; learned, zero or small-constant initial contents."""
    s = ctx.spec
    if s.init == "learned":
        ctx.params += int(s.slots) * int(s.width)
    return {"": TensorType((int(s.slots), int(s.width)))}


@shape_rule("write")
def write_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """M' = M ⊙ (1 - w eᵀ) + w aᵀ with erase e = sigmoid(.), add a."""
    mem, w = ctx.t("memory"), ctx.t("weights")
    if mem.rank != 2:
        ctx.fail(f"write needs a memory [S, width], got {mem}", "memory")
    if not w.simplex or w.dims != mem.dims[:1]:
        ctx.fail(f"write weights must be normalised over the {mem.dims[0]} slots, got {w}",
                 "weights", "address the memory with a softmax over its slots")
    for role in ("erase", "add"):
        v = ctx.t(role)
        if v.rank != 1 or v.dims[0] != mem.dims[1]:
            ctx.fail(f"{role} vector must be [{mem.dims[1]}], got {v}", role,
                     f"project it with a linear to out: {mem.dims[1]}")
    return {"": mem}


@shape_rule("address")
def address_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """NTM location addressing of content weights [S]: gate, shift, sharpen."""
    c, p, ctl = ctx.t("content"), ctx.t("prev"), ctx.t("control")
    if not c.simplex or c.rank != 1:
        ctx.fail(f"content weights must be a softmax over slots, got {c}", "content")
    if p.dims != c.dims:
        ctx.fail(f"previous weights {p} do not match content weights {c}", "prev")
    if ctl.rank != 1:
        ctx.fail(f"control is the controller state [d], got {ctl}", "control")
    k = 2 * ctx.spec.shifts + 1
    ctx.params += (int(ctl.dims[0]) + 1) * (1 + k + 1)
    return {"": TensorType(c.dims, simplex=True)}
