"""What the Python workflow takes as a spec and as data, made into the files a run reads.

``attngraph.fit`` and ``attngraph.save`` take a spec as a path, as YAML text or as
a :class:`~attngraph.ir.graph.Graph`, and data as a path (anything ``--data``
reads), a list of dict records, or a pandas ``DataFrame`` (anything with
``to_dict("records")``; pandas is not needed otherwise). A run reads files, and
stores where they are (``--resume`` reads them again), so in-memory data is
written into the run directory as JSON lines (:data:`TRAIN_FILE`,
:data:`VALID_FILE`) and spec text as :data:`SPEC_FILE`: the run holds everything
it was made from. An error in such data names the records (``<records>:3``, the
third record; ``<DataFrame>:3``, the third row), never the file written.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import AttnGraphError, Diagnostic, SourceLoc, TrainingError
from attngraph.fileio import write_file

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["TRAIN_FILE", "VALID_FILE", "SPEC_FILE", "is_path", "spec_path", "data_path",
           "fields_of", "folder_of", "listlike", "records_of", "table_rows", "named_as",
           "Written"]

TRAIN_FILE = "data-train.jsonl"
VALID_FILE = "data-valid.jsonl"
SPEC_FILE = "spec.yaml"


class Written:
    """The files one call wrote (to remove them again when the run cannot start), and
    the name each stands for in errors."""

    def __init__(self) -> None:
        self.files: list[Path] = []
        self.names: dict[str, str] = {}

    def write(self, path: Path, text: str, name: str | None = None) -> str:
        """Write ``text`` to ``path`` (atomically); errors in it will name ``name``."""
        write_file(path, text, error=TrainingError, parents=True)
        self.files.append(path)
        if name is not None:
            self.names[str(path)] = name
        return str(path)

    def remove(self) -> None:
        """Remove every file written."""
        for p in self.files:
            p.unlink(missing_ok=True)


def is_path(value: object) -> bool:
    """Whether a spec argument is a path (a ``Path``, or one line of text that is not YAML)."""
    if isinstance(value, Path):
        return True
    return isinstance(value, str) and "\n" not in value and not value.lstrip().startswith(
        "attngraph:")


def spec_path(spec: str | Path | Graph, folder: Path, written: Written) -> str:
    """A file holding ``spec``: its own path, its graph's file, or one written in ``folder``.

    Raises
    ------
    TrainingError
        A graph built in code, which has no spec text to store with the run.
    """
    from attngraph.ir.graph import Graph
    from attngraph.source import MAX_BYTES
    from attngraph.spectext import read_text

    if isinstance(spec, Graph):
        text = spec.text
        if text is None:
            msg = f"the graph '{spec.name}' holds no spec text (it was built in code)"
            raise TrainingError(msg, SourceLoc(spec.file), "give the spec's path or its "
                                "YAML text: a run stores the text it was trained from")
        if Path(spec.file).is_file() and read_text(spec.file, MAX_BYTES) == text:
            return spec.file
        return written.write(folder / SPEC_FILE, text)
    if is_path(spec):
        return str(spec)
    if not isinstance(spec, str):
        msg = f"a spec is a path, YAML text or a Graph, not {type(spec).__name__}"
        raise TrainingError(msg, SourceLoc("<spec>"), "e.g. attngraph.fit('specs/"
                            "global_attention.yaml', data)")
    return written.write(folder / SPEC_FILE, spec)


def _plain(value: Any) -> Any:
    """A numpy or pandas value as plain JSON data (json.dumps's ``default``)."""
    if hasattr(value, "tolist"):  # a numpy array or scalar
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (tuple, set)):
        return list(value)
    msg = f"{type(value).__name__} {value!r:.40}"
    raise TypeError(msg)


def fields_of(fields: object) -> dict[str, str]:
    """``fields`` (an input or ``label`` -> its column), checked, as a dict ({} for None).

    Raises
    ------
    TrainingError
        Anything but a mapping of names to column names.
    """
    if fields is None:
        return {}
    if not isinstance(fields, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in fields.items()):
        msg = f"fields maps each input (or 'label') to a column, not {fields!r:.60}"
        raise TrainingError(msg, SourceLoc("fields"), 'e.g. fields={"tokens": "review", '
                            '"label": "stars"}')
    return dict(fields)


def folder_of(out: object) -> Path:
    """The run directory ``out`` names, checked.

    Raises
    ------
    TrainingError
        Anything but a path.
    """
    if not isinstance(out, (str, Path)):
        msg = f"out is the run directory's path, not {type(out).__name__}"
        raise TrainingError(msg, SourceLoc("out"), "e.g. out='runs/mine'")
    return Path(out)


def table_rows(data: Any) -> Any:
    """A pandas DataFrame's rows as dicts (duck-typed: pandas is not imported); anything
    else as given."""
    if hasattr(data, "to_dict") and not isinstance(data, Mapping):
        return data.to_dict("records")
    return data


def listlike(data: Any) -> bool:
    """Whether ``data`` may be a list of records: iterable, and not a mapping, a text,
    bytes or a tensor (whose iteration runs over its first axis, or fails at 0-d)."""
    return (hasattr(data, "__iter__") and not isinstance(data, (Mapping, str, bytes))
            and type(data).__name__ != "Tensor")


def records_of(data: Any, name: str) -> list[Mapping[str, Any]]:
    """The records of a list of dicts or a DataFrame (located as ``name``).

    Raises
    ------
    TrainingError
        Data of another kind, no records, or a record that is not a mapping.
    """
    data = table_rows(data)
    if not listlike(data):
        msg = f"data is a path, a list of records (dicts) or a DataFrame, not " \
            f"{type(data).__name__}"
        raise TrainingError(msg, SourceLoc(name), 'e.g. [{"text": "...", "label": "..."}]')
    out = list(data)
    if not out:
        msg = "no records given"
        raise TrainingError(msg, SourceLoc(name), "give at least one record")
    for i, r in enumerate(out, 1):
        if not isinstance(r, Mapping):
            msg = f"record {i} is a {type(r).__name__}, not a dict of column -> value"
            raise TrainingError(msg, SourceLoc(name, i, 1), 'give dicts, e.g. {"text": '
                                '"...", "label": "..."}')
    return out


def _unwritable(record: Mapping[str, Any], i: int, name: str) -> TrainingError:
    """The error of a record that JSON cannot hold, naming its first such column."""
    for k, v in record.items():
        try:
            json.dumps(v, default=_plain, allow_nan=False)
        except (TypeError, ValueError) as exc:
            what = "a missing value (NaN)" if isinstance(v, float) and v != v else \
                f"{'a number JSON cannot hold' if isinstance(v, float) else str(exc)}"
            msg = f"record {i}: column '{k}' holds {what}"
            break
    else:
        msg = f"record {i} cannot be written as JSON"
    return TrainingError(msg, SourceLoc(name, i, 1), "give text, numbers, booleans or lists "
                         "of them; fill or drop missing values first (e.g. df.dropna())")


def _jsonl(records: list[Mapping[str, Any]], name: str) -> str:
    lines = []
    for i, r in enumerate(records, 1):
        try:
            lines.append(json.dumps({str(k): v for k, v in r.items()}, default=_plain,
                                    ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError):
            raise _unwritable(r, i, name) from None
    return "\n".join(lines) + "\n"


def data_path(data: Any, path: Path, written: Written) -> str:
    """A file holding ``data``: its own path, or its records written to ``path``."""
    if isinstance(data, (str, Path)):
        return str(data)
    name = "<DataFrame>" if hasattr(data, "to_dict") and not isinstance(data, Mapping) \
        else "<records>"
    return written.write(path, _jsonl(records_of(data, name), name), name)


@contextmanager
def named_as(written: Written) -> Iterator[None]:
    """An error in a file written from records, located at the records instead
    (``<records>:LINE``: the record's number; the excerpt is its JSON line)."""
    try:
        yield
    except AttnGraphError as exc:
        if not written.names:
            raise
        def named(text: str) -> str:
            for path, name in written.names.items():
                text = text.replace(path, name)
            return text

        diags = [Diagnostic(SourceLoc(written.names.get(d.loc.file, d.loc.file), d.loc.line,
                                      d.loc.col, d.loc.text), named(d.message),
                            named(d.hint) if d.hint else d.hint)
                 for d in exc.diagnostics]
        raise type(exc)(diags[0].message, diagnostics=diags) from None
