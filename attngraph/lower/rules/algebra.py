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
from attngraph.lower.rules.masks import masked_softmax as masks_softmax
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Expr", "Param", "lower_expr", "lower_param"]


# ----------------------------------------------------------------------------
# the built-in functions (registered, lazily, in attngraph.algebra.functions)

exp, log, sqrt, sin, cos, tanh, sigmoid, sign, floor = (
    torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos, torch.tanh, torch.sigmoid,
    torch.sign, torch.floor)
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


def _spread(x: Tensor, mask: Tensor) -> Tensor:
    """``x`` expanded to its shape broadcast with ``mask``: a value the same for every
    example (a position, a parameter: batch 1) reduced over an axis with padding
    has one result per example."""
    shape = torch.broadcast_shapes(x.shape, mask.shape)
    return x if tuple(x.shape) == tuple(shape) else x.expand(shape)


def masked_sum(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else _spread(x, mask).masked_fill(~mask, 0.0)).sum(dim)


def masked_mean(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.mean(dim)
    count = mask.sum(dim).to(x.dtype).clamp(min=1)
    return _spread(x, mask).masked_fill(~mask, 0.0).sum(dim) / count


def masked_amax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.amax(dim)
    top = _spread(x, mask).masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim)
    return torch.where(mask.any(dim), top, torch.zeros_like(top))


def masked_amin(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return -masked_amax(-x, dim, mask)


def masked_logsumexp(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.logsumexp(x, dim)
    out = torch.logsumexp(_spread(x, mask).masked_fill(~mask, torch.finfo(x.dtype).min),
                          dim)
    return torch.where(mask.any(dim), out, torch.zeros_like(out))


def masked_norm(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    sq = (x * x) if mask is None else _spread(x * x, mask).masked_fill(~mask, 0.0)
    return torch.sqrt(sq.sum(dim))


def masked_cumsum(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else _spread(x, mask).masked_fill(~mask, 0.0)).cumsum(dim)


def masked_softmax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    """The softmax kind's normaliser (:func:`attngraph.lower.rules.masks.masked_softmax`) along
    dimension ``dim``: one implementation for the named kind and the formula."""
    if mask is None:
        return torch.softmax(x, dim)
    x = _spread(x, mask)
    last = x.movedim(dim, -1)
    m = mask.expand_as(x).movedim(dim, -1)
    return masks_softmax(last, m).movedim(-1, dim)


def project(w: Tensor, x: Tensor, dim: int) -> Tensor:
    """``w (1 or B, out, in)`` applied along dimension ``dim`` of ``x (B, ...)``: one
    matrix for the batch (a param) or one per example (a value a node made)."""
    moved = x.movedim(dim, -1)  # (B, ..., in)
    wt = w.transpose(-1, -2)  # (1 or B, in, out)
    if moved.dim() == 2:  # a vector per example
        return (moved.unsqueeze(-2) @ wt).squeeze(-2)
    wt = wt.reshape(wt.shape[0], *([1] * (moved.dim() - 3)), wt.shape[-2], wt.shape[-1])
    return (moved @ wt).movedim(-1, dim)


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
    """The padding mask of length ``sym`` shaped to broadcast along dimension ``dim``
    (negative: from the end)."""
    m = rt.masks.get(sym) if sym else None
    if m is None:
        return None
    shape = [m.shape[0]] + [1] * (ndim - 1)
    shape[dim % ndim] = m.shape[1]
    return m.reshape(shape)


def _align(x: Tensor | float, shape: tuple[int, ...]) -> Tensor | float:
    """``x (B, *own)`` viewed as ``(B, *result)``: source dim (1-based) or -1 per result dim;
    a number, or a function of numbers only (a 0-d tensor), broadcasts as it is."""
    if not isinstance(x, Tensor) or x.dim() == 0:
        return x
    if x.dim() == 1:  # a per-example scalar (a length)
        return x.reshape(x.shape[0], *([1] * len(shape)))
    sizes = [x.shape[0]] + [x.shape[d] if d > 0 else 1 for d in shape]
    return x.reshape(sizes)


def _float(x: Any, dtype: torch.dtype) -> Any:
    """A truth value as 1.0 and 0.0 of ``dtype`` (numbers and float tensors as they are)."""
    return x.to(dtype) if isinstance(x, Tensor) and x.dtype == torch.bool else x


_BIN: dict[str, Any] = {
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
        #: the exported file sets the runtime's sizes when a formula reads one
        self.reads_sizes = any(ins[0] in ("len", "idxn") for ins in program)
        #: a formula of positions and numbers only is the same for every example
        self.unbatched = not any(ins[0] in ("in", "len") for ins in program)
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
            if src < 0:  # cut by the parameter itself, to the batch's size
                continue
            n, most = regs[src].shape[sd], regs[reg].shape[d]
            torch._check(n <= most, lambda n=n, most=most: (
                f"a parameter of this formula holds {most} positions (its max_len), but this "
                f"batch has {n}: raise max_len, or give shorter inputs"))
            regs[reg] = regs[reg].narrow(d, 0, n)
        for ins in self.program[len(regs):]:
            op = ins[0]
            if op == "num":
                regs.append(ins[1])
            elif op == "len":
                m = rt.masks.get(ins[1])
                if m is not None:
                    regs.append(m.sum(-1).to(dtype))
                elif ins[1] in rt.sizes:
                    regs.append(torch.ones(rt.batch, dtype=dtype, device=rt.device)
                                * rt.sizes[ins[1]])
                else:  # the length itself, kept symbolic (torch.export, ONNX)
                    n = regs[ins[2]].shape[ins[3]] if ins[2] >= 0 else rt.sizes[ins[1]]
                    regs.append(torch.ones(rt.batch, dtype=dtype, device=rt.device) * n)
            elif op == "idxn":
                n = ins[1] if isinstance(ins[1], int) else rt.sizes[ins[1]]
                regs.append(torch.arange(n, device=rt.device, dtype=dtype).reshape(1, n))
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
            elif op == "take":
                regs.append(self.impls[ins[1]](_float(regs[ins[2]], dtype), regs[ins[3]],
                                               *ins[4:7]))
            elif op == "mm":
                a = real_only(_float(regs[ins[1]], dtype), rt, ins[7], -1)
                regs.append(mm(a, _float(regs[ins[2]], dtype), *ins[3:7]))
            elif op == "proj":
                v = real_only(_float(regs[ins[2]], dtype), rt, ins[4], ins[3])
                regs.append(project(regs[ins[1]], v, ins[3]))
            else:
                regs.append(regs[ins[1]])
        y = regs[self.out]
        if not isinstance(y, Tensor) or y.dim() == 0:  # a number: one per example
            y = torch.ones(rt.batch, dtype=dtype, device=rt.device) * y
        for sym, d in self.pads:
            m = _mask(rt, sym, y.dim(), d)
            if m is not None:
                y = torch.where(m, y, torch.zeros((), dtype=y.dtype, device=y.device))
        if self.unbatched:  # one value for every example of the batch
            y = y.expand(rt.batch, *y.shape[1:])
        return y.permute(self.perm) if self.perm else y

    def python_line(self, args: dict[str, str], rt: str, require: Any) -> str:
        """This expression as one line of torch (see :func:`python_line`)."""
        return python_line(self, args, rt, require)


def lower_expr(ctx: LowerCtx) -> NodeModule:
    """The formula's program; functions resolved from the registry."""
    from attngraph.kinds.algebra import program_of

    prog = program_of(ctx)
    impls: dict[str, Any] = {}
    for ins in prog.instrs:
        if ins[0] in ("call", "axis", "take"):
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
                 clamp_to: tuple[float, float] | None,
                 lengths: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__()
        #: (dimension, length) of each axis over a length: cut to the batch's size
        self.lengths = lengths
        self.reads_sizes = bool(lengths)
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
        v: Tensor = self.value
        for d, sym in self.lengths:  # the first N positions of the table
            n = rt.sizes.get(sym)
            if n is not None:
                most = v.shape[d]
                torch._check(n <= most, lambda n=n, most=most: (
                    f"the parameter holds {most} positions (its max_len), but this batch has "
                    f"{n}: raise max_len, or give shorter inputs"))
                v = v.narrow(d, 0, n)
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
    lead = 2 if heads else 1
    lengths = tuple((lead + i, d) for i, d in enumerate(dims) if isinstance(d, str))
    return Param(shape, s.init, float(s.value), float(s.std), (float(s.range[0]),
                 float(s.range[1])), s.fixed, (float(s.clamp[0]), float(s.clamp[1]))
                 if s.clamp is not None else None, lengths)


# ----------------------------------------------------------------------------
# the Python export: an expression as one line of torch


def length_of(rt: Runtime, sym: str, like: Tensor | None = None, dim: int = 0) -> Tensor:
    """Per example, the real items of length ``sym``: its padding mask's count, else its
    size in the batch (else dimension ``dim`` of ``like``). ``(B,)``."""
    m = rt.masks.get(sym)
    if m is not None:
        return m.sum(-1).to(rt.dtype)
    n = rt.sizes[sym] if sym in rt.sizes or like is None else like.shape[dim]
    return torch.ones(rt.batch, dtype=rt.dtype, device=rt.device) * n


def positions(like: Tensor, dim: int) -> Tensor:
    """0, 1, ... along dimension ``dim`` of ``like``, as ``(1, L)``."""
    n = like.shape[dim]
    return torch.arange(n, device=like.device, dtype=like.dtype).reshape(1, n)


def real_only(x: Tensor, rt: Runtime, sym: str, dim: int) -> Tensor:
    """``x`` with 0 at the padded entries of its dimension ``dim`` (length ``sym``)."""
    m = _mask(rt, sym, x.dim(), dim)
    return x if m is None else _spread(x, m).masked_fill(~m, 0.0)


def over_real(fn: Any, x: Tensor, dim: int, rt: Runtime, sym: str) -> Tensor:
    """``fn(x, dim, mask)`` over the real entries of dimension ``dim`` (length ``sym``)."""
    return fn(x, dim, _mask(rt, sym, x.dim(), dim))


def zero_padding(y: Tensor, rt: Runtime, pads: tuple[tuple[str, int], ...]) -> Tensor:
    """``y`` with 0 at every padded position of its lengths ``(symbol, dimension)``."""
    for sym, d in pads:
        m = _mask(rt, sym, y.dim(), d)
        if m is not None:
            y = torch.where(m, y, torch.zeros((), dtype=y.dtype, device=y.device))
    return y


#: over an axis without padding: the plain torch call, ``{0}`` the value, ``{1}`` the dim
_PLAIN_AXIS = {"sum": "{0}.sum({1})", "mean": "{0}.mean({1})", "amax": "{0}.amax({1})",
               "amin": "{0}.amin({1})", "logsumexp": "torch.logsumexp({0}, {1})",
               "norm": "torch.linalg.vector_norm({0}, dim={1})", "cumsum": "{0}.cumsum({1})",
               "softmax": "torch.softmax({0}, {1})"}
_MASKED_AXIS = {"sum": masked_sum, "mean": masked_mean, "amax": masked_amax,
                "amin": masked_amin, "logsumexp": masked_logsumexp, "norm": masked_norm,
                "cumsum": masked_cumsum, "softmax": masked_softmax}
_OPS = {"+": "+", "-": "-", "*": "*", "/": "/", "^": "**", "<": "<", "<=": "<=", ">": ">",
        ">=": ">=", "==": "==", "!=": "!="}


def python_line(mod: Expr, args: dict[str, str], rt: str, require: Any) -> str:
    """The expression ``mod`` computes, as one Python expression of torch calls.

    ``args`` maps each input role (``formula.s``) to its variable, ``rt`` names the
    forward's runtime, ``require(obj)`` bundles a helper and gives its name (the
    padding-aware reductions, the lengths). Numbers are written as numbers, aligned
    values as indexing with ``None``, functions as their registered Python text.
    """
    text: list[str] = []
    bools: list[bool] = []
    ndims: list[int] = []
    reads = [ins for ins in mod.program if ins[0] == "in"]  # the values read come first
    for ins in reads:
        text.append(args["formula." + ins[1]])
        bools.append(False)
        ndims.append(-1)  # their rank is their own
    for reg, d, src, sd in mod.cuts:  # parameters over a length: the first N entries
        if src >= 0:
            text[reg] = f"{text[reg]}.narrow({d}, 0, {text[src]}.shape[{sd}])"
    for ins in mod.program[len(reads):]:
        op = ins[0]
        is_bool = False
        if op == "num":
            t, nd = repr(float(ins[1])), 0
        elif op == "len" and ins[2] < 0:
            t, nd = f"{require(length_of)}({rt}, {ins[1]!r})", 1
        elif op == "len":
            t, nd = f"{require(length_of)}({rt}, {ins[1]!r}, {text[ins[2]]}, {ins[3]})", 1
        elif op == "idxn":
            n = ins[1] if isinstance(ins[1], int) else f"{rt}.sizes[{ins[1]!r}]"
            t, nd = (f"torch.arange({n}, device={rt}.device, dtype={rt}.dtype)[None, :]", 2)
        elif op == "idx":
            t, nd = f"{require(positions)}({text[ins[1]]}, {ins[2]})", 2
        elif op == "align" and ndims[ins[1]] == 0:  # numbers broadcast as they are
            t, nd, is_bool = text[ins[1]], 0, bools[ins[1]]
        elif op == "align":
            src = text[ins[1]]
            keys = [":"] + [":" if d > 0 else "None" for d in ins[2]]
            if ndims[ins[1]] == 1:  # a per-example scalar
                keys = [":"] + ["None"] * len(ins[2])
            while keys and keys[-1] == ":":
                keys.pop()
            t, nd = f"{src}[{', '.join(keys)}]", 1 + len(ins[2])
            is_bool = bools[ins[1]]
        elif op == "neg":
            t, nd = f"-{text[ins[1]]}", ndims[ins[1]]
        elif op == "bin":
            a, b = text[ins[2]], text[ins[3]]
            cmp = ins[1] in ("<", "<=", ">", ">=", "==", "!=")
            if not cmp:
                a = f"{a}.to({rt}.dtype)" if bools[ins[2]] else a
                b = f"{b}.to({rt}.dtype)" if bools[ins[3]] else b
            t, nd, is_bool = f"({a} {_OPS[ins[1]]} {b})", _rank(ndims[ins[2]], ndims[ins[3]]), cmp
        elif op == "call":
            fn = FUNCTIONS[ins[1]]
            vals = [text[r] if not bools[r] or (ins[1] == "where" and k == 0)
                    else f"{text[r]}.to({rt}.dtype)" for k, r in enumerate(ins[2])]
            if ins[1] in ("min", "max", "where", "clamp"):  # torch wants tensors there
                vals = [v if ndims[r] != 0 else f"torch.tensor({v})"
                        for v, r in zip(vals, ins[2], strict=True)]
            if fn.python:
                t = fn.python.format(*vals)
            else:
                t = f"{require(mod.impls[ins[1]])}({', '.join(vals)})"
            nd = _rank(*(ndims[r] for r in ins[2]))
        elif op == "axis":
            x = text[ins[2]]
            if ins[4]:
                fn_name = require(_MASKED_AXIS[ins[1]]) if ins[1] in _MASKED_AXIS \
                    else require(mod.impls[ins[1]])
                t = f"{require(over_real)}({fn_name}, {x}, {ins[3]}, {rt}, {ins[4]!r})"
            elif ins[1] in _PLAIN_AXIS:
                t = _PLAIN_AXIS[ins[1]].format(x, ins[3])
            else:
                t = f"{require(mod.impls[ins[1]])}({x}, {ins[3]}, None)"
            nd = ndims[ins[2]] if ndims[ins[2]] < 0 else \
                ndims[ins[2]] - (1 if FUNCTIONS[ins[1]].form == "reduce" else 0)
        elif op == "take":
            t = (f"{require(mod.impls[ins[1]])}({text[ins[2]]}, {text[ins[3]]}, "
                 f"{', '.join(map(repr, ins[4:7]))})")
            nd = 1 + len(ins[6])
        elif op == "mm":
            a = text[ins[1]]
            if ins[7]:
                a = f"{require(real_only)}({a}, {rt}, {ins[7]!r}, -1)"
            t = f"{require(mm)}({a}, {text[ins[2]]}, {', '.join(map(repr, ins[3:7]))})"
            nd = -1
        else:  # proj
            x = text[ins[2]]
            if ins[4]:
                x = f"{require(real_only)}({x}, {rt}, {ins[4]!r}, {ins[3]})"
            t, nd = f"{require(project)}({text[ins[1]]}, {x}, {ins[3]})", ndims[ins[2]]
        text.append(t)
        bools.append(is_bool)
        ndims.append(nd)
    y = text[mod.out]
    if y.startswith("(") and y.endswith(")") and _balanced(y[1:-1]):
        y = y[1:-1]
    if ndims[mod.out] == 0:
        y = f"torch.ones({rt}.batch, dtype={rt}.dtype, device={rt}.device) * {y}"
    if mod.pads:
        y = f"{require(zero_padding)}({y}, {rt}, {mod.pads!r})"
    if mod.unbatched:
        y = f"{require(for_each_example)}({y}, {rt})"
    if mod.perm:
        y = f"({y}).permute{mod.perm!r}"
    return y


def for_each_example(y: Tensor, rt: Runtime) -> Tensor:
    """``y (1, ...)``, the same for every example, as ``(B, ...)``."""
    return y.expand(rt.batch, *y.shape[1:])


def _rank(*nds: int) -> int:
    """The dimensions of a result of operands of these (-1: a value read, of its own rank)."""
    return -1 if -1 in nds else max(nds, default=0)


def _balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            return False
    return depth == 0
