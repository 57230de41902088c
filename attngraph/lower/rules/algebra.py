"""Lowering of the algebra kinds: ``expr`` runs its formula's program, ``param`` holds a
tensor.

An expression's module holds the straight-line program of its formula
(:mod:`attngraph.algebra.program`): a tuple of plain tuples, run in order, one
torch operation each, so ``torch.compile(fullgraph=True)``, ``torch.export`` and
ONNX trace it as they trace any module. Values are laid out ``(B, [h,] *axes)``
with their axes in one fixed order, so aligning two values only views them with
axes of size one. Functions over an axis see only the real entries of a padded
length, and the result is zero at every padded position: padding stays padding.

A value the same for every example (a formula of the positions alone, a parameter,
what a formula makes of those) is computed once, with batch 1, and handed on as a view
over the batch (:func:`attngraph.lower.runtime.memo.broadcast`); an expression reading such a
view computes on the batch-1 tensor it came from (:func:`attngraph.lower.runtime.memo.unbroadcast`),
so T5's bucket of each pair of positions, and the bias read from it, are made once per
forward, not once per example, and each layer's gradient of the bias is summed over the
batch where it is used.

The torch implementations of the built-in formula functions live in
:mod:`attngraph.lower.rules.algebra_functions`, the Python export of an expression in
:mod:`attngraph.lower.rules.algebra_python`; both are importable from here (the registry of
functions names them ``attngraph.lower.rules.algebra:<name>``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from attngraph.algebra.functions import FUNCTIONS
from attngraph.algebra.program import operands

# the registry's functions and the export's helpers, importable from here too
from attngraph.lower.rules.algebra_functions import (  # noqa: F401
    abs_,
    axis_mask,
    clamp,
    cos,
    elu,
    elu1,
    exp,
    floor,
    for_each_example,
    gelu,
    length_of,
    log,
    logsigmoid,
    masked_amax,
    masked_amin,
    masked_cumsum,
    masked_logsumexp,
    masked_mean,
    masked_norm,
    masked_softmax,
    masked_sum,
    maximum,
    minimum,
    mm,
    over_real,
    positions,
    project,
    real_only,
    relu,
    relu2,
    sigmoid,
    sign,
    silu,
    sin,
    softplus,
    sqrt,
    tanh,
    where,
    zero_padding,
)
from attngraph.lower.rules.algebra_python import python_line
from attngraph.lower.runtime.memo import broadcast, unbroadcast
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["Expr", "Param", "lower_expr", "lower_param", "python_line"]


# ----------------------------------------------------------------------------
# running a program


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


def _tensor(x: Any, dtype: torch.dtype, rt: Runtime) -> Tensor:
    """A register as an operand: a truth value as a float, a number as a 0-d tensor (an
    operator of a number and a tensor exports to ONNX either way round)."""
    return _float(x, dtype) if isinstance(x, Tensor) else \
        torch.tensor(x, dtype=dtype, device=rt.device)


_BIN: dict[str, Any] = {
    "+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div, "^": torch.pow,
    "<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne,
}
_CMP = ("<", "<=", ">", ">=", "==", "!=")


class _Run:
    """One run of a program: its registers, the dtype of its floats, the runtime and the
    functions it calls."""

    __slots__ = ("regs", "dtype", "rt", "impls")

    def __init__(self, regs: list[Any], dtype: torch.dtype, rt: Runtime,
                 impls: dict[str, Any]) -> None:
        self.regs = regs
        self.dtype = dtype
        self.rt = rt
        self.impls = impls


def _num(r: _Run, ins: tuple[Any, ...]) -> Any:
    return ins[1]


def _len(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    rt = r.rt
    m = rt.masks.get(ins[1])
    if m is not None:
        return m.sum(-1).to(r.dtype)
    if ins[1] in rt.sizes:
        n = rt.sizes[ins[1]]
    else:  # the length itself, kept symbolic (torch.export, ONNX)
        n = r.regs[ins[2]].shape[ins[3]] if ins[2] >= 0 else rt.sizes[ins[1]]
    return torch.ones(rt.batch, dtype=r.dtype, device=rt.device) * n


def _idxn(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    n = ins[1] if isinstance(ins[1], int) else r.rt.sizes[ins[1]]
    return torch.arange(n, device=r.rt.device, dtype=r.dtype).reshape(1, n)


def _idx(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    n = r.regs[ins[1]].shape[ins[2]]
    return torch.arange(n, device=r.rt.device, dtype=r.dtype).reshape(1, n)


def _align_ins(r: _Run, ins: tuple[Any, ...]) -> Any:
    return _align(r.regs[ins[1]], ins[2])


def _neg(r: _Run, ins: tuple[Any, ...]) -> Any:
    return -r.regs[ins[1]]


def _bin(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    a, b = r.regs[ins[2]], r.regs[ins[3]]
    if ins[1] in _CMP:  # truth values compared as they are
        a = a if isinstance(a, Tensor) else torch.tensor(a, dtype=r.dtype, device=r.rt.device)
    else:
        a, b = _tensor(a, r.dtype, r.rt), _tensor(b, r.dtype, r.rt)
    return _BIN[ins[1]](a, b)


def _call(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    args = [r.regs[i] for i in ins[2]]
    first = 1 if ins[1] == "where" else 0  # where's condition stays bool
    args = args[:first] + [_tensor(a, r.dtype, r.rt) for a in args[first:]]
    return r.impls[ins[1]](*args)


def _axis(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    v = _float(r.regs[ins[2]], r.dtype)
    return r.impls[ins[1]](v, ins[3], axis_mask(r.rt, ins[4], v.dim(), ins[3]))


def _take(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    return r.impls[ins[1]](_float(r.regs[ins[2]], r.dtype), r.regs[ins[3]], *ins[4:7])


def _mm(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    a = real_only(_float(r.regs[ins[1]], r.dtype), r.rt, ins[7], -1)
    return mm(a, _float(r.regs[ins[2]], r.dtype), *ins[3:7])


def _proj(r: _Run, ins: tuple[Any, ...]) -> Tensor:
    v = real_only(_float(r.regs[ins[2]], r.dtype), r.rt, ins[4], ins[3])
    return project(r.regs[ins[1]], v, ins[3])


#: each instruction's operation (any other copies a register)
_OPS: dict[str, Callable[[_Run, tuple[Any, ...]], Any]] = {
    "num": _num, "len": _len, "idxn": _idxn, "idx": _idx, "align": _align_ins, "neg": _neg,
    "bin": _bin, "call": _call, "axis": _axis, "take": _take, "mm": _mm, "proj": _proj,
}


class Expr(NodeModule):
    """A formula as a straight-line program: one torch operation per instruction.

    ``program`` is the tuple of instructions (:mod:`attngraph.algebra.program`),
    ``out`` the register of the result, ``pads`` the ``(length, dimension)`` of each
    padded axis of the result (zeroed there), ``cuts`` the ``(register, dimension,
    source register, source dimension)`` of each parameter over a length, narrowed
    to the run-time length, ``formula`` its text (for errors and the export),
    ``in_pads`` the padded axes of each value read, ``(register, pads)``: zeroed there
    before the program runs, so that no gradient reaches a value read at a padded
    position (where the program may divide by a sum that is 0 there: 0/0 in the
    backward, which the result's own zeroing would not stop).
    """

    def __init__(self, program: tuple[tuple[Any, ...], ...], out: int,
                 pads: tuple[tuple[str, int], ...], cuts: tuple[tuple[int, int, int, int], ...],
                 perm: tuple[int, ...], formula: str, impls: dict[str, Any],
                 in_pads: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()) -> None:
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
        self.in_pads = in_pads

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        regs, dtype, shared = self._read(x, rt)
        for r, pads in self.in_pads if rt.masks else ():
            regs[r] = zero_padding(regs[r], rt, pads)
        run = _Run(regs, dtype, rt, self.impls)
        for ins in self.program[len(regs):]:
            op = _OPS.get(ins[0])
            regs.append(op(run, ins) if op is not None else regs[ins[1]])
        y = regs[self.out]
        if not isinstance(y, Tensor) or y.dim() == 0:  # a number: one per example
            y = torch.ones(rt.batch, dtype=dtype, device=rt.device) * y
        y = zero_padding(y, rt, self.pads)
        if self.perm:
            y = y.permute(self.perm)
        if (self.unbatched or shared) and y.shape[0] == 1:  # one value for every example
            y = broadcast(rt, y, rt.batch)
        return y

    def register(self, reg: int, rt: Runtime) -> Any:
        """Register ``reg`` of the program alone, when it reads none of the node's values
        (a position worked out from lengths and numbers: ``N - 1``), as the forward
        would compute it: a number, or one value per example."""
        need = {reg}
        for i in range(reg, -1, -1):
            if i in need:
                ins = self.program[i]
                if ins[0] == "in":
                    msg = f"register {reg} of '{self.formula}' reads the node's values"
                    raise ValueError(msg)
                need.update(operands(ins))
        regs: list[Any] = []
        run = _Run(regs, rt.dtype, rt, self.impls)
        for i, ins in enumerate(self.program[:reg + 1]):
            op = _OPS.get(ins[0])
            regs.append(None if i not in need else
                        op(run, ins) if op is not None else regs[ins[1]])
        return regs[reg]

    def _read(self, x: dict[str, Tensor], rt: Runtime) -> tuple[list[Any], torch.dtype, bool]:
        """The registers of the values read (each value the same for every example at
        batch 1), parameters over a length cut to the batch's; the dtype of floats made;
        whether a value was read at batch 1 from a view over the batch."""
        regs: list[Any] = []
        dtype = rt.dtype
        shared = False
        for ins in self.program:  # the values read come first
            if ins[0] != "in":
                break
            v = x["formula." + ins[1]]
            if v.dtype.is_floating_point:
                dtype = v.dtype
            one = unbroadcast(rt, v)
            shared = shared or one is not v
            regs.append(one)
        for reg, d, src, sd in self.cuts:  # parameters over a length: its first N entries
            if src < 0:  # cut by the parameter itself, to the batch's size
                continue
            n, most = regs[src].shape[sd], regs[reg].shape[d]
            torch._check(n <= most, lambda n=n, most=most: (
                f"a parameter of this formula holds {most} positions (its max_len), but this "
                f"batch has {n}: raise max_len, or give shorter inputs"))
            regs[reg] = regs[reg].narrow(d, 0, n)
        return regs, dtype, shared

    def python_line(self, args: dict[str, str], rt: str, require: Any) -> str:
        """This expression as one line of torch (see :func:`python_line`)."""
        return python_line(self, args, rt, require)


def _singular(prog: Any) -> bool:
    """Whether the program divides, raises to a power or calls a function whose
    derivative is infinite at a finite argument (:attr:`Function.singular`)."""
    return any((ins[0] == "bin" and ins[1] in ("/", "^"))
               or (ins[0] in ("call", "axis") and FUNCTIONS[ins[1]].singular)
               for ins in prog.instrs)


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
    in_pads = tuple((r, p) for r, ins in enumerate(prog.instrs) if ins[0] == "in"
                    if (p := tuple((s, i + 1) for i, s in enumerate(prog.vals[r].sizes)
                                   if isinstance(s, str)))) if _singular(prog) else ()
    return Expr(tuple(prog.instrs), prog.out, pads, tuple(cuts), perm, ctx.node.spec.formula,
                impls, in_pads)


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
