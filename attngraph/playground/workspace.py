"""The files a playground may open and save: the catalog, and one folder of the user's.

Specs are named by a source and a name: ``catalog:global_attention`` and
``mechanisms:alibi`` (read only), ``file:sub/my_spec.yaml`` (a path inside the folder
the playground was started with). Every path is resolved, symbolic links followed,
and refused unless it lies inside that folder and ends in ``.yaml`` or ``.yml``;
reading goes through :func:`attngraph.spectext.read_text` (a regular file, bounded)
and saving through :func:`attngraph.fileio.write_file` (whole or not at all).

Trained runs (folders holding ``summary.json`` and ``checkpoint.pt``, written by
``attngraph train``) are found under the folder too; :meth:`Workspace.attention`
draws one's attention picture with :func:`attngraph.train.pictures.attend.attend_run`, which
reads the checkpoint with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, SpecError

__all__ = ["Workspace", "OutsideFolder", "catalog_dirs", "SUFFIXES", "MAX_FILES", "MAX_RUNS"]

SUFFIXES = (".yaml", ".yml")
#: Most of the user's spec files listed (the folder may be large).
MAX_FILES = 400
#: Most trained runs listed.
MAX_RUNS = 200
#: Folders never searched for files or runs.
_SKIP = {".venv", "venv", "node_modules", "__pycache__", ".git", "site-packages"}
#: How deep under the folder files (2) and runs (4) are looked for.
_FILE_DEPTH, _RUN_DEPTH = 2, 4
#: Bytes of a run's summary.json read (it is a few hundred).
_MAX_SUMMARY = 100_000
#: Folders looked into at most, per listing.
_MAX_DIRS = 5000


def catalog_dirs() -> dict[str, Path]:
    """The catalog's folders (``specs/`` and ``mechanisms/``): beside the package in a
    checkout, else in the current folder."""
    here = Path(__file__).resolve().parent.parent.parent
    out: dict[str, Path] = {}
    for name in ("specs", "mechanisms"):
        for base in (here, Path.cwd()):
            if (base / name).is_dir():
                out["catalog" if name == "specs" else name] = base / name
                break
    return out


class OutsideFolder(SpecError):
    """A path that leads out of the playground's folder (the server answers 403)."""


def _refuse(msg: str, where: str, hint: str) -> SpecError:
    return SpecError(msg, SourceLoc(where), hint)


@dataclass
class Workspace:
    """The folder a playground serves files from, and the catalog beside it."""

    root: Path
    catalogs: dict[str, Path] = field(default_factory=catalog_dirs)
    _attention_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()

    # -- paths ---------------------------------------------------------------
    def resolve(self, rel: object) -> Path:
        """``rel`` as a spec file inside the folder; anything else is refused."""
        text = str(rel or "")
        if not text or "\x00" in text or len(text) > 500:
            msg = "no file path given"
            raise _refuse(msg, "path", "give a path inside the folder")
        path = (self.root / text).resolve()
        if not path.is_relative_to(self.root):
            msg = f"'{text[:100]}' is outside the playground's folder"
            raise OutsideFolder(msg, SourceLoc(text[:100]),
                                f"open and save files inside {self.root}")
        if path.suffix.lower() not in SUFFIXES:
            msg = f"'{text}' is not a spec file"
            raise _refuse(msg, text, "spec files end in .yaml or .yml")
        return path

    def _walk(self, depth: int) -> list[tuple[Path, list[str], list[str]]]:
        """Folders under the root to ``depth``, hidden and virtual-env ones skipped."""
        out = []
        for top, dirs, files in os.walk(self.root):
            here = Path(top)
            level = len(here.relative_to(self.root).parts)
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP
                             and level < depth)
            out.append((here, dirs, sorted(files)))
            if len(out) >= _MAX_DIRS:
                break
        return out

    # -- listing and opening -------------------------------------------------
    def specs(self) -> list[dict[str, str]]:
        """Every spec the page can open: ``{id, group, name}``, catalog first."""
        rows: list[dict[str, str]] = []
        for group, folder in self.catalogs.items():
            rows += [{"id": f"{group}:{p.stem}", "group": group, "name": p.stem}
                     for p in sorted(folder.glob("*.yaml"))]
        files = []
        for here, _dirs, names in self._walk(_FILE_DEPTH - 1):
            files += [here / n for n in names if Path(n).suffix.lower() in SUFFIXES]
            if len(files) >= MAX_FILES:
                break
        for p in files[:MAX_FILES]:
            rel = p.relative_to(self.root).as_posix()
            rows.append({"id": f"file:{rel}", "group": "file", "name": rel})
        return rows

    def open(self, spec_id: object) -> dict[str, Any]:
        """``{id, name, text, path, writable}`` of a listed spec (see :meth:`specs`)."""
        from attngraph.source import MAX_BYTES
        from attngraph.spectext import read_text

        group, _, name = str(spec_id or "").partition(":")
        if group == "file":
            path = self.resolve(name)
            rel = path.relative_to(self.root).as_posix()
            return {"id": f"file:{rel}", "name": rel, "path": rel, "writable": True,
                    "text": read_text(str(path), MAX_BYTES)}
        folder = self.catalogs.get(group)
        stems = {p.stem: p for p in folder.glob("*.yaml")} if folder is not None else {}
        if name not in stems:  # only names listed: never a path built from the request
            msg = f"no spec '{spec_id}'"
            raise _refuse(msg, str(spec_id)[:100],
                          "choose one from the list (catalog:NAME, mechanisms:NAME, file:PATH)")
        return {"id": f"{group}:{name}", "name": f"{group}/{name}.yaml", "path": None,
                "writable": False, "text": read_text(str(stems[name]), MAX_BYTES)}

    def save(self, rel: object, text: str) -> dict[str, Any]:
        """Write ``text`` to the spec file ``rel`` inside the folder, whole."""
        from attngraph.fileio import write_file
        from attngraph.source import MAX_BYTES
        from attngraph.spectext import check_text

        path = self.resolve(rel)
        if not path.parent.is_dir():
            msg = f"no folder '{path.parent.relative_to(self.root)}' to save into"
            raise _refuse(msg, str(rel), "save into a folder that exists")
        shown = path.relative_to(self.root).as_posix()
        check_text(text, shown, MAX_BYTES)
        existed = path.exists()
        write_file(path, text, error=SpecError)
        return {"path": shown, "id": f"file:{shown}", "bytes": len(text.encode("utf-8")),
                "created": not existed}

    # -- trained runs ----------------------------------------------------------
    def runs(self, spec_name: str | None = None) -> list[dict[str, Any]]:
        """Trained runs under the folder (of ``spec_name``'s spec when given)."""
        out: list[dict[str, Any]] = []
        for here, _dirs, names in self._walk(_RUN_DEPTH):
            if "summary.json" not in names or "checkpoint.pt" not in names:
                continue
            try:
                with open(here / "summary.json", "rb") as f:  # a run's own small file
                    summary = json.loads(f.read(_MAX_SUMMARY))
            except (OSError, ValueError, RecursionError):
                continue
            spec = summary.get("spec") if isinstance(summary, dict) else None
            if not isinstance(spec, str) or (spec_name and spec != spec_name):
                continue
            out.append({"run": here.relative_to(self.root).as_posix() or ".", "spec": spec,
                        "task": str(summary.get("task", ""))})
            if len(out) >= MAX_RUNS:
                break
        return out

    def attention(self, rel: object) -> bytes:
        """The PNG of what the run in folder ``rel`` attended to (its first test example).

        A run trained on a data file keeps no examples: its newest ``attention*.png``
        (from ``attngraph attend``) is shown instead, when there is one.
        """
        from attngraph.errors import TrainingError
        from attngraph.train.pictures.attend import attend_run

        text = str(rel or "")
        run = (self.root / text).resolve()
        listed = {r["run"] for r in self.runs()}
        shown = run.relative_to(self.root).as_posix() if run.is_relative_to(self.root) else ""
        if shown not in listed and (shown or ".") not in listed:
            msg = f"no trained run '{text[:100]}' in the playground's folder"
            raise _refuse(msg, text[:100], "train one with: attngraph train SPEC --out DIR")
        with self._attention_lock, tempfile.TemporaryDirectory() as tmp:
            try:
                out, _view = attend_run(run, example=0, out=Path(tmp) / "attention.png")
                return out.read_bytes()
            except TrainingError:
                kept = sorted(run.glob("attention*.png"), key=lambda p: p.stat().st_mtime)
                if kept:
                    return kept[-1].read_bytes()
                raise
