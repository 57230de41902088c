"""docs/real-models.md stays true: its example (a configuration, random weights, an
import, the weights over a text, a few steps of fine-tuning on texts) runs, from the shell and
from Python, every step doing what the page says, and the page is listed from the
README."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "real-models.md"
SECTION = "## From a configuration to a fine-tuned run"


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end > 0 else None]


def test_the_example_runs_and_prints_what_the_page_shows() -> None:
    """The section's python block runs without network; its printed lines start with the
    text block shown after it (training adds progress lines in between): the import's
    weights over the text, the picture written, the run fine-tuned to step 3."""
    pytest.importorskip("transformers", reason="the example needs transformers")
    text = _section()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S)
    assert code is not None and shown is not None
    for step in ("GPT2LMHeadModel(config)", "import_model(", "attend_text(", "resume=True",
                 "data=str(texts)"):
        assert step in code.group(1), step
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(PAGE), "exec"), {"__name__": "docs_example"})  # noqa: S102
    printed = [ln for ln in out.getvalue().splitlines() if not ln.startswith("step ")]
    assert printed == shown.group(1).splitlines()


def test_the_shell_example_runs_every_step(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The section's shell block, line by line in an empty folder: the configuration
    saved with random weights, the import, both attend commands (each writes its
    picture), a file of texts, and three steps of fine-tuning on them."""
    pytest.importorskip("transformers", reason="the example needs transformers")
    import attngraph
    from attngraph.cli import main

    block = re.search(r"```sh\n(.*?)```", _section(), re.S)
    assert block is not None
    lines = [ln.split("  #")[0].strip() for ln in block.group(1).splitlines() if ln.strip()]
    commands = [shlex.split(ln) for ln in lines]
    assert [c[1] for c in commands] == ["-c", "import", "attend", "attend", "-c", "train"]
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        if argv[0] == "python":
            subprocess.run([sys.executable, *argv[1:]], check=True, timeout=300)
            continue
        res = CliRunner().invoke(main, argv[1:])
        assert res.exit_code == 0, f"{' '.join(argv)}\n{res.output}"
    for argv in commands:
        if argv[1] == "attend":
            pic = Path(argv[argv.index("-o") + 1])
            assert pic.stat().st_size > 0, pic
    assert (tmp_path / "run" / "import.json").is_file()
    ck = attngraph.load_run(tmp_path / "run").checkpoint
    assert ck.step == 3 and ck.config["data"]["data"] == "texts.csv"  # on the texts


def test_the_page_is_listed_and_names_every_real_spec() -> None:
    """README links the page; the page links every spec of specs/real/."""
    assert "docs/real-models.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    text = PAGE.read_text(encoding="utf-8")
    for spec in sorted((ROOT / "specs" / "real").glob("*.yaml")):
        if not spec.name.endswith(".names.yaml"):
            assert f"specs/real/{spec.name}" in text, spec.name
