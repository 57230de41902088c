"""A compiled model's forward has a real signature: the inputs by name, in the spec's
order, then the optional masks; positional calls, tracing and torch.export with
dynamic shapes keyed by input name work, and copies keep it."""

from __future__ import annotations

import copy
import inspect
import io
import pickle
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402
from attngraph.lower.runtime.examples import random_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def _model(name: str) -> tuple[attngraph.Graph, torch.nn.Module]:
    graph = attngraph.load_spec(ROOT / "specs" / f"{name}.yaml")
    return graph, attngraph.compile(graph, seed=0).eval()


def test_signature_names_the_inputs_then_the_masks() -> None:
    _, m = _model("bahdanau_translation")
    assert str(inspect.signature(m.forward)) == "(source, target, source_mask=None)"
    _, g = _model("graph_attention")
    params = inspect.signature(g.forward).parameters
    assert [p for p in params if params[p].default is inspect.Parameter.empty] == \
        ["g", "g_adjacency"]


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_positional_call_equals_the_keyword_call(path: Path) -> None:
    graph = attngraph.load_spec(path)
    m = attngraph.compile(graph, seed=0).eval()
    kw = random_inputs(graph, batch=2, length=5, generator=torch.Generator().manual_seed(0))
    names = list(inspect.signature(m.forward).parameters)
    args = [kw[n] for n in names if n in kw]
    assert len(args) == len(kw)  # every input has a place in the signature
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a latent samples in eval: the same draws in both calls
        a = m(*args)
        torch.manual_seed(0)
        b = m(**kw)
    for k in b:
        assert torch.equal(a[k], b[k]), k


def test_wrong_positional_calls_are_located_errors() -> None:
    _, m = _model("bahdanau_translation")
    src = torch.randint(0, 12, (2, 5))
    with pytest.raises(LoweringError, match="4 positional arguments.*takes 3"):
        m(src, src, None, src)
    with pytest.raises(LoweringError, match="'source' twice"):
        m(src, source=src)
    with pytest.raises(LoweringError, match="forward needs input 'target'"):
        m(src)


def test_copies_keep_the_signature_and_their_own_weights() -> None:
    """pickle, torch.save and deepcopy rebuild forward for the copy: it runs the
    copy's weights, not the original's."""
    _, m = _model("global_attention")
    x = torch.randint(0, 32, (2, 6))
    want = m(x)["logits"]
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    for c in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m),
              torch.load(buf, weights_only=False)):
        assert inspect.signature(c.forward) == inspect.signature(m.forward)
        assert torch.equal(c(x)["logits"], want)
        with torch.no_grad():
            c.nodes.logits.bias.add_(1.0)
        assert not torch.equal(c(x)["logits"], want)  # the copy's forward runs the copy
        assert torch.equal(m(x)["logits"], want)


def test_an_input_named_like_a_keyword_is_taken_by_name() -> None:
    """Python cannot name a parameter ``lambda``: that model takes its inputs by name."""
    text = """
attngraph: 1
name: keyword_input
inputs:
  lambda: {type: vectors, dim: 4}
nodes:
  y: {kind: linear, from: lambda, out: 2}
outputs: {y: y}
"""
    m = attngraph.compile(text, seed=0)
    x = torch.randn(2, 3, 4)
    assert m(**{"lambda": x})["y"].shape == (2, 3, 2)
    with pytest.raises(LoweringError, match="takes its inputs by name only"):
        m(x)


def test_jit_trace_runs_at_a_new_shape() -> None:
    _, m = _model("multihead_attention")
    x = torch.randint(0, 32, (3, 7))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(m, (x,), strict=False)
    x2 = torch.randint(0, 32, (5, 11))
    torch.testing.assert_close(traced(x2)["logits"], m(x2)["logits"], atol=1e-6, rtol=1e-6)


def _has_loop(path: Path) -> bool:
    return any(n.kind in ("loop", "rnn") for _, n in attngraph.load_spec(path).walk())


EXPORTED = [p for p in SPECS if not _has_loop(p)]


@pytest.mark.slow
@pytest.mark.parametrize("path", EXPORTED, ids=lambda p: p.stem)
def test_export_with_dynamic_batch_and_length(path: Path) -> None:
    """torch.export with a dynamic batch and a dynamic length, keyed by input name,
    runs at a new shape and equals eager to 1e-6 (models without a recurrence: a
    Python loop over the items fixes their number while tracing)."""
    from torch.export import Dim, export

    graph = attngraph.load_spec(path)
    m = attngraph.compile(graph, seed=0).eval()
    kw = random_inputs(graph, batch=3, length=7, generator=torch.Generator().manual_seed(0))
    new = random_inputs(graph, batch=5, length=11, generator=torch.Generator().manual_seed(1))
    longest = max((int(n.spec.max_len) for _, n in graph.walk()
                   if getattr(n.spec, "max_len", None)), default=None)
    b, n = Dim("B"), Dim("N", min=2, max=longest) if longest else Dim("N", min=2)
    shapes = {}
    for node in graph.inputs:
        for key in kw:
            if key == node.id or key.startswith(f"{node.id}_"):
                axes = {0: b} | {i + 1: n for i, d in enumerate(node.types[""].dims)
                                 if isinstance(d, str)}
                shapes[key] = {0: b, 1: n, 2: n} if key.endswith("_adjacency") else axes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = export(m, (), kwargs=kw, dynamic_shapes=shapes)
    got, want = program.module()(**new), m(**new)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)
