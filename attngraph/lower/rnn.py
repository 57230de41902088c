"""Lowering rule of ``rnn``: GRU/LSTM over a sequence, or one cell step on a vector.

Without a padding mask the sequence runs through ``nn.GRU``/``nn.LSTM``. With one,
each row runs over its real items only, so padding appended after them changes
neither the outputs at real items nor the final ``state``, in either direction: the
backward direction starts at the row's last real item. Outputs at padded items are
zero; a row with no real item has zero outputs and its initial state as ``state``.
``init`` [h] (or [h·dirs] for a bidirectional rnn) starts every layer.
An LSTM's ``state`` port is its hidden state h; the cell state starts at zero.

The masked rows go through ``pack_padded_sequence`` (lengths from the mask; padding
is trailing, which the forward checks enforce). ``torch.compile`` cannot trace
packing (data-dependent sizes), so while compiling the same weights run step by step
with the same semantics (:meth:`Rnn._stepwise`); both are tested equal.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attngraph.lower.masks import padding_mask
from attngraph.lower.module import LowerCtx, NodeModule, Runtime


def _cell(cell: str, x: Tensor, h: Tensor, c: Tensor | None, w_ih: Tensor, w_hh: Tensor,
          b_ih: Tensor, b_hh: Tensor) -> tuple[Tensor, Tensor | None]:
    """One GRU or LSTM step with PyTorch's gate layout."""
    gi = x @ w_ih.T + b_ih
    gh = h @ w_hh.T + b_hh
    if cell == "gru":
        ir, iz, in_ = gi.chunk(3, -1)
        hr, hz, hn = gh.chunk(3, -1)
        r = torch.sigmoid(ir + hr)
        z = torch.sigmoid(iz + hz)
        n = torch.tanh(in_ + r * hn)
        return (1 - z) * n + z * h, None
    if c is None:
        msg = "an LSTM step needs its cell state"
        raise ValueError(msg)
    i, f, g, o = (gi + gh).chunk(4, -1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2), c2


class Rnn(NodeModule):
    """Ports ``out`` (B, N, h·dirs) and ``state`` (B, h·dirs); ``rnn`` holds the weights."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        t = ctx.t("from")
        self.t = t
        self.kind = s.cell
        self.hidden = int(s.hidden)
        self.dirs = 2 if s.bidirectional else 1
        self.layers = s.layers
        self.step = t.rank == 1
        d = int(t.dims[-1])
        if self.step:
            cell_cls = nn.GRUCell if s.cell == "gru" else nn.LSTMCell
            self.cell = cell_cls(d, self.hidden)
        else:
            rnn_cls = nn.GRU if s.cell == "gru" else nn.LSTM
            self.rnn = rnn_cls(d, self.hidden, num_layers=s.layers, batch_first=True,
                               bidirectional=s.bidirectional)

    def _h0(self, x: dict[str, Tensor], b: int, ref: Tensor) -> Tensor:
        """Initial hidden state (layers·dirs, B, h)."""
        init = x.get("init")
        if init is None:
            return ref.new_zeros(self.layers * self.dirs, b, self.hidden)
        if init.shape[-1] == self.hidden:
            per_dir = [init] * self.dirs
        else:
            per_dir = list(init.split(self.hidden, -1))
        return torch.stack(per_dir * self.layers, 0)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        v = x["from"]
        if self.step:
            h = x.get("init")
            if h is None:
                h = v.new_zeros(v.shape[0], self.hidden)
            if self.kind == "gru":
                h = self.cell(v, h)
            else:
                h, _ = self.cell(v, (h, torch.zeros_like(h)))
            return {"": h, "out": h, "state": h}  # (B, h)
        h0 = self._h0(x, v.shape[0], v)
        mask = padding_mask(rt, self.t.with_dims(self.t.dims[0]))
        if mask is None:
            hx = h0 if self.kind == "gru" else (h0, torch.zeros_like(h0))
            out, hn = self.rnn(v, hx)  # (B, N, h·dirs)
            hn = hn if self.kind == "gru" else hn[0]
            last = hn[-self.dirs:]  # (dirs, B, h)
        elif torch.compiler.is_compiling():
            out, last = self._stepwise(v, h0, mask)
        else:
            out, last = self._packed(v, h0, mask)
        state = torch.cat(list(last.unbind(0)), -1)  # (B, h·dirs)
        return {"": out, "out": out, "state": state}

    def _packed(self, v: Tensor, h0: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Each row over its real items (packed). Returns out and last-layer states."""
        # pack_padded_sequence wants lengths on the CPU and refuses 0: an empty row
        # runs one padded item, then its outputs and states are replaced below.
        lengths = mask.sum(1).cpu()  # (B,)
        empty = lengths == 0
        packed = pack_padded_sequence(v, lengths.clamp(min=1), batch_first=True,
                                      enforce_sorted=False)
        hx = h0 if self.kind == "gru" else (h0, torch.zeros_like(h0))
        out_p, hn = self.rnn(packed, hx)
        out, _ = pad_packed_sequence(out_p, batch_first=True, total_length=v.shape[1])
        hn = hn if self.kind == "gru" else hn[0]
        last = hn[-self.dirs:]  # (dirs, B, h)
        if bool(empty.any()):
            e = empty.to(v.device)
            out = out.masked_fill(e[:, None, None], 0.0)  # (B, N, h·dirs)
            last = torch.where(e[None, :, None], h0[-self.dirs:], last)
        return out, last

    def _stepwise(self, v: Tensor, h0: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """Step by step; padded steps keep the state. Returns out and last-layer states."""
        n = v.shape[1]
        keep = mask.unsqueeze(-1)  # (B, N, 1)
        layer_in = v
        finals: list[Tensor] = []
        for layer in range(self.layers):
            outs = []
            finals = []
            for d in range(self.dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w = [getattr(self.rnn, f"{p}{sfx}") for p in
                     ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                h = h0[layer * self.dirs + d]
                c = torch.zeros_like(h) if self.kind == "lstm" else None
                ys: list[Tensor] = [h] * n
                order = range(n - 1, -1, -1) if d else range(n)
                for i in order:
                    h2, c2 = _cell(self.kind, layer_in[:, i], h, c, *w)
                    k = keep[:, i]
                    h = torch.where(k, h2, h)
                    if c is not None and c2 is not None:
                        c = torch.where(k, c2, c)
                    ys[i] = h * k.to(h.dtype)
                outs.append(torch.stack(ys, 1))  # (B, N, h)
                finals.append(h)
            layer_in = torch.cat(outs, -1)  # (B, N, h·dirs)
        return layer_in, torch.stack(finals, 0)
