"""Export a spec's diagrams: both views, as Mermaid and DOT text (and SVG with dot).

    python examples/04_export_diagram.py [SPEC] [OUT_DIR]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from attngraph import load_spec
from renderers import render

ROOT = Path(__file__).resolve().parents[1]


def main(spec: str = str(ROOT / "specs" / "global_attention.yaml"),
         out_dir: str = "diagrams") -> list[Path]:
    graph = load_spec(spec)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    formats = ["mermaid", "dot"] + (["svg"] if shutil.which("dot") else [])
    written = []
    for view in ("architecture", "unrolled"):
        for fmt in formats:
            text = render(graph, view, fmt)
            suffix = {"mermaid": "mmd"}.get(fmt, fmt)
            path = out / f"{graph.name}.{view}.{suffix}"
            path.write_text(text if isinstance(text, str) else text.decode("utf-8"))
            written.append(path)
            print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main(*sys.argv[1:3])
