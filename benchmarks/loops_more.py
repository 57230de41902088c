"""Hand-written PyTorch twins of the catalog's speech recogniser, pointer network,
captioner, recurrent attention model of several objects, NTM copier, handwriting
generator and DRAW.

Like the twins in :mod:`loops`: the same parameters (up to a transpose) and the
same computation as the compiled spec, written as the papers' equations in a
plain loop, with the encoder-side projection of the score computed once.
:mod:`loops` lists them in its ``TWINS``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["HandSpeech", "HandPointerSort", "HandCaption", "HandObjects", "HandNtmCopy",
           "HandHandwriting", "HandDraw"]


def _vector(n: int) -> nn.Parameter:
    return nn.Parameter(torch.empty(n).uniform_(-n ** -0.5, n ** -0.5))


class HandSpeech(nn.Module):
    """Bi-GRU encoder; GRUCell decoder with location-aware attention (Chorowski et
    al. 2015): f = F * α_{i-1}, e = vᵀ tanh(W s + b + U h_j + V f_j); teacher forcing."""

    def __init__(self, vocab: int, feat: int, e: int, h: int, s: int, filters: int,
                 width: int) -> None:
        super().__init__()
        self.enc = nn.GRU(feat, h, batch_first=True, bidirectional=True)
        self.y_emb = nn.Embedding(vocab, e)
        self.F = nn.Conv1d(1, filters, width, padding=width // 2, bias=False)
        self.W = nn.Linear(s, s)  # W s + b
        self.U = nn.Linear(2 * h, s, bias=False)
        self.V = nn.Linear(filters, s, bias=False)
        self.v = _vector(s)
        self.cell = nn.GRUCell(e + 2 * h, s)
        self.out = nn.Linear(s + 2 * h, vocab)
        self.s = s

    def forward(self, frames: Tensor, target: Tensor) -> dict[str, Tensor]:
        h, _ = self.enc(frames)  # (B, N, 2h)
        uh = self.U(h)  # (B, N, s), once
        b, steps = target.shape
        state = h.new_zeros(b, self.s)
        prev = h.new_zeros(b, h.shape[1])  # α_0 = 0
        y = self.y_emb(torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1))
        logits, alphas = [], []
        for t in range(steps):
            f = self.F(prev.unsqueeze(1)).transpose(1, 2)  # (B, N, filters)
            e = torch.tanh(self.W(state).unsqueeze(1) + uh + self.V(f)) @ self.v  # (B, N)
            alpha = torch.softmax(e, -1)
            c = (alpha.unsqueeze(1) @ h).squeeze(1)  # (B, 2h)
            state = self.cell(torch.cat([y[:, t], c], -1), state)
            logits.append(self.out(torch.cat([state, c], -1)))
            alphas.append(alpha)
            prev = alpha
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    #: twin parameter -> (spec parameter, transposed)
    names = {
        "enc.*": ("nodes.enc.rnn.*", False),
        "y_emb.weight": ("nodes.dec.nodes.y_emb.weight", False),
        "F.weight": ("nodes.dec.nodes.f.conv.weight", False),
        "W.weight": ("nodes.dec.nodes.score.W", True),
        "W.bias": ("nodes.dec.nodes.score.b", False),
        "U.weight": ("nodes.dec.nodes.score.U", True),
        "V.weight": ("nodes.dec.nodes.score.V", True),
        "v": ("nodes.dec.nodes.score.v", False),
        "cell.*": ("nodes.dec.nodes.next.cell.*", False),
        "out.*": ("nodes.dec.nodes.logits.*", False),
    }


class HandPointerSort(nn.Module):
    """LSTM encoder; LSTMCell decoder from its last states, first fed a learned start
    vector, then the embedded number the target points at; the pointer scores
    u_j = vᵀ tanh(W d + b + U e_j) are the logits (Vinyals et al. 2015)."""

    def __init__(self, vocab: int, d: int, hidden: int) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.enc = nn.LSTM(d, hidden, batch_first=True)
        self.go = nn.Parameter(torch.randn(1, d))
        self.cell = nn.LSTMCell(d, hidden)
        self.W = nn.Linear(hidden, hidden)  # W d + b
        self.U = nn.Linear(hidden, hidden, bias=False)
        self.v = _vector(hidden)

    def forward(self, source: Tensor, target: Tensor) -> dict[str, Tensor]:
        x = self.emb(source)  # (B, N, d)
        e, (h, c) = self.enc(x)
        h, c = h[0], c[0]
        ue = self.U(e)  # (B, N, hidden), once
        rows = torch.arange(x.shape[0])
        inp = self.go.expand(x.shape[0], -1)
        scores, pointers = [], []
        for t in range(target.shape[1]):
            h, c = self.cell(inp, (h, c))
            u = torch.tanh(self.W(h).unsqueeze(1) + ue) @ self.v  # (B, N)
            scores.append(u)
            pointers.append(torch.softmax(u, -1))
            inp = x[rows, target[:, t]]  # the number the target points at
        return {"logits": torch.stack(scores, 1), "attention": torch.stack(pointers, 1)}

    names = {
        "emb.weight": ("nodes.x.embed.weight", False),
        "enc.*": ("nodes.enc.rnn.*", False),
        "go": ("nodes.go.weight", False),
        "cell.*": ("nodes.dec.nodes.dec.cell.*", False),
        "W.weight": ("nodes.dec.nodes.u.W", True),
        "W.bias": ("nodes.dec.nodes.u.b", False),
        "U.weight": ("nodes.dec.nodes.u.U", True),
        "v": ("nodes.dec.nodes.u.v", False),
    }


class HandCaption(nn.Module):
    """Show, attend and tell over 8×8 tiles (Xu et al. 2015): a_i = P tile_i + where_i;
    (h_0, c_0) from the mean annotation; e_ti = vᵀ tanh(W h + b + U a_i), U a_i once;
    ẑ = σ(f_β(h)) Σ α a; LSTMCell([E y ; ẑ]); deep output L_o(E y + L_h h + L_z ẑ)."""

    def __init__(self, vocab: int, feat: int, embed: int, hidden: int, att: int,
                 tiles: int = 6) -> None:
        super().__init__()
        self.proj = nn.Linear(64, feat)
        self.where = nn.Parameter(torch.randn(tiles, feat) * 0.02)
        self.h0 = nn.Linear(feat, hidden)
        self.c0 = nn.Linear(feat, hidden)
        self.emb = nn.Embedding(vocab, embed)
        self.W = nn.Linear(hidden, att)  # W h + b
        self.U = nn.Linear(feat, att, bias=False)
        self.v = _vector(att)
        self.beta = nn.Linear(hidden, 1)
        self.cell = nn.LSTMCell(embed + feat, hidden)
        self.lh = nn.Linear(hidden, embed, bias=False)
        self.lz = nn.Linear(feat, embed, bias=False)
        self.out = nn.Linear(embed, vocab)

    def forward(self, image: Tensor, target: Tensor) -> dict[str, Tensor]:
        tiles = F.unfold(image, kernel_size=8, stride=8).transpose(1, 2)  # (B, L, 64)
        a = self.proj(tiles) + self.where  # (B, L, feat)
        mean = a.mean(1)
        h, c = self.h0(mean), self.c0(mean)
        ua = self.U(a)  # (B, L, att), once
        b = target.shape[0]
        y = self.emb(torch.cat([target.new_zeros(b, 1), target[:, :-1]], 1))
        logits, alphas = [], []
        for t in range(target.shape[1]):
            e = torch.tanh(self.W(h).unsqueeze(1) + ua) @ self.v  # (B, L)
            alpha = torch.softmax(e, -1)
            z = torch.sigmoid(self.beta(h)) * (alpha.unsqueeze(1) @ a).squeeze(1)  # (B, feat)
            h, c = self.cell(torch.cat([y[:, t], z], -1), (h, c))
            logits.append(self.out(y[:, t] + self.lh(h) + self.lz(z)))
            alphas.append(alpha)
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    names = {
        "proj.*": ("nodes.tiles.proj.*", False),
        "where": ("nodes.pos.weight", False),
        "h0.*": ("nodes.h0.*", False),
        "c0.*": ("nodes.c0.*", False),
        "emb.weight": ("nodes.dec.nodes.e.weight", False),
        "W.weight": ("nodes.dec.nodes.score.W", True),
        "W.bias": ("nodes.dec.nodes.score.b", False),
        "U.weight": ("nodes.dec.nodes.score.U", True),
        "v": ("nodes.dec.nodes.score.v", False),
        "beta.*": ("nodes.dec.nodes.beta.*", False),
        "cell.*": ("nodes.dec.nodes.cell.cell.*", False),
        "lh.weight": ("nodes.dec.nodes.lh.weight", False),
        "lz.weight": ("nodes.dec.nodes.lz.weight", False),
        "out.*": ("nodes.dec.nodes.logits.*", False),
    }


class HandObjects(nn.Module):
    """DRAM with soft glimpses over a row of 8×8 tiles (Ba et al. 2015):
    g_i = relu(W_what P x_i) ⊙ relu(W_where l_i); r²_0 = tanh(W_c mean g);
    α = softmax(vᵀ tanh(W r² + b + U g_i)), U g once; r¹ = GRU(Σ α g), r² = GRU(r¹)."""

    def __init__(self, classes: int, d: int, hs: int, att: int) -> None:
        super().__init__()
        self.proj = nn.Linear(64, d)
        self.what = nn.Linear(d, d)
        self.where = nn.Linear(2, d)
        self.context = nn.Linear(d, hs)
        self.W = nn.Linear(hs, att)  # W r² + b
        self.U = nn.Linear(d, att, bias=False)
        self.v = _vector(att)
        self.core1 = nn.GRUCell(d, hs)
        self.core2 = nn.GRUCell(hs, hs)
        self.out = nn.Linear(hs, classes)
        self.hs = hs

    def forward(self, image: Tensor, target: Tensor) -> dict[str, Tensor]:
        tiles = F.unfold(image, kernel_size=8, stride=8).transpose(1, 2)  # (B, L, 64)
        rows, cols = image.shape[2] // 8, image.shape[3] // 8
        # tile centres (x, y) in grid_sample's coordinates, row by row -> (L, 2)
        x = (torch.arange(cols, dtype=image.dtype) * 8 + 4) / image.shape[3] * 2 - 1
        y = (torch.arange(rows, dtype=image.dtype) * 8 + 4) / image.shape[2] * 2 - 1
        centres = torch.stack([x.repeat(rows), y.repeat_interleave(cols)], -1)
        g = torch.relu(self.what(self.proj(tiles))) * torch.relu(self.where(centres))
        r1 = g.new_zeros(g.shape[0], self.hs)
        r2 = torch.tanh(self.context(g.mean(1)))
        ug = self.U(g)  # (B, L, att), once
        logits, alphas = [], []
        for _ in range(target.shape[1]):
            alpha = torch.softmax(torch.tanh(self.W(r2).unsqueeze(1) + ug) @ self.v, -1)
            r1 = self.core1((alpha.unsqueeze(1) @ g).squeeze(1), r1)
            r2 = self.core2(r1, r2)
            logits.append(self.out(r1))
            alphas.append(alpha)
        return {"logits": torch.stack(logits, 1), "attention": torch.stack(alphas, 1)}

    names = {
        "proj.*": ("nodes.what.proj.*", False),
        "what.*": ("nodes.what_r.*", False),
        "where.*": ("nodes.where.*", False),
        "context.*": ("nodes.r2_0.*", False),
        "W.weight": ("nodes.dram.nodes.score.W", True),
        "W.bias": ("nodes.dram.nodes.score.b", False),
        "U.weight": ("nodes.dram.nodes.score.U", True),
        "v": ("nodes.dram.nodes.score.v", False),
        "core1.*": ("nodes.dram.nodes.core1.cell.*", False),
        "core2.*": ("nodes.dram.nodes.core2.cell.*", False),
        "out.*": ("nodes.dram.nodes.logits.*", False),
    }


def _ntm_head(h: Tensor, mem: Tensor, prev: Tensor, key: nn.Linear, beta: Tensor,
              address: nn.Linear) -> Tensor:
    """One NTM head: k = tanh(W_k h), softmax(β·cos(k, M_i)); gate, shift ±1, sharpen."""
    k = torch.tanh(key(h))
    cos = (F.normalize(k, dim=-1, eps=1e-8).unsqueeze(1)
           @ F.normalize(mem, dim=-1, eps=1e-8).transpose(1, 2)).squeeze(1)
    wc = torch.softmax(beta * cos, -1)  # (B, S)
    p = address(h)
    g = torch.sigmoid(p[:, :1])
    shift = torch.softmax(p[:, 1:4], -1)
    gamma = 1 + F.softplus(p[:, 4:])
    wg = g * wc + (1 - g) * prev
    ws = sum(shift[:, i:i + 1] * torch.roll(wg, i - 1, dims=-1) for i in range(3))
    return torch.softmax(gamma * ws.clamp_min(1e-30).log(), -1)


class HandNtmCopy(nn.Module):
    """The NTM copier (Graves et al. 2014): a feedforward controller
    h_t = tanh(W [E x_t; r_{t-1}] + b); a write head addresses M_{t-1} and writes
    M_t = M ⊙ (1 - w eᵀ) + w aᵀ; a read head addresses M_t and reads r_t = w M_t;
    both heads start on slot 0; logits from h_t."""

    def __init__(self, vocab: int, e: int, hs: int, slots: int, width: int) -> None:
        super().__init__()
        self.x_emb = nn.Embedding(vocab, e)
        self.ctrl = nn.Linear(e + width, hs)
        self.wkey, self.rkey = nn.Linear(hs, width), nn.Linear(hs, width)
        self.wbeta, self.rbeta = nn.Parameter(torch.ones(())), nn.Parameter(torch.ones(()))
        self.waddress, self.raddress = nn.Linear(hs, 5), nn.Linear(hs, 5)  # gate, shifts, γ
        self.erase = nn.Linear(hs, width)
        self.add = nn.Linear(hs, width)
        self.out = nn.Linear(hs, vocab)
        self.slots, self.width = slots, width

    def forward(self, seq: Tensor) -> dict[str, Tensor]:
        b, steps = seq.shape
        mem = torch.full((b, self.slots, self.width), 1e-6)
        ww = F.one_hot(seq.new_zeros(b), self.slots).float()  # (B, S): on slot 0
        wr = ww
        r = mem.new_zeros(b, self.width)
        x = self.x_emb(seq)  # (B, T, e)
        logits, wws, wrs = [], [], []
        for t in range(steps):
            h = torch.tanh(self.ctrl(torch.cat([x[:, t], r], -1)))
            ww = _ntm_head(h, mem, ww, self.wkey, self.wbeta, self.waddress)
            e = torch.sigmoid(self.erase(h))
            a = torch.tanh(self.add(h))
            mem = mem * (1 - ww.unsqueeze(-1) * e.unsqueeze(1)) + ww.unsqueeze(-1) * a.unsqueeze(1)
            wr = _ntm_head(h, mem, wr, self.rkey, self.rbeta, self.raddress)
            r = (wr.unsqueeze(1) @ mem).squeeze(1)  # (B, width)
            logits.append(self.out(h))
            wws.append(ww)
            wrs.append(wr)
        return {"logits": torch.stack(logits, 1), "weights": torch.stack(wrs, 1),
                "write": torch.stack(wws, 1)}

    names = {
        "x_emb.weight": ("nodes.ntm.nodes.x_emb.weight", False),
        "ctrl.*": ("nodes.ntm.nodes.ctrl.*", False),
        "wkey.*": ("nodes.ntm.nodes.kw.*", False),
        "wbeta": ("nodes.ntm.nodes.simw.beta", False),
        "waddress.*": ("nodes.ntm.nodes.wlw.proj.*", False),
        "rkey.*": ("nodes.ntm.nodes.kr.*", False),
        "rbeta": ("nodes.ntm.nodes.simr.beta", False),
        "raddress.*": ("nodes.ntm.nodes.wlr.proj.*", False),
        "erase.*": ("nodes.ntm.nodes.erase.*", False),
        "add.*": ("nodes.ntm.nodes.addv.*", False),
        "out.*": ("nodes.ntm.nodes.logits.*", False),
    }


class HandHandwriting(nn.Module):
    """Graves' soft window (Graves 2013, section 5.1) in an LSTM pen model:
    h_t = LSTM([x_t ; w_{t-1}]); (α, β, step) = exp(W h_t + b); κ_t = κ_{t-1} + step;
    φ(t, u) = Σ_k α_k exp(−β_k (κ_k − u)²); w_t = Σ_u φ(t, u) c_u; y_t = W_y [h_t ; w_t]."""

    def __init__(self, letters: int, h: int, k: int) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(2 + letters, h)
        self.win = nn.Linear(h, 3 * k)
        self.pred = nn.Linear(h + letters, 2)
        self.letters, self.h, self.k = letters, h, k

    def forward(self, chars: Tensor, pen: Tensor) -> dict[str, Tensor]:
        c = F.one_hot(chars, self.letters).to(pen.dtype)  # (B, U, letters)
        b, steps = pen.shape[:2]
        u = torch.arange(1, chars.shape[1] + 1, dtype=pen.dtype)  # (U,)
        h, cc = pen.new_zeros(b, self.h), pen.new_zeros(b, self.h)
        kappa, w = pen.new_zeros(b, self.k), pen.new_zeros(b, self.letters)
        preds, phis, kappas = [], [], []
        for t in range(steps):
            h, cc = self.cell(torch.cat([pen[:, t], w], -1), (h, cc))
            alpha, beta, step = torch.exp(self.win(h)).split(self.k, -1)  # (B, K) each
            kappa = kappa + step
            phi = (alpha[..., None] * torch.exp(-beta[..., None] * (kappa[..., None] - u) ** 2)
                   ).sum(1)  # (B, U)
            w = (phi.unsqueeze(1) @ c).squeeze(1)  # (B, letters)
            preds.append(self.pred(torch.cat([h, w], -1)))
            phis.append(phi)
            kappas.append(kappa)
        return {"prediction": torch.stack(preds, 1), "attention": torch.stack(phis, 1),
                "centres": torch.stack(kappas, 1)}

    names = {
        "cell.*": ("nodes.dec.nodes.cell.cell.*", False),
        "win.*": ("nodes.dec.nodes.win.proj.*", False),
        "pred.*": ("nodes.dec.nodes.pred.*", False),
    }


def _draw_filters(p: Tensor, n: int, height: int, width: int
                  ) -> tuple[Tensor, Tensor, Tensor]:
    """DRAW's filterbanks from (g̃x, g̃y, log σ², log δ̃, log γ) (Gregor et al. 2015, eq. 19-25):
    F_X (B, N, W), F_Y (B, N, H), each row a normalised Gaussian; and γ (B,)."""
    gx = (width + 1) / 2 * (p[:, 0] + 1)
    gy = (height + 1) / 2 * (p[:, 1] + 1)
    var = torch.exp(p[:, 2])[:, None, None]
    delta = (max(width, height) - 1) / (n - 1) * torch.exp(p[:, 3])
    grid = torch.arange(1, n + 1, dtype=p.dtype) - n / 2 - 0.5  # (N,)

    def bank(g: Tensor, pixels: int) -> Tensor:
        mu = g[:, None] + grid * delta[:, None]  # (B, N)
        a = torch.arange(1, pixels + 1, dtype=p.dtype)
        f = torch.exp(-((a - mu[..., None]) ** 2) / (2 * var))  # (B, N, pixels)
        return f / (f.sum(-1, keepdim=True) + 1e-8)

    return bank(gx, width), bank(gy, height), torch.exp(p[:, 4])


class HandDraw(nn.Module):
    """DRAW with read and write attention (Gregor et al. 2015): x̂ = x − σ(c);
    r = γ [F_Y x F_Xᵀ, F_Y x̂ F_Xᵀ]; h_enc = LSTM([r, h_dec]); z = μ + σ ε with
    KL(N(μ, σ²) ‖ N(0, I)); h_dec = LSTM(z); c += (1/γ̂) F̂_Yᵀ W(h_dec) F̂_X."""

    def __init__(self, enc: int, dec: int, z: int, read_n: int, write_n: int, draws: int,
                 height: int = 12, width: int = 12) -> None:
        super().__init__()
        self.rparams = nn.Linear(dec, 5)
        self.enc = nn.LSTMCell(2 * read_n * read_n + dec, enc)
        self.mean = nn.Linear(enc, z)
        self.log_std = nn.Linear(enc, z)
        self.dec = nn.LSTMCell(z, dec)
        self.patch = nn.Linear(dec, write_n * write_n)
        self.wparams = nn.Linear(dec, 5)
        self.sizes = (enc, dec, read_n, write_n, draws, height, width)

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        enc, dec, rn, wn, draws, height, width = self.sizes
        b = image.shape[0]
        x = image[:, 0]  # (B, H, W)
        c = torch.zeros_like(x)
        he, ce = x.new_zeros(b, enc), x.new_zeros(b, enc)
        hd, cd = x.new_zeros(b, dec), x.new_zeros(b, dec)
        out: dict[str, list[Tensor]] = {k: [] for k in ("canvases", "kl", "read_fx",
                                                       "read_fy", "write_fx", "write_fy")}
        for _ in range(draws):
            fx, fy, gamma = _draw_filters(self.rparams(hd), rn, height, width)
            xhat = x - torch.sigmoid(c)
            g = gamma[:, None, None]
            r = torch.cat([(g * fy @ x @ fx.transpose(1, 2)).flatten(1),
                           (g * fy @ xhat @ fx.transpose(1, 2)).flatten(1)], -1)  # (B, 2N²)
            he, ce = self.enc(torch.cat([r, hd], -1), (he, ce))
            mu, log_std = self.mean(he), self.log_std(he)
            zt = mu + torch.exp(log_std) * torch.randn_like(mu)
            hd, cd = self.dec(zt, (hd, cd))
            wfx, wfy, wgamma = _draw_filters(self.wparams(hd), wn, height, width)
            w = self.patch(hd).reshape(b, wn, wn)
            c = c + wfy.transpose(1, 2) @ w @ wfx / wgamma[:, None, None]  # (B, H, W)
            kl = (0.5 * (mu**2 + torch.exp(2 * log_std) - 1) - log_std).sum(-1)
            for k, v in zip(out, (c[:, None], kl, fx, fy, wfx, wfy), strict=True):
                out[k].append(v)
        res = {k: torch.stack(v, 1) for k, v in out.items()}
        return {"logits": c[:, None], **res}

    names = {
        "rparams.*": ("nodes.draw.nodes.rparams.*", False),
        "enc.*": ("nodes.draw.nodes.enc.cell.*", False),
        "mean.*": ("nodes.draw.nodes.z.mean.*", False),
        "log_std.*": ("nodes.draw.nodes.z.log_std.*", False),
        "dec.*": ("nodes.draw.nodes.dec.cell.*", False),
        "patch.*": ("nodes.draw.nodes.patch.*", False),
        "wparams.*": ("nodes.draw.nodes.wparams.*", False),
    }
