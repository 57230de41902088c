"""specs/real/gpt2.yaml equals `transformers`' GPT2LMHeadModel: same configuration,
same (random) weights, imported through the name map, on right-padded batches."""

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


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=61, n_embd=32, n_layer=2, n_head=4,
                                  n_positions=16, attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(cfg).eval()
    path = tmp_path_factory.mktemp("gpt2")
    model.save_pretrained(path)
    return model, path


def test_logits_and_weights_equal_transformers_on_padded_batches(gpt2: tuple) -> None:
    """Logits at every real position and every layer's and head's weights equal
    GPT2LMHeadModel's to 1e-5 in float32 (right padding, attention_mask given)."""
    model, path = gpt2
    imp = load_model(path)
    ids, mask = _batch(61)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask.long(), output_attentions=True)
        out = imp.model(tokens=ids, tokens_mask=mask)
    assert (ref.logits - out["logits"])[mask].abs().max() < 1e-5
    weights = torch.stack(ref.attentions, 2)  # (B, H, L, N, N)
    real = mask[:, None, None, :, None] & mask[:, None, None, None, :]
    assert out["heads"].shape == weights.shape
    assert ((weights - out["heads"]).abs() * real).max() < 1e-5


def test_dims_come_from_the_configuration(gpt2: tuple) -> None:
    """The spec's dims are read from config.json (n_inner absent: ff = 4·n_embd), and
    the output layer is the token table (tied, one parameter)."""
    _, path = gpt2
    imp = load_model(path)
    assert imp.dims == {"vocab": 61, "d": 32, "heads": 4, "ff": 128, "layers": 2, "n": 16}
    sd = imp.model.state_dict()
    assert sd["nodes.logits.weight"].data_ptr() == sd["nodes.x.embed.weight"].data_ptr()


def test_greedy_next_tokens_equal_transformers(gpt2: tuple) -> None:
    """Greedy continuation by re-running the prefix picks the tokens GPT-2's generate does."""
    model, path = gpt2
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
