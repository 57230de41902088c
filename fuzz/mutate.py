"""Mutants of a valid spec: grammar-aware edits and plain text damage.

A :class:`Mutator` knows the language from the kinds' own models (kind names,
field names, the choices of ``Literal`` fields, which fields are sizes,
references and blocks) and the seed's own names (node ids, ports, dims, length
symbols, blocks). :meth:`Mutator.mutate` applies one to three operators and
returns the new text with the operators' names; the same seed and random state
give the same mutant, so a case is replayed from its number.

Examples
--------
>>> import random
>>> m = Mutator(random.Random(0))
>>> text, ops = m.mutate("attngraph: 1\\nname: t\\ninputs: {x: {type: vectors, dim: 4}}\\n"
...                      "nodes: {y: {kind: linear, from: x, out: 2}}\\noutputs: {y: y}\\n")
>>> isinstance(text, str) and len(ops) >= 1
True
"""

from __future__ import annotations

import copy
import random
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import yaml

__all__ = ["Grammar", "Mutator", "grammar", "rename"]

#: Names every Python object, dict or ``nn.Module`` has: node ids that must still work.
ATTRIBUTE_NAMES = (
    "clear", "keys", "items", "values", "update", "pop", "get", "copy", "setdefault",
    "train", "eval", "forward", "state_dict", "to", "cuda", "cpu", "type", "half",
    "float", "double", "parameters", "modules", "children", "training", "apply",
    "register_buffer", "add_module", "zero_grad", "extra_repr", "_modules",
    "_parameters", "_buffers", "__class__", "__init__", "__dict__", "__call__",
    "graph", "run", "schedule", "groups", "nodes", "aux", "T", "dump_patches",
    "call_super_init", "compile", "bfloat16", "ipu", "xpu", "mtia", "share_memory",
)
KEYWORDS = ("class", "def", "lambda", "None", "True", "False", "import", "return",
            "if", "for", "in", "not", "is", "and", "or", "yield", "async", "await")
PORTS = ("out", "state", "log_prob", "weights", "index", "location", "cell",
         "logits", "attention", "adjacency", "mask", "read", "x", "0")
NUMBERS: tuple[Any, ...] = (
    0, -1, 1, 2, 3, 7, 64, 1023, 1024, 1025, 65536, 10**6, 10**7, 10**9, 10**12,
    2**31, 2**63, 10**30, 0.5, -0.5, 0.0, -0.0, 1e-300, 1e-45, 1e-8, 1e-3, 1e3,
    1e8, 1e30, 1e300, -1e300, float("inf"), float("-inf"), float("nan"), 1.0000001,
    True, False, None,
)
ODD_STRINGS = (
    "", " ", "x" * 65, "α", "日本", "a.b.c", "a..b", ".x", "x.", "1e9", "null", "~",
    "N", "M", "T", "n", "\t", "a b", "x-y", "€", "\u200b", "\ufeff", "😀", "0x10",
    "-", "*", "&", "!", "%", "@x", "`", "{}", "[]", "{x: 1}", "'", '"',
)
ODD_CHARS = ("\x00", "\x01", "\x7f", "\ufeff", "\u200b", "\r", "\r\n", "\t", "\x0c",
             "\u2028", "\u0301", "😀", "\ud7ff", "\\", "\x85", "\xa0", "\u3000")
TAGS = ("!!int", "!!bool", "!!str", "!!float", "!!null", "!!binary", "!!timestamp",
        "!!seq", "!!map", "!!set", "!!omap", "!!pairs", "!custom", "!",
        "!!python/object/apply:os.system", "!!python/name:os.system",
        "!<tag:yaml.org,2002:int>", "!!merge", "!!value")
PUNCT = ("{", "}", "[", "]", ":", ",", "-", "&", "*", "!", "|", ">", "'", '"', "#",
         "? ", "%YAML 1.1\n---\n", "---\n", "...\n", "<<: ", "@", "`")

Data = Any
Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class Grammar:
    """What the language offers: kinds, their fields and their fields' choices."""

    kinds: tuple[str, ...]
    fields: dict[str, tuple[str, ...]]
    sizes: dict[str, frozenset[str]]
    refs: dict[str, tuple[str, ...]]
    blocks: dict[str, frozenset[str]]
    choices: dict[str, tuple[str, ...]]
    input_types: tuple[str, ...]
    input_fields: tuple[str, ...]
    scorer_fns: tuple[str, ...]
    all_fields: tuple[str, ...] = field(default=())


def _literals(annotation: object) -> list[str]:
    """Every string inside ``Literal[...]`` anywhere in an annotation."""
    out: list[str] = []
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        out += [a for a in typing.get_args(annotation) if isinstance(a, str)]
    for a in typing.get_args(annotation):
        if a is not annotation:
            out += _literals(a)
    return out


@lru_cache(maxsize=1)
def grammar() -> Grammar:
    """The language as the kinds' models define it (read once)."""
    from attngraph.kinds import SCORERS, spec_kinds
    from attngraph.spec import models as m
    from attngraph.spec.fields import fields_of

    kinds = spec_kinds()
    fields: dict[str, tuple[str, ...]] = {}
    sizes: dict[str, frozenset[str]] = {}
    refs: dict[str, tuple[str, ...]] = {}
    blocks: dict[str, frozenset[str]] = {}
    choices: dict[str, tuple[str, ...]] = {}
    for name, model in sorted(kinds.items()):
        f = fields_of(model)
        fields[name] = tuple(model.model_fields)
        sizes[name] = f.sizes
        refs[name] = f.refs
        blocks[name] = f.blocks
        for fname, info in model.model_fields.items():
            lits = _literals(info.annotation)
            if lits and fname != "kind":
                choices[fname] = tuple(sorted(set(choices.get(fname, ())) | set(lits)))
    inp = m.InputSpec
    input_types = tuple(sorted(set(_literals(inp.model_fields["type"].annotation))))
    everything = sorted({f for fs in fields.values() for f in fs} | set(inp.model_fields))
    return Grammar(tuple(sorted(kinds)), fields, sizes, refs, blocks, choices, input_types,
                   tuple(inp.model_fields), tuple(SCORERS.names()), tuple(everything))


@dataclass
class Names:
    """The names a seed defines, gathered once per mutant."""

    nodes: list[str]
    inputs: list[str]
    blocks: list[str]
    dims: list[str]
    lengths: list[str]

    @classmethod
    def of(cls, data: Data) -> Names:
        nodes: list[str] = []
        blocks: list[str] = []
        if isinstance(data, dict):
            if isinstance(data.get("nodes"), dict):
                nodes += [str(k) for k in data["nodes"]]
            if isinstance(data.get("blocks"), dict):
                for b, body in data["blocks"].items():
                    blocks.append(str(b))
                    if isinstance(body, dict):
                        if isinstance(body.get("nodes"), dict):
                            nodes += [str(k) for k in body["nodes"]]
                        if isinstance(body.get("inputs"), list):
                            nodes += [str(k) for k in body["inputs"]]
        inputs = (list(map(str, data["inputs"])) if isinstance(data, dict)
                  and isinstance(data.get("inputs"), dict) else [])
        dims = (list(map(str, data["dims"])) if isinstance(data, dict)
                and isinstance(data.get("dims"), dict) else [])
        lengths = ["N"]
        if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
            for v in data["inputs"].values():
                if isinstance(v, dict) and isinstance(v.get("length"), str):
                    lengths.append(v["length"])
        return cls(nodes or ["x"], inputs or ["x"], blocks, dims or ["d"], lengths)


def _paths(data: Data, prefix: Path_ = ()) -> list[Path_]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _get(data: Data, path: Path_) -> Data:
    for p in path:
        data = data[p]
    return data


def _node_maps(data: Data) -> list[Path_]:
    """Paths of every ``nodes:`` mapping (top level and in each block)."""
    out: list[Path_] = []
    if not isinstance(data, dict):
        return out
    if isinstance(data.get("nodes"), dict):
        out.append(("nodes",))
    if isinstance(data.get("blocks"), dict):
        for b, body in data["blocks"].items():
            if isinstance(body, dict) and isinstance(body.get("nodes"), dict):
                out.append(("blocks", b, "nodes"))
    return out


def _node_paths(data: Data) -> list[Path_]:
    """Paths of every node's mapping."""
    out: list[Path_] = []
    for mp in _node_maps(data):
        for nid, spec in _get(data, mp).items():
            if isinstance(spec, dict):
                out.append((*mp, nid))
    return out


def rename(data: Data, old: str, new: str) -> Data:
    """``data`` with the name ``old`` replaced by ``new`` as a key and in every reference."""
    pat = re.compile(rf"^{re.escape(old)}(\.|$)")

    def walk(v: Data) -> Data:
        if isinstance(v, dict):
            return {(new if k == old else k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and pat.match(v):
            return pat.sub(lambda m: new + m.group(1), v)
        return v

    return walk(data)


class Mutator:
    """Derives mutants from seed texts with its own random state."""

    def __init__(self, rng: random.Random, gram: Grammar | None = None) -> None:
        self.rng = rng
        self.g = gram or grammar()
        self.data_ops: list[tuple[str, Callable[[Data, Names], Data], int]] = [
            ("delete_key", self.delete_key, 6),
            ("rename_key", self.rename_key, 4),
            ("set_value", self.set_value, 8),
            ("swap_ref", self.swap_ref, 6),
            ("change_kind", self.change_kind, 4),
            ("add_field", self.add_field, 6),
            ("retype", self.retype, 3),
            ("rename_node", self.rename_node, 3),
            ("duplicate_node", self.duplicate_node, 2),
            ("nest_value", self.nest_value, 2),
            ("deep_blocks", self.deep_blocks, 1),
            ("huge_size", self.huge_size, 3),
            ("small_number", self.small_number, 3),
            ("swap_inputs", self.swap_inputs, 2),
        ]
        self.text_ops: list[tuple[str, Callable[[str], str], int]] = [
            ("duplicate_line", self.duplicate_line, 3),
            ("tag", self.tag, 3),
            ("alias", self.alias, 2),
            ("truncate", self.truncate, 2),
            ("odd_chars", self.odd_chars, 2),
            ("splice", self.splice, 2),
            ("deep_brackets", self.deep_brackets, 1),
        ]

    # --- driving -----------------------------------------------------------

    def mutate(self, text: str) -> tuple[str, list[str]]:
        """One to three operators on ``text``; returns the mutant and their names."""
        rng = self.rng
        ops: list[str] = []
        n = rng.choice((1, 1, 1, 2, 2, 3))
        data: Data = yaml.safe_load(text)
        tail: list[tuple[str, Callable[[str], str]]] = []
        for _ in range(n):
            if rng.random() < 0.78:
                name, fn = self._pick(self.data_ops)
                data = fn(copy.deepcopy(data), Names.of(data))
                ops.append(name)
            else:
                tail.append(self._pick(self.text_ops))
        out = self.dump(data) if ops else text
        for name, tfn in tail:
            out = tfn(out)
            ops.append(name)
        return out, ops

    def _pick(self, table: list[tuple[str, Any, int]]) -> tuple[str, Any]:
        total = sum(w for _, _, w in table)
        r = self.rng.uniform(0, total)
        for name, fn, w in table:
            r -= w
            if r <= 0:
                return name, fn
        return table[-1][0], table[-1][1]

    @staticmethod
    def dump(data: Data) -> str:
        try:
            return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
        except yaml.YAMLError:
            return yaml.safe_dump(repr(data))

    # --- values ------------------------------------------------------------

    def ref(self, names: Names) -> str:
        rng = self.rng
        pool = names.nodes + names.inputs
        r = rng.random()
        if r < 0.55:
            return rng.choice(pool)
        if r < 0.8:
            return f"{rng.choice(pool)}.{rng.choice(PORTS)}"
        if r < 0.9:
            return rng.choice(names.dims + names.lengths + names.blocks or ["z"])
        return rng.choice(ODD_STRINGS + ATTRIBUTE_NAMES[:8])

    def value(self, names: Names, fname: str | None = None, depth: int = 0) -> Data:
        """A value for field ``fname``: often of the right sort, sometimes not."""
        rng = self.rng
        g = self.g
        r = rng.random()
        if fname is not None and r < 0.6:
            if fname in g.choices and rng.random() < 0.6:
                return rng.choice(g.choices[fname])
            if fname == "kind":
                return rng.choice(g.kinds)
            if fname == "fn":
                return rng.choice(g.scorer_fns)
            if fname == "type":
                return rng.choice(g.input_types)
            if any(fname in s for s in g.sizes.values()):
                return rng.choice([*names.dims, *NUMBERS[:16]])
            if any(fname in s for s in g.refs.values()) or fname in ("from", "body", "block"):
                if rng.random() < 0.15:
                    return [self.ref(names) for _ in range(rng.randint(0, 3))]
                if rng.random() < 0.15:
                    return {"ref": self.ref(names), "detach": rng.random() < 0.5}
                return self.ref(names)
        r = rng.random()
        if r < 0.3:
            return rng.choice(NUMBERS)
        if r < 0.55:
            return self.ref(names)
        if r < 0.7:
            return rng.choice(ODD_STRINGS + KEYWORDS + g.kinds)
        if depth >= 2:
            return rng.choice(NUMBERS)
        if r < 0.85:
            return [self.value(names, None, depth + 1) for _ in range(rng.randint(0, 3))]
        keys = rng.sample(g.all_fields, k=min(3, len(g.all_fields)))
        return {k: self.value(names, k, depth + 1) for k in keys[: rng.randint(0, 3)]}

    # --- data operators ----------------------------------------------------

    def _some_path(self, data: Data, *, leaf: bool = False, dict_entry: bool = False
                   ) -> Path_ | None:
        paths = [p for p in _paths(data) if p]
        if dict_entry:
            paths = [p for p in paths if isinstance(_get(data, p[:-1]), dict)]
        if leaf:
            paths = [p for p in paths if not isinstance(_get(data, p), (dict, list))]
        return self.rng.choice(paths) if paths else None

    def delete_key(self, data: Data, names: Names) -> Data:
        p = self._some_path(data)
        if p is None:
            return data
        parent = _get(data, p[:-1])
        del parent[p[-1]]
        return data

    def rename_key(self, data: Data, names: Names) -> Data:
        p = self._some_path(data, dict_entry=True)
        if p is None:
            return data
        parent = _get(data, p[:-1])
        new = self.rng.choice((*self.g.all_fields, *ODD_STRINGS[:12], *ATTRIBUTE_NAMES[:10],
                               *names.nodes))
        val = parent.pop(p[-1])
        if new not in parent:
            parent[new] = val
        return data

    def set_value(self, data: Data, names: Names) -> Data:
        p = self._some_path(data)
        if p is None:
            return self.value(names)
        key = p[-1] if isinstance(p[-1], str) else None
        _get(data, p[:-1])[p[-1]] = self.value(names, key)
        return data

    def swap_ref(self, data: Data, names: Names) -> Data:
        known = set(names.nodes + names.inputs)
        paths = [p for p in _paths(data) if p and isinstance(_get(data, p), str)
                 and _get(data, p).split(".")[0] in known and p[-1] != "kind"]
        if not paths:
            return self.set_value(data, names)
        p = self.rng.choice(paths)
        _get(data, p[:-1])[p[-1]] = self.ref(names)
        return data

    def change_kind(self, data: Data, names: Names) -> Data:
        nodes = _node_paths(data)
        if not nodes:
            return self.set_value(data, names)
        spec = _get(data, self.rng.choice(nodes))
        spec["kind"] = self.rng.choice(self.g.kinds)
        return data

    def add_field(self, data: Data, names: Names) -> Data:
        nodes = _node_paths(data)
        if not nodes:
            return self.set_value(data, names)
        spec = _get(data, self.rng.choice(nodes))
        kind = spec.get("kind")
        pool = self.g.fields.get(kind, self.g.all_fields) if isinstance(kind, str) else ()
        fname = self.rng.choice(pool or self.g.all_fields)
        spec[fname] = self.value(names, fname)
        return data

    def retype(self, data: Data, names: Names) -> Data:
        """A value of the wrong sort: a list for a scalar, a string for a mapping."""
        p = self._some_path(data)
        if p is None:
            return data
        old = _get(data, p)
        rng = self.rng
        if isinstance(old, dict):
            new: Data = rng.choice([list(old.values()), str(old), None, 1])
        elif isinstance(old, list):
            new = rng.choice([{str(i): v for i, v in enumerate(old)}, ",".join(map(str, old)),
                              old[0] if old else None])
        elif isinstance(old, bool):
            new = rng.choice(["true", 1, [old]])
        elif isinstance(old, (int, float)):
            new = rng.choice([str(old), [old], {"value": old}, float(old) + 0.5])
        elif isinstance(old, str):
            new = rng.choice([[old], {old: old}, {"ref": old}, 1, True])
        else:
            new = rng.choice([0, "", []])
        _get(data, p[:-1])[p[-1]] = new
        return data

    def rename_node(self, data: Data, names: Names) -> Data:
        """Rename a node (or input) everywhere to an awkward identifier."""
        old = self.rng.choice(names.nodes + names.inputs)
        new = self.rng.choice((*ATTRIBUTE_NAMES, *KEYWORDS, "x" * 64, "_", "__",
                               *names.nodes, *names.inputs, *names.dims, *names.blocks))
        return rename(data, old, new)

    def duplicate_node(self, data: Data, names: Names) -> Data:
        nodes = _node_paths(data)
        if not nodes:
            return data
        p = self.rng.choice(nodes)
        parent = _get(data, p[:-1])
        parent[self.rng.choice((*ATTRIBUTE_NAMES[:6], f"{p[-1]}2"))] = copy.deepcopy(parent[p[-1]])
        return data

    def nest_value(self, data: Data, names: Names) -> Data:
        p = self._some_path(data)
        if p is None:
            return data
        v = _get(data, p)
        for _ in range(self.rng.choice((3, 20, 60, 70, 150))):
            v = [v] if self.rng.random() < 0.5 else {"x": v}
        _get(data, p[:-1])[p[-1]] = v
        return data

    def deep_blocks(self, data: Data, names: Names) -> Data:
        """A chain of blocks, each repeating or calling the next (deep or recursive)."""
        if not isinstance(data, dict):
            return data
        depth = self.rng.choice((2, 5, 40, 300))
        blocks = data.setdefault("blocks", {}) if isinstance(data.get("blocks", {}), dict) else {}
        data["blocks"] = blocks
        for i in range(depth):
            inner = f"chain{i + 1}" if i + 1 < depth else self.rng.choice((f"chain{i}", "chain0"))
            kind = self.rng.choice(("repeat", "block"))
            node: dict[str, Any] = {"kind": kind, "from": "h"}
            if kind == "repeat":
                node.update(block=inner, times=self.rng.choice((1, 2, 8, "d")))
            else:
                node.update(block=inner)
            body = {"inputs": ["h"], "nodes": {"y": node}, "output": "y"}
            if i + 1 == depth:
                body = {"inputs": ["h"], "nodes": {"y": {"kind": "norm", "from": "h"}},
                        "output": "y"}
                if self.rng.random() < 0.3:
                    body = {"inputs": ["h"], "nodes": {"y": node}, "output": "y"}
            blocks[f"chain{i}"] = body
        nodes = data.get("nodes")
        if isinstance(nodes, dict) and nodes:
            src = self.rng.choice(list(nodes))
            nodes["chained"] = {"kind": "repeat", "block": "chain0", "from": src,
                                "times": self.rng.choice((1, 2, 3))}
        return data

    def huge_size(self, data: Data, names: Names) -> Data:
        """A size, a step count or a repeat count made very large."""
        paths = [p for p in _paths(data) if p and isinstance(_get(data, p), int)
                 and not isinstance(_get(data, p), bool)]
        if not paths:
            return self.set_value(data, names)
        p = self.rng.choice(paths)
        _get(data, p[:-1])[p[-1]] = self.rng.choice((10**3, 4096, 10**5, 10**6, 999_999,
                                                    10**9, 2**40))
        return data

    def small_number(self, data: Data, names: Names) -> Data:
        paths = [p for p in _paths(data) if p and isinstance(_get(data, p), (int, float))
                 and not isinstance(_get(data, p), bool)]
        if not paths:
            return self.set_value(data, names)
        p = self.rng.choice(paths)
        _get(data, p[:-1])[p[-1]] = self.rng.choice((0, 0.0, -1, 1e-300, 1e-30, 1e-8, -1e-8,
                                                    1e-45, 5e-324, 1))
        return data

    def swap_inputs(self, data: Data, names: Names) -> Data:
        """An input of another type, length or vocabulary."""
        if not isinstance(data, dict) or not isinstance(data.get("inputs"), dict):
            return data
        if not data["inputs"]:
            return data
        name = self.rng.choice(list(data["inputs"]))
        spec = data["inputs"][name]
        if not isinstance(spec, dict):
            return data
        fname = self.rng.choice(self.g.input_fields)
        spec[fname] = self.value(names, fname)
        return data

    # --- text operators ----------------------------------------------------

    def _line(self, text: str) -> tuple[list[str], int]:
        lines = text.splitlines(keepends=True) or [""]
        return lines, self.rng.randrange(len(lines))

    def duplicate_line(self, text: str) -> str:
        lines, i = self._line(text)
        lines.insert(i, lines[i])
        return "".join(lines)

    def tag(self, text: str) -> str:
        spots = [m.end() for m in re.finditer(r":[ ]+(?=[^\s#{\[])", text)]
        spots += [m.end() for m in re.finditer(r"[{,\[] *(?=\w)", text)]
        if not spots:
            return text
        at = self.rng.choice(spots)
        return text[:at] + self.rng.choice(TAGS) + " " + text[at:]

    def alias(self, text: str) -> str:
        spots = [m.end() for m in re.finditer(r": +(?=[^\s#])", text)]
        if len(spots) < 2:
            return text
        a, b = sorted(self.rng.sample(spots, 2))
        if self.rng.random() < 0.5:
            # anchor the later value, alias it earlier: an undefined alias
            a, b = b, a
        out = text[:b] + "*a " + text[b:] if b > a else text
        if b > a:
            out = out[:a] + "&a " + out[a:]
            # the alias replaces the value after it: drop the rest of that line's value
            return re.sub(r"\*a [^\n,}\]]*", "*a", out, count=1)
        return text[:a] + "*a " + text[a:]

    def truncate(self, text: str) -> str:
        return text[: self.rng.randrange(len(text) + 1)]

    def odd_chars(self, text: str) -> str:
        at = self.rng.randrange(len(text) + 1)
        return text[:at] + "".join(self.rng.choices(ODD_CHARS, k=self.rng.randint(1, 3))) + \
            text[at:]

    def splice(self, text: str) -> str:
        at = self.rng.randrange(len(text) + 1)
        cut = self.rng.randint(0, 6)
        return text[:at] + "".join(self.rng.choices(PUNCT, k=self.rng.randint(1, 3))) + \
            text[at + cut:]

    def deep_brackets(self, text: str) -> str:
        n = self.rng.choice((65, 200, 1000, 5000, 20000))
        open_, close = self.rng.choice((("[", "]"), ("{a: ", "}")))
        return text + f"deep: {open_ * n}1{close * n}\n"

