"""The ``location`` scorer function (Luong et al. 2015): scores of positions, not of
item content: a learned score per position, or a gaussian window around a position
predicted from the query. Registered in :data:`attngraph.kinds.scorers.SCORERS`.
"""

from __future__ import annotations

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx
from attngraph.kinds.scorers import ScorerInfo, _mod, register_scorer

__all__: list[str] = []


def _location(ctx: RuleCtx, q: TensorType | None, k: TensorType) -> dict[str, TensorType]:
    s = ctx.spec
    n = k.dims[0]
    if k.heads or (q is not None and q.heads):
        ctx.fail("fn location scores positions, one set of scores for all heads, but its "
                 f"{'query' if q is not None and q.heads else 'key'} has heads",
                 "query" if q is not None and q.heads else "key",
                 "give it keys (and a query) without heads: the positions are the same for "
                 "every head")
    mode = s.mode or ("gaussian" if q is not None else "learned")
    if mode == "learned":
        max_len = s.max_len if s.max_len is not None else (n if isinstance(n, int) else None)
        if max_len is None:
            ctx.fail("location scores learned per position need 'max_len'",
                     hint="add max_len: <longest N>")
        if isinstance(n, int) and n > max_len:
            ctx.fail(f"location scores learned for max_len {max_len} positions, but the keys "
                     f"have {n} items", field="max_len",
                     hint=f"raise max_len to {n}, or drop it (the keys are a fixed {n} items)")
        ctx.params += max_len
        if q is not None:
            ctx.fail("location mode 'learned' takes no query", "query",
                     "use mode: gaussian to center a window on a position predicted from it")
        return {"": TensorType((n,))}
    if q is None:
        ctx.fail("location mode 'gaussian' predicts its position from a query",
                 hint="add query: <decoder state>")
    dq = ctx.fixed(q.dims[-1], "the feature size of 'query'", "query")
    hidden = s.hidden if s.hidden is not None else dq
    ctx.params += dq * hidden + hidden
    return {"": TensorType((n,) if q.rank == 1 else (q.dims[0], n))}


register_scorer(ScorerInfo(
    "location", "s_i = w_i (learned per position), or "
    "-(i - p)²/(2σ²) with p = N·sigmoid(vᵀ tanh(W q))",
    needs_query=False, content=False, module=_mod("Location"), shape=_location,
    applies="query", parameters="w: `max_len`; or W: hidden × d_q, v",
    doc="depends on positions, not on item content: `mode: learned` (no query) or "
    "`gaussian` (a window of width σ around p, predicted from the query)",
))
