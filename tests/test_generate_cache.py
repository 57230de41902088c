"""Generation with a key/value cache derived from the graph (attngraph.lower.decode.cache):
the same tokens and scores as re-running the prefix, on the catalog's language model,
GPT-2, Llama and the T5 encoder–decoder at tiny sizes, and the same greedy tokens as
transformers' generate."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import attngraph
from attngraph.lower.decode.cache import STEP_TRAITS, CacheRefused, plan_cache
from attngraph.lower.decode.decoders import CacheNote

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "specs" / "real"

#: tiny sizes of the real-model specs (the dims line replaced)
TINY = {
    "gpt2": "dims: {vocab: 37, d: 32, heads: 4, ff: 64, layers: 2, n: 32}",
    "llama": "dims: {vocab: 37, d: 32, heads: 4, kv: 2, kvd: 16, ff: 48, layers: 2}",
}


#: the language model with a relative bias on its scores in place of learned positions
BIASES = {
    "alibi": "{kind: position_bias, scores: score, fn: alibi}",
    "t5": "{kind: position_bias, scores: score, fn: t5, buckets: 8, max_distance: 16}",
}


def _spec(name: str) -> str:
    if name == "language_model":
        return (ROOT / "specs" / "language_model.yaml").read_text()
    if name in BIASES:
        text = _spec("language_model").replace("h:      {kind: add, from: [x, pos]}",
                                               "h:      {kind: add, from: [x, x]}")
        return text.replace("p:      {kind: softmax, scores: score,",
                            f"bias:   {BIASES[name]}\n  p:      {{kind: softmax, scores: bias,")
    text = (REAL / f"{name}.yaml").read_text()
    return re.sub(r"^dims: \{.*\}$", TINY[name], text, count=1, flags=re.M)


def _prompts(vocab: int, lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded prompts of the given lengths (padding id 0) and their mask."""
    g = torch.Generator().manual_seed(seed)
    n = max(lengths)
    ids = torch.randint(1, vocab, (len(lengths), n), generator=g)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    return ids.masked_fill(~mask, 0), mask


def _both(model: Any, inputs: dict[str, torch.Tensor], **opts: Any) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheNote)  # the cache must be used
        cached = attngraph.generate(model, inputs, **opts)
    plain = attngraph.generate(model, inputs, cache=False, **opts)
    return cached, plain


@pytest.mark.parametrize("name", ["language_model", "gpt2", "llama", "alibi", "t5"])
@pytest.mark.parametrize(("beam", "eos", "alpha"), [(1, None, 0.0), (1, 3, 0.0), (3, None, 0.0),
                                                    (3, 3, 0.6)])
def test_cached_generation_equals_rerunning_the_prefix(name: str, beam: int, eos: int | None,
                                                       alpha: float) -> None:
    """Greedy and beam search with the cache (on by default) give the tokens and lengths
    of re-running the whole prefix at every step, and its scores to 1e-5, for padded
    prompts of different lengths (and without a prompt, from the start id)."""
    model = attngraph.compile(_spec(name), seed=1)
    vocab = model.graph.dims["vocab"]
    ids, mask = _prompts(vocab, [5, 2, 4, 1])
    opts = {"max_length": 9, "beam": beam, "eos": eos, "pad": -1, "length_penalty": alpha}
    cached, plain = _both(model, {"tokens": ids, "tokens_mask": mask}, **opts)
    assert torch.equal(cached.tokens, plain.tokens)
    assert torch.equal(cached.lengths, plain.lengths)
    torch.testing.assert_close(cached.scores, plain.scores, atol=1e-5, rtol=0)
    cached, plain = _both(model, {"tokens": ids[:, :1]}, **opts)
    assert torch.equal(cached.tokens, plain.tokens)
    torch.testing.assert_close(cached.scores, plain.scores, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["language_model", "gpt2", "llama"])
def test_a_padded_prompt_batch_equals_each_prompt_alone(name: str) -> None:
    """Each padded prompt of a batch continues as it does alone, unpadded."""
    model = attngraph.compile(_spec(name), seed=2)
    ids, mask = _prompts(model.graph.dims["vocab"], [6, 3, 1], seed=4)
    both = attngraph.generate(model, {"tokens": ids, "tokens_mask": mask}, max_length=7)
    for i, n in enumerate([6, 3, 1]):
        one = attngraph.generate(model, {"tokens": ids[i:i + 1, :n]}, max_length=7)
        assert both.tokens[i].tolist() == one.tokens[0].tolist()
        torch.testing.assert_close(both.scores[i], one.scores[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("hidden", [False, True])
def test_the_prompt_runs_the_output_layer_on_each_rows_last_position(hidden: bool) -> None:
    """Nothing reads the final norm and the output layer at the prompt's other positions:
    they run on each row's last real one (GPT-2, padded prompts), as a step runs them,
    and generation is what re-running the prefix gives. A norm that another output
    reads as well runs on every position."""
    text = _spec("gpt2")
    if hidden:
        text = text.replace("outputs: {logits: logits,", "outputs: {logits: logits, hidden: nf,")
    model = attngraph.compile(text, seed=5)
    rows: dict[str, list[int]] = {"nf": [], "logits": []}
    for nid, seen in rows.items():
        model.nodes[nid].register_forward_hook(
            lambda _m, args, _out, seen=seen: seen.append(int(args[0]["from"].shape[1])))
    ids, mask = _prompts(model.graph.dims["vocab"], [7, 3, 5], seed=8)
    opts: dict[str, Any] = {"max_length": 4, "beam": 2}
    cached = attngraph.generate(model, {"tokens": ids, "tokens_mask": mask}, **opts)
    # (beside the prompt's 7 positions and the steps' 1, generate first checks on a
    # few positions that the decoder does not look ahead)
    assert 7 not in rows["logits"] and 1 in rows["logits"]
    assert (7 in rows["nf"]) is hidden
    plain = attngraph.generate(model, {"tokens": ids, "tokens_mask": mask}, cache=False,
                               **opts)
    assert torch.equal(cached.tokens, plain.tokens)
    torch.testing.assert_close(cached.scores, plain.scores, atol=1e-5, rtol=0)


def test_greedy_continues_what_forward_predicts() -> None:
    """Each greedy token is the argmax of forward over the prompt and the tokens before
    it (the language model, one unpadded prompt)."""
    model = attngraph.compile(_spec("language_model"), seed=3).eval()
    ids, _ = _prompts(16, [4], seed=5)
    out = attngraph.generate(model, {"tokens": ids}, max_length=6)
    seq = torch.cat([ids, out.tokens], 1)
    with torch.no_grad():
        logits = model(tokens=seq[:, :-1])["logits"][:, 3:]
    assert torch.equal(logits.argmax(-1), out.tokens)


def test_the_encoder_of_a_causal_decoder_runs_once() -> None:
    """A causal decoder with cross-attention to a source (the encoder's keys and values
    made once, kept for every step) generates what re-running it does, batched with
    padded sources."""
    from tests.test_generate import CAUSAL

    model = attngraph.compile(CAUSAL, seed=0)
    src, smask = _prompts(6, [5, 3, 4], seed=6)
    plan = plan_cache(model, model.graph, {"target"}, "T")
    static = {m for s in plan.sites if s.how == "static"
              for m in model.groups.get(s.step.node, (s.step.node,))}
    assert {"x", "k2", "v2"} <= static and "q2" not in static
    for beam in (1, 3):
        cached, plain = _both(model, {"source": src, "source_mask": smask}, max_length=6,
                              beam=beam, return_attention=True)
        assert torch.equal(cached.tokens, plain.tokens)
        torch.testing.assert_close(cached.scores, plain.scores, atol=1e-5, rtol=0)
        torch.testing.assert_close(cached.attention["attention"],
                                   plain.attention["attention"], atol=1e-6, rtol=0)


def test_the_plan_keeps_each_rounds_keys_and_values() -> None:
    """The cache keeps, per round of GPT-2's repeat, the keys and values the attention
    reads over every position; everything else runs on the new position only."""
    model = attngraph.compile(_spec("gpt2"), seed=0)
    plan = plan_cache(model, model.graph, {"tokens"}, "N")
    hows = {s.step.node: s.how for s in plan.sites}
    assert hows == {"x": "pointwise", "pos": "indexed", "h0": "pointwise", "stack": "rounds",
                    "nf": "pointwise", "logits": "pointwise"}
    rounds = next(s for s in plan.sites if s.how == "rounds").inner
    assert len(rounds) == 2
    kept = {k for r in rounds for s in r.sites for k, _ in s.extend}
    assert kept == {"k", "v"}


#: specs/real/t5.yaml at a tiny size: 2 encoder and 3 decoder layers, 8 buckets to 12
T5_TINY = ("dims: {vocab: 37, d: 32, heads: 4, inner: 24, ff: 48, layers: 2, dlayers: 3, "
           "buckets: 8, distance: 12}")


def _t5(seed: int = 0) -> Any:
    text = re.sub(r"^dims: \{.*\}$", T5_TINY, (REAL / "t5.yaml").read_text(), count=1,
                  flags=re.M)
    return attngraph.compile(text, seed=seed)


@pytest.mark.parametrize(("beam", "eos", "alpha"), [(1, None, 0.0), (1, 3, 0.0), (3, None, 0.0),
                                                    (3, 3, 0.6)])
def test_an_encoder_decoder_generates_the_same_with_and_without_cache(
        beam: int, eos: int | None, alpha: float) -> None:
    """T5 (a bias of j − i made once for every layer, cross-attention over the encoder)
    from padded sources: greedy and beam search give the same tokens and lengths with
    the cache as re-running the prefix, and its scores to 1e-5."""
    model = _t5(seed=1)
    src, smask = _prompts(37, [7, 2, 5, 4], seed=8)
    opts = {"max_length": 16, "beam": beam, "eos": eos, "pad": -1, "length_penalty": alpha}
    cached, plain = _both(model, {"source": src, "source_mask": smask}, **opts)
    assert torch.equal(cached.tokens, plain.tokens)
    assert torch.equal(cached.lengths, plain.lengths)
    torch.testing.assert_close(cached.scores, plain.scores, atol=1e-5, rtol=0)


def test_each_cached_step_gives_the_forward_logits_for_any_tokens() -> None:
    """Stepped through the cache with random tokens (not its own choices), past the
    decoder's exact buckets and its first grid of positions, the encoder–decoder's
    logits at every position equal forward's over the whole target to 1e-5."""
    from attngraph.lower.decode.cached import CachedDecoder
    from attngraph.lower.decode.decoders import causal_decoder

    model = _t5(seed=2).eval()
    src, smask = _prompts(37, [9, 4, 6], seed=9)
    n = 21  # grids of 16, then 32 positions
    feed = torch.randint(2, 37, (3, n), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        dec = causal_decoder(model, "logits", "target", None,
                             {"source": src, "source_mask": smask}, False)
        assert isinstance(dec, CachedDecoder)
        steps = [dec.step(None)[0]] + [dec.step(feed[:, t])[0] for t in range(n - 1)]
        target = torch.cat([torch.zeros(3, 1, dtype=torch.long), feed[:, :-1]], 1)
        whole = model(source=src, source_mask=smask, target=target)["logits"]
    torch.testing.assert_close(torch.stack(steps, 1), whole, atol=1e-5, rtol=0)


def test_the_plan_makes_the_encoder_and_cross_keys_once_and_the_bias_by_position() -> None:
    """T5's plan: the encoder, its bias and the cross-attention's keys and values run
    once; the decoder's bias (of positions alone) is made over a grid of positions;
    each decoder round keeps its self-attention's keys and values."""
    model = _t5()
    plan = plan_cache(model, model.graph, {"target"}, "T")
    hows = {s.step.node: s.how for s in plan.sites}
    assert {hows[k] for k in ("e_dist", "e_bucket", "e_bias", "enc", "memory")} == {"static"}
    assert {hows[k] for k in ("d_dist", "d_bucket", "d_bias")} == {"positions"}
    assert hows["dec"] == "rounds"
    rounds = next(s for s in plan.sites if s.how == "rounds").inner
    assert len(rounds) == 3
    for r in rounds:
        inner = {m: s.how for s in r.sites for m in r.gm.groups.get(s.step.node, (s.step.node,))}
        assert inner["ck"] == inner["cv"] == "static" and inner["cq"] == "pointwise"
        assert {k for s in r.sites for k, _ in s.extend} == {"k", "v"}


def test_a_value_of_positions_that_mixes_them_is_refused() -> None:
    """A formula of the target's positions alone that reads its length (its entry at a
    position changes as positions are added) is refused by the plan, naming it."""
    text = _spec("language_model").replace(
        "p:      {kind: softmax, scores: score,",
        "w:      {kind: expr, formula: \"(j <= i) / N\", sizes: {queries: N, items: N}}\n"
        "  sw:     {kind: expr, formula: \"score + w\"}\n"
        "  p:      {kind: softmax, scores: sw,")
    model = attngraph.compile(text, seed=0)
    with pytest.raises(CacheRefused, match="node 'w' \\(expr\\) reads the length N"):
        plan_cache(model, model.graph, {"tokens"}, "N")


def test_a_graph_the_cache_cannot_step_falls_back_with_a_note() -> None:
    """A node that mixes the target's positions other than by attention (a running sum,
    causal but not one position at a time) is refused by the plan with its id and why;
    generate notes it and re-runs the prefix instead, as cache=False does."""
    text = _spec("language_model").replace(
        "h:      {kind: add, from: [x, pos]}",
        "run:    {kind: expr, formula: \"cumsum(x, items)\"}\n"
        "  h:      {kind: add, from: [run, pos]}")
    model = attngraph.compile(text, seed=0)
    with pytest.raises(CacheRefused, match="node 'run' \\(expr\\)"):
        plan_cache(model, model.graph, {"tokens"}, "N")
    ids, mask = _prompts(16, [3, 2])
    with pytest.warns(CacheNote, match="node 'run'"):
        out = attngraph.generate(model, {"tokens": ids, "tokens_mask": mask}, max_length=4)
    plain = attngraph.generate(model, {"tokens": ids, "tokens_mask": mask}, max_length=4,
                               cache=False)
    assert torch.equal(out.tokens, plain.tokens)


def test_a_plugin_kind_registers_its_step_trait() -> None:
    """STEP_TRAITS is a registry: the built-in kinds are there, an unknown name fails."""
    assert STEP_TRAITS["rotary"] == "indexed" and STEP_TRAITS["norm"] == "pointwise"
    with pytest.raises(attngraph.errors.RegistryError, match="unknown step trait"):
        STEP_TRAITS["rotry"]


def test_bad_prompt_masks_are_refused() -> None:
    """A prompt mask padded first (left padding) is refused with the fix."""
    model = attngraph.compile(_spec("language_model"), seed=0)
    ids, mask = _prompts(16, [3, 2])
    with pytest.raises(attngraph.errors.LoweringError, match="real tokens first"):
        attngraph.generate(model, {"tokens": ids, "tokens_mask": mask.flip(1)}, max_length=2)


transformers = pytest.importorskip("transformers")


def _hf(name: str, tmp: Path) -> Any:
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=61, n_embd=32, n_layer=2, n_head=4,
                                      n_positions=32, attn_implementation="eager")
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(vocab_size=61, hidden_size=32, intermediate_size=48,
                                       num_hidden_layers=2, num_attention_heads=4,
                                       num_key_value_heads=2, max_position_embeddings=64,
                                       attn_implementation="eager")
        model = transformers.LlamaForCausalLM(cfg)
    model.eval().save_pretrained(tmp)
    return model


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_greedy_equals_transformers_generate(name: str, tmp_path: Path) -> None:
    """With the same (random) weights, imported through the name map, cached greedy
    generation from padded prompts gives each prompt the tokens transformers' generate
    (do_sample=False) gives it alone."""
    from attngraph.realmodels import load_model

    ref = _hf(name, tmp_path)
    imp = load_model(tmp_path)
    lengths = [7, 3, 5]
    ids, mask = _prompts(61, lengths, seed=7)
    out = attngraph.generate(imp.model, {"tokens": ids, "tokens_mask": mask}, max_length=12)
    for i, n in enumerate(lengths):
        with torch.no_grad():
            want = ref.generate(ids[i:i + 1, :n], attention_mask=torch.ones(1, n, dtype=torch.long),
                                max_new_tokens=12, do_sample=False, pad_token_id=0,
                                eos_token_id=None)
        assert out.tokens[i].tolist() == want[0, n:].tolist()
