"""Exports of specs whose names and text are odd (issue "Robustness ... generated code"):
every format ``attngraph export`` offers gives a file that parses or loads and whose
model computes what the compiled model computes, whatever the spec's name, title,
summary, node ids or input ids; names in generated code come from one mangler and
user text from one quoting function; a file that would not compile is an internal
error, reported cleanly, and nothing is written."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import keyword
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.lower.export.inputs import full_masks  # noqa: E402
from attngraph.lower.runtime.examples import random_inputs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: one small catalog spec, renamed and re-described by each test
BASE = (ROOT / "specs" / "kvq_attention.yaml").read_text(encoding="utf-8")
#: a loop over a block: the names of bodies and their classes
LOOP = (ROOT / "mechanisms" / "location_aware.yaml").read_text(encoding="utf-8")
#: formulas: nodes written as one line of torch in forward (``torch.exp(...)``)
FORMULAS = (ROOT / "mechanisms" / "softmax_zero_logit.yaml").read_text(encoding="utf-8")

#: the issue's names, then keywords, soft keywords, builtins, and names the exported file
#: defines or imports (all within the spec grammar: lowercase, digits, _)
ISSUE_NAMES = ["none", "runtime", "tensor_type"]
NAMES = [*ISSUE_NAMES, "match", "case", "type", "class", "print", "torch", "nn", "f", "tensor",
         "any", "self", "lowering_error", "padding_mask", "runtime_module", "a" + "b" * 63]
#: names outside the grammar (a graph built in Python): given to the graph directly
RAW_NAMES = ["_", "", "   ", "2d", "π_r²", "ﬁx", "名前", "a-b.c", "\x00", "x" * 300, '"""',
             "it's", "a\\", "\u0301x"]
SUMMARIES = ['ends with a "quote"', 'ends "', 'ends ""', "ends \\", 'triple """ inside',
             "ends '''", "line\nbreak", "*/ closes a C comment", "ctrl \x07\x1b\x7f end",
             "sep \u2028 end", "\\N{BULLET} \\x00", "{braces} %s {0}", "\t"]
#: node ids that name keywords, builtins and what forward itself defines
NODE_IDS = ["class", "match", "type", "print", "self", "torch", "rt", "tokens_mask",
            "padding_mask", "runtime", "step_q"]
#: input ids the forward can take as parameters (its signature keeps them)
INPUT_IDS = ["runtime", "nn", "torch", "padding_mask", "print", "match", "next", "bool"]


def spec_text(base: str = BASE, *, name: str | None = None, summary: str | None = None,
              rename: dict[str, str] | None = None) -> str:
    """``base`` with another name, summary and title, and node or block ids renamed
    (the id as a key and every reference to it)."""
    data = yaml.safe_load(base)
    if name is not None:
        data["name"] = name
    if summary is not None:
        data["summary"] = data["title"] = summary
    for old, new in (rename or {}).items():
        data = _renamed(data, old, new)
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


#: fields whose values are names of their own (an input's type ``tokens``), not ids
_NOT_IDS = frozenset({"type", "kind", "fn", "task"})


def _renamed(v: Any, old: str, new: str) -> Any:
    if isinstance(v, dict):
        return {_renamed(k, old, new): x if k in _NOT_IDS else
                re.sub(rf"\b{old}\b", new, x) if k == "formula" else _renamed(x, old, new)
                for k, x in v.items()}
    if isinstance(v, list):
        return [_renamed(x, old, new) for x in v]
    if isinstance(v, str) and (v == old or v.startswith(f"{old}.")):
        return new + v[len(old):]
    return v


def load_class(path: Path, cls: str) -> Any:
    """The class ``cls`` of the Python file at ``path``, imported as a module."""
    mod_name = f"robust_export_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod  # dataclasses look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.modules.pop(mod_name, None)
    return getattr(mod, cls)


def same_outputs(model: Any, run: Any, *, positional: bool = False) -> None:
    """``run`` (the exported model) returns what ``model`` returns, to 1e-5."""
    inputs = random_inputs(model.graph, batch=2, length=5,
                           generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = model(**inputs)
        full = full_masks(model, inputs)  # a program takes every mask (all True: no padding)
        got = run(*[full[k] for k in model._positional if k in full]) if positional \
            else run(**inputs)
    assert set(got) == set(want)
    for k, v in want.items():
        torch.testing.assert_close(got[k], v, atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="session")
def export_python(cli) -> Callable[..., tuple[Path, str]]:
    """``export_python(tmp_path, text)``: ``attngraph export --format python`` of
    ``text`` in ``tmp_path``; the file and the class the command says to import."""

    def run(tmp_path: Path, text: str) -> tuple[Path, str]:
        spec = tmp_path / "spec.yaml"
        spec.write_text(text, encoding="utf-8")
        out = tmp_path / "model.py"
        res = cli("export", spec, "--format", "python", "-o", out, code=0)
        assert "Traceback" not in res.output
        cls = res.output.split(" import ", 1)[1].split(";", 1)[0]
        ast.parse(out.read_text(encoding="utf-8"))
        return out, cls

    return run


@pytest.fixture(scope="session")
def check_python(export_python) -> Callable[..., str]:
    """``check_python(tmp_path, text)``: export ``text`` as Python, import the file, and
    compare it with the compiled model (eval mode, the compiled model's state dict);
    the class name."""

    def run(tmp_path: Path, text: str) -> str:
        out, cls = export_python(tmp_path, text)
        model = attngraph.compile(loads_spec(text), seed=0).eval()
        gen = load_class(out, cls)()
        gen.load_state_dict(model.state_dict())
        same_outputs(model, gen.eval())
        return cls

    return run


@pytest.mark.parametrize("name", NAMES)
def test_python_export_of_an_odd_spec_name(tmp_path: Path, name: str, check_python) -> None:
    """A spec named like a keyword, a builtin or a name of the file's own exports as a
    file that parses and computes what the compiled model computes."""
    cls = check_python(tmp_path, spec_text(name=name))
    assert cls.isidentifier() and not keyword.iskeyword(cls)


def test_the_issue_names_give_readable_classes(tmp_path: Path, export_python) -> None:
    """``none`` is a keyword as a class (``NoneModel``); ``runtime`` and ``tensor_type``
    keep their names, the file's helpers of those names being renamed around them."""
    from attngraph.lower.export.codegen import class_name

    assert [class_name(n) for n in ISSUE_NAMES] == ["NoneModel", "Runtime", "TensorType"]
    out, cls = export_python(tmp_path, spec_text(name="runtime"))
    tree = ast.parse(out.read_text(encoding="utf-8"))
    classes = [s.name for s in tree.body if isinstance(s, ast.ClassDef)]
    assert cls == "Runtime" and classes[-1] == "Runtime" and classes.count("Runtime") == 1


@pytest.mark.parametrize("name", RAW_NAMES, ids=ascii)
def test_python_export_of_a_graph_name_outside_the_grammar(tmp_path: Path, name: str) -> None:
    """A graph whose name the spec grammar would refuse (built in Python: unicode,
    digits first, empty, quotes, a NUL, 300 characters) still exports a valid file."""
    from attngraph.lower.export.codegen import class_name

    graph = dataclasses.replace(loads_spec(BASE), name=name, title=name, summary=name)
    model = attngraph.compile(graph, seed=0).eval()
    out = tmp_path / "model.py"
    out.write_text(model.code, encoding="utf-8")
    cls = class_name(name)
    assert cls.isidentifier() and not keyword.iskeyword(cls)
    gen = load_class(out, cls)()
    gen.load_state_dict(model.state_dict())
    same_outputs(model, gen.eval())


@pytest.mark.parametrize("summary", SUMMARIES, ids=ascii)
def test_python_export_of_an_odd_summary(tmp_path: Path, summary: str, check_python) -> None:
    """A summary and title ending in a quote or backslash, holding triple quotes,
    newlines, ``*/`` or control characters stay inside their docstrings."""
    check_python(tmp_path, spec_text(name="kvq", summary=summary))


@pytest.mark.parametrize("nid", NODE_IDS)
def test_python_export_of_odd_node_ids(tmp_path: Path, nid: str, check_python) -> None:
    """Node ids that are keywords, builtins or names forward uses itself (``rt``,
    ``grouped``, a helper) become distinct variables; the outputs are the same."""
    check_python(tmp_path, spec_text(rename={"x": nid, "k": f"{nid}2", "q": "q_"}))


@pytest.mark.parametrize("iid", INPUT_IDS)
def test_python_export_of_odd_input_ids(tmp_path: Path, iid: str, check_python) -> None:
    """An input named like a helper of the file or a builtin keeps its name (it is a
    parameter of forward); the file's own names go around it."""
    check_python(tmp_path, spec_text(rename={"tokens": iid}))


@pytest.mark.parametrize(("base", "iid"), [(BASE, "class"), (FORMULAS, "torch")])
def test_an_input_forward_cannot_take_is_a_located_error(base: str, iid: str) -> None:
    """An input named by a keyword cannot be a parameter of the exported forward, nor
    one named ``torch`` when a formula's line of torch reads the module: a
    LoweringError at the input's line (with a hint), never bad code."""
    old = "tokens" if base is BASE else "x"
    text = spec_text(base, rename={old: iid})
    model = attngraph.compile(loads_spec(text, "s.yaml"), seed=0)
    with pytest.raises(LoweringError) as info:
        model.code  # noqa: B018 - the property writes the file's text
    d = info.value.diagnostics[0]
    near = text.splitlines()[max(0, d.loc.line - 2):d.loc.line]  # the input, or its first field
    assert d.loc.file == "s.yaml" and any(line.strip() == f"{iid}:" for line in near)
    assert f"input '{iid}'" in d.message and "rename the input" in (d.hint or "")


def test_formula_nodes_named_like_builtins(tmp_path: Path, check_python) -> None:
    """Formula nodes (one line of torch each) named ``len``, ``print`` and ``self``
    become variables that hide no builtin, helper or ``self``."""
    check_python(tmp_path, spec_text(FORMULAS, name="len", rename={"s": "len", "m": "print",
                                                                  "p": "self"}))


@pytest.mark.parametrize("name", ["runtime", "none", "match", "step_loop"])
def test_python_export_of_odd_body_names(tmp_path: Path, name: str, check_python) -> None:
    """A loop whose block and node are named like keywords or the file's helpers writes
    its body class (``<Block>Loop``) apart from them and computes the same."""
    check_python(tmp_path, spec_text(LOOP, name=name, rename={"step": name, "dec": name,
                                                             "x": "class"}))


FORMAT_CASES = [{"name": "none"}, {"name": "runtime"}, {"name": "tensor_type"},
                {"name": "kvq", "summary": 'ends with a "quote"'}]


def _cases(fmt: str) -> list[Any]:
    """Each case once per format; ONNX (seconds each) beyond the first marked slow."""
    out = []
    for i, case in enumerate(FORMAT_CASES):
        marks = [pytest.mark.slow] if fmt == "onnx" and i >= 1 else []
        out.append(pytest.param(fmt, case, marks=marks, id=f"{fmt}-{i}"))
    return out


@pytest.mark.parametrize(("fmt", "case"), [*_cases("pt2"), *_cases("onnx")])
def test_binary_formats_of_odd_specs(tmp_path: Path, fmt: str, case: dict[str, str], cli) -> None:
    """The pt2 program (``torch.export.load``) and the ONNX model (onnxruntime) of a
    spec with an odd name or summary load and compute what the compiled model does."""
    text = spec_text(**case)
    spec = tmp_path / "spec.yaml"
    spec.write_text(text, encoding="utf-8")
    out = tmp_path / f"model.{fmt}"
    res = cli("export", spec, "--format", fmt, "-o", out)
    if fmt == "onnx" and "needs the" in res.output:
        pytest.skip("onnx is not installed")
    assert res.exit_code == 0, res.output
    model = attngraph.compile(loads_spec(text), seed=0).eval()
    if fmt == "pt2":
        same_outputs(model, torch.export.load(str(out)).module(), positional=True)
        return
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(out))
    names = [i.name for i in session.get_inputs()]

    def run(*args: Any) -> dict[str, Any]:
        feeds = {n: a.numpy() for n, a in zip(names, args, strict=True)}
        outs = session.run(None, feeds)
        return {o.name: torch.from_numpy(v) for o, v in zip(session.get_outputs(), outs,
                                                              strict=True)}

    same_outputs(model, run, positional=True)


def test_export_text_gives_every_format_in_process() -> None:
    """:func:`export_text` (the fuzzer's entry) exports a spec's text to every format
    the command offers, each checked; an unknown format is refused before any work."""
    from attngraph.commands.export import export_cmd
    from attngraph.errors import RegistryError
    from attngraph.lower.export.programs import FORMATS, export_text

    offered = next(p for p in export_cmd.params if p.name == "fmt").type.choices
    assert tuple(offered) == FORMATS
    files = export_text(spec_text(name="tensor_type"), formats=["python", "pt2"])
    assert set(files) == {"python", "pt2"} and files["python"].class_name == "TensorType"
    compile(files["python"].data, "model.py", "exec")
    with pytest.raises(RegistryError):
        export_text(BASE, formats=["pyhton"])


def test_generated_code_that_does_not_compile_is_an_internal_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """A generated file that would not compile (a bug of ours, simulated) is a
    LoweringError at the spec saying to report it; the command prints it without a
    traceback and leaves the existing file as it was."""
    import attngraph.lower.export.codegen as codegen

    monkeypatch.setattr(codegen, "_class_doc", lambda graph: '    """broken\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text(BASE, encoding="utf-8")
    out = tmp_path / "model.py"
    out.write_text("earlier\n", encoding="utf-8")
    res = cli("export", spec, "--format", "python", "-o", out)
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "does not compile" in res.output and "report" in res.output
    assert str(spec) in res.output
    assert out.read_text(encoding="utf-8") == "earlier\n"


def _random_names(rng: random.Random, n: int) -> list[str]:
    alphabet = ("abcXYZ_019 -.\"'\\\n\t\x00é名πﬁ²Ⅸ\u0301\u2028😀" + "".join(keyword.kwlist))
    words = [*keyword.kwlist, *keyword.softkwlist, "print", "torch", "self", "None", "",
             "_", "__init__", "x" * 100]
    out = list(words)
    for _ in range(n):
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))))
        out.append(rng.choice(words) + rng.choice(["", "_", "2", " ", "."]))
    return out


def test_the_mangler_gives_distinct_safe_identifiers() -> None:
    """Property (over 1000+ seeded random names, keywords and their variants): the
    mangler's output is an identifier as Python reads it (NFKC), never a keyword, soft
    keyword, builtin or reserved name, the same for the same key, and injective; a
    safe name is kept as it is."""
    import unicodedata

    from attngraph.lower.runtime.names import RESERVED, Mangler

    names = _random_names(random.Random(0), 600)
    reserved = {"torch", "nn", "F", "Runtime", "rt"}
    m = Mangler(reserved)
    got = {k: m.name(k) for k in names}
    assert len(set(got.values())) == len(got)  # injective over distinct keys
    for k, v in got.items():
        assert v.isidentifier() and unicodedata.normalize("NFKC", v) == v, (k, v)
        assert not keyword.iskeyword(v) and not keyword.issoftkeyword(v), (k, v)
        assert v not in RESERVED and v not in reserved and not v.startswith("__"), (k, v)
        assert m.name(k) == v
    assert [Mangler().name(k) for k in ("q", "snake_case1", "名前")] == ["q", "snake_case1",
                                                                      "名前"]
    again = Mangler(reserved)
    assert [again.name(k) for k in got] == list(got.values())  # deterministic


def test_quoted_user_text_cannot_break_out() -> None:
    """Property (seeded random text of quotes, backslashes, newlines, control and
    separator characters): a docstring made by ``docstring_text`` parses and holds the
    text's words; a ``comment`` is one comment line; ``quote`` evaluates to the text."""
    from attngraph.lower.export.codegen_text import comment, docstring_text, quote

    rng = random.Random(1)
    alphabet = "ab \"'\\\n\r\t\x00\x0b\x0c\x1b\x85\u2028\u2029\ud800*/#{}N"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 16)))
        doc = ast.parse(f'def f():\n    """{docstring_text(text)}"""\n').body[0]
        assert isinstance(doc, ast.FunctionDef)
        assert ast.get_docstring(doc, clean=False) == " ".join(text.split())
        line = comment(text, 8)
        assert line.count("\n") == 1 and line.endswith("\n")
        assert ast.parse(f"x = 1\n{line}y = 2\n").body[-1].lineno == 3
        assert ast.literal_eval(quote(text)) == text
