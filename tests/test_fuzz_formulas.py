"""The fuzzer on the open algebra (``kind: expr`` formulas and ``param`` nodes): its seeds
cover the formula language, its formula operators edit formulas as the grammar sees
them, the oracle judges formula errors, a quick run of formula mutants finds no
defect, and the formula reader refuses deep nesting at the offending character and
never runs code.

A longer run: ``python -m fuzz.run --count 5000 --focus formulas``.
"""

from __future__ import annotations

import builtins
import random
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from attngraph.algebra.axes import AXES
from attngraph.algebra.formula import MAX_DEPTH, MAX_LENGTH, Call, FormulaError, Name, parse, walk
from attngraph.algebra.functions import FUNCTIONS, REDUCTION_OF
from attngraph.errors import AttnGraphError, Diagnostic, ShapeError, SourceLoc
from attngraph.frontend import loads_spec
from fuzz.mutate import CODE, Mutator, Names, atoms, formula_tokens
from fuzz.oracle import _rejected, check
from fuzz.run import case, focus_seeds, fuzz
from fuzz.seeds import seeds

SEEDS = seeds()
ALGEBRA = focus_seeds(SEEDS, "formulas")
OWN = [s for s in SEEDS if s.name.startswith("fuzz/")]

SPEC = """attngraph: 1
name: f
dims: {{d: 8}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  q: {{kind: queries, from: x, heads: 2}}
  k: {{kind: keys, from: x, heads: 2}}
  s: {{kind: scorer, fn: dot, query: q, key: k}}
  w: {{kind: expr, formula: "{formula}"}}
outputs: {{w: w}}
"""
#: where the formula of SPEC starts: line 10, the column after the opening quote
LINE, COL = 10, SPEC.format(formula="").splitlines()[9].index('"') + 2


def _formulas(text: str) -> list[tuple[str, dict[str, Any]]]:
    """The expr and param nodes of a spec text (top level and in blocks)."""
    try:
        data = yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - mutants with tags, bad aliases...
        return []
    if not isinstance(data, dict):
        return []
    maps = [data.get("nodes")]
    if isinstance(data.get("blocks"), dict):
        maps += [b.get("nodes") for b in data["blocks"].values() if isinstance(b, dict)]
    return [(str(nid), spec) for nodes in maps if isinstance(nodes, dict)
            for nid, spec in nodes.items()
            if isinstance(spec, dict) and spec.get("kind") in ("expr", "param")]


def _refuse(formula: str) -> Diagnostic:
    with pytest.raises(ShapeError) as info:
        loads_spec(SPEC.format(formula=formula), "f.yaml")
    return info.value.diagnostics[0]


# --- seeds ---------------------------------------------------------------------------


def test_own_seeds_cover_the_formula_language() -> None:
    """The fuzzer's own seeds (fuzz/formula_seeds.yaml) call every function of the
    registry, read i, j, a length and an input's mask, reduce over the items, queries,
    heads and features, project, rename axes, declare a distribution, and hold params
    clamped, fixed, per head and over a length; each one validates and runs (with the
    other seeds, in tests/test_fuzz.py)."""
    assert len(OWN) >= 6 and all(s in ALGEBRA for s in OWN)
    called: set[str] = set()
    names: set[str] = set()
    axes: set[str] = set()
    specs: list[dict[str, Any]] = []
    for s in OWN:
        for _, spec in _formulas(s.text):
            specs.append(spec)
            if spec["kind"] != "expr":
                continue
            for e in walk(parse(spec["formula"])):
                if isinstance(e, Call):
                    axis = e.args and isinstance(e.args[-1], Name) and e.args[-1].name in AXES
                    called.add(REDUCTION_OF.get(e.fn, e.fn) if axis and len(e.args) == 2
                               else e.fn)
                    called.add(e.fn)
                    if axis:
                        axes.add(e.args[-1].name)  # type: ignore[attr-defined]
                elif isinstance(e, Name):
                    names.add(e.name)
    missing = sorted(set(FUNCTIONS.names()) - called)
    assert not missing, f"no seed in fuzz/formula_seeds.yaml calls {missing}: add one"
    assert {"i", "j", "N", "x.mask"} <= names
    assert {"items", "queries", "heads", "features"} <= axes
    exprs = [s for s in specs if s["kind"] == "expr"]
    params = [s for s in specs if s["kind"] == "param"]
    assert any(s.get("axes") for s in exprs) and any(s.get("distribution") for s in exprs)
    for fld in ("clamp", "fixed", "max_len", "heads", "axes"):
        assert any(fld in p for p in params), fld
    unicode_ops = "".join(s["formula"] for s in exprs)
    assert all(c in unicode_ops for c in "·×÷−√≤≥≠")


def test_the_algebra_seeds_are_those_with_an_expr_or_a_param() -> None:
    """--focus formulas starts from every seed that has an expr or a param, the
    mechanisms' and the docs' included."""
    assert set(OWN) <= set(ALGEBRA)
    assert all(re.search(r"kind:\s*(expr|param)\b", s.text) for s in ALGEBRA)
    assert len(ALGEBRA) > len(OWN)


# --- the mutator ---------------------------------------------------------------------


def test_the_formula_tokens_and_atoms() -> None:
    text = "relu(s / sqrt(d)) ^ 2 + (a.mask - 1e-3)"
    assert [t.kind for t in formula_tokens(text)][:4] == ["name", "open", "name", "op"]
    spans = [text[a:b] for a, b in atoms(text)]
    assert spans[:2] == ["relu(s / sqrt(d))", "s"]
    assert "(a.mask - 1e-3)" in spans and "a.mask" in spans and "1e-3" in spans


@pytest.mark.parametrize("op", [n for n, _, _ in Mutator(random.Random(0)).formula_ops])
def test_each_formula_operator_changes_formulas(op: str) -> None:
    """Each formula operator, on the formulas of the algebra seeds, changes nearly every
    formula and leaves YAML that still reads (it edits the formula, not the file)."""
    changed = total = 0
    for i, s in enumerate(ALGEBRA[:12]):
        m = Mutator(random.Random(i))
        fn = {n: f for n, f, _ in m.formula_ops}[op]
        names = Names.of(yaml.safe_load(s.text))
        for _, spec in _formulas(s.text):
            if spec["kind"] != "expr":
                continue
            new = fn(spec["formula"], names)
            assert isinstance(new, str)
            assert isinstance(yaml.safe_load(Mutator.dump({"formula": new}))["formula"], str)
            total += 1
            changed += new != spec["formula"]
    assert total >= 12 and changed >= 0.85 * total, f"{op}: {changed} of {total}"


@pytest.mark.parametrize("op", ["formula", "param", "expr_field", "add_expr"])
def test_the_algebra_operators_reach_every_seed(op: str) -> None:
    """The formula and param operators change the algebra seeds, and a seed without a
    formula or a param gets one (so the catalog's seeds reach the algebra too)."""
    for group in (ALGEBRA[:10], [s for s in SEEDS if s not in ALGEBRA][:10]):
        changed = 0
        for i, s in enumerate(group):
            m = Mutator(random.Random(i))
            fn = {n: f for n, f, _ in m.data_ops}[op]
            before = yaml.safe_load(s.text)
            after = fn(yaml.safe_load(s.text), Names.of(before))
            changed += after != before
        assert changed >= 8, f"{op} changed {changed} of {len(group)}"


def test_formula_mutants_reach_the_limits() -> None:
    """Among formula mutants: nesting past the depth limit, formulas past the length
    limit, numbers past the largest, unicode operators, Python code, unknown functions."""
    texts = []
    for i in range(400):
        _, text, _ = case(ALGEBRA, 11, i, "formulas")
        texts += [spec["formula"] for _, spec in _formulas(text)
                  if isinstance(spec.get("formula"), str)]
    joined = "\n".join(texts)
    assert any(len(t) > MAX_LENGTH for t in texts)
    assert "(" * (MAX_DEPTH + 1) in joined or "abs(" * (MAX_DEPTH // 2 + 1) in joined \
        or any(t.count("(") > MAX_DEPTH for t in texts)
    assert re.search(r"1e(300|10)|1000000001", joined)
    assert any(c in joined for c in "·×÷−√≤≥≠")
    assert "__import__" in joined or "lambda" in joined or "eval(" in joined
    assert len(set(texts)) > 300


# --- the oracle ----------------------------------------------------------------------


def test_a_formula_error_is_a_located_rejection_inside_the_formula() -> None:
    """A formula that cannot be read is a rejection (not a defect), its caret at the
    offending character of the formula."""
    for formula, at in (("s + * 2", 4), ("relu(s", 6), ("s $ 2", 2), ("exp(s) 3", 7),
                        ("sum(s,)", 6), ("s + 1e10", 4)):
        text = SPEC.format(formula=formula)
        o = check(text, "f.yaml", run=False, cli=False)
        assert o.outcome == "rejected", (formula, o)
        with pytest.raises(AttnGraphError) as info:
            loads_spec(text, "f.yaml")
        d = info.value.diagnostics[0]
        assert (d.loc.line, d.loc.col) == (LINE, COL + at), (formula, d.format())


def test_the_oracle_calls_a_misplaced_formula_error_a_defect() -> None:
    """A formula's syntax error reported anywhere but at its offending character is a
    ``misplaced`` defect; one past the end of its line is ``unlocated``."""
    text = SPEC.format(formula="s + * 2")
    with pytest.raises(AttnGraphError) as info:
        loads_spec(text, "f.yaml")
    d = info.value.diagnostics[0]
    assert _rejected(info.value, "f.yaml", text).outcome == "rejected"
    moved = AttnGraphError("", diagnostics=[Diagnostic(
        SourceLoc("f.yaml", d.loc.line, d.loc.col + 1, text), d.message, d.hint)])
    assert (_rejected(moved, "f.yaml", text).outcome,
            _rejected(moved, "f.yaml", text).cls) == ("defect", "misplaced")
    past = AttnGraphError("", diagnostics=[Diagnostic(
        SourceLoc("f.yaml", d.loc.line, 500, text), "elsewhere", "h")])
    assert _rejected(past, "f.yaml", text).cls == "unlocated"


def test_a_non_finite_formula_is_a_defect_named_by_its_node() -> None:
    """A valid formula whose value is not finite (a function that overflows) is a
    ``nonfinite`` defect, as any non-finite output is; the report names the expression
    that first made it and its formula."""
    from attngraph.algebra.functions import Function

    with FUNCTIONS.scoped():
        FUNCTIONS.register("fuzz_inf", Function("fuzz_inf", "∞ x",
                                                impl=lambda x: x * float("inf")))
        o = check(SPEC.format(formula="fuzz_inf(s) + 1"), "f.yaml", cli=False)
    assert "fuzz_inf" not in FUNCTIONS
    assert (o.outcome, o.cls, o.place) == ("defect", "nonfinite", "from Expr"), o
    assert "node 'w'" in o.message and "fuzz_inf(s) + 1" in o.message


# --- a quick run ---------------------------------------------------------------------


def test_quick_formula_run_finds_no_defect() -> None:
    """400 mutants of the algebra seeds, mostly formula and param operators: no crash,
    hang, non-finite output, late or misplaced error; most rejections carry a hint."""
    rep = fuzz(400, seed=20261126, jobs=2, timeout=20.0, focus="formulas")
    assert rep.n_defects == 0, rep.text(20261126)
    assert rep.outcomes["valid"] >= 20, rep.text(20261126)
    assert rep.hint_share > 0.95, rep.text(20261126)


# --- the formula reader's own guarantees ---------------------------------------------


@pytest.mark.parametrize(("open_", "close"), [("(", ")"), ("abs(", ")"), ("-", ""), ("2^", ""),
                                              ("softmax(", ", items)"), ("√", "")])
def test_nesting_past_the_limit_is_refused_at_the_offending_character(
        open_: str, close: str) -> None:
    """Brackets, calls, signs and powers nest MAX_DEPTH deep; one more is refused at the
    character that goes too deep (the bracket of a call, the sign, the ``^``), however far
    past the limit the formula goes, up to the length limit (never by recursing)."""
    over = len(open_) * MAX_DEPTH + len(open_) - 1  # the last character of opening 33
    for n in (MAX_DEPTH + 1, 2 * MAX_DEPTH, (MAX_LENGTH - 1) // (len(open_) + len(close))):
        formula = open_ * n + "s" + close * n
        d = _refuse(formula)
        assert "nests deeper than" in d.message and d.hint, d.format()
        assert (d.loc.line, d.loc.col) == (LINE, COL + over), (n, d.format())
        with pytest.raises(FormulaError) as info:
            parse(formula)
        assert info.value.offset == over
    loads_spec(SPEC.format(formula=open_ * MAX_DEPTH + "s" + close * MAX_DEPTH), "f.yaml")


@pytest.mark.parametrize("op", ["+", "*", "-", "/", "<"])
def test_a_long_flat_formula_reads_without_recursing(op: str) -> None:
    """A formula as long as the limit allows with no nesting at all (a sum of a thousand
    terms) is read and checked without exhausting Python's recursion: it compiles, or
    it is refused with a located error."""
    n = (MAX_LENGTH - 1) // 2
    formula = "s" + f"{op}s" * n
    try:
        loads_spec(SPEC.format(formula=formula), "f.yaml")
    except AttnGraphError as exc:
        d = exc.diagnostics[0]
        assert d.loc.line == LINE and d.loc.col >= COL, d.format()


@pytest.mark.parametrize("code", CODE)
def test_a_formula_never_runs_code(code: str, monkeypatch: pytest.MonkeyPatch,
                                   tmp_path: Path) -> None:
    """Python in a formula is an unknown name, an unknown function or a syntax error at
    its place; reading it calls no eval, exec, compile or import."""
    sentinel = tmp_path / "ran"
    code = code.replace("system('true')", f"system('touch {sentinel}')")

    def refuse(*a: Any, **k: Any) -> Any:
        msg = "a formula was run as Python"
        raise AssertionError(msg)

    parse.cache_clear()
    with monkeypatch.context() as mp:
        for fn in ("eval", "exec", "compile", "__import__"):
            mp.setattr(builtins, fn, refuse)
        try:
            parse(code)
        except FormulaError:
            pass
    text = SPEC.format(formula=code.replace('"', "'"))
    o = check(text, "f.yaml", run=False, cli=False)
    assert o.outcome == "rejected", o
    assert not sentinel.exists()
    if code == "__import__(os)":
        d = _refuse(code)
        assert "unknown function '__import__'" in d.message and d.loc.col == COL
    if code == "os.system(x)":
        d = _refuse(code)
        assert "'os.system' is not a function" in d.message and d.loc.col == COL
