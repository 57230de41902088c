"""The seeds mutants start from: every catalog spec and every whole spec in the docs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "Seed", "seeds", "doc_specs"]

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Seed:
    """A spec text and where it came from (``specs/x.yaml`` or ``docs/...md:LINE``)."""

    name: str
    text: str


def _is_spec(text: str) -> bool:
    for ln in text.splitlines():
        if ln.strip() and not ln.lstrip().startswith("#"):
            return ln.strip().startswith("attngraph: 1")
    return False


def doc_specs(path: Path) -> list[Seed]:
    """Every fenced ``yaml`` block of a markdown file that is a whole, valid spec.

    Blocks marked with a comment before them (``<!-- error: ... -->`` for examples of
    errors, ``<!-- large -->``, ``<!-- after-python -->`` for specs that need Python
    registered first) are left out.
    """
    out: list[Seed] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        text = "\n".join(lines[i + 1:j]) + "\n"
        prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        marked = re.match(r"^<!--.*-->$", prev) is not None
        if fence.group(1) == "yaml" and _is_spec(text) and not marked:
            out.append(Seed(f"{path.relative_to(ROOT)}:{i + 2}", text))
        i = j + 1
    return out


def seeds(root: Path = ROOT) -> list[Seed]:
    """The catalog specs, then the docs' specs, in a stable order."""
    out = [Seed(str(p.relative_to(root)), p.read_text(encoding="utf-8"))
           for p in sorted((root / "specs").glob("*.yaml"))]
    out += doc_specs(root / "docs" / "spec-language.md")
    return out
