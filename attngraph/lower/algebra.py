"""Lowering of the algebra kinds: ``expr`` runs its formula's program, ``param`` holds a
tensor; and the torch implementations of the built-in formula functions.

An expression's module holds the straight-line program of its formula
(:mod:`attngraph.algebra.program`): a tuple of plain tuples, run in order, one
torch operation each, so ``torch.compile(fullgraph=True)``, ``torch.export`` and
ONNX trace it as they trace any module. Values are laid out ``(B, [h,] *axes)``
with their axes in one fixed order, so aligning two values only views them with
axes of size one. Functions over an axis see only the real entries of a padded
length, and the result is zero at every padded position: padding stays padding.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.algebra.functions import FUNCTIONS
from attngraph.lower.module import LowerCtx, NodeModule, Runtime

__all__ = ["Expr", "Param", "lower_expr", "lower_param"]


# ----------------------------------------------------------------------------
# the built-in functions (registered, lazily, in attngraph.algebra.functions)

exp, log, sqrt, sin, cos, tanh, sigmoid, sign = (
    torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos, torch.tanh, torch.sigmoid,
    torch.sign)
relu, elu, softplus, gelu, silu, logsigmoid = F.relu, F.elu, F.softplus, F.gelu, F.silu, \
    F.logsigmoid
minimum, maximum, where = torch.minimum, torch.maximum, torch.where


def abs_(x: Tensor) -> Tensor:
    return torch.abs(x)


def relu2(x: Tensor) -> Tensor:
    return torch.relu(x) ** 2


def elu1(x: Tensor) -> Tensor:
    return F.elu(x) + 1


def clamp(x: Tensor, lo: Tensor | float, hi: Tensor | float) -> Tensor:
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        return torch.minimum(torch.maximum(x, torch.as_tensor(lo, dtype=x.dtype)),
                             torch.as_tensor(hi, dtype=x.dtype))
    return torch.clamp(x, lo, hi)


def sum_(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else x.masked_fill(~mask, 0.0)).sum(dim)


def mean_(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.mean(dim)
    count = mask.sum(dim).to(x.dtype).clamp(min=1)
    return x.masked_fill(~mask, 0.0).sum(dim) / count


def amax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.amax(dim)
    top = x.masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim)
    return torch.where(mask.any(dim), top, torch.zeros_like(top))


def amin(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return -amax(-x, dim, mask)


def logsumexp(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.logsumexp(x, dim)
    out = torch.logsumexp(x.masked_fill(~mask, torch.finfo(x.dtype).min), dim)
    return torch.where(mask.any(dim), out, torch.zeros_like(out))


def norm(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    sq = (x * x) if mask is None else (x * x).masked_fill(~mask, 0.0)
    return torch.sqrt(sq.sum(dim))


def cumsum(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else x.masked_fill(~mask, 0.0)).cumsum(dim)


def softmax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.softmax(x, dim)
    low = x.masked_fill(~mask, torch.finfo(x.dtype).min)
    p = torch.softmax(low, dim) * mask.to(x.dtype)
    return p


def project(w: Tensor, x: Tensor, dim: int) -> Tensor:
    """``w [out, in]`` (or ``(1, out, in)`` batched) applied along dimension ``dim`` of x."""
    w2 = w.reshape(w.shape[-2], w.shape[-1])
    moved = x.movedim(dim, -1)  # (..., in)
    return torch.matmul(moved, w2.t()).movedim(-1, dim)


def mm(a: Tensor, b: Tensor, a_heads: bool, b_heads: bool, a_rank: int, b_rank: int) -> Tensor:
    """``a (B, [h,] [M,] K) @ b (B, [h,] K, [N])``: heads broadcast, vectors as rows or
    columns."""
    if b_heads and not a_heads:
        a = a.unsqueeze(1)
    if a_heads and not b_heads:
        b = b.unsqueeze(1)
    a2 = a if a_rank == 2 else a.unsqueeze(-2)
    b2 = b if b_rank == 2 else b.unsqueeze(-1)
    out = a2 @ b2
    if b_rank == 1:
        out = out.squeeze(-1)
    if a_rank == 1:
        out = out.squeeze(-2 if b_rank == 2 else -1)
    return out


# ----------------------------------------------------------------------------
# running a program


def _mask(rt: Runtime, sym: str, ndim: int, dim: int) -> Tensor | None:
    """The padding mask of length ``sym`` shaped to broadcast along dimension ``dim``."""
    m = rt.masks.get(sym) if sym else None
    if m is None:
        return None
    shape = [m.shape[0]] + [1] * (ndim - 1)
    shape[dim] = m.shape[1]
    return m.reshape(shape)


def _align(x: Tensor | float, shape: tuple[int, ...]) -> Tensor | float:
    """``x (B, *own)`` viewed as ``(B, *result)``: source dim (1-based) or -1 per result dim."""
    if not isinstance(x, Tensor):
        return x
    if x.dim() == 1:  # a per-example scalar (a length)
        return x.reshape(x.shape[0], *([1] * len(shape)))
    sizes = [x.shape[0]] + [x.shape[d] if d > 0 else 1 for d in shape]
    return x.reshape(sizes)


def _float(x: Tensor | float, dtype: torch.dtype) -> Tensor | float:
    return x.to(dtype) if isinstance(x, Tensor) and x.dtype == torch.bool else x


_BIN = {
    "+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div, "^": torch.pow,
    "<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne,
}


class Expr(NodeModule):
    """A formula as a straight-line program: one torch operation per instruction.

    ``program`` is the tuple of instructions (:mod:`attngraph.algebra.program`),
    ``out`` the register of the result, ``pads`` the ``(length, dimension)`` of each
    padded axis of the result (zeroed there), ``cuts`` the ``(register, dimension,
    source register, source dimension)`` of each parameter over a length, narrowed
    to the run-time length, ``formula`` its text (for errors and the export).
    """

    def __init__(self, program: tuple[tuple[Any, ...], ...], out: int,
                 pads: tuple[tuple[str, int], ...], cuts: tuple[tuple[int, int, int, int], ...],
                 perm: tuple[int, ...], formula: str, impls: dict[str, Any]) -> None:
        super().__init__()
        self.program = program
        self.out = out
        self.pads = pads
        self.cuts = cuts
        self.perm = perm
        self.formula = formula
        self.impls = impls

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        regs: list[Any] = []
        dtype = rt.dtype
        for ins in self.program:  # the values read come first
            if ins[0] != "in":
                break
            v = x["formula." + ins[1]]
            if v.dtype.is_floating_point:
                dtype = v.dtype
            regs.append(v)
        for reg, d, src, sd in self.cuts:  # parameters over a length: its first N entries
            regs[reg] = regs[reg].narrow(d, 0, regs[src].shape[sd])
        for ins in self.program[len(regs):]:
            op = ins[0]
            if op == "num":
                regs.append(ins[1])
            elif op == "len":
                m = rt.masks.get(ins[1])
                if m is not None:
                    regs.append(m.sum(-1).to(dtype))
                else:  # the length itself, kept symbolic (torch.export, ONNX)
                    n = regs[ins[2]].shape[ins[3]]
                    regs.append(torch.ones(rt.batch, dtype=dtype, device=rt.device) * n)
            elif op == "idx":
                n = regs[ins[1]].shape[ins[2]]
                regs.append(torch.arange(n, device=rt.device, dtype=dtype).reshape(1, n))
            elif op == "align":
                regs.append(_align(regs[ins[1]], ins[2]))
            elif op == "neg":
                regs.append(-regs[ins[1]])
            elif op == "bin":
                # numbers as 0-d tensors: an operator of a number and a tensor exports to
                # ONNX either way round
                a, b = (_float(r, dtype) if isinstance(r, Tensor) else
                        torch.tensor(r, dtype=dtype, device=rt.device)
                        for r in (regs[ins[2]], regs[ins[3]]))
                if ins[1] in ("<", "<=", ">", ">=", "==", "!="):
                    a, b = regs[ins[2]], regs[ins[3]]
                    a = a if isinstance(a, Tensor) else torch.tensor(a, dtype=dtype,
                                                                     device=rt.device)
                regs.append(_BIN[ins[1]](a, b))
            elif op == "call":
                args = [regs[r] for r in ins[2]]
                first = 1 if ins[1] == "where" else 0  # where's condition stays bool
                args = args[:first] + [_float(a, dtype) if isinstance(a, Tensor) else
                                       torch.tensor(a, dtype=dtype, device=rt.device)
                                       for a in args[first:]]
                regs.append(self.impls[ins[1]](*args))
            elif op == "axis":
                v = _float(regs[ins[2]], dtype)
                mask = _mask(rt, ins[4], v.dim(), ins[3])
                regs.append(self.impls[ins[1]](v, ins[3], mask))
            elif op == "mm":
                a = _float(regs[ins[1]], dtype)
                mask = _mask(rt, ins[7], a.dim(), a.dim() - 1)
                regs.append(mm(a if mask is None else a.masked_fill(~mask, 0.0),
                               _float(regs[ins[2]], dtype), *ins[3:7]))
            elif op == "proj":
                v = _float(regs[ins[2]], dtype)
                mask = _mask(rt, ins[4], v.dim(), ins[3])
                regs.append(project(regs[ins[1]], v if mask is None else v.masked_fill(~mask, 0.0),
                                    ins[3]))
            else:
                regs.append(regs[ins[1]])
        y = regs[self.out]
        if not isinstance(y, Tensor):
            y = torch.full((rt.batch,), float(y), dtype=dtype, device=rt.device)
        for sym, d in self.pads:
            m = _mask(rt, sym, y.dim(), d)
            if m is not None:
                y = torch.where(m, y, torch.zeros((), dtype=y.dtype, device=y.device))
        return y.permute(self.perm) if self.perm else y


def lower_expr(ctx: LowerCtx) -> NodeModule:
    """The formula's program; functions resolved from the registry."""
    from attngraph.kinds.algebra import program_of

    prog = program_of(ctx)
    impls: dict[str, Any] = {}
    for ins in prog.instrs:
        if ins[0] in ("call", "axis"):
            fn = FUNCTIONS[ins[1]]
            impl = fn.impl
            if isinstance(impl, str):
                from attngraph.registry import resolve

                impl = resolve(impl)
            impls[ins[1]] = impl
    v = prog.val
    pads = tuple((s, i + 1) for i, s in enumerate(v.sizes) if isinstance(s, str))
    from attngraph.kinds.algebra import table_reads

    cuts = [(reg, d, ref, rd) for _, reg, d, ref, rd in table_reads(ctx, prog)]
    perm: tuple[int, ...] = ()
    named = ctx.node.spec.axes
    if named is not None:
        from attngraph.algebra.axes import canonical

        lead = 1 if v.axes[:1] == ("heads",) else 0
        order = canonical(named)
        perm = (0, *range(1, 1 + lead), *(1 + lead + named.index(a) for a in order))
    return Expr(tuple(prog.instrs), prog.out, pads, tuple(cuts), perm, ctx.node.spec.formula,
                impls)


# ----------------------------------------------------------------------------
# param


class Param(NodeModule):
    """A free tensor ``(1, [h,] *dims)``: a parameter, or a seeded buffer when fixed,
    clamped in every forward when asked."""

    def __init__(self, shape: tuple[int, ...], init: str, value: float, std: float,
                 lo_hi: tuple[float, float], fixed: bool,
                 clamp_to: tuple[float, float] | None) -> None:
        super().__init__()
        t = torch.empty(1, *shape)
        if init == "zeros":
            nn.init.zeros_(t)
        elif init == "ones":
            nn.init.ones_(t)
        elif init == "constant":
            nn.init.constant_(t, value)
        elif init == "normal":
            nn.init.normal_(t, 0.0, std)
        elif init == "uniform":
            nn.init.uniform_(t, *lo_hi)
        else:
            bound = math.sqrt(6.0 / (shape[-1] + (shape[-2] if len(shape) > 1 else 1))) \
                if shape else 1.0
            nn.init.uniform_(t, -bound, bound)
        if fixed:
            self.register_buffer("value", t)
        else:
            self.value = nn.Parameter(t)
        self.clamp_to = clamp_to

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = self.value
        if self.clamp_to is not None:
            v = v.clamp(self.clamp_to[0], self.clamp_to[1])
        return v


def lower_param(ctx: LowerCtx) -> NodeModule:
    """The tensor of the declared shape (lengths at ``max_len``), heads first."""
    from attngraph.kinds.algebra import param_dims

    s = ctx.spec
    dims, _, heads = param_dims(ctx)
    shape = ((heads,) if heads else ()) + tuple(
        s.max_len if isinstance(d, str) else int(d) for d in dims)
    return Param(shape, s.init, float(s.value), float(s.std), (float(s.range[0]),
                 float(s.range[1])), s.fixed, (float(s.clamp[0]), float(s.clamp[1]))
                 if s.clamp is not None else None)
