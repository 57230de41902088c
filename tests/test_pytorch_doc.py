"""``docs/pytorch.md`` stays true: its Python examples run, in order, in one session
(each asserts what it shows), and its shell commands run and print what it quotes."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from fuzz.seeds import blocks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "pytorch.md"
BLOCKS = blocks(DOC)


@pytest.fixture
def in_a_copy(repo_copy) -> Path:
    """A working folder that sees the catalog as ``specs/`` (the files the examples
    write land there)."""
    return repo_copy("specs")


def test_the_doc_has_examples_of_each_topic() -> None:
    """Calling, composing, a block as a layer, dtypes, export, ONNX and jit are shown."""
    code = "".join(b.text for b in BLOCKS if b.lang == "python")
    for needle in ("inspect.signature", "tokens_mask=", 'block="layer"', "torch.float64",
                   "export_program", "export_onnx", "onnxruntime", "torch.jit.trace"):
        assert needle in code, needle


@pytest.mark.slow
def test_the_python_examples_run_in_order(in_a_copy: Path) -> None:
    """Every python block runs after the ones before it, without an error."""
    scope: dict[str, object] = {"__name__": "pytorch_doc"}
    for block in (b for b in BLOCKS if b.lang == "python"):
        try:
            exec(compile(block.text, f"docs/pytorch.md:{block.line}", "exec"), scope)  # noqa: S102
        except Exception as exc:  # the block's line makes the failure findable
            pytest.fail(f"docs/pytorch.md:{block.line}: {type(exc).__name__}: {exc}")
    assert (in_a_copy / "bahdanau.pt2").exists() and (in_a_copy / "ga.onnx").exists()


@pytest.mark.slow
def test_the_shell_commands_print_what_the_doc_quotes(in_a_copy: Path, cli) -> None:
    """Each ``attngraph`` command of the sh blocks exits 0; a ``# wrote ...`` comment
    under it is the first line it prints."""
    for block in (b for b in BLOCKS if b.lang == "sh"):
        lines = block.text.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("attngraph "):
                continue
            res = cli(*shlex.split(line)[1:])
            assert res.exit_code == 0, f"docs/pytorch.md:{block.line + i}: {res.output}"
            quoted = lines[i + 1].lstrip("# ") if i + 1 < len(lines) else ""
            if quoted.startswith("wrote "):
                assert res.output.splitlines()[0] == quoted
