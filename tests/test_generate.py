"""Generation without a target (:func:`attngraph.generate`): greedy and beam search.

The models are untrained and seeded: the properties hold whatever the weights. The
references are independent of the search: the model's own eval-mode forward (which
feeds back its argmax), and the log-probabilities of every sequence under teacher
forcing (the forward in training mode, which reads the target), enumerated by brute
force on a tiny vocabulary.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
import torch

import attngraph
from attngraph.errors import LoweringError
from fuzz.seeds import blocks

ROOT = Path(__file__).resolve().parents[1]
SEQ2SEQ = ["bahdanau_translation", "luong_translation", "luong_local_p"]

#: A causal decoder over target tokens, with cross-attention to a source.
CAUSAL = """\
attngraph: 1
name: tiny_causal_decoder
dims: {vocab: 6, d: 16}
inputs:
  source: {type: tokens, vocab: vocab}
  target: {type: tokens, vocab: vocab, length: T}
nodes:
  x:  {kind: items, from: source, embed: d}
  y:  {kind: items, from: target, embed: d}
  q1: {kind: queries, from: y, heads: 2}
  k1: {kind: keys, from: y, heads: 2}
  v1: {kind: values, from: y, heads: 2}
  s1: {kind: scorer, fn: scaled_dot, query: q1, key: k1}
  p1: {kind: softmax, scores: s1, mask: {causal: true}}
  a1: {kind: readout, weights: p1, values: v1, out: d}
  r1: {kind: add, from: [y, a1]}
  q2: {kind: queries, from: r1, heads: 2}
  k2: {kind: keys, from: x, heads: 2}
  v2: {kind: values, from: x, heads: 2}
  s2: {kind: scorer, fn: scaled_dot, query: q2, key: k2}
  p2: {kind: softmax, scores: s2}
  a2: {kind: readout, weights: p2, values: v2, out: d}
  r2: {kind: add, from: [r1, a2]}
  logits: {kind: linear, from: r2, out: vocab}
outputs: {logits: logits, attention: p2}
"""


#: A decoder loop with a fixed number of steps and no target input at all.
FIXED = """\
attngraph: 1
name: fixed_steps_decoder
dims: {vocab: 7, e: 8, h: 16}
inputs:
  source: {type: tokens, vocab: vocab}
blocks:
  step:
    inputs: [enc, state, y]
    nodes:
      y_emb:  {kind: embedding, from: y, dim: e, vocab: vocab}
      score:  {kind: scorer, fn: additive, query: state, key: enc}
      alpha:  {kind: softmax, scores: score}
      ctx:    {kind: readout, weights: alpha, values: enc}
      inp:    {kind: concat, from: [y_emb, ctx]}
      next:   {kind: rnn, cell: gru, from: inp, hidden: h, init: state}
      logits: {kind: linear, from: next, out: vocab}
    outputs: {logits: logits, attention: alpha, state: next}
nodes:
  enc: {kind: items, from: source, embed: h}
  dec:
    kind: loop
    body: step
    steps: 4
    inputs: {enc: enc}
    carry: {state: {zeros: h, next: state}}
    feed: {y: {start: 2, feedback: logits}}
outputs: {logits: dec.logits, attention: dec.attention}
"""


def _model(name: str, vocab: int | None = None, seed: int = 0) -> Any:
    """A catalog spec (or ``causal``), compiled at ``seed``, with another vocabulary."""
    text = CAUSAL if name == "causal" else (ROOT / "specs" / f"{name}.yaml").read_text()
    if vocab is not None:
        text = re.sub(r"^dims: \{vocab: \d+", f"dims: {{vocab: {vocab}", text, flags=re.M)
    return attngraph.compile(text, seed=seed)


def _sources(b: int, n: int, vocab: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, vocab, (b, n), generator=torch.Generator().manual_seed(seed))


def _step_logps(model: Any, src: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """log p(tokens[:, t] | tokens[:, :t], src), (B, L), by a forward that reads the
    target: training mode (teacher forcing) for a loop, the shifted target for a
    causal decoder."""
    causal = model.graph.name == "tiny_causal_decoder"
    was = model.training
    with torch.no_grad():
        if causal:
            model.eval()
            shifted = torch.cat([torch.zeros_like(tokens[:, :1]), tokens[:, :-1]], 1)
            logits = model(source=src, target=shifted)["logits"]
        else:
            model.train()
            logits = model(source=src, target=tokens)["logits"]
    model.train(was)
    return torch.log_softmax(logits, -1).gather(2, tokens[..., None])[..., 0]


def _exact(model: Any, src: torch.Tensor, vocab: int, length: int, eos: int | None,
           alpha: float) -> list[tuple[tuple[int, ...], float]]:
    """The best hypothesis of each source by brute force: every sequence of ``length``
    ids scored under teacher forcing, cut after its first ``eos``."""
    seqs = torch.tensor(list(itertools.product(range(vocab), repeat=length)))
    best = []
    for row in src:
        logps = _step_logps(model, row.expand(len(seqs), -1), seqs).cumsum(1)
        hyps: dict[tuple[int, ...], float] = {}
        for seq, cum in zip(seqs.tolist(), logps.tolist(), strict=True):
            n = seq.index(eos) + 1 if eos is not None and eos in seq else length
            hyps[tuple(seq[:n])] = cum[n - 1]
        best.append(max(hyps.items(), key=lambda h: h[1] / len(h[0]) ** alpha))
    return best


@pytest.mark.parametrize("name", [*SEQ2SEQ, "causal", "show_attend_tell"])
def test_greedy_equals_the_eval_forward_given_its_tokens(name: str) -> None:
    """Greedy search with no target gives the tokens that the model's eval-mode
    forward, given them as the target, predicts at every step; its scores and
    per-step attention equal that forward's (1e-5 and 1e-6). (show_attend_tell: a
    captioner over image features, LSTM state started from them, start id 1, its
    attention output named apart from the loop's port.)"""
    if name == "show_attend_tell":
        model = attngraph.compile(ROOT / "mechanisms" / f"{name}.yaml", seed=0)
        inputs = {"feats": torch.randn(5, 9, 12, generator=torch.Generator().manual_seed(0))}
        target_name = "words"
    else:
        model = _model(name)
        inputs, target_name = {"source": _sources(5, 6, 6)}, "target"
    out = attngraph.generate(model, inputs, max_length=7, return_attention=True)
    assert out.tokens.shape == (5, 7) and out.lengths.tolist() == [7] * 5
    if name == "causal":
        target = torch.cat([torch.zeros_like(out.tokens[:, :1]), out.tokens[:, :-1]], 1)
    else:
        target = out.tokens
    ref = model.eval()(**inputs, **{target_name: target})
    assert torch.equal(ref["logits"].argmax(-1), out.tokens)
    logp = torch.log_softmax(ref["logits"], -1).gather(2, out.tokens[..., None])[..., 0]
    torch.testing.assert_close(out.scores, logp.sum(1), atol=1e-5, rtol=0)
    torch.testing.assert_close(out.attention["attention"], ref["attention"], atol=1e-6, rtol=0)


def test_a_loop_with_fixed_steps_generates_that_many_by_default() -> None:
    """A loop with ``steps: 4`` and a feedback feed that reads no input generates 4
    tokens without max_length, those the model's forward (which has no target to
    take) predicts from its start id 2; max_length overrides the count."""
    model = attngraph.compile(FIXED, seed=0)
    src = _sources(3, 5, 7)
    out = attngraph.generate(model, {"source": src})
    ref = model.eval()(source=src)["logits"]
    assert out.tokens.shape == (3, 4)
    assert torch.equal(ref.argmax(-1), out.tokens)
    longer = attngraph.generate(model, {"source": src}, max_length=6)
    assert longer.tokens.shape == (3, 6) and torch.equal(longer.tokens[:, :4], out.tokens)


def test_greedy_stops_each_example_at_eos() -> None:
    """With an end id, each example keeps the tokens of the run without one up to its
    first eos (included), then pad; its score sums those tokens' log-probs; the
    search stops once every example has ended."""
    model = _model("bahdanau_translation")
    src = _sources(6, 5, 12, seed=3)
    full = attngraph.generate(model, {"source": src}, max_length=8)
    eos = int(full.tokens[0, 2])
    out = attngraph.generate(model, {"source": src}, max_length=8, eos=eos, pad=-1)
    logps = _step_logps(model, src, full.tokens).cumsum(1)
    ended = 0
    for i, row in enumerate(full.tokens.tolist()):
        n = row.index(eos) + 1 if eos in row else 8
        ended = max(ended, n)
        assert out.lengths[i] == n
        assert out.tokens[i, :n].tolist() == row[:n]
        assert (out.tokens[i, n:] == -1).all()
        assert abs(float(out.scores[i]) - float(logps[i, n - 1])) < 1e-5
    assert out.tokens.shape[1] == ended <= 8
    assert out.lengths[0] == 3
    assert out.sequences() == [row[:n] for row, n in zip(full.tokens.tolist(),
                                                         out.lengths.tolist(), strict=True)]


@pytest.mark.parametrize(("name", "eos", "alpha"), [
    ("bahdanau_translation", None, 0.0), ("bahdanau_translation", 1, 0.0),
    ("bahdanau_translation", 2, 1.0), ("luong_local_p", 3, 0.6), ("causal", None, 0.0),
    ("causal", 1, 1.0)])
def test_beam_with_every_hypothesis_is_exact_search(name: str, eos: int | None,
                                                    alpha: float) -> None:
    """With K = V^L beams nothing is pruned: the returned sequence is the best of all
    V^L by score / length^alpha (brute force, every sequence scored under teacher
    forcing and cut after its first eos), and its score is that one's summed log-prob."""
    v, length = 4, 3
    model = _model(name, vocab=v, seed=2)
    src = _sources(3, 5, v, seed=4)
    out = attngraph.generate(model, {"source": src}, max_length=length, beam=v ** length,
                             eos=eos, length_penalty=alpha)
    for i, (seq, score) in enumerate(_exact(model, src, v, length, eos, alpha)):
        assert out.tokens[i, :int(out.lengths[i])].tolist() == list(seq)
        assert abs(float(out.scores[i]) - score) < 1e-5


def test_beam_scores_grow_with_k_and_never_pass_exact_search() -> None:
    """Beam 1 is greedy search (same tokens and scores); no beam's score passes the
    exact best, which beam V^L reaches; the mean score over examples does not fall
    as K grows (1, 2, 4, 16, V^L); and every returned score is the teacher-forced
    log-prob of the returned tokens."""
    v, length = 4, 4
    model = _model("luong_translation", vocab=v, seed=5)
    src = _sources(16, 6, v, seed=6)
    exact = torch.tensor([s for _, s in _exact(model, src, v, length, None, 0.0)])
    greedy = attngraph.generate(model, {"source": src}, max_length=length)
    means = []
    for k in (1, 2, 4, 16, v ** length):
        out = attngraph.generate(model, {"source": src}, max_length=length, beam=k)
        if k == 1:
            assert torch.equal(out.tokens, greedy.tokens)
            torch.testing.assert_close(out.scores, greedy.scores, atol=1e-6, rtol=0)
        assert (out.scores <= exact + 1e-5).all()
        torch.testing.assert_close(out.scores, _step_logps(model, src, out.tokens).sum(1),
                                   atol=1e-5, rtol=0)
        means.append(float(out.scores.mean()))
    assert all(b >= a - 1e-6 for a, b in itertools.pairwise(means)), means
    torch.testing.assert_close(torch.tensor(means[-1]), exact.mean(), atol=1e-5, rtol=0)
    assert means[-1] > means[0]  # (the search is not trivial on these weights)


@pytest.mark.parametrize(("name", "beam", "eos", "alpha"), [
    ("bahdanau_translation", 1, None, 0.0), ("bahdanau_translation", 3, None, 0.0),
    ("bahdanau_translation", 3, 4, 0.0), ("bahdanau_translation", 3, 4, 1.0),
    ("causal", 3, 0, 1.0)])
def test_a_padded_batch_equals_one_example_at_a_time(name: str, beam: int, eos: int | None,
                                                      alpha: float) -> None:
    """Sources of different lengths, padded and masked in one batch, give each the
    tokens, length, score and attention (zero at its padding) it gets alone (with an
    eos, the examples end at different steps)."""
    model = _model(name)
    vocab = 6 if name == "causal" else 12
    lengths = [3, 6, 4, 5]
    src = torch.zeros(4, 6, dtype=torch.long)
    mask = torch.zeros(4, 6, dtype=torch.bool)
    for i, n in enumerate(lengths):
        src[i, :n] = _sources(1, n, vocab, seed=10 + i)[0]
        mask[i, :n] = True
    opts: dict[str, Any] = {"max_length": 6, "beam": beam, "eos": eos, "pad": -1,
                            "length_penalty": alpha, "return_attention": True}
    both = attngraph.generate(model, {"source": src, "source_mask": mask}, **opts)
    if eos is not None:
        assert len(set(both.lengths.tolist())) > 1
    for i, n in enumerate(lengths):
        one = attngraph.generate(model, {"source": src[i:i + 1, :n]}, **opts)
        w = one.tokens.shape[1]
        assert both.tokens[i, :w].tolist() == one.tokens[0].tolist()
        assert (both.tokens[i, w:] == -1).all()
        assert both.lengths[i] == one.lengths[0]
        torch.testing.assert_close(both.scores[i], one.scores[0], atol=1e-5, rtol=0)
        # ([h,] steps, N): the steps this example ran alone
        att = both.attention["attention"][i].narrow(-2, 0, w)
        torch.testing.assert_close(att[..., :n], one.attention["attention"][0], atol=1e-6,
                                   rtol=0)
        assert (att[..., n:] == 0).all()


@pytest.mark.parametrize(("name", "beam", "eos"), [
    ("bahdanau_translation", 1, None), ("bahdanau_translation", 3, None),
    ("bahdanau_translation", 3, 4), ("causal", 1, 0), ("causal", 3, 0)])
def test_each_example_stops_at_its_own_max_length(name: str, beam: int,
                                                  eos: int | None) -> None:
    """``max_length`` given per example: each gets the tokens, length and score it gets
    alone with its own, whatever the others' (pad after it)."""
    model = _model(name)
    vocab = 6 if name == "causal" else 12
    src = _sources(4, 5, vocab, seed=3)
    limits = [2, 6, 1, 4]
    opts: dict[str, Any] = {"beam": beam, "eos": eos, "pad": -1, "length_penalty": 0.5}
    both = attngraph.generate(model, {"source": src}, max_length=torch.tensor(limits), **opts)
    assert both.tokens.shape[1] <= max(limits)
    for i, n in enumerate(limits):
        one = attngraph.generate(model, {"source": src[i:i + 1]}, max_length=n, **opts)
        w = one.tokens.shape[1]
        assert both.tokens[i, :w].tolist() == one.tokens[0].tolist()
        assert (both.tokens[i, w:] == -1).all()
        assert both.lengths[i] == one.lengths[0] <= n
        torch.testing.assert_close(both.scores[i], one.scores[0], atol=1e-5, rtol=0)
    same = attngraph.generate(model, {"source": src}, max_length=[6] * 4, **opts)
    ref = attngraph.generate(model, {"source": src}, max_length=6, **opts)
    assert torch.equal(same.tokens, ref.tokens) and torch.equal(same.lengths, ref.lengths)


def test_beam_attention_follows_the_returned_hypothesis() -> None:
    """The per-step attention returned with a beam's best sequence is the attention the
    decoder computes reading that sequence (teacher forcing), step by step."""
    model = _model("bahdanau_translation", seed=7)
    src = _sources(4, 5, 12, seed=8)
    out = attngraph.generate(model, {"source": src}, max_length=6, beam=4,
                             return_attention=True)
    model.train()
    with torch.no_grad():
        ref = model(source=src, target=out.tokens)["attention"]
    torch.testing.assert_close(out.attention["attention"], ref, atol=1e-6, rtol=0)
    assert out.attention["attention"].shape == (4, 6, 5)


def test_generation_restores_the_mode_and_ignores_the_target() -> None:
    """The model comes back in the mode it was in, and a target among the inputs
    (what the decoder would read, but not while generating) changes nothing."""
    model = _model("bahdanau_translation").train()
    src = _sources(2, 4, 12)
    a = attngraph.generate(model, {"source": src}, max_length=3, beam=2)
    assert model.training
    b = attngraph.generate(model, {"source": src, "target": torch.ones(2, 9, dtype=torch.long)},
                           max_length=3, beam=2)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.scores, b.scores)


def test_a_decoder_that_looks_ahead_is_refused() -> None:
    """A decoder over the target without a causal mask cannot generate a token at a
    time: the error names the output, points at the target input's line, and says
    to mask the attention."""
    model = attngraph.compile(CAUSAL.replace(", mask: {causal: true}", ""), seed=0)
    with pytest.raises(LoweringError) as info:
        attngraph.generate(model, {"source": _sources(2, 4, 6)}, max_length=3)
    err = info.value
    assert "output 'logits'" in str(err) and "not causal" in str(err)
    assert err.loc is not None and err.loc.line == 6
    assert "causal: true" in str(err.hint)


@pytest.mark.parametrize(("spec", "words"), [
    ("multihead_attention", "multihead_attention cannot generate: no output is made by a loop"),
    ("memory_network", "memory_network cannot generate: no output is made by a loop")])
def test_a_model_without_a_generating_output_is_refused(spec: str, words: str) -> None:
    """A model with no output made by a feedback loop or a causal decoder over a token
    input gets one error that says so, with a hint naming what generation needs
    (memory_network's loop reads its input at every step: no feedback)."""
    model = _model(spec)
    with pytest.raises(LoweringError) as info:
        attngraph.generate(model, {"tokens": torch.ones(1, 3, dtype=torch.long)}, max_length=2)
    assert words in str(info.value)
    assert "feedback:" in str(info.value.hint)


def test_a_loop_that_also_reads_an_input_at_every_step_is_refused() -> None:
    """A loop with a feed read from an input besides its feedback feed gets one error
    at its feed line: past that input's end there is nothing to feed."""
    text = (FIXED.replace("inputs: [enc, state, y]", "inputs: [enc, state, y, x]")
            .replace("      inp:    {kind: concat, from: [y_emb, ctx]}",
                     "      x_emb:  {kind: embedding, from: x, dim: e, vocab: vocab}\n"
                     "      inp:    {kind: concat, from: [y_emb, x_emb, ctx]}")
            .replace("feed: {y: {start: 2, feedback: logits}}",
                     "feed: {y: {start: 2, feedback: logits}, x: {from: source}}")
            .replace("steps: 4", "steps: source"))
    model = attngraph.compile(text, seed=0)
    with pytest.raises(LoweringError) as info:
        attngraph.generate(model, {"source": _sources(1, 3, 7)}, max_length=3)
    assert "loop 'dec' has feeds y, x: generation feeds back one token" in str(info.value)
    assert info.value.loc is not None and info.value.loc.line == 27


@pytest.mark.parametrize(("options", "words"), [
    ({}, "generate needs max_length for bahdanau_translation"),
    ({"max_length": 0}, "max_length must be a whole number >= 1, not 0"),
    ({"max_length": [3, 0]}, "max_length must be a whole number >= 1, not 0"),
    ({"max_length": [3, 2.5]}, "max_length must be a whole number >= 1, not 2.5"),
    ({"max_length": []}, "max_length is an empty list"),
    ({"max_length": torch.tensor([2.0])}, "max_length as a tensor holds one integer per "
                                          "example, not a torch.float32 tensor"),
    ({"max_length": [3, 2]}, "max_length gives 2 lengths, but the inputs hold 1 example"),
    ({"max_length": 3, "pad": "x"}, "pad='x' is not a whole number"),
    ({"max_length": 3, "start": 1.5}, "start=1.5 is not a whole number"),
    ({"max_length": 3, "beam": 0}, "beam must be a whole number >= 1, not 0"),
    ({"max_length": 3, "eos": 12}, "eos=12 is not a token id of the decoder (0 ≤ id < 12)"),
    ({"max_length": 3, "output": "attention"}, "output 'attention' is not made by a loop"),
    ({"max_length": 3, "output": ["tokens"]}, "output names one of the model's outputs"),
    ({"max_length": 3, "cache": None}, "cache must be True or False, not None"),
    ({"max_length": 3, "return_attention": "yes"}, "return_attention must be True or False"),
])
def test_bad_options_are_refused(options: dict[str, Any], words: str) -> None:
    """Each unusable option gets one error that names it and its value."""
    model = _model("bahdanau_translation")
    with pytest.raises(LoweringError) as info:
        attngraph.generate(model, {"source": _sources(1, 3, 12)}, **options)
    assert words in str(info.value)


def test_inputs_are_checked_as_forward_checks_them() -> None:
    """An unknown input name, or ids past the vocabulary, fail as forward fails."""
    model = _model("bahdanau_translation")
    with pytest.raises(LoweringError, match="unknown input 'sourse'"):
        attngraph.generate(model, {"sourse": _sources(1, 3, 12)}, max_length=2)
    with pytest.raises(LoweringError, match="input 'source'"):
        attngraph.generate(model, {"source": torch.full((1, 3), 40)}, max_length=2)
    with pytest.raises(LoweringError, match="inputs as a dict of name -> tensor, not list"):
        attngraph.generate(model, [_sources(1, 3, 12)], max_length=2)  # type: ignore[arg-type]


def test_the_docs_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The python blocks of docs/generation.md run, in order, as written (from the
    repository root, as its paths are)."""
    monkeypatch.chdir(ROOT)
    scope: dict[str, Any] = {}
    code = [b for b in blocks(ROOT / "docs" / "generation.md") if b.lang == "python"]
    assert code
    for b in code:
        exec(compile(b.text, f"docs/generation.md:{b.line}", "exec"), scope)  # noqa: S102


@pytest.mark.slow
def test_a_trained_translator_generates_its_targets() -> None:
    """bahdanau_translation trained with its train section (reversal) generates the
    reversed source from the source alone: greedy and beam 4 reach its token-accuracy
    target (0.9) on a held-out batch, and beam 4's mean score is at least greedy's."""
    from attngraph.train.engine.loop import train

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        res = train(ROOT / "specs" / "bahdanau_translation.yaml", seed=0)
    finally:
        torch.set_num_threads(before)
    batch = res.task.batch(256, split="valid")
    length = batch["target"].shape[1]
    greedy = attngraph.generate(res.model, {"source": batch["source"]}, max_length=length)
    beam = attngraph.generate(res.model, {"source": batch["source"]}, max_length=length,
                              beam=4)
    assert float((greedy.tokens == batch["target"]).float().mean()) >= 0.9
    assert float((beam.tokens == batch["target"]).float().mean()) >= 0.9
    assert float(beam.scores.mean()) >= float(greedy.scores.mean()) - 1e-6
