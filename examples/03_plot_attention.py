"""Train global attention briefly and plot its attention weights over the words.

    python examples/03_plot_attention.py [OUT.png]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from attngraph.train.engine.loop import train
from attngraph.train.pictures.attend import draw

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)  # these models are tiny: more threads only add overhead


def main(out: str = "attention.png", steps: int = 150) -> Path:
    res = train(ROOT / "specs" / "global_attention.yaml", steps=steps, seed=0)
    print({k: round(v, 3) for k, v in res.metrics.items()})
    from attngraph import load_spec
    from attngraph.train.tasks.lookup import bind_inputs

    graph = load_spec(ROOT / "specs" / "global_attention.yaml")
    batch = res.task.batch(4, split="test")
    res.model.eval()
    with torch.no_grad():
        outputs = res.model(**bind_inputs(graph, res.task, batch))
    print("attention of example 0:", [round(p, 2) for p in outputs["attention"][0].tolist()])
    path, view = draw(graph, res.task, outputs, batch, out, example=0)
    print(f"wrote {path} ({view})")
    return path


if __name__ == "__main__":
    main(*sys.argv[1:2])
