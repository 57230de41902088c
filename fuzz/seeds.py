"""The seeds mutants start from: every catalog spec, every mechanism, every whole spec in
the docs, and the fuzzer's own seeds (:data:`OWN`: specs that use the open algebra)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "OWN", "Block", "Seed", "blocks", "doc_specs", "documents", "is_spec",
           "seeds"]

ROOT = Path(__file__).resolve().parent.parent
#: The fuzzer's own seeds: YAML documents separated by ``---`` lines.
OWN = ("fuzz/formula_seeds.yaml",)


@dataclass(frozen=True)
class Seed:
    """A spec text and where it came from (``specs/x.yaml`` or ``docs/...md:LINE``)."""

    name: str
    text: str


@dataclass(frozen=True)
class Block:
    """One fenced code block of a markdown file: its language, text, first line and
    the marker comment before it (``<!-- error: x.yaml -->`` gives ``error: x.yaml``)."""

    lang: str
    text: str
    line: int
    marker: str


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file, with the marker comment before it."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence is None:
            i += 1
            continue
        prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        mark = re.match(r"^<!--\s*(.*?)\s*-->$", prev)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        out.append(Block(fence.group(1), "\n".join(lines[i + 1:j]) + "\n", i + 2,
                         mark.group(1) if mark else ""))
        i = j + 1
    return out


def is_spec(text: str) -> bool:
    """True when the first line that is not a comment is ``attngraph: 1``."""
    for ln in text.splitlines():
        if ln.strip() and not ln.lstrip().startswith("#"):
            return ln.strip().startswith("attngraph: 1")
    return False


def doc_specs(path: Path) -> list[Seed]:
    """Every fenced ``yaml`` block of a markdown file that is a whole, valid spec.

    Blocks with a marker comment (``<!-- error: ... -->`` for examples of errors,
    ``<!-- large -->``, ``<!-- after-python -->`` for specs that need Python
    registered first) are left out.
    """
    return [Seed(f"{path.relative_to(ROOT)}:{b.line}", b.text) for b in blocks(path)
            if b.lang == "yaml" and is_spec(b.text) and not b.marker]


def documents(path: Path, root: Path = ROOT) -> list[Seed]:
    """Every spec of a multi-document YAML file (documents split at ``---`` lines), each
    named ``path:LINE`` by its first line."""
    out: list[Seed] = []
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = 0
    for i in range(len(lines) + 1):
        if i == len(lines) or lines[i].rstrip() == "---":
            text = "".join(lines[start:i])
            if is_spec(text):
                out.append(Seed(f"{path.relative_to(root)}:{start + 1}", text))
            start = i + 1
    return out


def seeds(root: Path = ROOT) -> list[Seed]:
    """The catalog specs, the mechanisms of the literature, the docs' specs, then the
    fuzzer's own, in a stable order."""
    out = [Seed(str(p.relative_to(root)), p.read_text(encoding="utf-8"))
           for folder in ("specs", "mechanisms")
           for p in sorted((root / folder).glob("*.yaml"))]
    out += doc_specs(root / "docs" / "spec-language.md")
    for own in OWN:
        if (root / own).is_file():
            out += documents(root / own, root)
    return out
