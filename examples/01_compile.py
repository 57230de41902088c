"""Load a spec, compile it to a PyTorch module and run it on a batch.

    python examples/01_compile.py [SPEC]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import attngraph
from attngraph import load_spec

ROOT = Path(__file__).resolve().parents[1]


def main(spec: str = str(ROOT / "specs" / "global_attention.yaml")) -> dict[str, torch.Tensor]:
    graph = load_spec(spec)                   # validated, shapes inferred
    print(graph)                              # the IR, one line per node
    model = attngraph.compile(graph, seed=0)  # an nn.Module
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
    tokens = torch.randint(1, 32, (4, 12))    # [B, N] word ids (0 is reserved)
    model.eval()
    with torch.no_grad():
        out = model(tokens=tokens)            # a dict of the declared outputs
    for name, value in out.items():
        print(f"{name:<10} {tuple(value.shape)}")
    return out


if __name__ == "__main__":
    main(*sys.argv[1:2])
