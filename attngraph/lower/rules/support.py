"""Lowering rules of the supporting kinds: linear, mlp, embedding, position, norm,
add, concat, dropout (rnn lives in :mod:`attngraph.lower.rules.rnn`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.kinds.base import traits_of
from attngraph.lower.rules.activations import activation_fn, activation_module
from attngraph.lower.rules.masks import expand_to, padding_mask
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime


class Linear(NodeModule):
    """y = act(x Wᵀ + b): ``weight`` (out, d), ``bias`` (out)."""

    def __init__(self, d: int, out: int, bias: bool = True, act: str = "none") -> None:
        super().__init__()
        lin = nn.Linear(d, out, bias=bias)
        self.weight = lin.weight
        self.bias = lin.bias
        self.act = activation_module(act)
        # the activation as a function: the module's own call costs more than it
        self._act: Callable[[Tensor], Tensor] | None = activation_fn(act)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        y = F.linear(x["from"], self.weight, self.bias)  # (B, ..., out)
        return y if self._act is None else self._act(y)


def lower_linear(ctx: LowerCtx) -> NodeModule:
    """A dense layer on the last axis."""
    s = ctx.spec
    return Linear(ctx.features("from"), s.out, s.bias, s.act)


class Mlp(NodeModule):
    """``layers`` hidden layers with ``act``, then a linear to ``out``."""

    def __init__(self, d: int, hidden: int, out: int, act: str, layers: int) -> None:
        super().__init__()
        mods: list[nn.Module] = []
        for i in range(layers):
            mods += [nn.Linear(d if i == 0 else hidden, hidden), activation_module(act)]
        mods.append(nn.Linear(hidden, out))
        self.net = nn.Sequential(*mods)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return self.net(x["from"])  # (B, ..., out)


def lower_mlp(ctx: LowerCtx) -> NodeModule:
    """A multi-layer perceptron on the last axis."""
    s = ctx.spec
    return Mlp(ctx.features("from"), s.hidden, s.out, s.act, s.layers)


class Embedding(NodeModule):
    """Ids -> vectors: ``weight`` (vocab, dim)."""

    def __init__(self, vocab: int, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, dim))

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return F.embedding(x["from"], self.weight)  # (B, ..., dim)


def lower_embedding(ctx: LowerCtx) -> NodeModule:
    """A lookup table; ``vocab`` from the spec or the tokens input."""
    s = ctx.spec
    vocab = s.vocab
    if vocab is None:
        spec = ctx.graph.node(ctx.edge("from").src).spec  # as the shape rule's id bound
        vocab = (spec.classes or spec.vocab) if spec.type == "labels" else \
            (spec.vocab or spec.classes)
    return Embedding(int(vocab), int(s.dim))


def sinusoid(n: int, dim: int, device: torch.device,
             dtype: torch.dtype = torch.float32) -> Tensor:
    """Sinusoidal position table (n, dim): sin on even, cos on odd features, computed
    in ``dtype``."""
    pos = torch.arange(n, device=device, dtype=dtype)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, device=device, dtype=dtype)
                     * (-math.log(10000.0) / dim))
    pe = torch.zeros(n, dim, device=device, dtype=dtype)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)
    return pe


class Position(NodeModule):
    """Context vectors for positions 0..N-1 of ``from``'s items axis: a learned
    table of ``max_len`` rows, or sinusoidal when ``max_len`` is None."""

    def __init__(self, dim: int, max_len: int | None, axis: int) -> None:
        super().__init__()
        self.dim = dim
        self.axis = axis
        self.weight = (nn.Parameter(torch.randn(max_len, dim) * 0.02)
                       if max_len is not None else None)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        src = x["from"]
        n = src.shape[self.axis]
        if self.weight is not None:
            if n > self.weight.shape[0]:
                # the run-time wrapper names the node and its line
                msg = (f"the learned table covers max_len {self.weight.shape[0]} positions, "
                       f"but this input has {n} items")
                raise ValueError(msg)
            pe = self.weight[:n]
        else:
            # computed in float32 at least (float16 loses the phases of far positions),
            # in float64 for a float64 model (not float32's values cast), then in the
            # model's dtype, so a half or bf16 model stays in it
            out = src.dtype if src.is_floating_point() else rt.dtype
            pe = sinusoid(n, self.dim, src.device, torch.promote_types(out, torch.float32))
            pe = pe.to(out)
        return pe.unsqueeze(0).expand(src.shape[0], n, self.dim)  # (B, N, dim)


class PatchCentres(NodeModule):
    """``encoding: xy``: the (x, y) centre of each of ``rows × cols`` image patches,
    row by row, in the glimpse's coordinates (``[-1, 1]``, the image's corners at
    ±1): a constant ``[N, 2]`` buffer, no parameters."""

    centres: Tensor

    def __init__(self, rows: int, cols: int) -> None:
        super().__init__()
        self.rows, self.cols = rows, cols
        self.register_buffer("centres", patch_centres(rows, cols, torch.float32))

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        src = x["from"]
        # a float64 model gets the centres computed in float64, not float32's cast
        c = patch_centres(self.rows, self.cols, src.dtype).to(src.device) \
            if src.dtype == torch.float64 else self.centres.to(src.dtype)
        return c.unsqueeze(0).expand(src.shape[0], *c.shape)  # (B, N, 2)


def patch_centres(rows: int, cols: int, dtype: torch.dtype) -> Tensor:
    """The (x, y) centres of ``rows × cols`` patches in ``[-1, 1]``, row by row: (N, 2)."""
    x = (torch.arange(cols, dtype=dtype) + 0.5) / cols * 2 - 1
    y = (torch.arange(rows, dtype=dtype) + 0.5) / rows * 2 - 1
    yy, xx = torch.meshgrid(y, x, indexing="ij")
    return torch.stack([xx, yy], -1).reshape(-1, 2)


def lower_position(ctx: LowerCtx) -> NodeModule:
    """Sinusoidal or learned position vectors [N, dim]; patch centres [N, 2]."""
    s = ctx.spec
    t = ctx.t("from")
    if s.encoding == "xy":
        from attngraph.kinds.support import image_grid

        grid = image_grid(ctx.graph.node(ctx.edge("from").src), ctx.type_of)
        return PatchCentres(*grid)
    n = t.dims[0]
    rows = None
    if s.encoding == "learned":
        max_len = s.max_len or (n if isinstance(n, int) else None)
        if max_len is None:
            ctx.fail("learned positions need 'max_len'", hint="add max_len: <longest N>")
        rows = int(max_len)
    return Position(int(s.dim), rows, 2 if t.heads else 1)


class Norm(NodeModule):
    """Layer norm (``weight``, ``bias``) or RMS norm (``weight``) on the last axis."""

    def __init__(self, d: int, fn: str, eps: float | None = None) -> None:
        super().__init__()
        self.d = d
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if fn == "layer" else None
        self.fn = fn
        self.eps = eps

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]
        if self.fn == "layer":
            eps = 1e-5 if self.eps is None else self.eps
            return F.layer_norm(v, (self.d,), self.weight, self.bias, eps)
        return F.rms_norm(v, (self.d,), self.weight, self.eps)


def lower_norm(ctx: LowerCtx) -> NodeModule:
    """Normalisation over features."""
    s = ctx.spec
    return Norm(ctx.features("from"), s.fn, float(s.eps) if s.eps is not None else None)


class Add(NodeModule):
    """Sum (a kind that ``sums``: ``add``) or product (``mul``) of the inputs; a vector
    broadcasts over items, and over an image's channels (one value per channel,
    ``trail`` axes of 1 after it)."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        from attngraph.kinds.support import trailing_ones

        edges = ctx.node.edges("from")
        self.roles = [str(e.role) for e in edges]
        self.out_type = ctx.node.types[""]
        self.mul = not traits_of(ctx.node).sums  # (mul)
        ts = [ctx.type_of(e) for e in edges]
        self.trail = [trailing_ones(t, ts) for t in ts]

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        vals = [expand_to(x[r].reshape(*x[r].shape, *([1] * n)) if n else x[r], self.out_type)
                for r, n in zip(self.roles, self.trail, strict=True)]
        out = vals[0]
        for v in vals[1:]:
            out = out * v if self.mul else out + v
        return out


class Gain(NodeModule):
    """γ·x, γ one learned scalar starting at ``init``."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.tensor(float(ctx.spec.init)))

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return self.gamma * x["from"]


class Pool(NodeModule):
    """Mean, max or sum over the real items: (B, N, d) -> (B, d); no real item: zeros.

    The reduction is the formula function of the same meaning (``mean(x, items)``,
    ``max(x, items)``, ``sum(x, items)``): one implementation, the algebra's."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        from attngraph.algebra.functions import FUNCTIONS, REDUCTION_OF
        from attngraph.registry import resolve

        impl = FUNCTIONS[REDUCTION_OF.get(ctx.spec.fn, ctx.spec.fn)].impl
        self.reduce: Callable[..., Tensor] = resolve(impl) if isinstance(impl, str) else impl
        self.t = ctx.t("from")

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        pad = padding_mask(rt, self.t, axis=0)  # (B, N, 1)
        return self.reduce(x["from"], 1, pad)  # (B, d)



class Concat(NodeModule):
    """Join the inputs' features."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.roles = [str(e.role) for e in ctx.node.edges("from")]

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return torch.cat([x[r] for r in self.roles], dim=-1)



class Dropout(NodeModule):
    """Dropout in training, identity in eval."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return F.dropout(x["from"], self.p, self.training)


def lower_dropout(ctx: LowerCtx) -> NodeModule:
    """Dropout with probability ``p``."""
    return Dropout(ctx.spec.p)
