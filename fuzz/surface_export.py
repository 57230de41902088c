"""Surface ``export``: odd spec names, titles, summaries, labels and ids through every
export format.

Seeds are small catalog specs. Operators give the spec's ``name``, ``title``,
``summary``, a node's ``label`` or a node's or an input's id an odd value: Python
keywords and builtins (``class``, ``self``, ``torch``, ``F``, ``nn``), dunders, a
leading digit, quotes of every kind, ``\"\"\"``, backslashes, braces, ``*/`` and
``-->``, HTML, non-ASCII letters, combining marks, right-to-left marks, emoji,
U+2028, control characters, 10,000 characters, or nothing. A spec the reader
refuses is a clean rejection; an accepted one is exported through the CLI as the
user would: ``export --format python`` over an existing file (the file must then
parse, import torch only, load the compiled model's weights and give the compiled
model's finite outputs), ``render`` as JSON (which must parse), Mermaid and DOT,
``describe`` as JSON and text, and now and then ``export`` to pt2 (loaded back and
run) and ONNX, the slow formats. A rejected export must leave the existing file whole.
"""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import yaml

from fuzz.mutate import rename
from fuzz.oracle import Outcome
from fuzz.seeds import ROOT
from fuzz.surface import Case, Exit, changed, cli, fail, finite, rejected, snapshot

__all__ = ["SEEDS", "ODD", "prepare", "run"]

SEEDS = ("global_attention", "multihead_attention", "kvq_attention", "intra_attention")
#: Odd values for a name, a title, a summary, a label or an id.
ODD = ("class", "self", "torch", "F", "nn", "Tensor", "forward", "__init__", "__class__",
       "_", "__", "None", "True", "lambda", "import", "print", "super", "dict", "x.y", "a-b",
       "a b", "1abc", "0", "-", "", " ", "'", '"', '"""', "'''", "\\", "\\N{x}", "{}", "{0}",
       "{x!r}", "%s", "*/", "-->", "<!--", "<script>alert(1)</script>", "]]>", "a\nb",
       "a\rb", "a\u2028b", "\u202eevil", "e\u0301", "Σ", "ñame", "名前", "🙂", "\x00", "\x7f",
       "\t", "a" * 10_000, "n" * 300, "graph", "subgraph", "digraph", "node", "edge", "end",
       "style", "click", "#", "//", "# comment", "@", "`", "$x", "${x}", "\ufeff", "ℌ", "ﬁ",
       "İ", "ǅ", "_0", "model", "outputs", "inputs", "state_dict", "cls", "args", "kwargs")
_FIELDS = ("name", "name", "title", "summary", "label", "node-id", "input-id", "output-key")


def prepare(root: Any) -> dict[str, Any]:
    """The seed specs' texts, parsed."""
    return {n: yaml.safe_load((ROOT / "specs" / f"{n}.yaml").read_text(encoding="utf-8"))
            for n in SEEDS}


def _odd(case: Case) -> str:
    v = case.pick(ODD)
    if case.rng.random() < 0.3:
        v = case.pick(("attn_", "", "x")) + v + case.pick(("", "_1", " model"))
    return v


def _mutate(case: Case, data: dict[str, Any]) -> dict[str, Any]:
    for _ in range(case.rng.randint(1, 3)):
        what = case.pick(_FIELDS)
        value = _odd(case)
        case.op(f"{what}={value[:24]!r}")
        if what in ("name", "title", "summary"):
            data[what] = value
        elif what == "label":
            nid = case.rng.choice(sorted(data["nodes"]))
            if isinstance(data["nodes"][nid], dict):
                data["nodes"][nid]["label"] = value
        elif what == "node-id":
            data = rename(data, case.rng.choice(sorted(data["nodes"])), value)
        elif what == "input-id":
            data = rename(data, case.rng.choice(sorted(data["inputs"])), value)
        else:
            outs = data.get("outputs") or {}
            if outs:
                k = case.rng.choice(sorted(outs))
                outs[value] = outs.pop(k)
    return data


def _python(case: Case, spec: str, graph: Any) -> None:
    """``export --format python`` over an existing file; the file must run."""
    import attngraph
    from attngraph.lower.export.codegen import class_name
    from fuzz.oracle import _inputs

    out = case.tmp / "model.py"
    out.write_text("an earlier file\n", encoding="utf-8")
    before = snapshot(case.tmp)
    try:
        cli("export", spec, "--format", "python", "-o", str(out))
    except Exit:
        if changed(before, snapshot(case.tmp)):
            fail("lost-file", "export python after an error",
                         "a failed export changed the existing file")
        raise
    code = out.read_text(encoding="utf-8")
    try:
        compiled = compile(code, "model.py", "exec")
    except SyntaxError as exc:
        fail("bad-output", "python: does not parse",
                     f"the exported module does not parse: {exc}")
    model = attngraph.compile(graph, seed=0).eval()
    mod = types.ModuleType("fuzz_exported")
    sys.modules["fuzz_exported"] = mod
    try:
        exec(compiled, mod.__dict__)  # noqa: S102 - the code attngraph wrote
        cls = getattr(mod, class_name(graph.name), None)
        if cls is None:
            fail("bad-output", "python: class missing",
                         f"no class {class_name(graph.name)!r} in the exported module")
        gen = cls()
        gen.load_state_dict(model.state_dict())
        gen.eval()
        kw = _inputs(graph, 5, seed=case.index)
        import torch

        with torch.no_grad():
            want = model(**kw)
            got = gen(**kw)
    finally:
        sys.modules.pop("fuzz_exported", None)
    bad = finite(got)
    if bad:
        fail("nonfinite", "python export output", f"output {bad} is not finite")
    for k, v in want.items():
        g = got.get(k) if isinstance(got, dict) else None
        if torch.is_tensor(v) and (g is None or g.shape != v.shape
                                   or not torch.allclose(g.float(), v.float(), atol=1e-5)):
            fail("bad-output", "python export differs",
                         f"output {k!r} of the exported module differs from the compiled model")


def _pt2(case: Case, spec: str, fmt: str) -> None:
    out = case.tmp / f"model.{fmt}"
    out.write_bytes(b"an earlier file\n")
    before = snapshot(case.tmp)
    try:
        cli("export", spec, "--format", fmt, "-o", str(out))
    except Exit:
        if changed(before, snapshot(case.tmp)):
            fail("lost-file", f"export {fmt} after an error",
                         "a failed export changed the existing file")
        raise
    if fmt == "pt2":
        import torch

        prog = torch.export.load(str(out)).module()
        from attngraph.frontend import load_spec
        from fuzz.oracle import _inputs

        graph = load_spec(spec)
        kw = _inputs(graph, 5, seed=case.index)
        names = [n.id for n in graph.inputs]
        args = [kw[k] for k in kw if k.split("_mask")[0] in names]
        try:
            res = prog(*args)
        except Exception:  # noqa: BLE001 - the argument order is the model's, not ours
            return
        bad = finite(res)
        if bad:
            fail("nonfinite", "pt2 output", f"output {bad} is not finite")


def run(case: Case) -> Outcome:
    """One spec with odd names through every export format."""
    from attngraph.frontend import loads_spec

    seed = case.pick(SEEDS, "seed")
    data = _mutate(case, json.loads(json.dumps(case.state[seed])))
    text = yaml.safe_dump(data, allow_unicode=case.rng.random() < 0.7, sort_keys=False)
    spec = case.tmp / "spec.yaml"
    spec.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        graph = loads_spec(text, str(spec))
    except Exception as exc:  # noqa: BLE001 - the oracle classifies it
        return rejected(exc)
    fmt = case.pick(("python", "python", "render", "describe", "compile", "slow"), "format")
    if fmt == "python":
        _python(case, str(spec), graph)
    elif fmt == "render":
        for f in ("json", "mermaid", "dot"):
            view = case.pick(("architecture", "unrolled"))
            out = case.tmp / f"d.{f}"
            cli("render", str(spec), "--view", view, "--format", f, "-o", str(out))
            if f == "json":
                try:
                    json.loads(out.read_text(encoding="utf-8"))
                except ValueError as exc:
                    fail("bad-output", "render json does not parse", str(exc))
    elif fmt == "describe":
        json.loads(cli("describe", str(spec), "--format", "json"))
        cli("describe", str(spec))
    elif fmt == "compile":
        cli("compile", str(spec))
    elif case.rng.random() < 0.04 and seed in ("global_attention", "kvq_attention"):
        _pt2(case, str(spec), case.pick(("pt2", "pt2", "onnx"), "slow-format"))
    else:
        _python(case, str(spec), graph)
    return Outcome("valid")
