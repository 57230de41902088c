"""Lowering rule of ``rnn``: GRU/LSTM over a sequence, or one cell step on a vector.

Without a padding mask the sequence runs through torch's fused GRU/LSTM (the
weights are ``nn.GRU``'s/``nn.LSTM``'s, held by :class:`RecurrentWeights`). With one,
each row runs over its real items only, so padding appended after them changes
neither the outputs at real items nor the final ``state``, in either direction: the
backward direction starts at the row's last real item. Outputs at padded items are
zero; a row with no real item has zero outputs and its initial state as ``state``.
``init`` [h] (or [h·dirs] for a bidirectional rnn) starts every layer.
An LSTM's ``state`` port is its hidden state h and ``cell_state`` its cell state c,
which starts at ``init_cell`` (zeros without it): a loop carries both.
With ``each``, one cell step runs on every item alone ([N, d] with states [N, h]).

The masked rows go through ``pack_padded_sequence`` (lengths from the mask; padding
is trailing, which the forward checks enforce). ``torch.compile`` traces neither
packing (data-dependent sizes) nor ``nn.GRU``/``nn.LSTM``, so while compiling the
same weights run step by step with the same semantics (:meth:`Rnn._stepwise`), with
or without a mask; both are tested equal. While exporting, that step runs through
torch's ``scan`` (:func:`attngraph.lower.rules.scan.rnn_scan`), so that the number of items
stays dynamic in the program.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.rules.scan import rnn_scan
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime


def cell_step(cell: str, x: Tensor, h: Tensor, c: Tensor | None, w_ih: Tensor, w_hh: Tensor,
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


class RecurrentWeights(nn.Module):
    """The weights of a multi-layer, one- or two-way GRU or LSTM, under the names,
    in the order and with the initialisation of ``nn.GRU``/``nn.LSTM`` (so state dicts
    and seeds are theirs), run by the same fused ops (``torch.gru``/``torch.lstm``).

    Not an ``nn.RNNBase``: ``torch.compile`` refuses to trace those, even to read their
    weights, while it traces this module (the rnn then runs by steps, see
    :meth:`Rnn._stepwise`).
    """

    def __init__(self, cell: str, d: int, hidden: int, layers: int,
                 bidirectional: bool) -> None:
        super().__init__()
        ref = (nn.GRU if cell == "gru" else nn.LSTM)(
            d, hidden, num_layers=layers, batch_first=True, bidirectional=bidirectional)
        self.names: list[str] = list(ref._flat_weights_names)
        for name in self.names:
            self.register_parameter(name, ref._parameters[name])
        self.cell, self.input_size, self.hidden_size = cell, d, hidden
        self.num_layers, self.bidirectional = layers, bidirectional

    def extra_repr(self) -> str:
        return (f"{self.cell.upper()}({self.input_size}, {self.hidden_size}, "
                f"num_layers={self.num_layers}, bidirectional={self.bidirectional})")

    def forward(self, x: Tensor, h0: Tensor, c0: Tensor | None = None,
                batch_sizes: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """``x`` (B, N, d), or packed data with its ``batch_sizes``; states
        (layers·dirs, B, h). Returns the outputs and the final h (and c)."""
        w: list[Tensor] = [self._parameters[n] for n in self.names]  # type: ignore[misc]
        args = (w, True, self.num_layers, 0.0, self.training, self.bidirectional)
        if self.cell == "gru":
            out, hn = (torch.gru(x, h0, *args, True) if batch_sizes is None
                       else torch.gru(x, batch_sizes, h0, *args))
            return out, hn, None
        if c0 is None:
            msg = "an LSTM needs its initial cell state"
            raise ValueError(msg)
        out, hn, cn = (torch.lstm(x, (h0, c0), *args, True) if batch_sizes is None
                       else torch.lstm(x, batch_sizes, (h0, c0), *args))
        return out, hn, cn


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
        self.each = bool(s.each)
        self.step = t.rank == 1 or self.each
        self.vector = t.rank == 1 and not self.each
        d = int(t.dims[-1])
        if self.step:
            cell_cls = nn.GRUCell if s.cell == "gru" else nn.LSTMCell
            self.cell = cell_cls(d, self.hidden)
        else:
            self.rnn = RecurrentWeights(s.cell, d, self.hidden, s.layers, s.bidirectional)

    def _h0(self, x: dict[str, Tensor], b: int, ref: Tensor, role: str = "init") -> Tensor:
        """Initial hidden (or cell) state (layers·dirs, B, h)."""
        init = x.get(role)
        if init is None:
            return ref.new_zeros(self.layers * self.dirs, b, self.hidden)
        if init.shape[-1] == self.hidden:
            per_dir = [init] * self.dirs
        else:
            per_dir = list(init.split(self.hidden, -1))
        return torch.stack(per_dir * self.layers, 0)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        v = x["from"]
        if self.vector:  # one step on (B, d): a loop body's cell
            return self._vector_step(v, x.get("init"), x.get("init_cell"))
        if self.step:
            return self._step(v, x.get("init"), x.get("init_cell"), rt)
        h0 = self._h0(x, v.shape[0], v)
        c0 = self._h0(x, v.shape[0], v, "init_cell") if self.kind == "lstm" else None
        mask = padding_mask(rt, self.t.with_dims(self.t.dims[0]))
        if torch.compiler.is_exporting():
            # one step in the program, run over a dynamic number of items
            out, last, cn = rnn_scan(self.rnn, cell_step, v, h0, c0, mask)
        elif torch.compiler.is_compiling():
            # dynamo traces neither nn.GRU/nn.LSTM nor packing: the same weights, by step
            out, last, cn = self._stepwise(v, h0, c0, mask)
        elif mask is None:
            out, hn, cn = self.rnn(v, h0, c0)  # (B, N, h·dirs), (layers·dirs, B, h) x2
            last = hn[-self.dirs:]  # (dirs, B, h)
            cn = None if cn is None else cn[-self.dirs:]
        else:
            out, last, cn = self._packed(v, h0, c0, mask)
        state = torch.cat(list(last.unbind(0)), -1)  # (B, h·dirs)
        ports = {"": out, "out": out, "state": state}
        if cn is not None:
            ports["cell_state"] = torch.cat(list(cn.unbind(0)), -1)
        return ports

    def _step(self, v: Tensor, h: Tensor | None, c: Tensor | None,
              rt: Runtime) -> dict[str, Tensor]:
        """One cell step on (B, d), or on each item of (B, N, d) alone."""
        if v.dim() == 2 and not self.each:  # the step of a loop body: the cell's own op
            return self._vector_step(v, h, c)
        lead = v.shape[:-1]  # (B,) or (B, N)
        if h is None:
            h = v.new_zeros(*lead, self.hidden)
        h = h.expand(*lead, self.hidden)
        flat = v.reshape(-1, v.shape[-1])
        hf = h.reshape(-1, self.hidden)
        ports: dict[str, Tensor] = {}
        if self.kind == "gru":
            h2 = self.cell(flat, hf).reshape(*lead, self.hidden)
        else:
            c = v.new_zeros(*lead, self.hidden) if c is None else c.expand(*lead, self.hidden)
            h2f, c2f = self.cell(flat, (hf, c.reshape(-1, self.hidden)))
            h2 = h2f.reshape(*lead, self.hidden)
            ports["cell_state"] = c2f.reshape(*lead, self.hidden)
        if self.each:  # padded items keep zeros
            mask = padding_mask(rt, self.t, axis=0)  # (B, N, 1)
            if mask is not None:
                h2 = h2 * mask.to(h2.dtype)
                if "cell_state" in ports:
                    ports["cell_state"] = ports["cell_state"] * mask.to(h2.dtype)
        ports.update({"": h2, "out": h2, "state": h2})  # (B, [N,] h)
        return ports

    def _vector_step(self, v: Tensor, h: Tensor | None,
                     c: Tensor | None) -> dict[str, Tensor]:
        """One step on (B, d) from states (B, h) (or (1, h), or zeros): what
        ``nn.GRUCell``/``nn.LSTMCell`` compute, without their checks of batched input."""
        cell = self.cell
        size = (v.shape[0], self.hidden)
        if h is None:
            h = v.new_zeros(size)
        elif h.shape != size:  # an init shared by the rows
            h = h.expand(size)
        w = (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
        if self.kind == "gru":
            h2 = torch.gru_cell(v, h, *w)
            return {"": h2, "out": h2, "state": h2}
        if c is None:
            c = v.new_zeros(size)
        elif c.shape != size:
            c = c.expand(size)
        h2, c2 = torch.lstm_cell(v, (h, c), *w)
        return {"": h2, "out": h2, "state": h2, "cell_state": c2}

    def _packed(self, v: Tensor, h0: Tensor, c0: Tensor | None,
                mask: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Each row over its real items (packed). Returns out and the last layer's
        hidden and (LSTM) cell states."""
        # pack_padded_sequence wants lengths on the CPU and refuses 0: an empty row
        # runs one padded item, then its outputs and states are replaced below.
        lengths = mask.sum(1).cpu()  # (B,)
        empty = lengths == 0
        packed = pack_padded_sequence(v, lengths.clamp(min=1), batch_first=True,
                                      enforce_sorted=False)
        order, back = packed.sorted_indices, packed.unsorted_indices
        if order is None or back is None:  # enforce_sorted=False always gives both
            msg = "pack_padded_sequence gave no permutation"
            raise RuntimeError(msg)
        data, hn, cn = self.rnn(packed.data, h0.index_select(1, order),
                                None if c0 is None else c0.index_select(1, order),
                                batch_sizes=packed.batch_sizes)
        out, _ = pad_packed_sequence(PackedSequence(data, packed.batch_sizes, order, back),
                                     batch_first=True, total_length=v.shape[1])
        last = hn.index_select(1, back)[-self.dirs:]  # (dirs, B, h)
        cn = None if cn is None else cn.index_select(1, back)[-self.dirs:]
        # (while tracing, always: the branch would be recorded for the traced rows)
        if torch.jit.is_tracing() or bool(empty.any()):
            e = empty.to(v.device)
            out = out.masked_fill(e[:, None, None], 0.0)  # (B, N, h·dirs)
            last = torch.where(e[None, :, None], h0[-self.dirs:], last)
            if cn is not None and c0 is not None:
                cn = torch.where(e[None, :, None], c0[-self.dirs:], cn)
        return out, last, cn

    def _stepwise(self, v: Tensor, h0: Tensor, c0: Tensor | None,
                  mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Step by step; padded steps keep the state. Returns out and the last layer's
        hidden and (LSTM) cell states."""
        n = v.shape[1]
        keep = mask.unsqueeze(-1) if mask is not None else None  # (B, N, 1)
        layer_in = v
        finals: list[Tensor] = []
        cells: list[Tensor] = []
        for layer in range(self.layers):
            outs = []
            finals = []
            cells = []
            for d in range(self.dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w = [getattr(self.rnn, f"{p}{sfx}") for p in
                     ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                h = h0[layer * self.dirs + d]
                c = c0[layer * self.dirs + d] if c0 is not None else None
                ys: list[Tensor] = [h] * n
                order = range(n - 1, -1, -1) if d else range(n)
                for i in order:
                    h2, c2 = cell_step(self.kind, layer_in[:, i], h, c, *w)
                    if keep is None:
                        h, c = h2, c2
                        ys[i] = h
                        continue
                    k = keep[:, i]
                    h = torch.where(k, h2, h)
                    if c is not None and c2 is not None:
                        c = torch.where(k, c2, c)
                    ys[i] = h * k.to(h.dtype)
                outs.append(torch.stack(ys, 1))  # (B, N, h)
                finals.append(h)
                if c is not None:
                    cells.append(c)
            layer_in = torch.cat(outs, -1)  # (B, N, h·dirs)
        return layer_in, torch.stack(finals, 0), torch.stack(cells, 0) if cells else None
