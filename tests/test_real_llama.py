"""specs/real/llama.yaml equals `transformers`' LlamaForCausalLM: same configuration,
same (random) weights, imported through the name map (rotary rows turned from the
halves layout to adjacent pairs), with grouped-query heads, on right-padded batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

from attngraph.realmodels import load_model  # noqa: E402


def _batch(vocab: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids (3, 9) and a right-padding mask: lengths 9, 6, 3."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (3, 9), generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([9, 6, 3])[:, None]
    return ids, mask


def _saved(tmp: Path, **extra: object) -> tuple[object, Path]:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   attn_implementation="eager", **extra)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(tmp)
    return model, tmp


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    return _saved(tmp_path_factory.mktemp("llama"))


def test_logits_and_weights_equal_transformers_on_padded_batches(llama: tuple) -> None:
    """Logits at every real position and every layer's and head's weights equal
    LlamaForCausalLM's to 1e-5 in float32 (4 query heads reading 2 key/value heads)."""
    model, path = llama
    imp = load_model(path)
    assert imp.dims["kv"] == 2 and imp.dims["kvd"] == 16
    ids, mask = _batch(61)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask.long(), output_attentions=True)
        out = imp.model(tokens=ids, tokens_mask=mask)
    assert (ref.logits - out["logits"])[mask].abs().max() < 1e-5
    weights = torch.stack(ref.attentions, 2)  # (B, H, L, N, N)
    real = mask[:, None, None, :, None] & mask[:, None, None, None, :]
    assert ((weights - out["heads"]).abs() * real).max() < 1e-5


def test_tied_embeddings_read_the_table_saved_once(tmp_path: Path) -> None:
    """A model with tie_word_embeddings saves the table once; the name map's fallback
    reads it into the output layer, and the logits still equal transformers'."""
    model, path = _saved(tmp_path, tie_word_embeddings=True)
    imp = load_model(path)
    ids, mask = _batch(61, seed=1)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask.long()).logits
        out = imp.model(tokens=ids, tokens_mask=mask)["logits"]
    assert (ref - out)[mask].abs().max() < 1e-5


def test_greedy_next_tokens_equal_transformers(llama: tuple) -> None:
    """Greedy continuation by re-running the prefix picks the tokens Llama's generate does."""
    model, path = llama
    imp = load_model(path)
    ids, _ = _batch(61, seed=3)
    prefix = ids[:1, :4]
    with torch.no_grad():
        ref = model.generate(prefix, max_new_tokens=6, do_sample=False, pad_token_id=0)
        seq = prefix
        for _ in range(6):
            logits = imp.model(tokens=seq, tokens_mask=torch.ones_like(seq, dtype=torch.bool))
            seq = torch.cat([seq, logits["logits"][:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(seq, ref)
