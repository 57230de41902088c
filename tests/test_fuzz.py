"""The fuzzer: its mutants, its oracle, a quick run with no defects, and every case it
ever found kept as a regression spec with its expected outcome.

The long run is ``make fuzz`` (``python -m fuzz.run --count 100000``).
"""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import Field

from attngraph import guard
from attngraph.errors import AttnGraphError
from attngraph.frontend import loads_spec
from attngraph.ir.graph import TensorType
from attngraph.kinds import KINDS, RuleCtx, kind
from attngraph.spec.models import NodeModel, Ref
from fuzz.mutate import Mutator, Names, rename
from fuzz.oracle import budget_limits, check
from fuzz.run import HAVE_PROC, case, cpu_seconds, fuzz
from fuzz.seeds import seeds

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = sorted((ROOT / "fuzz" / "regressions").glob("*.yaml"))
SEEDS = seeds()


def test_seeds_cover_the_catalog_and_the_docs_and_all_run() -> None:
    """Every catalog spec and every whole spec of the docs is a seed, and each one
    validates, compiles and runs with finite outputs (mutants start from valid specs)."""
    names = [s.name for s in SEEDS]
    assert sum(n.startswith("specs/") for n in names) == len(list((ROOT / "specs").glob("*.yaml")))
    assert sum(n.startswith("docs/") for n in names) >= 20
    for s in SEEDS:
        o = check(s.text, "seed.yaml", cli=False)
        assert o.outcome == "valid", (s.name, o)


def test_a_case_number_is_the_same_mutant_every_time() -> None:
    """Case i of seed s replays exactly (the report's case numbers are reproducible)."""
    a = [case(SEEDS, 7, i)[1] for i in range(30)]
    b = [case(SEEDS, 7, i)[1] for i in range(30)]
    assert a == b
    assert len(set(a)) > 25


@pytest.mark.parametrize("op", [name for name, _, _ in Mutator(random.Random(0)).data_ops])
def test_each_grammar_operator_changes_the_spec(op: str) -> None:
    """Each grammar-aware operator, applied to the catalog, changes most specs and
    leaves YAML that still parses (the damage is in the language, not the syntax)."""
    changed = 0
    for i, s in enumerate(SEEDS[:16]):
        m = Mutator(random.Random(i))
        fn = {n: f for n, f, _ in m.data_ops}[op]
        data = yaml.safe_load(s.text)
        out = m.dump(fn(data, Names.of(yaml.safe_load(s.text))))
        assert isinstance(yaml.safe_load(out), (dict, list, str, type(None)))
        changed += yaml.safe_load(out) != yaml.safe_load(s.text)
    assert changed >= 10, f"{op} changed only {changed} of 16 specs"


def test_renaming_a_node_renames_its_references() -> None:
    """rename moves every reference along, so the mutant is the same graph under other
    ids (how node ids that shadow Python attributes are reached)."""
    text = [s.text for s in SEEDS if s.name == "specs/multihead_attention.yaml"][0]
    before = loads_spec(text, "a.yaml")
    data = yaml.safe_load(text)
    for old, new in zip(sorted(data["nodes"]), ("clear", "keys", "items", "values", "update",
                                                "pop", "copy", "get"), strict=False):
        data = rename(data, old, new)
    after = loads_spec(Mutator.dump(data), "b.yaml")
    assert len(after.nodes) == len(before.nodes)
    assert {"clear", "keys", "items"} <= {n.id for n in after.nodes}


class _BoomSpec(NodeModel):
    kind: Literal["boom"]
    from_: Ref = Field(alias="from")
    mode: Literal["crash", "inf"] = "crash"


def _lower_boom(ctx: Any) -> Any:
    import torch

    from attngraph.lower.runtime.module import NodeModule

    class Boom(NodeModule):
        def forward(self, x: dict[str, Any], rt: Any) -> Any:
            return x["from"] * torch.tensor(float("inf"))

    return Boom()


def _boom_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    if ctx.spec.mode == "crash":
        msg = "boom"
        raise KeyError(msg)
    return {"": ctx.t("from")}


#: Poses as a built-in rule, whose exceptions are attngraph's own defects.
_boom_shape.__module__ = "attngraph.kinds._fuzz_test"


BOOM = ("attngraph: 1\nname: b\ninputs: {{x: {{type: vectors, dim: 4}}}}\n"
        "nodes: {{y: {{kind: boom, from: x, mode: {mode}}}}}\noutputs: {{y: y}}\n")


@pytest.mark.parametrize(("mode", "cls"), [("crash", "crash"), ("inf", "nonfinite")])
def test_the_oracle_calls_a_crash_or_a_non_finite_output_a_defect(mode: str, cls: str) -> None:
    """A built-in kind whose shape rule raises a plain exception, or whose output is not
    finite from finite inputs, is reported as a defect of that class: the quick run can
    fail. (The rule poses as attngraph's own: a plugin's exception is a located error.)"""
    with KINDS.scoped():
        kind("boom", _BoomSpec, lowering=_lower_boom, role="support")(_boom_shape)
        o = check(BOOM.format(mode=mode), "boom.yaml", cli=False)
    assert "boom" not in KINDS
    assert (o.outcome, o.cls) == ("defect", cls), o
    if cls == "crash":
        assert "_boom_shape" in o.place


def test_a_case_over_the_time_limit_is_a_hang() -> None:
    """The driver kills a worker whose case runs over the limit and reports a hang
    (with a limit no case can meet)."""
    rep = fuzz(2, seed=0, jobs=1, timeout=0.001)
    assert rep.outcomes["defect"] == 2
    assert all(k.startswith("hang") for k in rep.defects)


@pytest.mark.skipif(not HAVE_PROC, reason="CPU time of another process needs /proc")
def test_the_time_limit_counts_cpu_time_not_waiting() -> None:
    """A hang is judged by the CPU time a case takes (a loaded machine slows the clock,
    not the work): a process's CPU seconds grow while it works and not while it waits."""
    pid = os.getpid()
    t0 = cpu_seconds(pid)
    time.sleep(0.3)
    t1 = cpu_seconds(pid)
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    t2 = cpu_seconds(pid)
    assert t0 is not None and t1 is not None and t2 is not None
    assert t1 - t0 < 0.1 and t2 - t1 > 0.2, (t0, t1, t2)


def test_quick_run_finds_no_defect_and_rejections_carry_hints() -> None:
    """2,000 mutants of the catalog and the docs: no crash, hang, non-finite output,
    odd exit or unlocated error; over 95% of rejections carry a hint."""
    rep = fuzz(2000, seed=20261123, jobs=2, timeout=20.0)
    assert rep.n_defects == 0, rep.text(20261123)
    assert rep.outcomes["valid"] >= 100, rep.text(20261123)
    assert rep.hint_share > 0.95, rep.text(20261123)


def _expectation(path: Path) -> tuple[str, str]:
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    m = re.search(r"^# expect: (ok|error (\d+:\d+) (.*))$", text, re.M)
    assert m, f"{path.name}: no '# expect:' line"
    return ("ok", "") if m.group(1) == "ok" else (m.group(2), m.group(3))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[p.stem for p in REGRESSIONS])
def test_regression(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each defect the fuzzer found is kept: it now gives its expected located error
    (with a hint) or runs with finite outputs (under the fuzzer's memory budget)."""
    for name, value in budget_limits(2048).items():
        monkeypatch.setattr(guard, name, value)
    where, message = _expectation(path)
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    o = check(text, "regression.yaml")
    if where == "ok":
        assert o.outcome == "valid", o
        return
    assert o.outcome == "rejected", o
    assert o.hint, o.message
    with pytest.raises(AttnGraphError) as info:
        loads_spec(text, "regression.yaml")
    first = info.value.diagnostics[0]
    assert f"{first.loc.line}:{first.loc.col}" == where, first.format()
    assert message in first.message, first.format()


def test_the_command_writes_its_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m fuzz.run` (what `make fuzz` runs) prints the counts and writes the JSON
    report into a folder it makes; exit status 0 without defects."""
    import json

    from fuzz.run import main

    out = tmp_path / "runs" / "fuzz" / "report.json"
    assert main(["--count", "20", "--jobs", "1", "--json", str(out)]) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["total"] == 20 and report["outcomes"].get("defect", 0) == 0
    assert "20 mutants in" in capsys.readouterr().out


def test_inputs_that_share_a_length_get_one_padding() -> None:
    """The oracle's random masks follow the spec: inputs of one length symbol get the
    same mask (forward refuses different ones), for every seed."""
    pytest.importorskip("torch")
    import torch

    from fuzz.oracle import _inputs

    graph = loads_spec("""attngraph: 1
name: shared_len
inputs:
  a: {type: vectors, dim: 4, length: K}
  b: {type: tokens, vocab: 9, length: K}
nodes:
  x: {kind: items, from: b, embed: 4}
  s: {kind: add, from: [a, x]}
outputs: {s: s}
""")
    for seed in range(20):
        kw = _inputs(graph, 6, seed)
        assert torch.equal(kw["a_mask"], kw["b_mask"])
