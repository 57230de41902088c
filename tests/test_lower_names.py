"""Node ids that are attribute names of nn.Module, nn.ModuleDict or the lowered
module classes (``keys``, ``train``, ``_modules``, ``forward``...) lower and run."""

from __future__ import annotations

import pickle
import re

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

import attngraph  # noqa: E402
from attngraph.errors import GraphError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.lower.rules.structure import Block, Loop, Repeat  # noqa: E402
from attngraph.lower.runtime.module import AttnModel, GraphModule, NodeModule  # noqa: E402
from attngraph.lower.runtime.names import ESCAPE, NodeDict, module_key  # noqa: E402
from attngraph.spec.models import IDENT as IDENT_PATTERN  # noqa: E402

IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")

LOOPED = """
attngraph: 1
name: looped
inputs:
  x: {type: vectors, dim: 4}
blocks:
  step:
    inputs: [h, x]
    nodes:
      s: {kind: scorer, fn: dot, query: h, key: x}
      p: {kind: softmax, scores: s}
      z: {kind: readout, weights: p, values: x}
      n: {kind: linear, from: z, out: 4, act: tanh}
    outputs: {n: n}
nodes:
  r: {kind: loop, body: step, steps: 2, inputs: {x: x}, carry: {h: {zeros: 4, next: n}}}
outputs: {y: r.final_h}
"""


def _attribute_names() -> list[str]:
    """Every identifier an nn.Module, nn.ModuleDict or a lowered module answers to."""
    names: set[str] = set(dir(nn.Module())) | set(dir(nn.ModuleDict())) | set(dir(NodeDict()))
    for cls in (GraphModule, AttnModel, NodeModule, Block, Loop, Repeat):
        names |= set(dir(cls))
    names |= set(dir(attngraph.compile(LOOPED, seed=0)))
    return sorted(n for n in names if IDENT.match(n))


ALL_NAMES = _attribute_names()
#: those the spec language accepts as ids today (all of them once ids may start with
#: an upper-case letter or an underscore)
NAMES = [n for n in ALL_NAMES if re.match(IDENT_PATTERN, n)]


def _chain(names: list[str]) -> str:
    """A spec whose nodes are linears named ``names``, each reading the one before."""
    lines = ["attngraph: 1", "name: names", "inputs:", "  x: {type: vectors, dim: 4}",
             "nodes:"]
    prev = "x"
    for n in names:
        lines.append(f"  {n}: {{kind: linear, from: {prev}, out: 4}}")
        prev = n
    lines.append(f"outputs: {{y: {prev}}}")
    return "\n".join(lines) + "\n"


def test_the_names_cover_the_known_collisions() -> None:
    """The list holds the names that crashed compile, and many more."""
    for n in ("clear", "keys", "items", "values", "update", "pop", "train", "eval", "forward",
              "state_dict", "to", "cuda", "type", "half", "parameters", "modules",
              "training", "run", "schedule", "nodes", "graph", "binder"):
        assert n in NAMES
    assert "_modules" in ALL_NAMES and "T_destination" in ALL_NAMES
    assert len(ALL_NAMES) > 140 and len(NAMES) > 60


def test_node_dict_takes_every_identifier() -> None:
    """The dict of lowered nodes takes every attribute name (any identifier, also
    those the spec language does not accept yet) as a key: indexing, membership,
    iteration, the state dict, loading it, pickling and a fullgraph trace."""
    torch.manual_seed(0)
    nodes = NodeDict()
    for n in ALL_NAMES:
        nodes[n] = nn.Linear(2, 2)
    assert list(nodes) == ALL_NAMES and len(nodes) == len(ALL_NAMES)
    assert all(n in nodes for n in ALL_NAMES) and "absent" not in nodes
    sd = nodes.state_dict()
    assert {k.rsplit(".", 1)[0] for k in sd} == {module_key(n) for n in ALL_NAMES}
    fresh = NodeDict()
    for n in ALL_NAMES:
        fresh[n] = nn.Linear(2, 2)
    fresh.load_state_dict(sd)
    x = torch.randn(3, 2)
    for n in ALL_NAMES:
        torch.testing.assert_close(fresh[n](x), nodes[n](x))
    again = pickle.loads(pickle.dumps(nodes))
    torch.testing.assert_close(again["_modules"](x), nodes["_modules"](x))
    del again["_modules"]
    assert "_modules" not in again and len(again) == len(ALL_NAMES) - 1

    class Chain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.nodes = nodes

        def forward(self, v: torch.Tensor) -> torch.Tensor:
            for n in ALL_NAMES[:40]:
                v = self.nodes[n](v)
            return v

    chain = Chain()
    torch._dynamo.reset()
    compiled = torch.compile(chain, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x), chain(x))


def test_escaped_keys_are_exactly_the_attributes_of_a_module_dict() -> None:
    """An id is escaped iff nn.ModuleDict has an attribute of that name; escaped keys
    are not identifiers, so they cannot collide with another node's id."""
    probe = nn.ModuleDict()
    for n in [*ALL_NAMES, "score", "x", "q", "enc", "T", "self", "Keys", "keys_"]:
        key = module_key(n)
        assert (key != n) == hasattr(probe, n), n
        if key != n:
            assert key == ESCAPE + n and not IDENT.match(key)
    assert len({module_key(n) for n in ALL_NAMES}) == len(ALL_NAMES)


def test_every_attribute_name_is_a_node_id() -> None:
    """A spec whose node ids are all those names compiles and runs; the nodes are
    found by id, ordinary ids keep ``nodes.<id>.<param>`` and the others are stored
    under ``nodes.@<id>``; the state dict round-trips into a fresh model,
    named_parameters agree with it, and a pickled model gives the same outputs."""
    text = _chain(NAMES)
    model = attngraph.compile(text, seed=0).eval()
    x = torch.randn(2, 3, 4)
    want = model(x=x)["y"]
    assert want.shape == (2, 3, 4)
    assert list(model.nodes) == NAMES == list(model.nodes.keys())
    assert [k for k, _ in model.nodes.items()] == NAMES
    for n in NAMES:
        assert n in model.nodes
        assert isinstance(model.nodes[n], NodeModule)
    sd = model.state_dict()
    assert f"nodes.{module_key('clear')}.weight" in sd
    assert "nodes.@clear.weight" in sd and "nodes.@keys.bias" in sd
    assert "nodes.schedule.weight" in sd  # not an attribute of the dict: no escape
    assert [k for k, _ in model.named_parameters()] == list(sd)
    other = attngraph.compile(text, seed=1).eval()
    assert not torch.equal(other(x=x)["y"], want)
    other.load_state_dict(sd)
    torch.testing.assert_close(other(x=x)["y"], want)
    again = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(again(x=x)["y"], want)


def test_ordinary_ids_keep_their_state_dict_keys() -> None:
    """Ids that are no attribute name are stored under themselves (checkpoints keep
    loading): ``nodes.<id>.<param>``."""
    model = attngraph.compile(_chain(["enc", "score", "out"]), seed=0)
    assert list(model.state_dict()) == [f"nodes.{n}.{p}" for n in ("enc", "score", "out")
                                        for p in ("weight", "bias")]


def test_attribute_names_compile_fullgraph() -> None:
    """torch.compile(fullgraph=True) traces a model whose node ids collide with
    attribute names, and gives the same outputs."""
    names = ["clear", "keys", "training", "forward", "state_dict", "to", "x1"]
    model = attngraph.compile(_chain(names), seed=0).eval()
    x = torch.randn(2, 3, 4)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(x=x)["y"], model(x=x)["y"])


SHARED = """
attngraph: 1
name: shared
inputs:
  keys: {type: vectors, dim: 4}
  clear: {type: vector, dim: 4}
blocks:
  body:
    inputs: [keys, clear]
    nodes:
      train: {kind: scorer, fn: dot, query: clear, key: keys}
      eval: {kind: softmax, scores: train}
      items: {kind: readout, weights: eval, values: keys}
      update: {kind: linear, from: items, out: 4, act: tanh}
    outputs: {update: update}
nodes:
  pop: {kind: block, block: body, from: {keys: keys, clear: clear}}
  values:
    kind: loop
    body: body
    steps: 2
    inputs: {keys: keys}
    carry: {clear: {init: clear, next: update}}
  forward: {kind: add, from: [pop, values.final_clear]}
outputs: {y: forward, weights: values.update}
"""


def test_ids_shared_by_inputs_block_bodies_and_loops() -> None:
    """Inputs, block-body nodes, a block use and a loop may all be named like
    attributes, and the same id may name an input and a body node: the model runs,
    trains, and names parameters ``nodes.@pop.nodes.@update.weight``."""
    model = attngraph.compile(SHARED, seed=0)
    keys, clear = torch.randn(2, 5, 4), torch.randn(2, 4)
    out = model(keys=keys, clear=clear)
    assert out["y"].shape == (2, 4) and out["weights"].shape == (2, 2, 4)
    sd = model.state_dict()
    assert "nodes.@pop.nodes.@update.weight" in sd
    assert "nodes.@values.nodes.@update.bias" in sd
    assert torch.equal(model.nodes["pop"].nodes["update"].weight,
                       sd["nodes.@pop.nodes.@update.weight"])
    out["y"].sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    fresh = attngraph.compile(SHARED, seed=5)
    fresh.load_state_dict(sd)
    torch.testing.assert_close(fresh(keys=keys, clear=clear)["y"], out["y"])


def test_compile_command_lists_escaped_nodes_by_id() -> None:
    """The parameter table of ``attngraph compile`` names nodes by id and kind."""
    from attngraph.commands.compile import param_table

    table = param_table(attngraph.compile(_chain(["keys", "score"]), seed=0))
    assert table.splitlines()[0].split()[:3] == ["keys", "linear", "20"]


def test_an_input_named_self_is_refused_where_it_is_declared() -> None:
    """``model(self=...)`` cannot work (Module.__call__ takes self): validation says so
    at the input's line rather than the first call failing."""
    text = _chain(["y"]).replace("  x: {type: vectors", "  self: {type: vectors").replace(
        "from: x", "from: self")
    with pytest.raises(GraphError, match="input 'self'") as exc:
        loads_spec(text, "t.yaml")
    assert exc.value.loc.line == 4
    assert "rename" in (exc.value.hint or "")


def test_an_input_named_like_another_inputs_mask_is_refused() -> None:
    """Inputs ``x`` and ``x_mask`` would both be ``x_mask=``: refused by validation."""
    text = _chain(["y"]).replace("inputs:\n", "inputs:\n  x_mask: {type: vector, dim: 4}\n")
    with pytest.raises(GraphError, match="input 'x_mask' has the name of the mask"):
        loads_spec(text, "t.yaml")
