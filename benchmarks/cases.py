"""The specs and the hand-written PyTorch modules the benchmarks compare.

Each hand-written module is what a careful PyTorch user would write for the
same mechanism, with the same parameter shapes as the lowered spec.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

__all__ = [
    "mhsa_spec", "HandMHSA", "global_spec", "HandGlobal", "additive_spec", "HandAdditive",
    "local_spec", "HandDenseLocal", "deep_transformer_spec", "masked_rnn_spec",
    "HandPackedRnn",
]


def mhsa_spec(d: int, heads: int, window: int | None = None) -> str:
    """Multi-head self-attention over vectors [N, d]; output projection back to d."""
    mask = f", mask: {{window: {window}}}" if window is not None else ""
    return f"""attngraph: 1
name: mhsa
dims: {{d: {d}}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  q: {{kind: queries, from: x, dim: d, heads: {heads}}}
  k: {{kind: keys, from: x, dim: d, heads: {heads}}}
  v: {{kind: values, from: x, dim: d, heads: {heads}}}
  score: {{kind: scorer, fn: scaled_dot, query: q, key: k, pairs: all}}
  p: {{kind: softmax, scores: score{mask}}}
  z: {{kind: readout, weights: p, values: v, combine: concat, out: d}}
outputs: {{z: z}}
"""


def local_spec(d: int, heads: int, window: int) -> str:
    """Windowed (local) multi-head self-attention."""
    return mhsa_spec(d, heads, window)


class HandMHSA(nn.Module):
    """Projections + ``F.scaled_dot_product_attention`` + output projection."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.h = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        b, n, d = x.shape

        def split(t: Tensor) -> Tensor:
            return t.view(b, n, self.h, d // self.h).transpose(1, 2)

        z = F.scaled_dot_product_attention(split(self.q(x)), split(self.k(x)),
                                           split(self.v(x)), attn_mask=mask)
        return self.o(z.transpose(1, 2).reshape(b, n, d))


class HandDenseLocal(HandMHSA):
    """Local attention the dense way: SDPA with an explicit N×N band mask."""

    def __init__(self, d: int, heads: int, window: int) -> None:
        super().__init__(d, heads)
        self.window = window

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        n = x.shape[1]
        i = torch.arange(n)
        band = (i[:, None] - i[None, :]).abs() <= self.window  # (N, N)
        return super().forward(x, band)


def global_spec(vocab: int, d: int, classes: int) -> str:
    """The catalog's global attention classifier (specs/global_attention.yaml)."""
    return f"""attngraph: 1
name: global_attention
dims: {{vocab: {vocab}, d: {d}, classes: {classes}}}
inputs:
  tokens: {{type: tokens, vocab: vocab}}
nodes:
  x:      {{kind: items, from: tokens, embed: d}}
  score:  {{kind: scorer, fn: additive, query: {{learned: d}}, key: x}}
  p:      {{kind: softmax, scores: score}}
  z:      {{kind: readout, weights: p, values: x}}
  logits: {{kind: linear, from: z, out: classes}}
outputs: {{logits: logits}}
"""


class HandGlobal(nn.Module):
    """Embedding, e_i = vᵀ tanh(W q + U x_i + b), softmax, z = Σ p_i x_i, linear."""

    def __init__(self, vocab: int, d: int, classes: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.q = nn.Parameter(torch.randn(d) / d**0.5)
        self.W = nn.Linear(d, d)  # W q + b
        self.U = nn.Linear(d, d, bias=False)
        self.v = nn.Parameter(torch.randn(d) / d**0.5)
        self.out = nn.Linear(d, classes)

    def forward(self, tokens: Tensor) -> Tensor:
        x = self.emb(tokens)  # (B, N, d)
        e = torch.tanh(self.U(x) + self.W(self.q)) @ self.v  # (B, N)
        p = torch.softmax(e, dim=-1)
        z = (p.unsqueeze(1) @ x).squeeze(1)  # (B, d)
        return self.out(z)


def additive_spec(d: int, hidden: int) -> str:
    """Bahdanau's alignment model over all (target, source) pairs, then the contexts."""
    return f"""attngraph: 1
name: additive
dims: {{d: {d}, a: {hidden}}}
inputs:
  dec: {{type: vectors, dim: d, length: T}}
  enc: {{type: vectors, dim: d}}
nodes:
  score: {{kind: scorer, fn: additive, query: dec, key: enc, hidden: a}}
  p: {{kind: softmax, scores: score}}
  c: {{kind: readout, weights: p, values: enc}}
outputs: {{c: c}}
"""


class HandAdditive(nn.Module):
    """e_{t,j} = vᵀ tanh(W s_t + U h_j + b); α = softmax_j(e); c_t = Σ_j α_{t,j} h_j."""

    def __init__(self, d: int, hidden: int) -> None:
        super().__init__()
        self.W = nn.Linear(d, hidden)
        self.U = nn.Linear(d, hidden, bias=False)
        self.v = nn.Parameter(torch.randn(hidden) / hidden**0.5)

    def forward(self, dec: Tensor, enc: Tensor) -> Tensor:
        e = torch.tanh(self.W(dec).unsqueeze(2) + self.U(enc).unsqueeze(1)) @ self.v
        return torch.softmax(e, dim=-1) @ enc  # (B, T, d)


def masked_rnn_spec(d: int, hidden: int, cell: str) -> str:
    """A bidirectional GRU or LSTM encoder over padded vectors: outputs and final state."""
    return f"""attngraph: 1
name: masked_rnn
dims: {{d: {d}, h: {hidden}}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  enc: {{kind: rnn, cell: {cell}, from: x, hidden: h, bidirectional: true}}
outputs: {{out: enc, state: enc.state}}
"""


class HandPackedRnn(nn.Module):
    """``pack_padded_sequence`` + bidirectional ``nn.GRU``/``nn.LSTM`` + ``pad_packed_sequence``."""

    def __init__(self, d: int, hidden: int, cell: str) -> None:
        super().__init__()
        cls = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = cls(d, hidden, batch_first=True, bidirectional=True)

    def forward(self, x: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        """``lengths`` (B,) on the CPU; returns out (B, N, 2h) and state (B, 2h)."""
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, hn = self.rnn(packed)
        h = hn if isinstance(hn, Tensor) else hn[0]  # (2, B, h)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, torch.cat([h[0], h[1]], -1)


def deep_transformer_spec(times: int) -> str:
    """specs/transformer_encoder.yaml with ``times: <times>`` layers."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "specs" / "transformer_encoder.yaml"
    text = path.read_text(encoding="utf-8")
    old = "times: 2,"
    if old not in text:
        msg = f"{path} no longer has '{old}'; update benchmarks/cases.py"
        raise RuntimeError(msg)
    return text.replace(old, f"times: {times},")
