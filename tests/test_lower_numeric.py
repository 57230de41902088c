"""Lowered modules at the edges of the spec's numeric ranges: every output and
gradient stays finite in float32 and bfloat16; a learned table given a longer
input than it covers fails naming its node and line."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.lower.rules.hard import Policy  # noqa: E402
from attngraph.lower.rules.masks import masked_softmax  # noqa: E402
from attngraph.lower.rules.normalisers import masked_sparsemax  # noqa: E402
from attngraph.spec.models import SCALE_RANGE  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LOW, HIGH = SCALE_RANGE
DTYPES = [torch.float32, torch.bfloat16]


def finite(*ts: torch.Tensor) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in ts)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
@pytest.mark.parametrize("fn", [masked_softmax, masked_sparsemax], ids=["softmax", "sparsemax"])
@pytest.mark.parametrize("temperature", [LOW, 1.0, HIGH])
def test_scores_of_1e4_over_any_allowed_temperature_stay_finite(
    dtype: torch.dtype, fn: object, temperature: float
) -> None:
    """The measurement behind the temperature range: scores of ±1e4 divided by any
    allowed temperature give finite weights and gradients, masked rows included."""
    g = torch.Generator().manual_seed(0)
    s = ((torch.rand(4, 7, 9, generator=g) * 2 - 1) * 1e4).to(dtype).requires_grad_()
    mask = torch.rand(4, 7, 9, generator=g) > 0.3
    mask[0] = False  # a fully masked row
    p = fn(s / temperature, mask)  # type: ignore[operator]
    (grad,) = torch.autograd.grad((p * torch.randn(p.shape, generator=g).to(dtype)).sum(), s)
    assert finite(p, grad)


def test_below_the_range_a_temperature_overflows() -> None:
    """Why the range has a floor: 1e-38 already makes inf scores and NaN weights."""
    s = torch.tensor([[1e4, -1e4, 0.0]])
    assert not finite(masked_softmax(s / 1e-38, None))


@pytest.mark.parametrize("dtype", DTYPES, ids=["float32", "bfloat16"])
def test_gumbel_at_the_smallest_tau_stays_finite(dtype: torch.dtype) -> None:
    """A Gumbel-softmax policy at tau = 0.001 over large scores: finite sample,
    log-probability, entropy and gradients."""
    torch.manual_seed(0)
    s = (torch.randn(64, 9) * 1e4).to(dtype).requires_grad_()
    mask = torch.rand(64, 9) > 0.3
    out = Policy("categorical", "gumbel", tau=LOW).train()(scores=s, mask=mask)
    (grad,) = torch.autograd.grad(out["sample"].sum() + out["log_prob"].sum(), s)
    assert finite(out["sample"], out["log_prob"], out["entropy"], grad)


def test_gumbel_noise_is_never_infinite(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exponential draw of exactly 0 (possible in float32) gives finite noise, not
    an infinite one that would make the relaxed sample NaN."""
    def zeros(self: torch.Tensor, *a: object, **k: object) -> torch.Tensor:
        return self.zero_()

    monkeypatch.setattr(torch.Tensor, "exponential_", zeros)
    out = Policy("categorical", "gumbel").train()(scores=torch.randn(8, 5))
    assert finite(out["sample"], out["log_prob"])


@pytest.mark.parametrize("std", [LOW, 1e-30])
@pytest.mark.parametrize("train", [True, False])
def test_gaussian_log_prob_stays_finite_at_a_tiny_std(std: float, train: bool) -> None:
    """At the smallest std the log-probability is finite, in training and in eval; a
    module built directly with a smaller std takes the smallest one."""
    torch.manual_seed(0)
    mean = torch.tanh(torch.randn(16, 2)).requires_grad_()
    pol = Policy("gaussian", std=std).train(train)
    assert pol.std == LOW
    out = pol(mean=mean)
    (grad,) = torch.autograd.grad(out["log_prob"].sum(), mean, allow_unused=True)
    assert finite(out["log_prob"], out["entropy"])
    assert grad is None or finite(grad)


def _docs_glimpse_loop() -> str:
    text = (ROOT / "docs" / "spec-language.md").read_text(encoding="utf-8")
    start = text.index("name: glimpse_loop")
    start = text.rindex("```yaml\n", 0, start) + len("```yaml\n")
    return text[start:text.index("```", start)]


@pytest.mark.parametrize("train", [True, False])
def test_docs_glimpse_loop_log_probs_are_finite_at_the_smallest_std(train: bool) -> None:
    """The docs' recurrent attention loop with std at its floor: finite log-probs."""
    text = _docs_glimpse_loop().replace("dist: gaussian}", f"dist: gaussian, std: {LOW}}}")
    assert f"std: {LOW}" in text
    model = attngraph.compile(loads_spec(text, "g.yaml"), seed=0).train(train)
    out = model(img=torch.randn(3, 1, 28, 28) * 100)
    assert finite(out["log_probs"], out["logits"])


def test_a_learned_position_table_refuses_a_longer_input_at_its_line() -> None:
    """A forward with more items than max_len fails naming the node and its line."""
    text = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 4}\nnodes:\n"
            "  p: {kind: position, from: x, dim: 4, encoding: learned, max_len: 3}\n"
            "outputs: {p: p}\n")
    model = attngraph.compile(loads_spec(text, "t.yaml"), seed=0)
    assert model(x=torch.randn(2, 3, 4))["p"].shape == (2, 3, 4)
    with pytest.raises(LoweringError) as info:
        model(x=torch.randn(2, 5, 4))
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (6, 6)
    assert "the learned table covers max_len 3 positions, but this input has 5 items" in d.message
