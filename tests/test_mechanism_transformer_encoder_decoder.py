"""The transformer encoder-decoder against torch.nn.Transformer (post-norm, ReLU, no
dropout) with copied weights, source and target padding, and the causal mask."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

D = 16


def _attention(prefix: str, mha: nn.MultiheadAttention, q: str, k: str, v: str, out: str,
               ) -> dict[str, torch.Tensor]:
    w, b = mha.in_proj_weight, mha.in_proj_bias
    got = {f"{prefix}.{out}.out.weight": mha.out_proj.weight,
           f"{prefix}.{out}.out.bias": mha.out_proj.bias}
    for i, name in enumerate((q, k, v)):
        got[f"{prefix}.{name}.proj.weight"] = w[i * D:(i + 1) * D]
        got[f"{prefix}.{name}.proj.bias"] = b[i * D:(i + 1) * D]
    return got


def _norms(prefix: str, pairs: dict[str, nn.LayerNorm]) -> dict[str, torch.Tensor]:
    return {f"{prefix}{node}.{p}": getattr(ln, p) for node, ln in pairs.items()
            for p in ("weight", "bias")}


def _ff(prefix: str, layer: nn.Module) -> dict[str, torch.Tensor]:
    return {f"{prefix}.f.net.0.weight": layer.linear1.weight,
            f"{prefix}.f.net.0.bias": layer.linear1.bias,
            f"{prefix}.f.net.2.weight": layer.linear2.weight,
            f"{prefix}.f.net.2.bias": layer.linear2.bias}


def _weights(ref: nn.Transformer) -> dict[str, torch.Tensor]:
    w: dict[str, torch.Tensor] = {}
    for i, layer in enumerate(ref.encoder.layers):
        p = f"nodes.enc.rounds.{i}.nodes"
        w |= _attention(p, layer.self_attn, "q", "k", "v", "a") | _ff(p, layer)
        w |= _norms(f"{p}.", {"n1": layer.norm1, "n2": layer.norm2})
    for i, layer in enumerate(ref.decoder.layers):
        p = f"nodes.dec{i + 1}.nodes"
        w |= _attention(p, layer.self_attn, "q1", "k1", "v1", "a1")
        w |= _attention(p, layer.multihead_attn, "q2", "k2", "v2", "a2") | _ff(p, layer)
        w |= _norms(f"{p}.", {"n1": layer.norm1, "n2": layer.norm2, "n3": layer.norm3})
    return w | _norms("nodes.", {"mem": ref.encoder.norm, "out": ref.decoder.norm})


def test_matches_nn_transformer_with_padding_and_causal_mask() -> None:
    """Decoder states at real target positions equal nn.Transformer's."""
    torch.manual_seed(0)
    ref = nn.Transformer(D, 2, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=32,
                         dropout=0.0, batch_first=True).eval()
    model = compile_mechanism("transformer_encoder_decoder")
    load_weights(model, _weights(ref))
    src, tgt = torch.randn(3, 7, D), torch.randn(3, 5, D)
    smask, tmask = lengths_mask([7, 4, 2], 7), lengths_mask([5, 5, 3], 5)
    causal = torch.ones(5, 5, dtype=torch.bool).triu(1)  # True: may not attend
    want = ref(src, tgt, tgt_mask=causal, src_key_padding_mask=~smask,
               tgt_key_padding_mask=~tmask, memory_key_padding_mask=~smask)
    got = model(src=src, tgt=tgt, src_mask=smask, tgt_mask=tmask)["out"]
    torch.testing.assert_close(got[tmask], want[tmask], **TOL)
