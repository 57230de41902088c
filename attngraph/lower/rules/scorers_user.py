"""A user's scorer function (a :class:`~attngraph.kinds.scorers.ScorerInfo` with
``make``): its module built and checked (:func:`_user_scorer`), and run as a
:class:`UserScorer`."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.kinds.hooks import call_hook, hook_name, instance_of
from attngraph.kinds.scorers import scorer_count
from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.rules.scorers_base import QueryRead, Scorer
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["UserScorer"]


class UserScorer(Scorer):
    """A user's scorer module (``ScorerInfo.make``) whose ``forward(q, k)`` gives the
    scores of all pairs; it may also take ``mask`` (the keys' padding, (B, N) bool,
    True = real) and ``positions`` (the keys' item indices, (N,)) by keyword. What it
    raises, and scores of another shape than declared, fail naming the function (the
    run-time wrapper adds the node and its line)."""

    broadcasts_batch = False

    def __init__(self, inner: nn.Module, read: QueryRead, name: str) -> None:
        super().__init__(0, 0, 0, None, None, read)
        self.inner = inner
        self.fn = name
        self.key_type = read.key
        takes = _keywords(inner.forward)
        self.wants = {w for w in ("mask", "positions") if w in takes or "**" in takes}

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        self._extra: dict[str, Tensor | None] = {}
        k = x["key"]
        if "mask" in self.wants and self.key_type is not None:
            m = padding_mask(rt, self.key_type.with_dims(self.key_type.dims[0]))
            self._extra["mask"] = m
        if "positions" in self.wants:
            self._extra["positions"] = torch.arange(k.shape[-2], device=k.device)
        return super().forward(x, rt)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        try:
            out = self.inner(q, k, **getattr(self, "_extra", {}))
        except Exception as exc:  # noqa: BLE001 - the user's code: name it, keep the cause
            msg = f"scorer fn '{self.fn}' raised {type(exc).__name__}: {exc}"
            raise RuntimeError(msg) from exc
        want = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        if not isinstance(out, Tensor) or tuple(out.shape) != tuple(want):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            msg = (f"scorer fn '{self.fn}' returned scores of shape {got}, but scores of "
                   f"{q.shape[-2]} queries against {k.shape[-2]} keys are {tuple(want)}")
            raise ValueError(msg)
        return out


def _keywords(fn: Any) -> set[str]:
    """The parameter names ``fn`` takes (``**`` when it takes any keyword)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {"**" if p.kind is p.VAR_KEYWORD else p.name for p in params}


def _user_scorer(ctx: LowerCtx, info: Any, dq: int, dk: int, hidden: int,
                 read: QueryRead) -> NodeModule:
    """Build a registered function's module: told the head count when its ``make``
    takes ``heads``; what ``make`` raises, and a parameter count other than it
    declared, are located errors at the node."""
    where = hook_name(info.make)
    takes = _keywords(info.make)
    heads = read.heads
    declared = scorer_count(ctx.node, info, "params", dq, dk, hidden, error=LoweringError)
    if heads and heads > 1 and "heads" not in takes and "**" not in takes and declared:
        ctx.fail(f"scorer fn '{info.name}' has parameters but its make() takes no head count, "
                 f"so it cannot give each of the {heads} heads its own",
                 hint=f"give {where} a 'heads' parameter: make(dq, dk, hidden, heads) and "
                 "parameters with a leading head axis")
    kw = {"heads": heads} if "heads" in takes or "**" in takes else {}
    inner = call_hook(info.make, dq, dk, hidden, **kw, node=ctx.node, error=LoweringError,
                      what=f"scorer fn '{info.name}': make({dq}, {dk}, {hidden})",
                      expect=instance_of(nn.Module, "an nn.Module"), loc=ctx.node.where("fn"))
    declared *= heads or 1
    has = sum(p.numel() for p in inner.parameters())
    if has != declared:
        ctx.fail(f"scorer fn '{info.name}' declares {declared:,} parameters "
                 f"(params({dq}, {dk}, {hidden})" + (f" × {heads} heads" if heads else "")
                 + f"), but its module has {has:,}",
                 hint="make its ScorerInfo params(dq, dk, hidden) count the module's "
                 "parameters (per head), so that validate and the resource guard are true")
    return UserScorer(inner, read, info.name)
