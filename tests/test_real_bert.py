"""specs/real/bert.yaml equals `transformers`' BertForSequenceClassification: same
configuration, same (random) weights, imported through the name map, with token
types, on right-padded batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

from attngraph.realmodels import load_model  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=61, hidden_size=32, intermediate_size=48,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  max_position_embeddings=16, num_labels=3,
                                  attn_implementation="eager")
    model = transformers.BertForSequenceClassification(cfg).eval()
    path = tmp_path_factory.mktemp("bert")
    model.save_pretrained(path)
    return model, path


def test_logits_and_weights_equal_transformers_on_padded_batches(bert: tuple) -> None:
    """Class logits (pooler on the first token) and every layer's and head's weights
    equal BertForSequenceClassification's to 1e-5 in float32 (right padding)."""
    model, path = bert
    imp = load_model(path)
    assert imp.dims["classes"] == 3 and imp.dims["types"] == 2
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 61, (3, 9), generator=g)
    seg = torch.randint(0, 2, (3, 9), generator=g)
    mask = torch.arange(9)[None, :] < torch.tensor([9, 6, 3])[:, None]
    with torch.no_grad():
        ref = model(input_ids=ids, token_type_ids=seg, attention_mask=mask.long(),
                    output_attentions=True)
        out = imp.model(tokens=ids, tokens_mask=mask, segments=seg, segments_mask=mask)
    assert (ref.logits - out["logits"]).abs().max() < 1e-5
    weights = torch.stack(ref.attentions, 2)  # (B, H, L, N, N)
    real = mask[:, None, None, :, None] & mask[:, None, None, None, :]
    assert ((weights - out["heads"]).abs() * real).max() < 1e-5
