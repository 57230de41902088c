"""``attngraph export SPEC|RUN --format pt2``: a torch.export program that runs, without
attngraph, at shapes other than the traced ones, and equals the compiled model."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from export_support import (  # noqa: E402
    exported,
    new_inputs,
    positional,
    run_without_attngraph,
    symbols,
    traced_as_the_command_does,
)

import attngraph  # noqa: E402
from attngraph.cli import main  # noqa: E402
from attngraph.lower.export.inputs import full_masks  # noqa: E402

#: the exported files are shared by the test processes (``export_support.exported``)
pytestmark = pytest.mark.usefixtures("shared_exports")

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))

def _run_elsewhere(model: Any, graph: Any, program: Path, batch: int,
                  lengths: tuple[int, ...]) -> tuple[dict, dict]:
    """Run the program saved at ``program`` where attngraph cannot be imported, at
    ``batch`` with the symbolic lengths of sizes ``lengths`` (see ``new_inputs``), and
    the compiled ``model`` on the same inputs (after the same seed)."""
    new = new_inputs(graph, batch=batch, lengths=lengths, seed=3)
    got = run_without_attngraph(program, positional(model, full_masks(model, new)))
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # as the runner does
        want = model(**new)
    return got, want


def _export_and_run(path: Path, tmp: Path, batch: int,
                    lengths: tuple[int, ...]) -> tuple[str, dict, dict]:
    """Export with the command (batch 2, every length 8); run the program elsewhere at
    ``batch`` with the symbolic lengths of sizes ``lengths`` (see ``new_inputs``)."""
    program = tmp / f"{path.stem}.pt2"
    res = CliRunner().invoke(main, ["export", str(path), "-o", str(program)])
    assert res.exit_code == 0, res.output
    graph = attngraph.load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    return (res.output, *_run_elsewhere(model, graph, program, batch, lengths))


def _shared_and_run(path: Path, tmp: Path, batch: int,
                    lengths: tuple[int, ...]) -> tuple[Any, dict, dict]:
    """The program ``attngraph export SPEC`` writes (``export_file`` at batch 2, every
    length 8, seed 0: the command's defaults), made once and shared with
    tests/test_export_masks.py, saved and run as above: the export's result (what the
    command prints from), the program's outputs, the model's."""
    model, made = exported(path, "pt2")
    traced_as_the_command_does(made)
    program = tmp / f"{path.stem}.pt2"
    program.write_bytes(made.data)
    return (made.exported,
            *_run_elsewhere(model, attngraph.load_spec(path), program, batch, lengths))


def test_export_runs_without_attngraph_at_a_new_batch_and_length(tmp_path: Path) -> None:
    said, got, want = _export_and_run(ROOT / "specs" / "global_attention.yaml", tmp_path,
                                      batch=5, lengths=(13,))
    assert "batch dynamic; lengths N dynamic" in said
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)


@pytest.mark.xdist_group("luong_local_p")
def test_export_keeps_the_lengths_of_a_recurrence_dynamic(tmp_path: Path) -> None:
    """A GRU over the source and a decoder loop over the target run through scan while
    exporting: the program runs a source of 11 items and a target of 6 steps (traced
    at 8 and 8) and equals the compiled model to 1e-6 (a bidirectional encoder: the
    slow catalog test, bahdanau_translation and luong_translation). The program is
    the one the command writes, shared with the catalog tests below."""
    done, got, want = _shared_and_run(ROOT / "specs" / "luong_local_p.yaml", tmp_path,
                                      batch=5, lengths=(11, 6))
    # what the command prints as "batch dynamic; lengths N, T dynamic"
    assert symbols(attngraph.load_spec(ROOT / "specs" / "luong_local_p.yaml")) == ["N", "T"]
    assert done.batch_dynamic and done.lengths_dynamic
    assert got["logits"].shape == (5, 6, 12)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)


def test_export_to_an_unwritable_place_is_a_located_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    res = CliRunner().invoke(main, ["export", str(ROOT / "specs" / "global_attention.yaml"),
                                    "-o", str(tmp_path / "file" / "model.pt2")])
    assert res.exit_code == 1
    assert "Traceback" not in res.output and "error:" in res.output


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xdist_group(p.stem)) for p in SPECS],
    ids=lambda p: p.stem)
def test_every_catalog_spec_exports_with_dynamic_batch_and_lengths(path: Path,
                                                                  tmp_path: Path) -> None:
    """Each catalog spec exports with its batch and every symbolic length dynamic (loops
    and rnns over items included); at batch 5 with lengths 11 and 6 (traced at 2 and 8)
    the program, run without attngraph, equals the compiled model to 1e-6 (the program
    the command writes; the command itself is tested above)."""
    done, got, want = _shared_and_run(path, tmp_path, batch=5, lengths=(11, 6))
    # what the command prints as "batch dynamic" and no "fixed" (batch, lengths)
    assert done.batch_dynamic and done.lengths_dynamic, (done.batch_dynamic,
                                                         done.lengths_dynamic)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)


MECHANISMS = sorted((ROOT / "mechanisms").glob("*.yaml"))
#: mechanisms torch.export cannot trace yet, and why
NOT_YET: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize("path", [
    pytest.param(p, marks=pytest.mark.xfail(reason=NOT_YET[p.stem], strict=True))
    if p.stem in NOT_YET else p for p in MECHANISMS], ids=lambda p: p.stem)
def test_every_mechanism_exports_with_dynamic_batch_and_lengths(path: Path) -> None:
    """The literature's mechanisms (loops, maps, rnns over items included) export with a
    dynamic batch and lengths, and the saved program equals the compiled model to 1e-6
    at batch 5 with lengths 11 and 6 (the file is shared with tests/test_onnx.py's
    ONNX of the same trace: ``export_support.exported``)."""
    model, made = exported(path, "pt2")
    traced_as_the_command_does(made)
    done = made.exported
    assert done.batch_dynamic and done.lengths_dynamic
    # the program takes every mask: all True (synthesizer's attention over a parameter
    # has a batch of 1 without a mask, of 5 with one, the same numbers)
    new = full_masks(model, new_inputs(attngraph.load_spec(path), batch=5,
                                       lengths=(11, 6), seed=3))
    program = torch.export.load(io.BytesIO(made.data)).module()
    with torch.no_grad():
        got, want = program(*positional(model, new)), model(**new)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)


def test_a_trained_run_exports_with_its_trained_weights(tmp_path: Path) -> None:
    """``export RUN`` writes the run's trained model: the program gives the reloaded
    run's outputs, not those of fresh weights."""
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(ROOT / "specs" / "global_attention.yaml"),
                                    "--out", str(run_dir), "--steps", "3", "--quiet"])
    assert res.exit_code == 0, res.output
    trained = attngraph.load_run(run_dir).model.eval()
    graph = attngraph.load_spec(ROOT / "specs" / "global_attention.yaml")
    new = new_inputs(graph, batch=3, lengths=(5,), seed=4)
    fresh = attngraph.compile(graph, seed=0).eval()
    with torch.no_grad():
        want, other = trained(**new), fresh(**new)
    assert not torch.allclose(want["logits"], other["logits"])  # training moved the weights
    res = CliRunner().invoke(main, ["export", str(run_dir), "-o", str(tmp_path / "m.pt2")])
    assert res.exit_code == 0, res.output
    assert f"the weights trained in {run_dir}" in res.output
    program = torch.export.load(str(tmp_path / "m.pt2")).module()
    with torch.no_grad():
        got = program(*positional(trained, full_masks(trained, new)))
    torch.testing.assert_close(got["logits"], want["logits"], atol=1e-6, rtol=0)


def test_export_of_a_folder_that_is_no_run_is_a_located_error(tmp_path: Path) -> None:
    """A directory without a checkpoint is one error naming it, never a traceback."""
    res = CliRunner().invoke(main, ["export", str(tmp_path), "-o", str(tmp_path / "m.pt2")])
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert str(tmp_path) in res.output


@pytest.mark.parametrize(("name", "fmt"), [("model.py", "python"), ("model.PT2", "pt2"),
                                          ("model.bin", "pt2")])
def test_without_format_the_files_suffix_picks_it(tmp_path: Path, name: str, fmt: str) -> None:
    """``-o model.py`` without --format writes the PyTorch source (it was a pt2 archive
    under a .py name); .pt2 and any suffix that names no format give a pt2 program."""
    path = ROOT / "specs" / "global_attention.yaml"
    out = tmp_path / name
    res = CliRunner().invoke(main, ["export", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert f"({fmt}" in res.output
    if fmt == "python":
        compile(out.read_text(encoding="utf-8"), str(out), "exec")  # Python source
    else:
        program = torch.export.load(str(out)).module()
        model = attngraph.compile(attngraph.load_spec(path), seed=0).eval()
        new = new_inputs(attngraph.load_spec(path), batch=2, lengths=(5,), seed=1)
        with torch.no_grad():
            got = program(*positional(model, full_masks(model, new)))
            want = model(**new)
        torch.testing.assert_close(got["logits"], want["logits"], atol=1e-6, rtol=0)


def test_an_explicit_format_wins_over_the_suffix(tmp_path: Path) -> None:
    """--format python with a file named .txt writes Python there, as asked."""
    out = tmp_path / "model.txt"
    res = CliRunner().invoke(main, ["export", str(ROOT / "specs" / "global_attention.yaml"),
                                    "--format", "python", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8").lstrip().startswith('"""')
    # a file Python cannot import by name is run by path in the hint, and that runs
    hint = next(line for line in res.output.splitlines() if line.startswith("run it: "))
    assert f"= runpy.run_path({str(out)!r})[" in hint
    import runpy

    cls = hint.split(" = runpy.run_path")[0].removeprefix("run it: ")
    assert isinstance(runpy.run_path(str(out))[cls](), torch.nn.Module)
    for name, how in (("my-model.py", "runpy.run_path"), ("mymodel.py", "from mymodel import")):
        res = CliRunner().invoke(main, ["export", str(ROOT / "specs" / "global_attention.yaml"),
                                        "--format", "python", "-o", str(tmp_path / name)])
        assert res.exit_code == 0 and how in res.output, res.output
