"""``model.code`` and ``attngraph export --format python``: a standalone PyTorch file
that imports torch only, takes the compiled model's state dict, and returns what the
compiled model returns (to 1e-6, eval mode) in a process where attngraph cannot be
imported."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from codegen_support import file_names, filled, load, masked_inputs  # noqa: E402

import attngraph  # noqa: E402
from attngraph.cli import main  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.lower.export.codegen import class_name  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
MECHANISMS = sorted((ROOT / "mechanisms").glob("*.yaml"))

#: imports every exported file in a process where attngraph cannot be imported, runs
#: it on the saved inputs with the saved state dict (strictly: every name matches),
#: and saves its outputs next to it
RUNNER = """
import importlib, sys
sys.modules["attngraph"] = None  # any import of attngraph now fails
try:
    import attngraph.lower
except ImportError:
    pass
else:
    raise SystemExit("attngraph is importable")
import torch
folder = sys.argv[1]
sys.path.insert(0, folder)
for name in sys.argv[2:]:
    data = torch.load(f"{folder}/{name}.pt")
    model = getattr(importlib.import_module(name), data["cls"])()
    model.load_state_dict(data["state"])
    model.eval()
    torch.manual_seed(0)  # a model that samples in eval (a latent) draws the same noise
    with torch.no_grad():
        out = model(**data["inputs"])
    torch.save(out, f"{folder}/{name}.out.pt")
"""


def _export_all(paths: list[Path], folder: Path) -> dict[str, tuple[Any, dict, str]]:
    """Write each spec's file (``model.code``) and its state dict and inputs; run them
    all in one process without attngraph. Returns name -> (model, wanted outputs, code)."""
    made: dict[str, tuple[Any, dict, str]] = {}
    for path in paths:
        name = path.stem
        model = attngraph.compile(path, seed=0).eval()
        code = model.code
        (folder / f"{name}.py").write_text(code, encoding="utf-8")
        inputs = masked_inputs(model)
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # as the runner does: the same draws of a latent
            want = model(**inputs)
        torch.save({"state": model.state_dict(), "inputs": inputs,
                    "cls": class_name(model.graph.name)}, folder / f"{name}.pt")
        made[name] = (model, want, code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-I", "-c", RUNNER, str(folder), *made],
                         capture_output=True, text=True, timeout=600, env=env, check=False,
                         cwd=folder)
    assert run.returncode == 0, run.stderr[-3000:]
    return made


def _assert_same_outputs(folder: Path, made: dict[str, tuple[Any, dict, str]]) -> None:
    for name, (_, want, _) in made.items():
        got = torch.load(folder / f"{name}.out.pt")
        assert list(got) == list(want), name
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (name, k)
            torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0,
                                       msg=lambda m, n=name, o=k: f"{n}.{o}: {m}")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("codegen")
    return folder, _export_all(SPECS, folder)


def test_every_catalog_file_equals_the_compiled_model_without_attngraph(
        catalog: tuple[Path, dict]) -> None:
    """For each catalog spec, the exported file, run where attngraph cannot
    be imported with the compiled model's state dict (loaded strictly: the parameter
    names are the same), returns the same outputs on padded inputs to 1e-6."""
    folder, made = catalog
    assert len(made) == len(SPECS) >= 19
    _assert_same_outputs(folder, made)


def test_files_import_torch_only_and_are_ruff_clean(catalog: tuple[Path, dict]) -> None:
    """Every exported file parses, imports torch and the standard library only, and
    passes ruff with the project's rules (imports sorted, lines <= 100, no undefined
    names)."""
    folder, made = catalog
    for name, (_, _, code) in made.items():
        tree = ast.parse(code)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                tops = {(node.module or "").split(".")[0]}
            else:
                continue
            assert tops <= {"torch", "__future__", *sys.stdlib_module_names}, (name, tops)
    ruff = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), *(str(folder / f"{n}.py")
                                                            for n in made)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert ruff.returncode == 0, ruff.stdout[-3000:]


def test_forward_is_plain_pytorch_one_line_per_node(catalog: tuple[Path, dict]) -> None:
    """The forward of multihead_attention is torch code a person would write: one
    statement per node, named after its id, under its YAML line, with its output shape;
    modules are standard ones (``nn.Linear``, ``nn.Embedding``) under readable names;
    no interpreter (no Runtime, no per-node classes)."""
    _, made = catalog
    code = made["multihead_attention"][2]
    forward = code[code.index("    def forward(self, tokens: Tensor"):]
    for line in [
        "        # line 24: score: {kind: scorer, fn: scaled_dot, query: q, key: k, label: e}\n"
        "        score = q @ k.transpose(-1, -2) * 0.35355339059327373  # (B, 4, 1, N)\n",
        "        p = masked_softmax(score, mask)  # (B, 4, 1, N)\n",
        "        k = split_heads(self.k(x), 4)  # (B, 4, N, 8)\n",
        "        z = self.z(merge_heads(w @ v, 'concat'))  # (B, 1, 32)\n",
        "        return {'logits': logits, 'attention': p}\n",
    ]:
        assert line in forward, line
    assert "class MultiheadAttention(nn.Module):" in code
    assert "        self.k = nn.Linear(32, 32, bias=True)\n" in code
    assert "def forward(self, tokens: Tensor, tokens_mask: Tensor | None = None)" in code
    assert "Runtime" not in code and "class Proj" not in code


#: the catalog specs some of whose nodes still copy their lowering classes (none: every
#: built-in kind has an emit rule; rotary and position biases are covered with the
#: mechanisms and real models that hold them in test_codegen_relative.py)
FALLS_BACK: set[str] = set()
#: every other catalog spec: each node written by its kind's emit rule
PLAIN = [p.stem for p in SPECS if p.stem not in FALLS_BACK]


@pytest.mark.parametrize("spec", PLAIN)
def test_plain_specs_copy_no_lowering_class(spec: str) -> None:
    """Every node of these specs is written by its kind's emit rule: no node falls
    back to its copied lowering class, and the file holds no runtime state."""
    from attngraph.lower.export.codegen import python_source
    from attngraph.lower.runtime.module import Runtime, _run_linear_group

    model = attngraph.compile(ROOT / "specs" / f"{spec}.yaml", seed=0)
    report: list[str] = []
    code = python_source(model, runtime=Runtime, linear_group=_run_linear_group,
                         report=report)
    assert report == []
    assert "class Runtime" not in code and "todo" not in code


def test_the_bahdanau_export_reads_top_to_bottom(catalog: tuple[Path, dict]) -> None:
    """The exported Bahdanau model is under 250 lines; its decoder is a Python ``for``
    over the target steps with the body's nodes inline (no stage tables)."""
    code = catalog[1]["bahdanau_translation"][2]
    assert len(code.splitlines()) < 250
    assert "        for t in range(target.shape[1]):\n" in code
    assert "            alpha = masked_softmax(score, source_mask)  # (B, N)\n" in code
    assert "todo" not in code and "Step(" not in code
    assert "Runtime" not in code and "rt." not in code  # no runtime tables


@pytest.mark.parametrize("spec", [
    "global_attention", "multihead_attention",
    pytest.param("bahdanau_translation", marks=pytest.mark.xfail(
        strict=True, raises=Exception,
        reason="the file packs the padded source (pack_padded_sequence), whose lengths "
        "torch.export cannot trace; the compiled model exports by a scan"))])
def test_torch_export_of_the_file_gives_the_same_outputs(spec: str) -> None:
    """torch.export of the generated module (at the example's shapes) succeeds and its
    program returns what the compiled model returns."""
    model = attngraph.compile(ROOT / "specs" / f"{spec}.yaml", seed=0).eval()
    name = f"{spec}_export_program"
    mod = load(model.code, name)
    try:
        ours = filled(mod, model)
        inputs = masked_inputs(model)
        program = torch.export.export(ours, (), inputs)
        with torch.no_grad():
            got, want = program.module()(**inputs), model(**inputs)
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=0)
    finally:
        del sys.modules[name]


DOC = ROOT / "docs" / "export-python.md"


def _doc_block(marker: str, fence: str) -> str:
    """The fenced block of docs/export-python.md after ``marker`` (a line of it)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"```{fence}\n", text.index(marker)) + len(fence) + 4
    return text[start:text.index("```", start)]


def test_export_command_writes_model_code(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """`attngraph export SPEC --format python -o FILE` writes exactly ``model.code`` of
    the compiled spec and prints what docs/export-python.md shows."""
    spec = ROOT / "specs" / "multihead_attention.yaml"
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["export", str(spec), "--format", "python", "-o", "mha.py"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "mha.py").read_text(encoding="utf-8") == \
        attngraph.compile(spec, seed=0).code
    assert res.output == _doc_block("attngraph export specs/multihead_attention.yaml", "text")


@pytest.mark.parametrize("spec", ["multihead_attention", "bahdanau_translation"])
def test_the_docs_excerpt_is_the_exported_code(catalog: tuple[Path, dict], spec: str) -> None:
    """Each part of an excerpt in docs/export-python.md (parts split at ``...``) is
    text of the exported file of its spec (the top-level class; a loop's body)."""
    code = catalog[1][spec][2]
    block = _doc_block(f"<!-- excerpt: {spec} -->", "python")
    parts = "".join(line if line.strip() != "..." else "\0"
                    for line in block.splitlines(keepends=True)).split("\0")
    assert len(parts) >= 2
    for part in parts:
        assert part in code, part[:200]


SHARED = """attngraph: 1
name: shared_tied
dims: {vocab: 30, d: 8}
inputs:
  tok: {type: tokens, vocab: vocab}
  other: {type: tokens, vocab: vocab, length: M}
nodes:
  x:  {kind: items, from: tok, embed: d}
  keys: {kind: keys, from: x}
  q:  {kind: queries, from: x}
  y: {kind: items, from: other, embed: d, share: x}
  out: {kind: linear, from: q, out: vocab, tie: x}
outputs: {o: out, y: y, k: keys}
"""


def test_shared_and_tied_parameters_stay_shared() -> None:
    """A node with ``share`` is its owner's module and a ``tie``d linear's weight is the
    embedding table, in the file as in the compiled model; a node id that names a
    ModuleDict attribute (``keys``) keeps its escaped key; the outputs are equal."""
    model = attngraph.compile(loads_spec(SHARED), seed=0).eval()
    mod = load(model.code, "shared_tied_export")
    try:
        ours = mod.SharedTied()
        ours.load_state_dict(model.state_dict())
        ours.eval()
        # every compiled name has its parameter in the file (STATE_NAMES)
        assert set(file_names(mod, model).values()) == set(ours.state_dict())
        assert mod.STATE_NAMES["nodes.y.embed."] == mod.STATE_NAMES["nodes.x.embed."]
        assert ours.out.weight is ours.x.weight
        gen = torch.Generator().manual_seed(0)
        tok = torch.randint(0, 30, (2, 5), generator=gen)
        other = torch.randint(0, 30, (2, 3), generator=gen)
        with torch.no_grad():
            got, want = ours(tok, other), model(tok, other)
        # float32 rounding apart: the model runs the keys' and queries' projections
        # as one stacked matmul (about 1e-6 relative), the file as two
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6)
    finally:
        del sys.modules["shared_tied_export"]


@pytest.mark.parametrize("spec", ["transformer_encoder", "bahdanau_translation"])
def test_the_file_trains_like_the_compiled_model(spec: str) -> None:
    """In training mode (a loop then teacher-forces its fed-back tokens) the file's
    outputs and the gradients of every parameter equal the compiled model's to 1e-6
    (the specs hold no dropout, so training mode is deterministic)."""
    model = attngraph.compile(ROOT / "specs" / f"{spec}.yaml", seed=0).train()
    name = f"{spec}_train_export"
    mod = load(model.code, name)
    try:
        ours = filled(mod, model)
        inputs = masked_inputs(model)
        got, want = ours(**inputs), model(**inputs)
        for k in want:
            torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0)
        sum(v.float().square().sum() for v in got.values()).backward()
        sum(v.float().square().sum() for v in want.values()).backward()
        ours_p = dict(ours.named_parameters(remove_duplicate=False))
        names = file_names(mod, model)
        for pname, p in model.named_parameters():
            mine = ours_p[names[pname]]
            assert mine.grad is not None, pname
            torch.testing.assert_close(mine.grad, p.grad, atol=1e-6, rtol=0)
    finally:
        del sys.modules[name]


CLASH = """attngraph: 1
name: clash
dims: {vocab: 20, d: 8}
inputs:
  rt: {type: tokens, vocab: vocab}
  torch: {type: tokens, vocab: vocab, length: M}
nodes:
  x: {kind: items, from: rt, embed: d}
  grouped: {kind: keys, from: x}
  q: {kind: queries, from: x}
  y: {kind: items, from: torch, embed: d}
outputs: {k: grouped, q: q, y: y, m: torch.mask}
"""


def test_inputs_named_like_forwards_own_variables() -> None:
    """Inputs named ``rt`` and ``torch`` and a node named ``grouped`` keep their names
    in the signature; forward's own variables step aside; a mask port read as an
    output is all True when the mask is not given, as in the compiled model."""
    model = attngraph.compile(loads_spec(CLASH), seed=0).eval()
    code = model.code
    assert "def forward(\n        self,\n        rt: Tensor,\n        torch: Tensor," in code
    mod = load(code, "clash_export")
    try:
        ours = mod.Clash()
        ours.load_state_dict(model.state_dict())
        ours.eval()
        rt, tk = torch.randint(0, 20, (2, 5)), torch.randint(0, 20, (2, 3))
        for masks in ({}, {"rt_mask": torch.tensor([[True] * 5, [True, True, False, False,
                                                                 False]])}):
            with torch.no_grad():
                got, want = ours(rt, tk, **masks), model(rt, tk, **masks)
            assert list(got) == list(want)
            for k in want:
                torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0)
        assert bool(got["m"].all())
    finally:
        del sys.modules["clash_export"]


def test_a_node_that_cannot_be_written_is_a_located_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A node module holding a value with no literal form: one LoweringError naming the
    node, at its line, with a hint, not a traceback from inside the generator."""
    import attngraph.lower.export.emit.writer as writer

    model = attngraph.compile(ROOT / "specs" / "multihead_attention.yaml", seed=0)
    model.nodes["score"].opaque = object()
    # the node's lowering class is copied (as for a plugin kind without an emit rule)
    monkeypatch.setattr(writer, "emit_rule", lambda kind: None)
    with pytest.raises(LoweringError) as e:
        _ = model.code
    d = e.value.diagnostics[0]
    assert "node 'score' (scorer) cannot be exported as Python" in d.message
    assert "object" in d.message
    assert d.loc.line == 24
    assert "pt2" in (d.hint or "")


def test_a_node_class_without_source_is_a_located_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A node module copied (no emit rule) whose class has no readable source (made at
    run time, as in a notebook): one LoweringError naming the node at its line, not a
    traceback."""
    import attngraph.lower.export.emit.writer as writer

    monkeypatch.setattr(writer, "emit_rule", lambda kind: None)
    model = attngraph.compile(ROOT / "specs" / "multihead_attention.yaml", seed=0)
    ns: dict[str, Any] = {}
    exec("import torch\nclass Ghost(torch.nn.Module):\n"  # noqa: S102
         "    def forward(self, x, rt):\n        return x['scores']\n", ns)
    ns["Ghost"].__module__ = "attngraph.lower.ghost"
    model.nodes["p"].__class__ = ns["Ghost"]
    with pytest.raises(LoweringError) as e:
        _ = model.code
    d = e.value.diagnostics[0]
    assert d.message.startswith("node 'p' (softmax) cannot be exported as Python")
    assert d.loc.line == 25


def test_an_input_named_by_a_keyword_is_refused_at_its_line() -> None:
    """An input forward cannot take as a Python parameter (``lambda``): one located
    error saying so."""
    text = SHARED.replace("  tok: {type: tokens, vocab: vocab}\n",
                          "  tok: {type: tokens, vocab: vocab}\n  lambda: {type: vector, dim: d}\n")
    model = attngraph.compile(loads_spec(text), seed=0)
    with pytest.raises(LoweringError) as e:
        _ = model.code
    d = e.value.diagnostics[0]
    assert d.message == ("input 'lambda': its name is a Python keyword, which forward "
                         "cannot take")
    assert d.loc.line == 6
    assert "rename the input" in (d.hint or "")


@pytest.mark.slow
def test_every_mechanism_file_equals_the_compiled_model_without_attngraph(
        tmp_path: Path) -> None:
    """The same property for the 21 mechanisms (sharing, tying, loops, hard attention,
    rotary tables and ALiBi slopes made in forward)."""
    made = _export_all(MECHANISMS, tmp_path)
    _assert_same_outputs(tmp_path, made)
