"""The catalog's loop models and their hand-written PyTorch twins.

Each twin is what a careful PyTorch user writes for the same model: the same
parameters (count and shapes, up to a transpose), the same computation, with the
usual hand optimisations (the encoder-side projection of an attention score
computed once, before the decoder loop), and otherwise the plain loop of the
papers' equations, step by step. ``copy_into(twin, model)`` copies a compiled
spec's weights into its twin, so that a test can check both give the same outputs
(``tests/test_bench_twins.py``); the benchmark then times the two.

``catalog(name, **dims)`` is a catalog spec with its ``dims:`` changed (e.g. to the
benchmark's d = 128).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
import torch.nn.functional as F
from loops_more import (
    HandCaption,
    HandDraw,
    HandHandwriting,
    HandNtmCopy,
    HandObjects,
    HandPointerSort,
    HandSpeech,
)
from torch import Tensor, nn

__all__ = ["catalog", "TWINS", "copy_into", "HandBahdanau", "HandBahdanauAfter", "HandLuong",
           "HandLuongLocalP", "HandMemoryNetwork", "HandGlimpseSoft", "HandGlimpseHard",
           "HandSpeech", "HandPointerSort", "HandCaption", "HandObjects", "HandNtmCopy",
           "HandHandwriting", "HandDraw"]

SPECS = Path(__file__).resolve().parent.parent / "specs"


def catalog(name: str, **dims: int) -> str:
    """The text of ``specs/<name>.yaml`` with the given dims replaced."""
    text = (SPECS / f"{name}.yaml").read_text(encoding="utf-8")
    m = re.search(r"^dims: \{(.*?)\}", text, re.M)
    if m is None:
        msg = f"specs/{name}.yaml has no one-line 'dims: {{...}}'; update benchmarks/loops.py"
        raise RuntimeError(msg)
    old = dict(kv.split(":") for kv in m.group(1).replace(" ", "").split(","))
    unknown = set(dims) - set(old)
    if unknown:
        msg = f"specs/{name}.yaml has no dims {sorted(unknown)}"
        raise RuntimeError(msg)
    new = {**old, **{k: str(v) for k, v in dims.items()}}
    line = "dims: {" + ", ".join(f"{k}: {v}" for k, v in new.items()) + "}"
    return text[:m.start()] + line + text[m.end():]


def _uniform(*shape: int) -> nn.Parameter:
    return nn.Parameter(torch.empty(*shape).uniform_(-shape[-1] ** -0.5, shape[-1] ** -0.5))


class HandBahdanau(nn.Module):
    """Bi-GRU encoder; GRUCell decoder with the additive score
    e_tj = vᵀ tanh(W s_{t-1} + b + U h_j), U h_j computed once; teacher forcing."""

    def __init__(self, vocab: int, e: int, h: int, s: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, e)
        self.enc = nn.GRU(e, h, batch_first=True, bidirectional=True)
        self.y_emb = nn.Embedding(vocab, e)
        self.W = nn.Linear(s, s)  # W s + b
        self.U = nn.Linear(2 * h, s, bias=False)
        self.v = nn.Parameter(torch.empty(s).uniform_(-s ** -0.5, s ** -0.5))
        self.cell = nn.GRUCell(e + 2 * h, s)
        self.out = nn.Linear(s + 2 * h, vocab)
        self.s = s

    def forward(self, source: Tensor, target: Tensor) -> dict[str, Tensor]:
        h, _ = self.enc(self.emb(source))  # (B, N, 2h)
        uh = self.U(h)  # (B, N, s), once
        b, steps = target.shape
        state = h.new_zeros(b, self.s)
        prev = torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1)  # shifted right
        y = self.y_emb(prev)  # (B, T, e)
        logits, alphas = [], []
        for t in range(steps):
            e = torch.tanh(self.W(state).unsqueeze(1) + uh) @ self.v  # (B, N)
            alpha = torch.softmax(e, -1)
            c = (alpha.unsqueeze(1) @ h).squeeze(1)  # (B, 2h)
            state = self.cell(torch.cat([y[:, t], c], -1), state)
            logits.append(self.out(torch.cat([state, c], -1)))
            alphas.append(alpha)
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    #: twin parameter -> (spec parameter, transposed)
    names = {
        "emb.weight": ("nodes.x.embed.weight", False),
        "y_emb.weight": ("nodes.dec.nodes.y_emb.weight", False),
        "W.weight": ("nodes.dec.nodes.score.W", True),
        "W.bias": ("nodes.dec.nodes.score.b", False),
        "U.weight": ("nodes.dec.nodes.score.U", True),
        "v": ("nodes.dec.nodes.score.v", False),
        "cell.*": ("nodes.dec.nodes.next.cell.*", False),
        "enc.*": ("nodes.enc.rnn.*", False),
        "out.*": ("nodes.dec.nodes.logits.*", False),
    }


class HandBahdanauAfter(HandBahdanau):
    """:class:`HandBahdanau` with its output layer applied once after the loop (on every
    step's [s_t; c_t]), as the compiled spec does under teacher forcing: the careful
    hand-written version, for context."""

    def forward(self, source: Tensor, target: Tensor) -> dict[str, Tensor]:
        h, _ = self.enc(self.emb(source))
        uh = self.U(h)
        b, steps = target.shape
        state = h.new_zeros(b, self.s)
        y = self.y_emb(torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1))
        outs, alphas = [], []
        for t in range(steps):
            alpha = torch.softmax(torch.tanh(self.W(state).unsqueeze(1) + uh) @ self.v, -1)
            c = (alpha.unsqueeze(1) @ h).squeeze(1)
            state = self.cell(torch.cat([y[:, t], c], -1), state)
            outs.append(torch.cat([state, c], -1))
            alphas.append(alpha)
        return {"logits": self.out(torch.stack(outs, 1)), "attention": torch.stack(alphas, 1)}


def _lookup(names: dict[str, tuple[str, bool]], twin_name: str) -> tuple[str, bool]:
    if twin_name in names:
        return names[twin_name]
    head, _, tail = twin_name.partition(".")
    src, tr = names[f"{head}.*"]
    return src.replace("*", tail), tr


def copy_into(twin: nn.Module, model: nn.Module) -> None:
    """Copy a compiled spec's parameters into its twin (every twin parameter)."""
    theirs = dict(model.named_parameters())
    with torch.no_grad():
        for name, p in twin.named_parameters():
            src, tr = _lookup(type(twin).names, name)  # type: ignore[arg-type]
            w = theirs[src]
            p.copy_(w.T if tr else w)


class HandLuong(nn.Module):
    """Bi-GRU encoder; GRUCell decoder h_t = GRU(E y_{t-1}, h_{t-1}); general score
    h_tᵀ W_a h̄_s; h̃_t = tanh(W_c [c_t; h_t]); logits = W_o h̃_t; teacher forcing."""

    def __init__(self, vocab: int, e: int, h: int, hh: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, e)
        self.enc = nn.GRU(e, hh, batch_first=True, bidirectional=True)
        self.y_emb = nn.Embedding(vocab, e)
        self.cell = nn.GRUCell(e, h)
        self.W_a = _uniform(h, h)
        self.att = nn.Linear(2 * hh + h, h)
        self.out = nn.Linear(h, vocab)
        self.h = h

    def forward(self, source: Tensor, target: Tensor) -> dict[str, Tensor]:
        hs, _ = self.enc(self.emb(source))  # (B, N, h)
        b, steps = target.shape
        state = hs.new_zeros(b, self.h)
        y = self.y_emb(torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1))
        logits, alphas = [], []
        for t in range(steps):
            state = self.cell(y[:, t], state)
            a = torch.softmax(((state @ self.W_a).unsqueeze(1) @ hs.transpose(1, 2))
                              .squeeze(1), -1)  # (B, N)
            c = (a.unsqueeze(1) @ hs).squeeze(1)
            logits.append(self.out(torch.tanh(self.att(torch.cat([c, state], -1)))))
            alphas.append(a)
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    names = {
        "emb.weight": ("nodes.x.embed.weight", False),
        "y_emb.weight": ("nodes.dec.nodes.y_emb.weight", False),
        "W_a": ("nodes.dec.nodes.score.W", False),
        "cell.*": ("nodes.dec.nodes.ht.cell.*", False),
        "enc.*": ("nodes.enc.rnn.*", False),
        "att.*": ("nodes.dec.nodes.att.*", False),
        "out.*": ("nodes.dec.nodes.logits.*", False),
    }


class HandLuongLocalP(nn.Module):
    """GRU encoder whose final state starts the decoder; Luong's local-p attention:
    general score plus -(s - p_t)²/(2σ²), p_t = N·sigmoid(v_pᵀ tanh(W_p h_t))."""

    def __init__(self, vocab: int, e: int, h: int, sigma: float = 1.0) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, e)
        self.enc = nn.GRU(e, h, batch_first=True)
        self.y_emb = nn.Embedding(vocab, e)
        self.cell = nn.GRUCell(e, h)
        self.W_a = _uniform(h, h)
        self.W_p = nn.Linear(h, h, bias=False)
        self.v_p = nn.Parameter(torch.empty(h).uniform_(-h ** -0.5, h ** -0.5))
        self.att = nn.Linear(2 * h, h)
        self.out = nn.Linear(h, vocab)
        self.sigma = sigma

    def forward(self, source: Tensor, target: Tensor) -> dict[str, Tensor]:
        hs, last = self.enc(self.emb(source))  # (B, N, h), (1, B, h)
        b, steps = target.shape
        n = hs.shape[1]
        pos = torch.arange(n, dtype=hs.dtype)
        state = last[0]
        y = self.y_emb(torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1))
        logits, alphas = [], []
        for t in range(steps):
            state = self.cell(y[:, t], state)
            content = ((state @ self.W_a).unsqueeze(1) @ hs.transpose(1, 2)).squeeze(1)
            p = n * torch.sigmoid(torch.tanh(self.W_p(state)) @ self.v_p)  # (B,)
            where = -((pos - p.unsqueeze(1)) ** 2) / (2 * self.sigma ** 2)
            a = torch.softmax(content + where, -1)
            c = (a.unsqueeze(1) @ hs).squeeze(1)
            logits.append(self.out(torch.tanh(self.att(torch.cat([c, state], -1)))))
            alphas.append(a)
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    names = {
        "emb.weight": ("nodes.x.embed.weight", False),
        "y_emb.weight": ("nodes.dec.nodes.y_emb.weight", False),
        "W_a": ("nodes.dec.nodes.content.W", False),
        "W_p.weight": ("nodes.dec.nodes.where.W", True),
        "v_p": ("nodes.dec.nodes.where.v", False),
        "cell.*": ("nodes.dec.nodes.ht.cell.*", False),
        "enc.*": ("nodes.enc.rnn.*", False),
        "att.*": ("nodes.dec.nodes.att.*", False),
        "out.*": ("nodes.dec.nodes.logits.*", False),
    }


class HandMemoryNetwork(nn.Module):
    """An NTM-style step: GRU controller on [E x_t; r_{t-1}]; content addressing
    β·cos(k_t, M_i) (β fixed) then softmax; location addressing (gate, shift by ±1,
    sharpen); read r_t = w M; write M ⊙ (1 - w eᵀ) + w aᵀ with e = sigmoid(W_e h_t);
    logits from [h_t; r_t]. M_0 is a learned [S, W] parameter shared by the batch."""

    #: the spec's fixed β of the cosine scorer
    BETA = 5.0

    def __init__(self, vocab: int, e: int, hs: int, slots: int, width: int) -> None:
        super().__init__()
        self.m0 = _uniform(slots, width)
        self.x_emb = nn.Embedding(vocab, e)
        self.cell = nn.GRUCell(e + width, hs)
        self.key = nn.Linear(hs, width)
        self.erase = nn.Linear(hs, width)
        self.add = nn.Linear(hs, width)
        self.address = nn.Linear(hs, 5)  # gate, 3 shifts, sharpening
        self.out = nn.Linear(hs + width, vocab)
        self.slots, self.width, self.hs = slots, width, hs

    def forward(self, seq: Tensor) -> dict[str, Tensor]:
        b, steps = seq.shape
        mem = self.m0.unsqueeze(0).expand(b, -1, -1)  # (B, S, W)
        h = mem.new_zeros(b, self.hs)
        w = mem.new_zeros(b, self.slots)
        r = mem.new_zeros(b, self.width)
        x = self.x_emb(seq)  # (B, T, e)
        logits, ws = [], []
        for t in range(steps):
            h = self.cell(torch.cat([x[:, t], r], -1), h)
            k = torch.tanh(self.key(h))
            cos = (F.normalize(k, dim=-1, eps=1e-8).unsqueeze(1)
                   @ F.normalize(mem, dim=-1, eps=1e-8).transpose(1, 2)).squeeze(1)
            wc = torch.softmax(self.BETA * cos, -1)  # (B, S)
            p = self.address(h)
            g = torch.sigmoid(p[:, :1])
            shift = torch.softmax(p[:, 1:4], -1)
            gamma = 1 + F.softplus(p[:, 4:])
            wg = g * wc + (1 - g) * w
            ws_ = sum(shift[:, i:i + 1] * torch.roll(wg, i - 1, dims=-1) for i in range(3))
            w = torch.softmax(gamma * ws_.clamp_min(1e-30).log(), -1)
            r = (w.unsqueeze(1) @ mem).squeeze(1)  # (B, width)
            e = torch.sigmoid(self.erase(h))
            a = torch.tanh(self.add(h))
            mem = mem * (1 - w.unsqueeze(-1) * e.unsqueeze(1)) + w.unsqueeze(-1) * a.unsqueeze(1)
            logits.append(self.out(torch.cat([h, r], -1)))
            ws.append(w)
        return {"logits": torch.stack(logits, 1), "weights": torch.stack(ws, 1)}

    names = {
        "x_emb.weight": ("nodes.ntm.nodes.x_emb.weight", False),
        "cell.*": ("nodes.ntm.nodes.ctrl.cell.*", False),
        "key.*": ("nodes.ntm.nodes.key.*", False),
        "erase.*": ("nodes.ntm.nodes.erase.*", False),
        "add.*": ("nodes.ntm.nodes.addv.*", False),
        "m0": ("nodes.m0.initial", False),
        "address.*": ("nodes.ntm.nodes.wl.proj.*", False),
        "out.*": ("nodes.ntm.nodes.logits.*", False),
    }


class HandGlimpseSoft(nn.Module):
    """8×8 tiles projected to d, plus a learned vector per tile; an MLP; the score
    vᵀ tanh(W a_i + b) of each tile; softmax; Σ α_i a_i; an MLP classifier."""

    def __init__(self, d: int, classes: int, tiles: int = 16) -> None:
        super().__init__()
        self.proj = nn.Linear(64, d)
        self.where = nn.Parameter(torch.randn(tiles, d) * 0.02)
        self.feat = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.W = nn.Linear(d, d)
        self.v = nn.Parameter(torch.empty(d).uniform_(-d ** -0.5, d ** -0.5))
        self.head = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, classes))

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        tiles = F.unfold(image, kernel_size=8, stride=8).transpose(1, 2)  # (B, 16, 64)
        a = self.feat(self.proj(tiles) + self.where)
        alpha = torch.softmax(torch.tanh(self.W(a)) @ self.v, -1)  # (B, 16)
        z = (alpha.unsqueeze(1) @ a).squeeze(1)
        return {"logits": self.head(z), "attention": alpha}

    names = {
        "proj.*": ("nodes.tiles.proj.*", False),
        "where": ("nodes.where.weight", False),
        "feat.*": ("nodes.feat.net.*", False),
        "W.weight": ("nodes.score.W", True),
        "W.bias": ("nodes.score.b", False),
        "v": ("nodes.score.v", False),
        "head.*": ("nodes.logits.net.*", False),
    }


def _retina(image: Tensor, loc: Tensor, size: int, scales: int) -> Tensor:
    """Patches of side size·2^i around loc ((x, y) in [-1, 1]), each averaged to size."""
    b, c, h, w = image.shape
    out = []
    for i in range(scales):
        side = size * 2 ** i
        theta = torch.zeros(b, 2, 3, dtype=image.dtype)
        theta[:, 0, 0], theta[:, 1, 1] = side / w, side / h
        theta[:, :, 2] = loc
        grid = F.affine_grid(theta, [b, c, side, side], align_corners=False)
        patch = F.grid_sample(image, grid, align_corners=False)
        out.append(F.avg_pool2d(patch, 2 ** i) if i else patch)
    return torch.stack(out, 1).flatten(1)


class HandGlimpseHard(nn.Module):
    """The recurrent attention model: a two-scale 16×16 retina at l_t; g = relu(W g) +
    relu(W l); GRU core; the location network scores a learned vector per cell from
    the glimpse and samples the next cell (REINFORCE, baseline from the core)."""

    def __init__(self, gd: int, hs: int, classes: int, steps: int = 3) -> None:
        super().__init__()
        self.cells = nn.Parameter(torch.randn(16, gd) * 0.02)
        self.where = nn.Linear(2, gd)
        self.what = nn.Linear(512, gd)
        self.q = nn.Linear(512, gd)
        self.core = nn.GRUCell(gd, hs)
        self.baseline = nn.Linear(hs, 1)
        self.out = nn.Linear(hs, classes)
        x = (torch.arange(4.0) + 0.5) / 4 * 2 - 1
        self.register_buffer("centres", torch.stack(torch.meshgrid(x, x, indexing="xy"),
                                                    -1).reshape(16, 2))
        self.hs, self.steps = hs, steps

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        b = image.shape[0]
        h = image.new_zeros(b, self.hs)
        loc = image.new_zeros(b, 2)
        logps, bases, locs = [], [], []
        for _ in range(self.steps):
            g = _retina(image, loc, 16, 2)
            h = self.core(F.relu(self.what(g)) + F.relu(self.where(loc)), h)
            e = F.relu(self.q(g)) @ self.cells.T  # (B, 16)
            logp = torch.log_softmax(e, -1)
            if self.training:
                i = torch.multinomial(logp.exp().detach(), 1).squeeze(1)
            else:
                i = e.argmax(-1)
            locs.append(loc)
            loc = F.one_hot(i, 16).to(e.dtype) @ self.centres
            logps.append(logp.gather(1, i[:, None]).squeeze(1))
            bases.append(self.baseline(h.detach()).squeeze(1))
        return {"logits": self.out(h), "log_prob": torch.stack(logps, 1),
                "baseline": torch.stack(bases, 1), "locations": torch.stack(locs, 1)}

    names = {
        "cells": ("nodes.cells.weight", False),
        "where.*": ("nodes.ram.nodes.where.*", False),
        "what.*": ("nodes.ram.nodes.what.*", False),
        "q.*": ("nodes.ram.nodes.q.*", False),
        "core.*": ("nodes.ram.nodes.core.cell.*", False),
        "baseline.*": ("nodes.ram.nodes.pick.baseline_proj.*", False),
        "out.*": ("nodes.logits.*", False),
    }


TWINS: dict[str, type[nn.Module]] = {
    "bahdanau_translation": HandBahdanau, "luong_translation": HandLuong,
    "luong_local_p": HandLuongLocalP, "memory_network": HandMemoryNetwork,
    "glimpse_soft": HandGlimpseSoft, "glimpse_hard": HandGlimpseHard,
    "speech_recognition": HandSpeech, "pointer_sort": HandPointerSort,
    "caption_generation": HandCaption, "object_recognition": HandObjects,
    "ntm_copy": HandNtmCopy,
    "handwriting_generation": HandHandwriting,
    "image_generation": HandDraw,
}
