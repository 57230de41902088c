"""The heatmap picture of `attngraph attend` names its axes by what they run over: a
`vectors` input's items by its field name and index (not a "step" axis), a labels
input's steps, the output's name on the one row of weights [N]; an input's padding is
cut from its axis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

matplotlib = pytest.importorskip("matplotlib")

import attngraph  # noqa: E402
from attngraph.frontend import load_spec, loads_spec  # noqa: E402
from attngraph.train.pictures.attend import draw_model  # noqa: E402
from attngraph.train.pictures.matrix import heatmap_axes, matrix  # noqa: E402
from attngraph.train.pictures.plot import pyplot  # noqa: E402
from attngraph.train.tasks.lookup import task_for  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

POOLED = """\
attngraph: 1
name: pooled_frames
dims: {feat: 4, classes: 2}
inputs:
  frames: {type: vectors, dim: feat}
nodes:
  score:  {kind: scorer, fn: additive, query: {learned: feat}, key: frames}
  p:      {kind: softmax, scores: score}
  z:      {kind: readout, weights: p, values: frames}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, attention: p}
"""


def _svg_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_axes_are_named_after_the_inputs_they_run_over() -> None:
    """[T, N] over a vectors input's frames and a labels input's steps; [N] alone has no
    row axis; an axis over no input keeps the generic name with its length's."""
    speech = load_spec(ROOT / "specs" / "speech_recognition.yaml")
    cols, rows = heatmap_axes(speech, "attention", rows=True)
    assert (cols.name, cols.input) == ("frames: item (index)", "frames")
    assert rows is not None and (rows.name, rows.input) == ("target: step", "target")
    pooled = loads_spec(POOLED, "pooled.yaml")
    cols, rows = heatmap_axes(pooled, "attention", rows=False)
    assert cols.name == "frames: item (index)" and rows is None
    memory = load_spec(ROOT / "specs" / "ntm_copy.yaml")
    cols, _ = heatmap_axes(memory, "weights", rows=True)
    assert cols.input is None and not cols.name.startswith("step")


def test_the_speech_picture_has_a_frames_axis_with_padding_cut(tmp_path: Path) -> None:
    """speech_recognition's weights [T, N] are drawn target steps down and the example's
    own frames across (its padding cut), each axis named; the picture file says so."""
    graph = load_spec(ROOT / "specs" / "speech_recognition.yaml")
    task = task_for(graph, None, 0)
    batch = task.batch(8, split="valid")
    lengths = batch["frames_mask"].sum(1)
    k = int(lengths.argmin())
    assert int(lengths[k]) < batch["frames"].shape[1]  # an example with padding
    model = attngraph.compile(graph, seed=0).eval()
    with torch.no_grad():
        out = model(**{n.id: batch[n.id] for n in graph.inputs},
                    **{f"{n.id}_mask": batch[f"{n.id}_mask"] for n in graph.inputs
                       if f"{n.id}_mask" in batch})
    plt = pyplot()
    fig, ax = plt.subplots()
    what = matrix(ax, out["attention"][k].float(), {key: v[k] for key, v in batch.items()},
                  graph, "attention")
    assert ax.get_xlabel() == "frames: item (index)" and ax.get_ylabel() == "target: step"
    assert ax.images[0].get_array().shape[1] == int(lengths[k])
    assert what == "'attention' weights per target: step"
    plt.close(fig)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text as text, to read back
        path, view = draw_model(graph, task, model, tmp_path / "speech.svg", example=k, size=8)
    assert view == "matrix"
    assert "frames: item (index)" in _svg_text(path)


def test_a_data_run_over_vectors_shows_its_items_not_steps(tmp_path: Path, cli) -> None:
    """A run trained on a JSONL of vectors draws its pooling weights [N] over the
    example's frames by index, its one row named by the output: no "step" axis."""
    spec = tmp_path / "pooled.yaml"
    spec.write_text(POOLED)
    data = tmp_path / "frames.jsonl"
    g = torch.Generator().manual_seed(0)
    with data.open("w") as f:
        for i in range(16):
            n = 3 + i % 4
            f.write(json.dumps({"frames": torch.rand(n, 4, generator=g).tolist(),
                                "label": "ab"[i % 2]}) + "\n")
    run = tmp_path / "run"
    res = cli("train", spec, "--data", data, "--steps", "2",
              "--out", run, "--quiet", code=0)
    pic = tmp_path / "a.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        res = cli("attend", run, "--data", data,
                  "--example", "1", "-o", pic)
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"{pic} (matrix)"
    text = _svg_text(pic)
    assert "frames: item (index)" in text and ">attention<" in text
    assert ">step<" not in text
