"""specs/real/t5.yaml equals `transformers`' T5ForConditionalGeneration (v1.0): same
configuration, same (random) weights, imported through the name map (one token table,
the bias per bucket living in block 0 of each stack and serving every layer), on
batches padded on both sides; and it generates, greedy and beam, the tokens
transformers' generate does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

import attngraph  # noqa: E402
from attngraph.errors import SpecError  # noqa: E402
from attngraph.realmodels import load_model  # noqa: E402
from attngraph.source import load  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "specs" / "real" / "t5.yaml"
VOCAB = 61


def _config(**extra: Any) -> Any:
    """A small T5: 2 encoder and 3 decoder layers, 8 buckets up to distance 20 (so
    short batches reach the log-spaced buckets)."""
    opts: dict[str, Any] = {"vocab_size": VOCAB, "d_model": 32, "d_kv": 8, "d_ff": 48,
                            "num_layers": 2, "num_decoder_layers": 3, "num_heads": 4,
                            "relative_attention_num_buckets": 8,
                            "relative_attention_max_distance": 20,
                            "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}
    return transformers.T5Config(**{**opts, **extra})


def _saved(tmp: Path, std: float | None = None, **extra: Any) -> tuple[Any, Path]:
    """A random-weight T5 saved to ``tmp``; ``std``: every matrix drawn anew at that
    scale (default init makes a tiny model repeat one token)."""
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(_config(**extra)).eval()
    if std is not None:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "layer_norm" not in name:
                    p.normal_(0.0, std)
    model.save_pretrained(tmp)
    return model, tmp


def _padded(n: int, lengths: list[int], seed: int, start: bool = False
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids (B, n) in 2 … VOCAB-1 padded last with 0, and their mask; ``start``: the
    decoder's start id 0 first."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (len(lengths), n), generator=g)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    if start:
        ids[:, 0] = 0
    return ids.masked_fill(~mask, 0), mask


@pytest.fixture(scope="module")
def t5(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    return _saved(tmp_path_factory.mktemp("t5"))


def test_logits_and_weights_equal_transformers_on_padded_batches(t5: tuple) -> None:
    """Logits at every real target position and every layer's and head's weights
    (encoder self-attention, decoder self-attention, cross-attention) equal
    T5ForConditionalGeneration's to 1e-5 in float32, source and target padded."""
    model, path = t5
    imp = load_model(path)
    assert (imp.dims["layers"], imp.dims["dlayers"], imp.dims["inner"]) == (2, 3, 32)
    src, sm = _padded(26, [26, 17, 4], seed=1)
    tgt, tm = _padded(23, [23, 9, 14], seed=2, start=True)
    with torch.no_grad():
        ref = model(input_ids=src, attention_mask=sm.long(), decoder_input_ids=tgt,
                    decoder_attention_mask=tm.long(), output_attentions=True)
        out = imp.model(source=src, source_mask=sm, target=tgt, target_mask=tm)
    assert (ref.logits - out["logits"])[tm].abs().max() < 1e-5
    for name, theirs, rows, cols in (("heads", ref.encoder_attentions, sm, sm),
                                     ("decoder", ref.decoder_attentions, tm, tm),
                                     ("cross", ref.cross_attentions, tm, sm)):
        weights = torch.stack(theirs, 2)  # (B, H, L, M, N)
        assert weights.shape == out[name].shape
        real = rows[:, None, None, :, None] & cols[:, None, None, None, :]
        assert ((weights - out[name]).abs() * real).max() < 1e-5, name


def test_one_table_and_one_bias_per_stack_serve_every_layer(t5: tuple) -> None:
    """The parameters are transformers' exactly (one token table for source, target
    and output; the bias per bucket only from block 0 of each stack), and that one
    bias is read by every layer: changing it changes the last layer's weights."""
    model, path = t5
    imp = load_model(path)
    ours = sum(p.numel() for p in imp.model.parameters())
    assert ours == sum(p.numel() for p in model.parameters())
    table = model.decoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight
    assert torch.equal(imp.model.nodes["d_table"].value[0], table.t())
    src, sm = _padded(6, [6], seed=3)
    tgt, tm = _padded(5, [5], seed=4, start=True)
    with torch.no_grad():
        before = imp.model(source=src, target=tgt)["decoder"][:, :, -1]
        imp.model.nodes["d_table"].value.add_(torch.randn_like(imp.model.nodes["d_table"].value))
        after = imp.model(source=src, target=tgt)["decoder"][:, :, -1]
    assert (before - after).abs().max() > 1e-3


def _bucket_spec(buckets: int, distance: int) -> str:
    """The spec's own bucket formulas (read from t5.yaml) as a spec of their own."""
    nodes = load(SPEC).data["nodes"]
    lines = [f"  {k}: {json.dumps(dict(nodes[k]))}" for k in
             ("e_dist", "e_bucket", "d_dist", "d_bucket")]
    return ("attngraph: 1\nname: buckets\n"
            f"dims: {{buckets: {buckets}, distance: {distance}}}\n"
            "inputs:\n  source: {type: vectors, dim: 1}\n"
            "  target: {type: vectors, dim: 1, length: T}\n"
            "nodes:\n" + "\n".join(lines) + "\noutputs: {enc: e_bucket, dec: d_bucket}\n")


@pytest.mark.parametrize(("buckets", "distance"), [(32, 128), (8, 20), (13, 50)])
def test_buckets_equal_transformers_over_long_distances(buckets: int, distance: int) -> None:
    """The bucket formulas of the spec give T5Attention._relative_position_bucket's
    buckets for every pair of 700 positions, both ways (encoder) and looking back
    (decoder), past max_distance and at the log-spaced buckets' edges."""
    from transformers.models.t5.modeling_t5 import T5Attention

    model = attngraph.compile(_bucket_spec(buckets, distance), seed=0)
    n = 700
    x = torch.zeros(1, n, 1)
    with torch.no_grad():
        out = model(source=x, target=x)
    rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i
    for name, both in (("enc", True), ("dec", False)):
        want = T5Attention._relative_position_bucket(rel, bidirectional=both,
                                                     num_buckets=buckets,
                                                     max_distance=distance)
        assert torch.equal(out[name][0].long(), want), name


def test_a_gated_gelu_t5_is_refused_at_its_setting(tmp_path: Path) -> None:
    """T5 v1.1's gated-GELU feed-forward is not what the spec computes: import refuses
    it at the configuration's key, naming the value and what the spec computes."""
    _saved(tmp_path, feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    with pytest.raises(SpecError, match="feed_forward_proj is 'gated-gelu'") as err:
        load_model(tmp_path)
    assert err.value.diagnostics[0].loc.file.endswith("config.json")


def test_greedy_and_beam_equal_transformers_generate(tmp_path: Path) -> None:
    """From padded sources, cached greedy search (eos 1, padded after it with 0) and
    beam search (3 beams, no eos, summed log-probabilities) give the tokens
    transformers' generate gives (do_sample=False, the same max length)."""
    model, path = _saved(tmp_path, std=1.0)
    imp = load_model(path)
    src, sm = _padded(11, [11, 6, 3], seed=5)
    steps = 14
    out = attngraph.generate(imp.model, {"source": src, "source_mask": sm},
                             max_length=steps, eos=1, pad=0)
    beam = attngraph.generate(imp.model, {"source": src, "source_mask": sm},
                              max_length=steps, beam=3)
    with torch.no_grad():
        # transformers counts the start id in max_length; its own cache is off because
        # it sizes it by the encoder's layer count (3 decoder layers here)
        want = model.generate(input_ids=src, attention_mask=sm.long(), max_length=steps + 1,
                              do_sample=False, use_cache=False)
        want_beam = model.generate(input_ids=src, attention_mask=sm.long(),
                                   max_length=steps + 1, do_sample=False, num_beams=3,
                                   eos_token_id=None, length_penalty=0.0, use_cache=False)
    got = out.tokens[:, :want.shape[1] - 1]
    assert got.tolist() == want[:, 1:].tolist()
    assert bool((out.tokens[:, want.shape[1] - 1:] == 0).all())
    assert beam.tokens.tolist() == want_beam[:, 1:].tolist()
    assert len({tuple(r) for r in out.tokens.tolist()}) > 1  # the rows differ


def test_the_pages_generation_example_runs(t5: tuple) -> None:
    """docs/real-models.md's T5 generation example runs on a small random T5 (its
    path given) and prints the shape it says."""
    import contextlib
    import io
    import re

    _, path = t5
    page = (Path(__file__).resolve().parents[1] / "docs" / "real-models.md").read_text(
        encoding="utf-8")
    code = next(c for c in re.findall(r"```python\n(.*?)```", page, re.S)
                if '"path/to/t5"' in c)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.replace('"path/to/t5"', repr(str(path))), "real-models.md", "exec"),
             {"__name__": "docs_example"})  # noqa: S102 - the page's own example
    rows, steps = re.fullmatch(r"torch\.Size\(\[(\d+), (\d+)\]\)\n", out.getvalue()).groups()
    assert int(rows) == 2 and 1 <= int(steps) <= 20
