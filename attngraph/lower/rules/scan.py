"""Recurrences as torch's ``scan`` while exporting, so that their length stays dynamic.

In eager mode (and under ``torch.compile``) a ``loop`` and an ``rnn`` over items run a
Python ``for`` over their steps: the fastest way there, but ``torch.export`` unrolls it
at the length it traces, and the program then takes that length only. While
exporting (``torch.compiler.is_exporting()``), the same step runs through the ``scan``
higher-order operator instead: the program holds one step, run once per element of
a dynamic axis.

What scan asks of a step, and how it is met here:

- the step is a pure function of its carry and of one slice of its inputs: the
  loop's fixed inputs, the parameters and the padding masks are read from the
  enclosing scope (scan lifts them), and a runtime of its own takes what nodes
  record per step (``rt.steps``, ``rt.aux``: training-only records a program does
  not return);
- no output aliases an input or another output, and a carry keeps its strides:
  every value leaves as a fresh contiguous copy;
- the carry keeps its metadata: a fed-back token (a long id) is carried as a float
  (exact below 2**24), since an integer carry breaks scan's autograd tracing.

Both paths run the same node modules, so they compute the same values; the tests
compare an exported program with the eager model at a new batch and length.

>>> import torch
>>> from attngraph.lower.rules.scan import rnn_scan
>>> from attngraph.lower.rules.rnn import RecurrentWeights, cell_step
>>> w = RecurrentWeights("gru", 3, 4, 1, False)
>>> x, h0 = torch.randn(2, 5, 3), torch.zeros(1, 2, 4)
>>> out, last, _ = rnn_scan(w, cell_step, x, h0, None, None)
>>> ref, hn, _ = w(x, h0)
>>> bool(torch.allclose(out, ref, atol=1e-6)) and bool(torch.allclose(last, hn, atol=1e-6))
True
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

if TYPE_CHECKING:
    from collections.abc import Callable

    from attngraph.lower.rules.loop import Feed, Loop, Stages
    from attngraph.lower.runtime.module import Runtime

__all__ = ["loop_scan", "rnn_scan"]


def _scan(fn: Any, init: Any, xs: Any, *, reverse: bool = False) -> tuple[Any, Any]:
    """torch's scan over axis 1 of ``xs``: (final carry, outputs stacked on axis 1)."""
    from torch._higher_order_ops.scan import scan

    return scan(fn, init, xs, dim=1, reverse=reverse)  # type: ignore[no-untyped-call]


def _own(v: Tensor) -> Tensor:
    """A fresh contiguous copy: scan's values may alias nothing, and a carry must keep
    its strides (an expanded init would not)."""
    return v.clone(memory_format=torch.contiguous_format)


def _token_dtype(rt: Runtime) -> torch.dtype:
    """The float type a fed-back id is carried in: at least float32 (exact ids)."""
    return torch.promote_types(rt.dtype, torch.float32)


def loop_scan(loop: Loop, stages: Stages, fixed: dict[str, Tensor],
              state: dict[str, Tensor], early: dict[str, Tensor], fed_back: list[Feed],
              every: Tensor, rt: Runtime
              ) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[str, Tensor]]:
    """Run ``loop``'s ``stages.step`` once per step through scan.

    Parameters
    ----------
    loop : Loop
        The lowered loop (its nodes, carries and output keys).
    stages : Stages
        The stages chosen for this call; ``before`` already ran.
    fixed, state : dict
        The loop's inputs (the same at every step) and the carries' first values.
    early : dict
        Every value known before the steps, (B, T, ...) each: step t reads ``[:, t]``.
    fed_back : list of Feed
        The feeds that are the argmax of the previous step's output.
    every : Tensor
        A tensor whose axis 1 has the number of steps (the ``steps`` reference).
    rt : Runtime
        The model's runtime (masks, batch, dtype, device).

    Returns
    -------
    stacks, records, state : dict
        The body outputs made at each step, stacked as the loop stacks them; the
        values the ``after`` stage reads, (B, T, ...); the final carries.
    """
    b = rt.batch
    tok = _token_dtype(rt)
    ids = {f.name: torch.full((b,), float(f.start), dtype=tok, device=rt.device)
           for f in fed_back}  # (B,) the start id of each fed-back feed
    init = ({k: _own(v) for k, v in state.items()}, ids)
    xs = {"": every, **early}

    def step(carry: tuple[dict[str, Tensor], dict[str, Tensor]], xt: dict[str, Tensor]
             ) -> tuple[Any, Any]:
        now, ids = carry
        vals = {**fixed, **now, **{k: v for k, v in xt.items() if k}}
        for f in fed_back:
            vals[f.name] = ids[f.name].long()
        own = replace(rt, aux={}, steps={})  # per-step records stay inside the step
        after, per_step, recorded = loop._step(stages, vals, own)
        fed = {f.name: vals[loop.keys[str(f.feedback)][0]].argmax(-1).to(tok)
               for f in fed_back}
        return (({k: _own(v) for k, v in after.items()}, fed),
                ({k: _own(v) for k, v in per_step.items()},
                 {k: _own(v) for k, v in recorded.items()}))

    (final, _), (ys, recs) = _scan(step, init, xs)
    stacks = {k: v.transpose(1, 2) if loop.stack_axis[k] == 2 else v for k, v in ys.items()}
    return stacks, recs, final


def rnn_scan(rnn: Any, cell: Callable[..., tuple[Tensor, Tensor | None]], v: Tensor,
             h0: Tensor, c0: Tensor | None,
             mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
    """A multi-layer, one- or two-way GRU/LSTM over the items of ``v`` (B, N, d) through
    scan, with the semantics of :meth:`attngraph.lower.rules.rnn.Rnn._stepwise` (padded items
    keep the state and output zeros).

    Parameters
    ----------
    rnn : RecurrentWeights
        The weights (``weight_ih_l0``... as ``nn.GRU`` names them) and ``cell``, the
        kind (``"gru"`` or ``"lstm"``).
    cell : callable
        One step, ``cell(kind, x, h, c, w_ih, w_hh, b_ih, b_hh) -> (h, c)``
        (:func:`attngraph.lower.rules.rnn.cell_step`).
    v : Tensor
        The items (B, N, d).
    h0, c0 : Tensor
        Initial states (layers·dirs, B, h); ``c0`` for an LSTM only.
    mask : Tensor, optional
        (B, N) bool, True = a real item.

    Returns
    -------
    out, last, cell : Tensor
        Outputs (B, N, h·dirs); the last layer's final hidden (dirs, B, h) and cell
        states (LSTM, else None).
    """
    kind = rnn.cell
    dirs = 2 if rnn.bidirectional else 1
    keep = (mask.unsqueeze(-1) if mask is not None
            else v.new_ones(v.shape[0], v.shape[1], 1, dtype=torch.bool))  # (B, N, 1)
    layer_in = v
    finals: list[Tensor] = []
    cells: list[Tensor] = []
    for layer in range(rnn.num_layers):
        outs, finals, cells = [], [], []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            w = [getattr(rnn, f"{p}{sfx}") for p in ("weight_ih", "weight_hh", "bias_ih",
                                                      "bias_hh")]
            i = layer * dirs + d
            init = (_own(h0[i]), _own(c0[i] if c0 is not None else h0[i]))

            def step(carry: tuple[Tensor, Tensor], xt: tuple[Tensor, Tensor],
                     w: list[Tensor] = w) -> tuple[Any, Tensor]:
                h, c = carry
                x, k = xt
                h2, c2 = cell(kind, x, h, c if kind == "lstm" else None, *w)
                h = torch.where(k, h2, h)
                c = torch.where(k, c2, c) if c2 is not None else _own(c)
                return (h, c), h * k.to(h.dtype)

            (h, c), ys = _scan(step, init, (layer_in, keep), reverse=bool(d))
            outs.append(ys)  # (B, N, h)
            finals.append(h)
            if kind == "lstm":
                cells.append(c)
        layer_in = torch.cat(outs, -1)  # (B, N, h·dirs)
    return layer_in, torch.stack(finals, 0), torch.stack(cells, 0) if cells else None
