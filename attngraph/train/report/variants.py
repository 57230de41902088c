"""Variants of specs for ``attngraph compare``: overrides ``PATH=VALUE`` on the YAML.

An override names a place in a spec by its keys from the document's root,
joined by dots (list items by their index): ``nodes.score.fn=dot``,
``train.options.length=16``, ``blocks.decode.nodes.score.key={ref: enc, detach: true}``.
The value is read as YAML (``4`` is a number, ``dot`` a string, ``{...}`` a
map). Every key up to the last must exist in the spec, and the last one's
parent must be a map (a new field may be added: the spec's own validation then
judges it) or a list holding that index. A bad override is one
:class:`~attngraph.errors.SpecError` located in the override's own text, with
the keys that exist there.

:func:`parse_set` reads ``--set PATH=VALUE``; :func:`parse_vary` reads
``--vary NAME:PATH[+PATH...]=V1,V2,...`` (several paths set to the same value,
e.g. the heads of q, k and v); :func:`variants` makes the list of
:class:`Variant` (each spec, times every combination of the ``--vary`` values),
and :func:`write_variant` writes a variant's spec text, which is then loaded and
trained as any spec file.

Examples
--------
>>> o = parse_set("nodes.score.fn=dot")
>>> o.path, o.value
(('nodes', 'score', 'fn'), 'dot')
>>> doc = {"nodes": {"score": {"kind": "scorer", "fn": "additive"}}}
>>> apply(doc, [o])["nodes"]["score"]["fn"]
'dot'
>>> v = parse_vary("heads:nodes.q.heads+nodes.k.heads=1,4")
>>> v.name, [p for p, _ in v.choices[0]], [c[0][1].value for c in v.choices]
('heads', [('nodes', 'q', 'heads'), ('nodes', 'k', 'heads')], [1, 4])
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from attngraph.errors import SourceLoc, SpecError, did_you_mean

__all__ = ["Override", "Vary", "Variant", "parse_set", "parse_vary", "apply", "variants",
           "write_variant", "split_values"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Override:
    """Set ``path`` (keys from the root) to ``value``; ``text`` and ``at`` say where it
    was given (``--set``/``--vary`` and the option's text) for error messages."""

    path: tuple[str | int, ...]
    value: Any
    text: str
    at: str = "--set"
    #: 1-based column of the path within ``text``
    col: int = 1

    def loc(self, col: int | None = None) -> SourceLoc:
        """Where this override is written, pointing at ``col`` (default: its path)."""
        return SourceLoc(self.at, 1, col or self.col, self.text)

    @property
    def label(self) -> str:
        """``path=value`` as given."""
        return f"{'.'.join(map(str, self.path))}={_show(self.value)}"


@dataclass(frozen=True)
class Vary:
    """``--vary NAME:PATHS=V1,V2``: one choice per value, each a list of overrides."""

    name: str
    values: tuple[str, ...]
    choices: tuple[tuple[tuple[tuple[str | int, ...], Override], ...], ...]


@dataclass(frozen=True)
class Variant:
    """One thing ``compare`` trains: a spec file under some overrides."""

    name: str
    spec: str
    overrides: tuple[Override, ...] = ()


def _show(value: Any) -> str:
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=10_000).strip().removesuffix(
        "\n...").strip()


def _value(text: str, loc: SourceLoc) -> Any:
    """A value as YAML (a bare word stays a string)."""
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError as exc:
        msg = f"the value {text!r} is not valid YAML: {getattr(exc, 'problem', exc)}"
        raise SpecError(msg, loc, "write a number, a word, or a flow map such as "
                        "{ref: enc, detach: true}") from None


def _path(text: str, loc: SourceLoc) -> tuple[str | int, ...]:
    """Dot-separated keys; a part of digits is a list index."""
    parts = text.strip().split(".")
    if not text.strip() or any(not p for p in parts):
        msg = f"{text!r} is not a path of keys joined by dots"
        raise SpecError(msg, loc, "e.g. nodes.score.fn or train.options.length")
    return tuple(int(p) if p.isdigit() else p for p in parts)


def parse_set(text: str, at: str = "--set") -> Override:
    """Read ``PATH=VALUE`` (see the module's notes).

    Raises
    ------
    SpecError
        No ``=``, an empty path, or a value that is not YAML; located in ``text``.
    """
    path, eq, value = text.partition("=")
    if not eq:
        msg = f"{text!r} is not PATH=VALUE"
        raise SpecError(msg, SourceLoc(at, 1, 1, text), "e.g. --set nodes.score.fn=dot")
    loc = SourceLoc(at, 1, 1, text)
    return Override(_path(path, loc), _value(value, SourceLoc(at, 1, len(path) + 2, text)),
                    text, at)


def split_values(text: str) -> list[str]:
    """Split at the commas outside brackets and braces.

    >>> split_values("1,4,{ref: enc, detach: true}")
    ['1', '4', '{ref: enc, detach: true}']
    """
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return [*out, cur]


def parse_vary(text: str) -> Vary:
    """Read ``NAME:PATH[+PATH...]=V1,V2,...`` (see the module's notes).

    Raises
    ------
    SpecError
        A missing or bad name, path or value list; located in ``text``.
    """
    name, colon, rest = text.partition(":")
    if not colon or not _NAME.fullmatch(name.strip()):
        msg = f"{text!r} is not NAME:PATH=V1,V2"
        raise SpecError(msg, SourceLoc("--vary", 1, 1, text),
                        "start with a name for the variable, e.g. --vary heads:nodes.q.heads=1,4")
    paths, eq, values = rest.partition("=")
    start = len(name) + 2
    if not eq:
        msg = f"{text!r} has no '=' before its values"
        raise SpecError(msg, SourceLoc("--vary", 1, start, text), "e.g. heads:nodes.q.heads=1,4")
    keys, col = [], start
    for p in paths.split("+"):
        keys.append((_path(p, SourceLoc("--vary", 1, col, text)), col))
        col += len(p) + 1
    vals = split_values(values)
    if len(vals) < 2 or any(not v.strip() for v in vals):
        msg = f"--vary needs at least two values, comma-separated; found {values!r}"
        raise SpecError(msg, SourceLoc("--vary", 1, start + len(paths) + 1, text),
                        "e.g. heads:nodes.q.heads=1,4")
    choices = []
    vcol = start + len(paths) + 1
    for v in vals:
        value = _value(v, SourceLoc("--vary", 1, vcol, text))
        vcol += len(v) + 1
        choices.append(tuple((k, Override(k, value, text, "--vary", c)) for k, c in keys))
    return Vary(name.strip(), tuple(v.strip() for v in vals), tuple(choices))


def apply(data: Any, overrides: list[Override] | tuple[Override, ...]) -> Any:
    """A copy of the document ``data`` with ``overrides`` applied in order.

    Raises
    ------
    SpecError
        A key the spec lacks on the way (with the keys there and a "did you
        mean"), or a step into something that is not a map or list; located at
        that key in the override's text.
    """
    out = copy.deepcopy(data)
    for o in overrides:
        here, col = out, o.col
        for i, key in enumerate(o.path):
            last = i == len(o.path) - 1
            where = ".".join(map(str, o.path[:i])) or "the spec"
            if isinstance(here, dict):
                k = str(key)
                if not last and k not in here:
                    msg = f"{where} has no key '{k}'"
                    known = sorted(map(str, here))
                    raise SpecError(msg, o.loc(col), f"{did_you_mean(k, known)}keys there: "
                                    f"{', '.join(known)}")
                if last:
                    here[k] = copy.deepcopy(o.value)
                else:
                    here = here[k]
            elif isinstance(here, list) and isinstance(key, int) and key < len(here):
                if last:
                    here[key] = copy.deepcopy(o.value)
                else:
                    here = here[key]
            else:
                what = (f"a list of {len(here)} items" if isinstance(here, list)
                        else f"the value {_show(here)!r}")
                msg = f"{where} is {what}: it has no '{key}'"
                raise SpecError(msg, o.loc(col), "override a key of a map, or an index "
                                "of a list within its length")
            col += len(str(key)) + 1
    return out


def _slug(text: str) -> str:
    """A folder name from a variant's label."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-") or "variant"


def variants(specs: list[str], sets: list[Override], varies: list[Vary]) -> list[Variant]:
    """Each spec (named by its file's stem), times each combination of ``varies``.

    >>> vs = variants(["specs/a.yaml"], [], [parse_vary("h:nodes.q.heads=1,4")])
    >>> [v.name for v in vs]
    ['h=1', 'h=4']
    """
    stems = [Path(s).stem for s in specs]
    names = [s if stems.count(s) == 1 else f"{s}-{i}" for i, s in enumerate(stems, 1)]
    out = []
    for name, spec in zip(names, specs, strict=True):
        combos = itertools.product(*(range(len(v.values)) for v in varies))
        for combo in combos:
            parts = [f"{v.name}={_slug(v.values[i])}" for v, i in zip(varies, combo, strict=True)]
            label = "_".join(parts)
            full = (f"{name}_{label}" if len(specs) > 1 else label) if parts else name
            extra = [o for v, i in zip(varies, combo, strict=True) for _, o in v.choices[i]]
            out.append(Variant(_slug(full), spec, (*sets, *extra)))
    return out


def write_variant(variant: Variant, text: str, file: str, out: Path) -> tuple[Path, bool]:
    """Write ``variant``'s spec (``text``, read from ``file``, with its overrides) to
    ``out/spec.yaml``, keeping the file's own text when there are no overrides;
    ``(path, changed)``, ``changed`` when an earlier, different spec was there.

    Raises
    ------
    SpecError
        An override that does not fit the spec (see :func:`apply`).
    TrainingError
        When the file cannot be written.
    """
    from attngraph.fileio import read_bytes
    from attngraph.source import loads
    from attngraph.train.store.directory import atomic_write, run_file, write_error

    if variant.overrides:
        doc = loads(text, file)
        data = apply(doc.data, variant.overrides)
        head = "".join(f"#   {o.label}\n" for o in variant.overrides)
        text = (f"# {file} with these overrides (attngraph compare):\n{head}"
                + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100))
    path = out / "spec.yaml"
    try:
        out.mkdir(parents=True, exist_ok=True)
        before = read_bytes(path, run_file("spec.yaml", 1 << 24)).decode(
            "utf-8", "replace") if path.is_file() else None
    except OSError as exc:
        raise write_error(path, exc) from None
    if before != text:
        atomic_write(path, text.encode("utf-8"))
    return path, before is not None and before != text
