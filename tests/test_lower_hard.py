"""Hard attention modules: the policy (categorical/gaussian, three estimators), the
REINFORCE loss and the glimpse sensor, checked against their defining properties."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from attngraph.lower.rules.glimpse import Glimpse, glimpse  # noqa: E402
from attngraph.lower.rules.hard import Policy, reinforce_loss  # noqa: E402

F = torch.nn.functional


def _scores(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


# --- policy: categorical ------------------------------------------------------------


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_categorical_samples_only_unmasked_items(estimator: str) -> None:
    """In training, every sampled one-hot lies on an unmasked item, for each estimator."""
    torch.manual_seed(0)
    scores = torch.zeros(400, 6)
    scores[:, 1] = 5.0  # a masked item with the highest score must still never be picked
    mask = torch.tensor([True, False, True, False, True, True]).expand(400, 6)
    pol = Policy("categorical", estimator).train()
    out = pol(scores=scores, mask=mask)
    sample = out["sample"].detach()
    assert torch.equal(sample.sum(-1), torch.ones(400))
    assert sample[:, ~mask[0]].abs().sum() == 0
    # all four unmasked items are hit (the sampler is not stuck on one)
    assert (sample.sum(0)[mask[0]] > 0).all()


def test_categorical_eval_is_deterministic_argmax() -> None:
    """In eval mode the sample is the one-hot of the argmax over unmasked items, every call."""
    scores = _scores(5, 3, 7)
    mask = torch.ones(5, 3, 7, dtype=torch.bool)
    mask[..., 0] = False
    scores[..., 0] = 100.0  # masked, so not the argmax
    pol = Policy("categorical").eval()
    a = pol(scores=scores, mask=mask)["sample"]
    b = pol(scores=scores, mask=mask)["sample"]
    want = F.one_hot(scores.masked_fill(~mask, -math.inf).argmax(-1), 7).float()
    assert torch.equal(a, want)
    assert torch.equal(a, b)


def test_categorical_log_prob_and_entropy_match_torch_distributions() -> None:
    """log_prob of the sampled item and entropy equal torch.distributions.Categorical's."""
    torch.manual_seed(1)
    scores = _scores(4, 2, 5, 9)  # (B, h, M, N)
    mask = torch.rand(4, 1, 1, 9) > 0.3
    mask[..., 0] = True
    pol = Policy("categorical").train()
    out = pol(scores=scores, mask=mask)
    assert out["sample"].shape == (4, 2, 5, 9) and out["log_prob"].shape == (4, 2, 5)
    dist = torch.distributions.Categorical(logits=scores.masked_fill(~mask, -math.inf))
    index = out["sample"].argmax(-1)
    torch.testing.assert_close(out["log_prob"], dist.log_prob(index))
    torch.testing.assert_close(out["entropy"], dist.entropy())


def test_reinforce_sample_carries_no_gradient() -> None:
    """With estimator reinforce the sample is a constant; log_prob carries the gradient."""
    scores = _scores(3, 5).requires_grad_()
    out = Policy("categorical", "reinforce").train()(scores=scores)
    assert not out["sample"].requires_grad
    out["log_prob"].sum().backward()
    assert scores.grad is not None and scores.grad.abs().sum() > 0


def test_straight_through_gradient_equals_softmax_gradient() -> None:
    """Forward is one-hot; the gradient w.r.t. scores equals that of softmax(scores)."""
    torch.manual_seed(2)
    scores = _scores(4, 6).requires_grad_()
    c = _scores(4, 6, seed=3)
    out = Policy("categorical", "straight_through").train()(scores=scores)
    sample = out["sample"]
    assert torch.equal(sample.detach().sum(-1), torch.ones(4))
    assert set(sample.detach().unique().tolist()) <= {0.0, 1.0}
    (sample * c).sum().backward()
    ref = scores.detach().clone().requires_grad_()
    (torch.softmax(ref, -1) * c).sum().backward()
    torch.testing.assert_close(scores.grad, ref.grad)


def test_gumbel_forward_is_one_hot_with_relaxed_gradient() -> None:
    """Gumbel-softmax in training gives exact one-hots forward and a nonzero gradient."""
    torch.manual_seed(3)
    scores = _scores(8, 5).requires_grad_()
    out = Policy("categorical", "gumbel", tau=0.5).train()(scores=scores)
    sample = out["sample"]
    assert set(sample.detach().unique().tolist()) <= {0.0, 1.0}
    assert torch.equal(sample.detach().sum(-1), torch.ones(8))
    (sample * _scores(8, 5, seed=4)).sum().backward()
    assert scores.grad is not None and scores.grad.abs().sum() > 0


def test_fully_masked_row_gives_zeros_not_nan() -> None:
    """A row whose items are all masked samples nothing: zero weights, log_prob and entropy 0."""
    scores = _scores(2, 4).requires_grad_()
    mask = torch.tensor([[True, True, False, False], [False] * 4])
    for mode in ("train", "eval"):
        pol = Policy("categorical", "straight_through")
        pol.train(mode == "train")
        out = pol(scores=scores, mask=mask)
        assert torch.equal(out["sample"][1].detach(), torch.zeros(4))
        assert out["log_prob"][1] == 0 and out["entropy"][1] == 0
        (out["sample"].sum() + out["log_prob"].sum() + out["entropy"].sum()).backward()
        assert torch.isfinite(scores.grad).all()


# --- policy: gaussian ---------------------------------------------------------------


def test_gaussian_eval_returns_mean_train_samples_with_std() -> None:
    """Eval returns the mean itself; training samples scatter around it with the given std."""
    torch.manual_seed(4)
    mean = torch.full((20000, 2), 0.3)
    pol = Policy("gaussian", std=0.2)
    assert torch.equal(pol.eval()(mean=mean)["sample"], mean)
    s = pol.train()(mean=mean)["sample"]
    assert abs(s.mean().item() - 0.3) < 0.01
    assert abs(s.std().item() - 0.2) < 0.01


def test_gaussian_log_prob_matches_torch_distributions() -> None:
    """log_prob (summed over coordinates) and entropy equal torch.distributions.Normal's."""
    torch.manual_seed(5)
    mean = _scores(6, 2)
    out = Policy("gaussian", std=0.3).train()(mean=mean)
    normal = torch.distributions.Normal(mean, 0.3)
    torch.testing.assert_close(out["log_prob"], normal.log_prob(out["sample"]).sum(-1))
    torch.testing.assert_close(out["entropy"], normal.entropy().sum(-1))


def test_gaussian_reinforce_gradient_reaches_mean_only_through_log_prob() -> None:
    """A reinforce location is a constant; its log_prob moves the mean toward the sample."""
    torch.manual_seed(6)
    mean = torch.zeros(1, 2, requires_grad=True)
    out = Policy("gaussian", std=0.5).train()(mean=mean)
    assert not out["sample"].requires_grad
    out["log_prob"].sum().backward()
    # d log N(s; m, σ)/dm = (s - m)/σ²: same sign as the sample's offset
    torch.testing.assert_close(mean.grad, out["sample"] / 0.25)


# --- baseline and the REINFORCE loss -----------------------------------------------


def test_reinforce_loss_raises_log_prob_of_rewarded_samples() -> None:
    """One SGD step on reinforce_loss makes rewarded choices likelier, unrewarded ones rarer."""
    torch.manual_seed(7)
    logits = torch.zeros(64, 4, requires_grad=True)
    pol = Policy("categorical", baseline=False).train()
    out = pol(scores=logits)
    index = out["sample"].argmax(-1)
    reward = (index == 2).float()  # only item 2 pays
    reinforce_loss(out["log_prob"], reward, 0.5).backward()
    with torch.no_grad():
        new = torch.log_softmax(logits - 1.0 * logits.grad, -1)
    before = math.log(0.25)
    rewarded = new.gather(-1, index[:, None]).squeeze(-1)
    assert (rewarded[reward == 1] > before).all()
    assert (rewarded[reward == 0] < before).all()


def test_reinforce_loss_fits_the_learned_baseline_and_detaches_the_advantage() -> None:
    """The baseline gets gradient only from (b - r)²; the policy term sees (r - b) as a constant."""
    lp = torch.tensor([-1.0, -2.0], requires_grad=True)
    b = torch.tensor([0.2, 0.4], requires_grad=True)
    r = torch.tensor([1.0, 0.0])
    reinforce_loss(lp, r, b).backward()
    torch.testing.assert_close(lp.grad, -(r - b.detach()) / 2)
    torch.testing.assert_close(b.grad, (b.detach() - r))  # d mean((b-r)^2)/db = (b-r) for B=2


def test_reinforce_loss_sums_over_steps_per_step_baseline() -> None:
    """log_prob [B, T, M] with a baseline [B, T]: per-step advantages, summed over T and M."""
    lp = torch.randn(3, 4, 2, requires_grad=True)
    b = torch.randn(3, 4)
    r = torch.tensor([1.0, 0.0, 2.0])
    loss = reinforce_loss(lp, r, b)
    want = -((r[:, None] - b) * lp.sum(-1)).sum(-1).mean()
    torch.testing.assert_close(loss, want)


def test_baseline_scalar_and_linear_ports() -> None:
    """baseline true: one learned scalar; a width d: a linear on a detached vector."""
    pol = Policy("categorical", baseline=True)
    out = pol(scores=_scores(5, 3))
    assert out["baseline"].shape == (5,) and sum(p.numel() for p in pol.parameters()) == 1
    pol = Policy("gaussian", baseline=8)
    h = _scores(5, 8).requires_grad_()
    out = pol(mean=_scores(5, 2), baseline_input=h)
    assert out["baseline"].shape == (5,) and sum(p.numel() for p in pol.parameters()) == 9
    assert out["baseline"].requires_grad
    out["baseline"].sum().backward()
    assert h.grad is None  # fitting the baseline does not train the state it reads


# --- glimpse -------------------------------------------------------------------------


def test_glimpse_at_centre_one_scale_is_the_centre_crop() -> None:
    """At loc (0, 0) with one scale, the glimpse is exactly the central size×size crop."""
    img = _scores(2, 3, 8, 10)
    out = glimpse(img, torch.zeros(2, 2), size=4)
    assert out.shape == (2, 3 * 4 * 4)
    torch.testing.assert_close(out, img[:, :, 2:6, 3:7].reshape(2, -1))


def test_glimpse_second_scale_is_average_of_twice_larger_crop() -> None:
    """Scale 2 covers twice the side (4x area), averaged down to size×size."""
    img = _scores(1, 2, 8, 8)
    out = glimpse(img, torch.zeros(1, 2), size=2, scales=2).reshape(1, 2, 2, 2, 2)
    torch.testing.assert_close(out[:, 0], img[:, :, 3:5, 3:5])
    torch.testing.assert_close(out[:, 1], F.avg_pool2d(img[:, :, 2:6, 2:6], 2))


def test_glimpse_is_batched_and_pads_with_zeros() -> None:
    """Each batch element is cropped at its own location; outside pixels read as zero."""
    img = _scores(2, 1, 4, 4) + 10.0  # no true zeros inside the image
    # one pixel = 0.5 in [-1, 1] coordinates of a 4-pixel side
    loc = torch.tensor([[-0.5, -0.5], [-1.0, -1.0]])
    out = glimpse(img, loc, size=2).reshape(2, 2, 2)
    torch.testing.assert_close(out[0], img[0, 0, 0:2, 0:2])
    want = torch.zeros(2, 2)
    want[1, 1] = img[1, 0, 0, 0]
    torch.testing.assert_close(out[1], want)


def test_glimpse_is_differentiable_wrt_image_and_location() -> None:
    """Gradients reach exactly the pixels under the glimpse, and the location."""
    img = _scores(1, 1, 8, 8).requires_grad_()
    loc = torch.tensor([[0.1, -0.2]], requires_grad=True)
    Glimpse(size=2, scales=2)(img, loc).sum().backward()
    assert img.grad is not None and loc.grad is not None
    assert img.grad.abs().sum() > 0 and loc.grad.abs().sum() > 0
    assert img.grad[0, 0, 0, :].abs().sum() == 0  # the top row is outside every patch


# --- end to end: compiled specs ----------------------------------------------------

HARD_PICK = """\
attngraph: 1
name: hard_pick
dims: {vocab: 20, d: 8, classes: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
nodes:
  x:      {kind: items, from: tokens, embed: d}
  score:  {kind: scorer, fn: additive, query: {learned: d}, key: x}
  pick:   {kind: policy, scores: score, estimator: ESTIMATOR}
  z:      {kind: readout, weights: pick, values: x}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, z: z, items: x, choice: pick.sample, log_prob: pick.log_prob}
"""

RAM = """\
attngraph: 1
name: tiny_ram
dims: {gd: 16, hs: 16, classes: 4}
inputs:
  image: {type: image, channels: 1, height: 12, width: 12}
blocks:
  step:
    inputs: [img, h, l]
    nodes:
      g:     {kind: glimpse, image: img, loc: l, size: 4, scales: 2}
      what:  {kind: linear, from: g, out: gd, act: relu}
      where: {kind: linear, from: l, out: gd, act: relu}
      gin:   {kind: add, from: [what, where]}
      core:  {kind: rnn, cell: gru, from: gin, hidden: hs, init: h}
      mu:    {kind: linear, from: core, out: 2, act: tanh}
      pick:  {kind: policy, dist: gaussian, mean: mu, std: 0.2, baseline: core}
    outputs: {state: core, loc: pick.sample, log_prob: pick.log_prob,
              baseline: pick.baseline}
nodes:
  ram:
    kind: loop
    body: step
    steps: 3
    inputs: {img: image}
    carry: {h: {zeros: hs, next: state}, l: {zeros: 2, next: loc}}
  logits: {kind: linear, from: ram.final_h, out: classes}
outputs: {logits: logits, log_prob: ram.log_prob, baseline: ram.baseline,
          locations: ram.loc}
"""


def _compile(text: str, **kw: object) -> torch.nn.Module:
    import attngraph

    return attngraph.compile(attngraph.loads_spec(text), seed=0, **kw)


@pytest.mark.parametrize("estimator", ["reinforce", "straight_through", "gumbel"])
def test_compiled_categorical_policy_is_hard_attention_over_unpadded_items(
        estimator: str) -> None:
    """A policy's sample used as readout weights picks exactly one real item's vector,
    never a padded one, in training and eval; eval picks the same item every call."""
    torch.manual_seed(0)
    model = _compile(HARD_PICK.replace("ESTIMATOR", estimator))
    tokens = torch.randint(0, 20, (6, 5))
    mask = torch.ones(6, 5, dtype=torch.bool)
    mask[:, 3:] = False
    for mode in (True, False):
        model.train(mode)
        out = model(tokens=tokens, tokens_mask=mask)
        choice = out["choice"].detach()
        assert out["logits"].shape == (6, 3) and out["log_prob"].shape == (6,)
        assert torch.equal(choice.sum(-1), torch.ones(6))
        assert choice[:, 3:].abs().sum() == 0
        want = (choice.unsqueeze(-1) * out["items"]).sum(1)
        torch.testing.assert_close(out["z"], want)
    again = model(tokens=tokens, tokens_mask=mask)["choice"]
    assert torch.equal(again, out["choice"])


def test_compiled_straight_through_policy_trains_the_scorer() -> None:
    """With straight_through, the task loss alone gives gradient to the scorer's parameters."""
    model = _compile(HARD_PICK.replace("ESTIMATOR", "straight_through")).train()
    out = model(tokens=torch.randint(0, 20, (4, 5)))
    out["logits"].sum().backward()
    grads = {n: p.grad for n, p in model.named_parameters() if n.startswith("nodes.score.")}
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads.values())


def test_recurrent_attention_model_runs_in_train_and_eval() -> None:
    """A glimpse/GRU/gaussian-policy loop gives [B, T, ...] log-probs, baselines and
    locations; training samples locations, eval is deterministic."""
    model = _compile(RAM)
    img = torch.randn(3, 1, 12, 12)
    out = model.train()(image=img)
    assert out["logits"].shape == (3, 4)
    assert out["log_prob"].shape == (3, 3) and out["baseline"].shape == (3, 3)
    assert out["locations"].shape == (3, 3, 2)
    again = model(image=img)
    assert not torch.equal(again["locations"], out["locations"])
    model.eval()
    a, b = model(image=img), model(image=img)
    assert torch.equal(a["locations"], b["locations"])
    torch.testing.assert_close(a["logits"], b["logits"])


def test_reinforce_step_changes_location_and_baseline_parameters() -> None:
    """One SGD step on the declared outputs' REINFORCE loss moves the location network and
    the baseline; model_reinforce_loss gives the same loss from model.aux."""
    from attngraph.lower.rules.hard import model_reinforce_loss

    torch.manual_seed(1)
    model = _compile(RAM).train()
    out = model(image=torch.randn(8, 1, 12, 12))
    reward = (out["logits"].argmax(-1) == torch.arange(8) % 4).float()
    loss = reinforce_loss(out["log_prob"], reward, out["baseline"])
    torch.testing.assert_close(model_reinforce_loss(model, reward), loss)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad()
    loss.backward()
    opt.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert any(".mu." in n for n in changed), changed
    assert any(".pick.baseline_proj." in n for n in changed), changed
    assert not any(n.startswith("nodes.logits.") for n in changed)  # reward has no gradient


@pytest.mark.slow
def test_reinforce_learns_to_pick_rewarded_items() -> None:
    """Training only on model_reinforce_loss (reward: the picked token id is < 5) takes the
    eval-mode pick from chance (~0.3) to nearly always a rewarded item when one exists."""
    from attngraph.lower.rules.hard import model_reinforce_loss

    torch.manual_seed(0)
    model = _compile(HARD_PICK.replace("ESTIMATOR", "reinforce"))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)

    def hit_rate() -> float:
        model.eval()
        with torch.no_grad():
            tok = torch.randint(0, 20, (512, 5))
            picked = (model(tokens=tok)["choice"] * tok).sum(-1)
        model.train()
        good = (tok < 5).any(-1)
        return float(((picked < 5) & good).sum() / good.sum())

    before = hit_rate()
    for _ in range(100):
        tok = torch.randint(0, 20, (64, 5))
        out = model(tokens=tok)
        reward = ((out["choice"].detach() * tok).sum(-1) < 5).float()
        opt.zero_grad()
        model_reinforce_loss(model, reward).backward()
        opt.step()
    assert before < 0.6
    assert hit_rate() > 0.9


CELLS = """
attngraph: 1
name: cells
inputs:
  image: {type: image, channels: 1, height: 12, width: 16}
nodes:
  tiles:   {kind: items, from: image, patches: [4, 4]}
  centres: {kind: position, from: tiles, encoding: xy}
  pixels:  {kind: items, from: image}
  dots:    {kind: position, from: pixels, encoding: xy}
outputs: {centres: centres, dots: dots, tiles: tiles}
"""


def test_xy_positions_are_patch_centres_where_a_glimpse_sees_the_patch() -> None:
    """``encoding: xy`` gives each patch's centre, row by row like the items; a glimpse
    of the patch's size at that centre is exactly that patch, for every patch."""
    model = _compile(CELLS)
    img = torch.randn(2, 1, 12, 16)
    out = model(image=img)
    centres = out["centres"]
    assert centres.shape == (2, 12, 2)  # 3 rows × 4 columns of 4×4 patches
    torch.testing.assert_close(centres[0, :4, 0], torch.tensor([-0.75, -0.25, 0.25, 0.75]))
    torch.testing.assert_close(centres[0, ::4, 1], torch.tensor([-2 / 3, 0.0, 2 / 3]))
    for i in range(12):
        seen = glimpse(img, centres[:, i], size=4)  # (2, 16)
        torch.testing.assert_close(seen, out["tiles"][:, i], atol=1e-5, rtol=0)
    assert out["dots"].shape == (2, 12 * 16, 2)
    torch.testing.assert_close(out["dots"][0, 0], torch.tensor([-15 / 16, -11 / 12]))
    assert sum(p.numel() for p in model.parameters()) == 0


def test_xy_positions_need_items_cut_from_an_image() -> None:
    """Positions of tokens have no (x, y): one located error with a hint; dim must be 2."""
    from attngraph.errors import ShapeError
    from attngraph.frontend import loads_spec

    bad = """
attngraph: 1
name: bad
inputs:
  src: {type: tokens, vocab: 10}
nodes:
  x:   {kind: items, from: src, embed: 8}
  xy:  {kind: position, from: x, encoding: xy}
outputs: {xy: xy}
"""
    with pytest.raises(ShapeError) as e:
        loads_spec(bad, "bad.yaml")
    d = e.value.diagnostics[0]
    assert "centres of image patches" in d.message and d.hint and d.loc.line == 8
    wide = CELLS.replace("encoding: xy}\n  pixels", "encoding: xy, dim: 3}\n  pixels")
    with pytest.raises(ShapeError, match="dim is 2"):
        loads_spec(wide, "wide.yaml")
