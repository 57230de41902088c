"""Errors of setting up training and of drawing attention are located: at the part of
the spec at fault (FILE:LINE:COL, with the line shown), at the run or the file at
fault otherwise, each with a hint; on the command line one error, exit 1, no
traceback, and nothing written before the error."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from click.testing import Result  # noqa: E402

from attngraph.errors import SourceLoc, TrainingError  # noqa: E402
from attngraph.frontend import load_spec  # noqa: E402
from attngraph.train.engine.step import train_step  # noqa: E402
from attngraph.train.pictures.attend import draw, pick_view  # noqa: E402
from attngraph.train.run.runner import RunConfig, run  # noqa: E402
from attngraph.train.tasks.lookup import (  # noqa: E402
    TASKS,
    Task,
    bind_inputs,
    register_task,
    task_for,
)

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
GA_TEXT = GA.read_text(encoding="utf-8")


def _spec(tmp_path: Path, old: str, new: str, base: Path = GA) -> Path:
    """A copy of ``base`` with ``old`` replaced by ``new`` (which must occur once)."""
    text = base.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / "spec.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def _at(path: Path, line_has: str, token: str) -> tuple[str, int, int]:
    """(file, line, col) of ``token`` on the first line of ``path`` holding ``line_has``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    n = next(i for i, ln in enumerate(lines) if line_has in ln)
    return str(path), n + 1, lines[n].index(token, lines[n].index(line_has)) + 1


def _where(loc: SourceLoc) -> tuple[str, int, int]:
    return loc.file, loc.line, loc.col


def _located(err: TrainingError, path: Path, line_has: str, token: str) -> None:
    """The error is at ``token`` in ``path``, prints that line, and has a hint."""
    assert _where(err.loc) == _at(path, line_has, token), err.format()
    assert line_has in err.loc.excerpt()
    assert err.hint


def _failed_cleanly(res: Result, where: str) -> str:
    """The CLI printed one error at ``where`` with a hint, no traceback, and exited 1."""
    assert res.exit_code == 1, res.output
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    assert res.stderr.count(": error: ") == 1, res.stderr
    assert f"{where}: error: " in res.stderr and "\nhint: " in res.stderr, res.stderr
    return res.stderr


@pytest.fixture(scope="session")
def train(cli) -> Callable[..., Result]:
    """``train(spec, out, *extra)``: ``spec`` trained from the command line, 2 steps of
    4 into ``out``, quietly, with the ``extra`` options."""

    def run(spec: Path, out: Path, *extra: object) -> Result:
        return cli("train", spec, "--steps", "2", "--batch", "4",
                   "--out", out, "--quiet", *extra)

    return run


def _cli_at(spec: Path, line_has: str, token: str) -> str:
    file, line, col = _at(spec, line_has, token)
    return f"{file}:{line}:{col}"


# --- the task and its settings, from the spec's train: section ------------------------

def test_unknown_task_in_the_spec_points_at_train_task(tmp_path: Path, train) -> None:
    """A misspelt train.task is located at its value, with a did-you-mean; the CLI
    prints that one error and writes nothing."""
    spec = _spec(tmp_path, "task: needle", "task: needel")
    with pytest.raises(TrainingError, match="unknown task 'needel'") as err:
        task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "task: needel", "needel")
    assert "did you mean 'needle'" in (err.value.hint or "")
    res = train(spec, tmp_path / "run")
    _failed_cleanly(res, _cli_at(spec, "task: needel", "needel"))
    assert not (tmp_path / "run").exists()


def test_unknown_task_given_on_the_command_line_names_the_spec_file(tmp_path: Path, train) -> None:
    """--task is not in the spec: an unknown one names the spec file (no line), and
    says what was meant."""
    with pytest.raises(TrainingError, match="unknown task 'needel'") as err:
        task_for(load_spec(GA), "needel", 0)
    assert _where(err.value.loc) == (str(GA), 0, 0)
    res = train(GA, tmp_path / "run", "--task", "needel")
    assert "did you mean 'needle'" in _failed_cleanly(res, str(GA))


def test_spec_without_train_section_and_no_task_points_at_the_spec(tmp_path: Path, train) -> None:
    """No --task and no train: section: located at the spec's first line (not the file
    name inside the message)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(GA_TEXT[:GA_TEXT.index("train:")], encoding="utf-8")
    with pytest.raises(TrainingError) as err:
        task_for(load_spec(spec), None, 0)
    assert err.value.message == "no task given and the spec has no 'train:' section"
    _located(err.value, spec, "attngraph: 1", "attngraph")
    _failed_cleanly(train(spec, tmp_path / "run"), _cli_at(spec, "attngraph: 1", "attngraph"))


def test_unknown_option_points_at_its_key(tmp_path: Path, train) -> None:
    """An option the task lacks is located at its key in train.options."""
    spec = _spec(tmp_path, "length: 12}", "lenght: 12}")
    with pytest.raises(TrainingError, match="no option 'lenght'") as err:
        task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "options:", "lenght")
    assert "did you mean 'length'" in (err.value.hint or "")
    _failed_cleanly(train(spec, tmp_path / "run"), _cli_at(spec, "options:", "lenght"))


def test_mistyped_option_points_at_its_value(tmp_path: Path) -> None:
    """An option of the wrong type is located at its value, and the hint gives the type."""
    spec = _spec(tmp_path, "length: 12}", "length: 1.5}")
    with pytest.raises(TrainingError, match="option 'length' must be int") as err:
        task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "options:", "1.5")
    assert "int" in (err.value.hint or "")


def test_options_that_do_not_fit_together_point_at_train_options(tmp_path: Path) -> None:
    """A task's own check of its options (classes over vocab) is located at train.options."""
    spec = _spec(tmp_path, "classes: 4, length", "classes: 40, length")
    with pytest.raises(TrainingError, match="needs vocab >= classes") as err:
        task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "options:", "{vocab")


def test_options_the_caller_gives_name_the_spec_file() -> None:
    """Options given by the caller (not written in the spec) are not located in it."""
    with pytest.raises(TrainingError, match="no option 'lenght'") as err:
        task_for(load_spec(GA), None, 0, {"lenght": 3})
    assert _where(err.value.loc) == (str(GA), 0, 0)


def test_target_metric_the_task_does_not_measure_points_at_it(tmp_path: Path, train) -> None:
    """train.target naming a metric the task never measures is refused at its key, with
    the task's metrics in the hint (it used to be reported only as 'missing')."""
    spec = _spec(tmp_path, "attention_peak: 0.8}", "attn_peak: 0.8}")
    with pytest.raises(TrainingError, match="'attn_peak', which task 'needle'") as err:
        task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "target:", "attn_peak")
    assert "did you mean 'attention_peak'" in (err.value.hint or "")
    _failed_cleanly(train(spec, tmp_path / "run"), _cli_at(spec, "target:", "attn_peak"))


def test_task_with_an_unregistered_metric_points_at_train_task(tmp_path: Path) -> None:
    """A task listing a metric nobody registered fails before training, at train.task."""
    spec = _spec(tmp_path, "task: needle", "task: half_done")
    spec.write_text(spec.read_text().replace("options: {vocab: 32, classes: 4, length: 12}",
                                              "options: {}"))
    spec.write_text(spec.read_text().replace(
        "target: {accuracy: 0.95, attention_peak: 0.8}", "target: {}"))
    with TASKS.scoped():
        @register_task("half_done")
        class HalfDone(Task):
            provides = {"tokens": "tokens"}
            metrics = ("acuracy",)

        with pytest.raises(TrainingError, match="metric 'acuracy'") as err:
            task_for(load_spec(spec), None, 0)
    _located(err.value, spec, "task: half_done", "half_done")
    assert "did you mean 'accuracy'" in (err.value.hint or "")


def test_batch_that_does_not_split_over_processes_points_at_train_batch(
        tmp_path: Path, cli) -> None:
    """The spec's batch not divisible by --nproc is located at train.batch; a --batch
    given on the command line names the spec file; nothing starts, nothing is written."""
    res = cli("train", GA, "--nproc", "3", "--out",
              tmp_path / "run")
    _failed_cleanly(res, _cli_at(GA, "  batch: 32", "32"))
    res = cli("train", GA, "--batch", "5", "--nproc", "2",
              "--out", tmp_path / "run")
    _failed_cleanly(res, str(GA))
    assert not (tmp_path / "run").exists()


# --- the task's data and the spec's inputs and outputs --------------------------------

def test_task_without_data_for_an_input_points_at_its_type(tmp_path: Path, train) -> None:
    """A task giving no data of an input's type is located at the input's type, before
    the output directory is touched: training again into it afterwards works."""
    with pytest.raises(TrainingError, match="no 'tokens' data") as err:
        t = task_for(load_spec(GA), "karate", 0)
        bind_inputs(load_spec(GA), t, t.batch(2))
    _located(err.value, GA, "tokens: {type: tokens", "tokens,")
    out = tmp_path / "run"
    res = train(GA, out, "--task", "karate")
    _failed_cleanly(res, _cli_at(GA, "tokens: {type: tokens", "tokens,"))
    assert not out.exists()
    assert train(GA, out).exit_code == 0


def test_ambiguous_fields_point_at_the_input_name(tmp_path: Path) -> None:
    """Two fields of an input's type, neither of its name: located at the input's key."""
    with TASKS.scoped():
        @register_task("two_texts")
        class TwoTexts(Task):
            provides = {"left": "tokens", "right": "tokens"}

            def sample(self, rng: Any, size: int, split: str) -> dict[str, Any]:
                import numpy as np

                z = np.ones((size, 3), dtype=np.int64)
                return {"left": z, "right": z, "target": z[:, 0]}

        graph = load_spec(GA)
        task = task_for(graph, "two_texts", 0)
        with pytest.raises(TrainingError, match="several 'tokens' fields") as err:
            bind_inputs(graph, task, task.batch(2))
    _located(err.value, GA, "tokens: {type: tokens", "tokens:")
    assert "left, right" in (err.value.hint or "")


def test_ids_over_the_vocab_point_at_the_inputs_vocab() -> None:
    """Task data with ids past the input's vocab is located at that vocab."""
    graph = load_spec(GA)
    task = task_for(graph, None, 0, {"vocab": 40})
    with pytest.raises(TrainingError, match="vocab is 32") as err:
        bind_inputs(graph, task, task.batch(64))
    _located(err.value, GA, "tokens: {type: tokens", "vocab,")


def test_data_of_another_shape_points_at_the_input(tmp_path: Path) -> None:
    """Images of another size than the input's are located at the input, before training."""
    spec = _spec(tmp_path, "options: {canvas: 32,", "options: {canvas: 40,",
                 base=ROOT / "specs" / "glimpse_soft.yaml")
    with pytest.raises(TrainingError, match="does not fit") as err:
        run(RunConfig(spec=str(spec), steps=1, batch=2, out=str(tmp_path / "run"),
                      quiet=True))
    _located(err.value, spec, "image: {type: image", "{type")
    assert not (tmp_path / "run").exists()


def test_spec_without_logits_points_at_outputs(tmp_path: Path, train) -> None:
    """Training a spec that declares no 'logits' output is refused at its outputs: key,
    before anything is written."""
    spec = _spec(tmp_path, "outputs: {logits: logits,", "outputs: {scores: logits,")
    out = tmp_path / "run"
    _failed_cleanly(train(spec, out), _cli_at(spec, "outputs:", "outputs"))
    assert not out.exists()


def test_logits_of_the_wrong_shape_point_at_the_output(tmp_path: Path) -> None:
    """Logits whose shape does not fit the task's targets are located at the output's
    reference in the spec."""
    import attngraph

    spec = _spec(tmp_path, "outputs: {logits: logits,", "outputs: {logits: x,")
    graph = load_spec(spec)
    task = task_for(graph, None, 0)
    model = attngraph.compile(graph, seed=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(TrainingError, match="output 'logits' has shape") as err:
        train_step(model, graph, task, task.batch(2), opt)
    _located(err.value, spec, "outputs:", "x,")


# --- attend ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short run of global_attention (its test batch: 16 examples)."""
    out = tmp_path_factory.mktemp("attend") / "run"
    run(RunConfig(spec=str(GA), steps=1, batch=4, eval_size=16, out=str(out), quiet=True))
    return out


def test_example_outside_the_test_batch_names_the_run(trained: Path, tmp_path: Path, cli) -> None:
    """--example past the run's test batch is an error at the run directory, with the
    valid range; no picture is drawn."""
    res = cli("attend", trained, "--example", "16", "-o", tmp_path / "a.png")
    err = _failed_cleanly(res, str(trained))
    assert "outside the test batch of 16" in err and "between 0 and 15" in err
    assert not (tmp_path / "a.png").exists()


def test_picture_into_a_missing_directory_makes_it(trained: Path, tmp_path: Path, cli) -> None:
    """-o into directories that do not exist makes them, as train makes its --out."""
    out = tmp_path / "new" / "dir" / "a.png"
    cli("attend", trained, "-o", out, code=0)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_picture_under_a_file_is_one_error_naming_the_path(trained: Path,
                                                          tmp_path: Path, cli) -> None:
    """-o whose directory is a file: one error naming the picture's path, no traceback."""
    (tmp_path / "plain").write_text("x")
    for out in (tmp_path / "plain" / "a.png", tmp_path / "plain" / "sub" / "a.png"):
        err = _failed_cleanly(cli("attend", trained, "-o", out), str(out))
        assert "not a directory" in err


def test_picture_into_a_read_only_directory_is_one_error(
        trained: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """A picture that cannot be written (read-only directory) is one error naming its
    path, with a hint; the refusal is simulated, as root may write anywhere."""
    from matplotlib.figure import Figure

    def refuse(self: Any, fname: Any, *a: Any, **k: Any) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(fname))

    monkeypatch.setattr(Figure, "savefig", refuse)
    out = tmp_path / "locked" / "a.png"
    err = _failed_cleanly(cli("attend", trained, "-o", out), str(out))
    assert "cannot write the picture: permission denied" in err


@pytest.mark.skipif(__import__("os").geteuid() == 0,
                    reason="root writes into read-only directories")
def test_picture_into_a_really_read_only_directory(trained: Path, tmp_path: Path, cli) -> None:
    """The same with a directory without write permission."""
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        out = locked / "a.png"
        assert "cannot write the picture" in _failed_cleanly(cli("attend", trained, "-o", out),
                                                             str(out))
    finally:
        locked.chmod(0o755)


def test_picture_of_an_unknown_format_is_refused(trained: Path, tmp_path: Path, cli) -> None:
    """A suffix matplotlib cannot write is refused at the path before any drawing; a name
    without a suffix becomes a .png, and the printed path says so."""
    bad = tmp_path / "a.bmpx"
    assert ".png" in _failed_cleanly(cli("attend", trained, "-o", bad), str(bad))
    res = cli("attend", trained, "-o", tmp_path / "plain_name", code=0)
    assert (tmp_path / "plain_name.png").is_file()
    assert str(tmp_path / "plain_name.png") in res.stdout


def test_run_of_a_spec_without_attention_output_points_into_its_spec(tmp_path: Path, cli) -> None:
    """attend on a run whose spec declares no attention output is located at the
    outputs: key of the spec it was trained from (the stored text is shown)."""
    spec = _spec(tmp_path, "outputs: {logits: logits, attention: p}",
                 "outputs: {logits: logits}")
    spec.write_text(spec.read_text().replace(", attention_peak: 0.8}", "}"))
    out = tmp_path / "run"
    run(RunConfig(spec=str(spec), steps=1, batch=4, eval_size=4, out=str(out), quiet=True))
    err = _failed_cleanly(cli("attend", out), _cli_at(spec, "outputs:", "outputs"))
    assert "declares no attention output" in err and "outputs: {logits: logits}" in err


def test_output_of_a_shape_attend_cannot_draw_points_at_it() -> None:
    """An attention output attend cannot draw is located at its reference in outputs:."""
    graph = load_spec(GA)
    with pytest.raises(TrainingError, match="cannot draw output 'attention'") as err:
        pick_view(graph, {"attention": torch.tensor(0.5)})
    _located(err.value, GA, "outputs:", "p}")


def test_draw_refuses_an_example_outside_the_batch_at_the_spec(tmp_path: Path) -> None:
    """draw() called with a batch and an example past it names the spec's file."""
    graph = load_spec(GA)
    task = task_for(graph, None, 0)
    batch = task.batch(2, split="valid")
    with pytest.raises(TrainingError, match="outside the test batch of 2") as err:
        draw(graph, task, {}, batch, tmp_path / "a.png", example=2)
    assert _where(err.value.loc) == (str(GA), 0, 0) and err.value.hint
