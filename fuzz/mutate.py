"""Mutants of a valid spec: grammar-aware edits and plain text damage.

A :class:`Mutator` knows the language from the kinds' own models (kind names,
field names, the choices of ``Literal`` fields, which fields are sizes,
references and blocks), the formula language (its functions, axes and limits) and
the seed's own names (node ids, ports, dims, length symbols, blocks).
:meth:`Mutator.mutate` applies one to three operators and returns the new text
with the operators' names; the same seed and random state give the same mutant,
so a case is replayed from its number.

Formulas (``kind: expr``) have operators of their own that edit the formula text
as the formula grammar sees it (:data:`Mutator.formula_ops`: operators,
functions, names, constants, nesting, brackets, arguments, unicode, junk, length,
odd characters, code, numeric hazards, axes), and ``param`` nodes have theirs
(shapes, heads, axes, ``max_len``, ``clamp``...); ``add_expr`` puts a generated
formula between a node and one of its readers, so every seed reaches the algebra.

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

__all__ = ["Grammar", "Mutator", "Names", "atoms", "formula_tokens", "grammar", "rename",
           "rename_in_formula"]

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

# --- the formula language's look-alikes --------------------------------------------

#: Operators a formula may hold, and the ones of other languages it may not.
FORMULA_OPS = ("+", "-", "*", "/", "^", "**", "<", "<=", ">", ">=", "==", "!=", "=", "===",
               "<>", "//", "%", "&", "|", "&&", "||", "!", "~", "@", "->", ":", ";", ".",
               "..", ",", "", " ", "***", "^^", "+-", "--", "=<", "=>", "<<", ">>")
#: The unicode operators the reader takes (aliases), then look-alikes it does not.
UNICODE_OPS = ("·", "×", "÷", "−", "√", "≤", "≥", "≠",
               "∗", "⋅", "–", "—", "＋", "－", "／", "﹡", "²", "⁻¹", "∑", "∏", "∞", "≈",
               "⊙", "∘", "′", "∕", "⨯")
#: Names that are no function (Python builtins, other spellings, dotted names).
UNKNOWN_FUNCTIONS = ("__import__", "eval", "exec", "open", "getattr", "print", "compile",
                     "globals", "input", "exit", "lambda", "Exp", "EXP", "softmax2", "argmax",
                     "pow", "log2", "torch.exp", "os.system", "x.y", "f", "_", "i", "j", "N",
                     "items", "d", "x" * 70, "α", "sum_", "expr", "param")
#: Names that are no value of a spec (Python's, other languages', almost-names).
ODD_NAMES = ("__class__", "__builtins__", "__dict__", "self", "None", "True", "False", "inf",
             "nan", "e", "pi", "torch", "os", "lambda", "k_", "I", "J", "n", "_", "_x",
             "x.y.z", "a.b", "x.mask.mask", "x" * 70, "mask", "out", "heads", "time")
#: Numbers at and past the reader's limits, and numbers that are not numbers.
ODD_CONSTANTS = ("1e300", "1e9", "1e10", "999999999", "1000000000", "1000000000.0000001",
                 "1000000001", "-0", "0", "0.0", ".5e-400", "1e", "1e+", "00", "007", "0x10",
                 "1_000", "1.2.3", "inf", "nan", "NaN", "5e-324", "1e-45", "3.4e38", "1e38",
                 "1e30", "1e-30", ".", "1.", ".e1", "1e-999999", "9" * 400, "1" + "0" * 30,
                 "2.5", "-1", "65504", "88.7", "1e-8", "0.000000001", "1E9", "1e+09", "1e09",
                 "0e0", "9e9", "-1e9", "1e08")
#: Text after a complete formula (or before one).
FORMULA_JUNK = (")", "(", " x", ";", " # c", "\n", ", 1", " = 1", "...", " if x else y", ",",
                "!", "'", '"', "\\", " \\\n x", "\t", "  ", "}", "]", ": 1", " +", "*", "^",
                "()", "1", "x", "$x", "%", " and x", "\u200b", "--", "//")
#: Python, which a formula never runs (each is at most an unknown name or a syntax error).
CODE = ("__import__('os').system('true')", "__import__(os)", "().__class__.__bases__[0]",
        "eval(x)", "exec(x)", "open(x)", "lambda: 0", "x if y else z", "[x for x in s]",
        "x.__class__", "x.__dict__", "exit()", "globals()", "os.system(x)", "{x: 1}", "x[0]",
        "x[:, 0]", "`x`", "x; import os", "f'{x}'", "b'x'", "1 if x else 0", "not x",
        "x and x", "x or 0", "__import__", "breakpoint()", "x.__class__.__mro__",
        "getattr(x, y)", "print(x)", "$(rm -rf /)", "${x}", "{{x}}", "x @ x", "x := 1")
#: Formulas that read well and may overflow, divide by zero or leave the real numbers
#: (``{x}`` is a value of the formula). The oracle calls a non-finite output a defect.
HAZARDS = ("exp(exp(exp({x})))", "exp(1e9 * {x})", "{x} / 0", "{x} / ({x} - {x})",
           "log({x})", "log(-abs({x}))", "sqrt(-abs({x}) - 1)", "{x} ^ -1", "{x} ^ 0.5",
           "{x} ^ 1e9", "(-1) ^ {x}", "0 ^ -abs({x})", "1e9 * 1e9 * {x}", "{x} / N",
           "{x} / sum({x}, items)", "exp({x}) / sum(exp({x}), items)",
           "log(softmax({x}, items))", "1 / norm({x}, items)", "{x} / mean({x}, items)",
           "{x} * 0 / 0", "1e9 ^ {x}", "exp({x}) ^ 1e9", "logsumexp({x} * 1e9, items)",
           "tanh({x}) / sign({x})", "sqrt({x}) / 0 * 0", "exp({x} * d * d * d)",
           "{x} / (i - j)", "1 / (N - N)", "amax({x}, items) / amin({x}, items)",
           "cumsum(exp(exp({x})), items)", "{x} ^ {x} ^ {x}", "exp(-log(0 * {x}))")
_FTOKEN = re.compile(r"""
    (?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)
  | (?P<op>\*\*|<=|>=|==|!=|[-+*/^<>·×÷−√≤≥≠])
  | (?P<open>\()
  | (?P<close>\))
  | (?P<comma>,)
""", re.VERBOSE)


@dataclass(frozen=True)
class FTok:
    """A token of a formula as the mutator sees it: its kind, span and text."""

    kind: str  # num, name, op, open, close, comma
    start: int
    end: int
    text: str


def formula_tokens(text: str) -> list[FTok]:
    """The tokens of a formula (characters no token takes are skipped).

    >>> [t.text for t in formula_tokens("relu(s / sqrt(d)) ^ 2")]
    ['relu', '(', 's', '/', 'sqrt', '(', 'd', ')', ')', '^', '2']
    """
    return [FTok(m.lastgroup or "", m.start(), m.end(), m.group())
            for m in _FTOKEN.finditer(text)]


def atoms(text: str) -> list[tuple[int, int]]:
    """The spans of the formula's atoms: numbers, names, calls and bracket groups (an
    unclosed bracket runs to the end).

    >>> t = "exp(s) + (a)"
    >>> [t[a:b] for a, b in atoms(t)]
    ['exp(s)', 's', '(a)', 'a']
    """
    toks = formula_tokens(text)
    out: list[tuple[int, int]] = []
    for k, t in enumerate(toks):
        call = t.kind == "name" and k + 1 < len(toks) and toks[k + 1].kind == "open"
        args = t.kind == "open" and k > 0 and toks[k - 1].kind == "name"
        if t.kind in ("num", "name") and not call:
            out.append((t.start, t.end))
        elif call or (t.kind == "open" and not args):
            depth, end = 0, len(text)
            for u in toks[k + (1 if call else 0):]:
                depth += (u.kind == "open") - (u.kind == "close")
                if depth == 0:
                    end = u.end
                    break
            out.append((t.start, end))
    return out

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
    #: formula functions by form (``elementwise``, ``reduce``...) with their value arity
    functions: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    #: the axis names formulas use
    axes: tuple[str, ...] = ()
    #: the formula reader's limits: length, depth, largest number
    max_length: int = 2000
    max_depth: int = 32
    max_number: float = 1e9


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
    from attngraph.algebra import formula as fm
    from attngraph.algebra.axes import AXES
    from attngraph.algebra.functions import FUNCTIONS
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
    functions: dict[str, tuple[str, int, int]] = {
        n: (str(FUNCTIONS[n].form), *FUNCTIONS[n].arity) for n in FUNCTIONS.names()}
    return Grammar(tuple(sorted(kinds)), fields, sizes, refs, blocks, choices, input_types,
                   tuple(inp.model_fields), tuple(SCORERS.names()), tuple(everything),
                   functions, tuple(AXES), fm.MAX_LENGTH, fm.MAX_DEPTH, fm.MAX_NUMBER)


@dataclass
class Names:
    """The names a seed defines, gathered once per mutant."""

    nodes: list[str]
    inputs: list[str]
    blocks: list[str]
    dims: list[str]
    lengths: list[str]
    #: ``param`` nodes (matrices for ``project``)
    params: list[str] = field(default_factory=list)

    def formula_names(self) -> list[str]:
        """What a formula may name: values, dims, lengths, indices, input masks."""
        return [*self.nodes, *self.inputs, *self.dims, *self.lengths, "i", "j",
                *(f"{x}.mask" for x in self.inputs)]

    @classmethod
    def of(cls, data: Data) -> Names:
        nodes: list[str] = []
        blocks: list[str] = []
        params = [p[-1] for p in _node_paths(data) if _get(data, p).get("kind") == "param"]
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
        return cls(nodes or ["x"], inputs or ["x"], blocks, dims or ["d"], lengths,
                   [str(p) for p in params])


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


def _formula_paths(data: Data) -> list[Path_]:
    """Paths of every formula (the ``formula`` string of a node, top level or in a block)."""
    return [(*p, "formula") for p in _node_paths(data)
            if isinstance(_get(data, p).get("formula"), str)]


def rename(data: Data, old: str, new: str) -> Data:
    """``data`` with the name ``old`` replaced by ``new`` as a key and in every reference."""
    pat = re.compile(rf"^{re.escape(old)}(\.|$)")

    def walk(v: Data) -> Data:
        if isinstance(v, dict):
            if isinstance(v.get("formula"), str):  # a formula names nodes among other things
                v = {**v, "formula": rename_in_formula(v["formula"], old, new)}
            return {(new if k == old else k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, str) and pat.match(v):
            return pat.sub(lambda m: new + m.group(1), v)
        return v

    return walk(data)


def rename_in_formula(text: str, old: str, new: str) -> str:
    """``text`` with the name ``old`` (or ``old.port``) read as ``new``; calls are kept.

    >>> rename_in_formula("exp(s) / sum(exp(s.out), items) + ss", "s", "keys")
    'exp(keys) / sum(exp(keys.out), items) + ss'
    """
    toks = formula_tokens(text)
    out, at = [], 0
    for k, t in enumerate(toks):
        call = k + 1 < len(toks) and toks[k + 1].kind == "open"
        if t.kind == "name" and not call and t.text.split(".")[0] == old:
            out += [text[at:t.start], new + t.text[len(old):]]
            at = t.end
    return "".join(out) + text[at:]


class Mutator:
    """Derives mutants from seed texts with its own random state."""

    def __init__(self, rng: random.Random, gram: Grammar | None = None,
                 focus: str | None = None) -> None:
        self.rng = rng
        self.g = gram or grammar()
        #: ``"formulas"``: mostly the operators of formulas and params (fuzz.run --focus)
        self.focus = focus
        #: the sub-operator the last formula operator applied (shown in the op's name)
        self.sub = ""
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
            # the algebra: weighed up in mutate() when the spec has formulas or params
            ("formula", self.formula, 0),
            ("param", self.param, 0),
            ("expr_field", self.expr_field, 0),
            ("add_expr", self.add_expr, 3),
        ]
        #: operators on a formula's text, each (name, function of (text, names), weight)
        self.formula_ops: list[tuple[str, Callable[[str, Names], str], int]] = [
            ("operator", self.f_operator, 6),
            ("function", self.f_function, 6),
            ("name", self.f_name, 8),
            ("constant", self.f_constant, 5),
            ("nest", self.f_nest, 4),
            ("brackets", self.f_brackets, 4),
            ("arguments", self.f_arguments, 4),
            ("unicode", self.f_unicode, 3),
            ("junk", self.f_junk, 3),
            ("long", self.f_long, 2),
            ("odd_chars", self.f_odd_chars, 2),
            ("code", self.f_code, 2),
            ("hazard", self.f_hazard, 3),
            ("subtree", self.f_subtree, 4),
            ("axis", self.f_axis, 5),
            ("generate", self.f_generate, 4),
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
            if rng.random() < (0.78 if self.focus is None else 0.95):
                name, fn = self._pick(self._data_table(data))
                self.sub = ""
                data = fn(copy.deepcopy(data), Names.of(data))
                ops.append(f"{name}.{self.sub}" if self.sub else name)
            else:
                tail.append(self._pick(self.text_ops))
        out = self.dump(data) if ops else text
        for name, tfn in tail:
            out = tfn(out)
            ops.append(name)
        return out, ops

    def _data_table(self, data: Data) -> list[tuple[str, Any, int]]:
        """The data operators with their weights for this spec: the formula and param
        operators weigh as much as the rest together where the spec has formulas or
        params (most of all with ``focus="formulas"``)."""
        has_f = bool(_formula_paths(data))
        has_p = any(_get(data, p).get("kind") == "param" for p in _node_paths(data))
        algebra = {"formula": 40 if has_f else 0, "param": 12 if has_p else 0,
                   "expr_field": 6 if has_f else 0, "add_expr": 3}
        table = []
        for name, fn, w in self.data_ops:
            if name in algebra:
                w = algebra[name]
                if self.focus == "formulas":
                    w = w * 4 if w else (8 if name == "add_expr" else 0)
            elif self.focus == "formulas":
                w = max(1, w // 3)
            if w:
                table.append((name, fn, w))
        return table

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

    # --- formulas and params ---------------------------------------------------

    def formula(self, data: Data, names: Names) -> Data:
        """One or two edits of one formula's text (``formula.<sub-operator>``); a spec
        without formulas gets one (``add_expr``)."""
        paths = _formula_paths(data)
        if not paths:
            return self.add_expr(data, names)
        p = self.rng.choice(paths)
        text = _get(data, p)
        subs = []
        for _ in range(self.rng.choice((1, 1, 1, 2))):
            name, fn = self._pick(self.formula_ops)
            text = fn(text, names)
            subs.append(name)
        self.sub = "+".join(subs)
        _get(data, p[:-1])[p[-1]] = text
        return data

    def _fpick(self, text: str, kinds: tuple[str, ...], *, calls: bool | None = None
               ) -> FTok | None:
        """A random token of the formula of one of ``kinds`` (names: calls or not)."""
        toks = formula_tokens(text)
        found = []
        for k, t in enumerate(toks):
            if t.kind not in kinds:
                continue
            if calls is not None and t.kind == "name":
                is_call = k + 1 < len(toks) and toks[k + 1].kind == "open"
                if is_call != calls:
                    continue
            found.append(t)
        return self.rng.choice(found) if found else None

    def _atom(self, text: str) -> tuple[int, int]:
        spans = atoms(text)
        return self.rng.choice(spans) if spans else (0, len(text))

    def _leaf(self, names: Names) -> str:
        """A name or number a formula may read."""
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            return rng.choice(names.nodes + names.inputs)
        if r < 0.7:
            return rng.choice(("0", "1", "2", "0.5", "1e-6", "3", "-1"))
        return rng.choice(names.formula_names())

    def _call(self, fname: str, args: list[str]) -> str:
        """A call of function ``fname`` on ``args`` (axis and matrix added by its form)."""
        rng = self.rng
        form, lo, hi = self.g.functions.get(fname, ("elementwise", 1, 1))
        args = list(args)
        while len(args) < lo:
            args.append(args[-1] if args and rng.random() < 0.5 else rng.choice(("0", "1")))
        args = args[:max(hi, 1)]
        if form == "project":
            args = args[:1]
            return f"{fname}(W, {args[0]}, {rng.choice(self.g.axes or ('items',))})"
        if form in ("reduce", "scan", "normalise"):
            axis = rng.choice(("items",) * 3 + ("queries", "heads", "features")
                              + tuple(self.g.axes))
            return f"{fname}({args[0]}, {axis})"
        return f"{fname}({', '.join(args)})"

    def gen_formula(self, names: Names, depth: int = 0) -> str:
        """A random formula over the spec's names (typed or not: most are, by luck)."""
        rng = self.rng
        if depth >= 3 or rng.random() < 0.3:
            return self._leaf(names)
        r = rng.random()
        if r < 0.35:
            op = rng.choice(("+", "-", "*", "/", "^", "*", "+", "<", "<=", ">", "==", "!="))
            return (f"({self.gen_formula(names, depth + 1)} {op} "
                    f"{self.gen_formula(names, depth + 1)})")
        if r < 0.45:
            return f"-{self.gen_formula(names, depth + 1)}"
        fname = rng.choice(sorted(self.g.functions) or ["exp"])
        form, lo, hi = self.g.functions.get(fname, ("elementwise", 1, 1))
        n = rng.randint(lo, hi) if form == "elementwise" else max(lo, 1)
        call = self._call(fname, [self.gen_formula(names, depth + 1) for _ in range(n)])
        if form == "project":
            w = rng.choice(names.params) if names.params else self._leaf(names)
            call = call.replace("(W,", f"({w},", 1)
        return call

    def f_operator(self, text: str, names: Names) -> str:
        """An operator replaced by another (of the formula's, or of another language's)."""
        t = self._fpick(text, ("op", "comma"))
        new = self.rng.choice(FORMULA_OPS + UNICODE_OPS)
        if t is None:
            return f"{text} {new} {self._leaf(names)}"
        return text[:t.start] + new + text[t.end:]

    def f_function(self, text: str, names: Names) -> str:
        """A function called another (of the registry, or no function), or an atom
        wrapped in a call."""
        rng = self.rng
        pool = sorted(self.g.functions) or ["exp"]
        t = self._fpick(text, ("name",), calls=True)
        if t is None or rng.random() < 0.3:
            a, b = self._atom(text)
            return text[:a] + self._call(rng.choice(pool), [text[a:b] or "x"]) + text[b:]
        new = rng.choice(pool) if rng.random() < 0.7 else rng.choice(UNKNOWN_FUNCTIONS)
        return text[:t.start] + new + text[t.end:]

    def f_name(self, text: str, names: Names) -> str:
        """A name swapped for another of the spec (node, input, port, dims name, length,
        index, axis), or for one of no spec."""
        rng = self.rng
        r = rng.random()
        if r < 0.6:
            new = rng.choice(names.formula_names())
        elif r < 0.75:
            new = rng.choice(self.g.axes or ("items",))
        elif r < 0.85:
            new = f"{rng.choice(names.nodes + names.inputs)}.{rng.choice(PORTS)}"
        else:
            new = rng.choice(ODD_NAMES + ATTRIBUTE_NAMES[:10] + KEYWORDS)
        t = self._fpick(text, ("name",), calls=False)
        if t is None:
            return f"{text} * {new}"
        return text[:t.start] + new + text[t.end:]

    def f_constant(self, text: str, names: Names) -> str:
        """A number (or a value) replaced by one at or past the limits, or by one that
        is no number."""
        rng = self.rng
        lim = self.g.max_number
        new = rng.choice(ODD_CONSTANTS + (f"{lim:g}", repr(lim), repr(lim * (1 + 1e-9)),
                                          str(int(lim) + 1), f"-{lim:g}"))
        t = self._fpick(text, ("num",))
        if t is None or rng.random() < 0.25:
            a, b = self._atom(text)
            if rng.random() < 0.5:
                return text[:a] + new + text[b:]
            return text[:a] + f"{new} * {text[a:b]}" + text[b:]
        return text[:t.start] + new + text[t.end:]

    def f_nest(self, text: str, names: Names) -> str:
        """The formula, or one atom, nested around the depth limit and far past it, in
        brackets, calls, minus signs or powers."""
        rng = self.rng
        lim = self.g.max_depth
        n = rng.choice((lim // 2 - 1, lim // 2, lim // 2 + 1, lim - 2, lim - 1, lim, lim + 1,
                        lim + 2, 2 * lim, 200, 1000))
        style = rng.choice(("bracket", "call", "minus", "power", "mixed", "axis"))
        a, b = (0, len(text)) if rng.random() < 0.5 else self._atom(text)
        inner = text[a:b] or "x"
        ones = [f for f, (form, lo, _) in sorted(self.g.functions.items())
                if form == "elementwise" and lo == 1] or ["abs"]
        if style == "bracket":
            inner = "(" * n + inner + ")" * n
        elif style == "call":
            f = rng.choice(ones)
            inner = f"{f}(" * n + inner + ")" * n
        elif style == "minus":
            inner = rng.choice(("-", "+", "−", "√", "- ")) * n + inner
        elif style == "power":
            inner = "1 ^ " * n + inner
        elif style == "axis":
            inner = "sum(" * n + inner + ", items)" * n
        else:
            for _ in range(n):
                inner = rng.choice(("({})", "-{}", "abs({})", "1^{}", "({} + 1)")).format(inner)
        return text[:a] + inner + text[b:]

    def f_brackets(self, text: str, names: Names) -> str:
        """A bracket opened, closed, dropped, turned round or of another shape."""
        rng = self.rng
        r = rng.random()
        toks = formula_tokens(text)
        at = rng.choice([t.start for t in toks] + [len(text)])
        if r < 0.3:
            return text[:at] + rng.choice(("(", "((", "(" * 5)) + text[at:]
        if r < 0.55:
            return text[:at] + rng.choice((")", "))", ")" * 5)) + text[at:]
        t = self._fpick(text, ("open", "close"))
        if t is None:
            return "(" + text if rng.random() < 0.5 else text + ")"
        if r < 0.8:
            return text[:t.start] + text[t.end:]
        new = rng.choice(("[", "]", "{", "}", "<", ">", ")" if t.kind == "open" else "(", "⟨", "|"))
        return text[:t.start] + new + text[t.end:]

    def f_arguments(self, text: str, names: Names) -> str:
        """A call's arguments emptied, doubled, left out or given one too many."""
        rng = self.rng
        spans = [(a, b) for a, b in atoms(text) if text[a:b].rstrip().endswith(")")
                 and "(" in text[a:b] and re.match(r"[A-Za-z_]", text[a])]
        if not spans:
            return text + rng.choice(("()", "(,)", "(x)", "(x, items)"))
        a, b = rng.choice(spans)
        call = text[a:b]
        name, inner = call[:call.index("(")], call[call.index("(") + 1:-1]
        args = inner.split(",") if "," in inner else [inner]
        choice = rng.choice(("empty", "comma", "trailing", "leading", "double", "drop_last",
                             "extra", "axis_only", "axes"))
        if choice == "empty":
            new = ""
        elif choice == "comma":
            new = rng.choice((",", " , ", ",,", " "))
        elif choice == "trailing":
            new = inner + ","
        elif choice == "leading":
            new = "," + inner
        elif choice == "double":
            new = inner + ",," + inner
        elif choice == "drop_last":
            new = ",".join(args[:-1])
        elif choice == "extra":
            new = inner + ", " + rng.choice((self._leaf(names), "items", "queries", "1"))
        elif choice == "axis_only":
            new = rng.choice(self.g.axes or ("items",))
        else:
            new = inner + ", items, items"
        return text[:a] + f"{name}({new})" + text[b:]

    def f_unicode(self, text: str, names: Names) -> str:
        """An operator written in unicode (the reader's aliases, or look-alikes it does
        not take), or a square root sign before an atom."""
        rng = self.rng
        alias = {"*": ("·", "×", "∗", "⋅", "⨯"), "/": ("÷", "∕", "／"), "-": ("−", "–", "—", "－"),
                 "<=": ("≤", "⩽"), ">=": ("≥", "⩾"), "!=": ("≠",), "+": ("＋", "∔"),
                 "^": ("ˆ", "＾"), "(": ("（", "❨"), ")": ("）", "❩")}
        t = self._fpick(text, ("op", "open", "close"))
        if t is None or t.text not in alias or rng.random() < 0.25:
            a, _ = self._atom(text)
            return text[:a] + rng.choice(("√", "√ ", "√√", "∛", "²")) + text[a:]
        return text[:t.start] + rng.choice(alias[t.text]) + text[t.end:]

    def f_junk(self, text: str, names: Names) -> str:
        """Junk after the formula, before it, or between two of its tokens."""
        rng = self.rng
        junk = rng.choice(FORMULA_JUNK)
        r = rng.random()
        if r < 0.5:
            return text + junk
        if r < 0.7:
            return junk + text
        toks = formula_tokens(text)
        at = rng.choice([t.start for t in toks] or [0])
        return text[:at] + junk + text[at:]

    def f_long(self, text: str, names: Names) -> str:
        """A formula at, just past or far past the length limit: a long sum, a long name,
        a long number, a long argument list."""
        rng = self.rng
        lim = self.g.max_length
        target = rng.choice((lim - 1, lim, lim + 1, 2 * lim, 50_000))
        r = rng.random()
        if r < 0.5:
            term = rng.choice((" + " + self._leaf(names), "+x", " * 1", "-1", " + (s)"))
            out = text
            while len(out) < target:
                out += term
            return out[:target] if rng.random() < 0.5 else out
        if r < 0.7:
            return text + " + " + "x" * max(1, target - len(text) - 3)
        if r < 0.85:
            return text + " + 0." + "1" * max(1, target - len(text) - 5)
        args = ", ".join([self._leaf(names)] * max(1, (target - 8) // 3))
        return f"max({args})"

    def f_odd_chars(self, text: str, names: Names) -> str:
        """Characters no formula has: controls, invisibles, quotes, YAML's own."""
        rng = self.rng
        at = rng.randrange(len(text) + 1)
        pool = ODD_CHARS + ("$", "`", "#", "@", "?", "'", '"', "\\", "&", "*", ":", "{", "[",
                            "ｓ", "𝑥", "π", "∞", "ß", "İ", "\u0000", "%s", "{0}")
        return text[:at] + "".join(rng.choices(pool, k=rng.randint(1, 3))) + text[at:]

    def f_code(self, text: str, names: Names) -> str:
        """Python code for a formula (or inside one): never run, only an error."""
        rng = self.rng
        code = rng.choice(CODE)
        if rng.random() < 0.5:
            return code
        a, b = self._atom(text)
        return text[:a] + code + text[b:]

    def f_hazard(self, text: str, names: Names) -> str:
        """An atom (or the whole formula) in a formula that may overflow or divide by zero."""
        rng = self.rng
        a, b = (0, len(text)) if rng.random() < 0.4 else self._atom(text)
        inner = text[a:b] or self._leaf(names)
        return text[:a] + rng.choice(HAZARDS).format(x=f"({inner})") + text[b:]

    def f_subtree(self, text: str, names: Names) -> str:
        """An atom replaced by another atom of the formula, deleted, or the formula
        joined with itself."""
        rng = self.rng
        spans = atoms(text)
        r = rng.random()
        if len(spans) >= 2 and r < 0.4:
            (a, b), (c, d) = rng.sample(spans, 2)
            return text[:a] + text[c:d] + text[b:]
        if spans and r < 0.65:
            a, b = rng.choice(spans)
            return text[:a] + text[b:]
        op = rng.choice(("+", "*", "-", "/", "<", "^"))
        return f"({text}) {op} ({text})"

    def f_axis(self, text: str, names: Names) -> str:
        """An axis argument named anew (another axis, a name that is none, none at all),
        or an atom reduced, scanned or normalised over an axis."""
        rng = self.rng
        axes = self.g.axes or ("items",)
        found = [t for t in formula_tokens(text) if t.kind == "name" and t.text in axes]
        if found and rng.random() < 0.6:
            t = rng.choice(found)
            new = rng.choice((*axes, *axes, "time", "N", "i", "j", "item", "Items", "features.x",
                              rng.choice(names.nodes), ""))
            return text[:t.start] + new + text[t.end:]
        over = [f for f, (form, _, _) in sorted(self.g.functions.items())
                if form in ("reduce", "scan", "normalise")] or ["sum"]
        a, b = self._atom(text)
        return text[:a] + f"{rng.choice(over)}({text[a:b] or 'x'}, {rng.choice(axes)})" + text[b:]

    def f_generate(self, text: str, names: Names) -> str:
        """A new random formula over the spec's names, or an atom replaced by one."""
        if self.rng.random() < 0.5:
            return self.gen_formula(names)
        a, b = self._atom(text)
        return text[:a] + self.gen_formula(names, 1) + text[b:]

    def param(self, data: Data, names: Names) -> Data:
        """A field of a ``param`` node set to a value at or past its limits (shape,
        heads, axes, init, value, std, range, clamp, fixed, max_len); a spec without
        params gets one, read by a formula."""
        rng = self.rng
        paths = [p for p in _node_paths(data) if _get(data, p).get("kind") == "param"]
        if not paths:
            return self._add_param(data, names)
        spec = _get(data, rng.choice(paths))
        fname = rng.choice(("shape", "shape", "shape", "heads", "axes", "axes", "init",
                            "value", "std", "range", "clamp", "clamp", "fixed", "max_len",
                            "max_len"))
        self.sub = fname
        spec[fname] = self.param_value(fname, names)
        if fname == "shape" and rng.random() < 0.3:
            spec["max_len"] = self.param_value("max_len", names)
        return data

    def param_value(self, fname: str, names: Names) -> Data:
        """A value for field ``fname`` of a param: mostly of its sort, at the edges."""
        rng = self.rng
        if rng.random() < 0.1:
            return self.value(names, fname)
        axes = self.g.axes or ("items",)
        if fname == "shape":
            pool = (1, 2, 3, 4, 7, 16, 64, 0, -1, 10**6, 10**6 + 1, 10**9, *names.dims,
                    *names.lengths, "N", "M", "T", "D", "Nx", "heads", "x", 1.5, None, True, "",
                    "n", 2**31)
            return [rng.choice(pool) for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4)))]
        if fname == "heads":
            return rng.choice((1, 2, 4, 0, -1, 1024, 1025, *names.dims, "N", None, True, 2.5))
        if fname == "axes":
            if rng.random() < 0.1:
                return None
            pool = (*axes, *axes, "time", "", "N", "heads")
            return [rng.choice(pool) for _ in range(rng.choice((0, 1, 1, 2, 2, 3, 4)))]
        if fname == "init":
            return rng.choice((*self.g.choices.get("init", ()), "he", "", 1))
        if fname in ("value", "std"):
            return rng.choice((*NUMBERS[:24], 1e6, 1e6 + 1, 1e-7, -1e6, 1e3, 1e3 + 1))
        if fname in ("range", "clamp"):
            return rng.choice(([0, 1], [1, 0], [0, 0], [-1e6, 1e6], [1e-300, 1e-299],
                               [-1, -0.5], [0.5], [0, 1, 2], [0, 1e300], [-1e7, 1e7],
                               [0.999999, 1], [-0.0, 0.0], "0,1", None, [0.5, 0.99],
                               [1e-6, 1e6], [-1e6, -1e6 + 1]))
        if fname == "fixed":
            return rng.choice((True, False, "yes", 1, None))
        return rng.choice((None, 0, 1, 2, 5, 64, 65536, 65537, 10**9, -1, "N", "d", 1.5,
                           *names.dims))

    def _add_param(self, data: Data, names: Names) -> Data:
        """A new param node and a formula that reads it with a node of the spec."""
        nodes = data.get("nodes") if isinstance(data, dict) else None
        if not isinstance(nodes, dict):
            return self.add_expr(data, names)
        rng = self.rng
        pid = rng.choice(("fuzz_p", "w", "g", "keys", "p0"))
        spec: dict[str, Any] = {"kind": "param"}
        for fname in rng.sample(("shape", "heads", "axes", "init", "clamp", "fixed",
                                 "max_len"), k=rng.randint(0, 3)):
            spec[fname] = self.param_value(fname, names)
        nodes[pid] = spec
        names = Names(names.nodes + [pid], names.inputs, names.blocks, names.dims,
                      names.lengths, names.params + [pid])
        return self.add_expr(data, names, read=pid)

    def expr_field(self, data: Data, names: Names) -> Data:
        """An expression's ``axes`` or ``distribution`` set anew."""
        rng = self.rng
        paths = [p[:-1] for p in _formula_paths(data)]
        if not paths:
            return self.add_expr(data, names)
        spec = _get(data, rng.choice(paths))
        if rng.random() < 0.6:
            self.sub = "axes"
            axes = self.g.axes or ("items",)
            spec["axes"] = None if rng.random() < 0.1 else [
                rng.choice((*axes, *axes, "time")) for _ in range(rng.choice((0, 1, 2, 2, 3, 4)))]
        else:
            self.sub = "distribution"
            spec["distribution"] = rng.choice((True, True, False, "yes", None))
        return data

    def add_expr(self, data: Data, names: Names, read: str | None = None) -> Data:
        """A generated formula put between a node and one of its readers (or made an
        output): the reader now reads the formula, which reads the node."""
        rng = self.rng
        nodes = data.get("nodes") if isinstance(data, dict) else None
        if not isinstance(nodes, dict):
            return self.set_value(data, names)
        known = set(names.nodes + names.inputs)
        refs = [p for p in _paths(data) if p and p[0] in ("nodes", "outputs")
                and isinstance(_get(data, p), str) and p[-1] not in ("kind", "formula")
                and _get(data, p).split(".")[0] in known]
        eid = rng.choice(("fuzz_e", "f", "e2", "items", "values", "update", "fx"))
        while eid in nodes:
            eid += "_"
        src = read or (_get(data, rng.choice(refs)) if refs else rng.choice(sorted(known)))
        r = rng.random()
        if r < 0.25:
            formula = src
        elif r < 0.5:
            fname = rng.choice(sorted(self.g.functions) or ["exp"])
            formula = self._call(fname, [src])
            if "(W," in formula:
                formula = formula.replace("(W,", f"({rng.choice(names.params or [src])},", 1)
        elif r < 0.75:
            formula = f"{src} {rng.choice(('+', '*', '-', '/'))} {self.gen_formula(names, 1)}"
        else:
            formula = self.gen_formula(names)
            if src not in formula:
                formula = f"{src} + 0 * ({formula})"
        spec: dict[str, Any] = {"kind": "expr", "formula": formula}
        if rng.random() < 0.1:
            spec["distribution"] = True
        nodes[eid] = spec
        self.sub = "reader" if refs and read is None and rng.random() < 0.7 else "output"
        if self.sub == "reader":
            p = rng.choice([p for p in refs if _get(data, p).split(".")[0] == src.split(".")[0]]
                           or refs)
            _get(data, p[:-1])[p[-1]] = eid
        else:
            outs = data.setdefault("outputs", {})
            if isinstance(outs, dict):
                outs[eid] = eid
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

