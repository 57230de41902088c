"""Run one mutant as a user would, and say what happened.

:func:`check` reads the text as a spec file; a valid spec is also drawn,
described, compiled and run forward and backward on random inputs (padded
where the inputs have masks). The :class:`Outcome` is one of

- ``valid``: everything ran and every output is finite;
- ``rejected``: one of the project's errors, every diagnostic located in the
  file (``hint`` says whether every one carries a hint);
- ``defect``: anything else, with a class (``crash``, ``unlocated``,
  ``misplaced``, ``late``, ``nonfinite``, ``exit``; the driver adds ``hang``,
  ``memory`` and ``signal``) and the place it arose (the innermost project frame,
  or the message).

Formulas (``kind: expr``): a formula that cannot be read is a *rejection* like any
other, located inside the formula. The oracle reads each formula of a rejected
mutant itself (:func:`attngraph.algebra.formula.parse`) and, when the rejection
reports that formula's syntax error, checks that its caret is at the offending
character (anywhere inside the value, for a formula that spans lines or holds
escapes: the reader may map the offset through them): else a ``misplaced`` defect.
A non-finite output is a defect; its place names the kind of the first node whose
output is not finite although its inputs are, and the message that node (and its
formula). One exception, an outcome of its own,
``arithmetic``: the first such node is a formula the user wrote with an operation
that can leave the real numbers on finite data (``/``, ``^``, ``log``, ``sqrt``,
``exp``, a product: ``x / x`` at 0, ``exp(exp(exp(s)))``): that is the formula's arithmetic, not
attngraph's, and is counted and reported apart (the language refuses what is certain,
a constant zero divisor, when the spec is read). A formula without such an operation
that makes a non-finite value is still a defect.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import sysconfig
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Outcome", "check", "place_of", "budget_limits"]


def budget_limits(max_mb: int) -> dict[str, int]:
    """The resource guard's memory limits scaled to a process of ``max_mb`` megabytes.

    The guard's figures count the tensors one forward makes; a training step's peak
    (gradients, temporaries) is up to about four times that, over the ~400 MB torch
    itself takes. The fuzzer runs every mutant under these limits (set on
    :mod:`attngraph.guard`), so a spec the guard lets through that still takes
    more memory is a defect of the guard's figures.
    """
    from attngraph import guard

    budget = max(64, max_mb - 400) * 2**20 // (4 * 4)
    return {"MAX_TENSOR": min(guard.MAX_TENSOR, budget),
            "MAX_HELD": min(guard.MAX_HELD, budget),
            "MAX_PARAMS": min(guard.MAX_PARAMS, budget // 2)}


@dataclass(frozen=True)
class Outcome:
    """What one mutant did."""

    outcome: str  # "valid" | "rejected" | "defect"
    cls: str = ""  # defect class, or the rejecting error's class name
    place: str = ""  # where: "attngraph/x.py:12 in f" or a message shape
    message: str = ""
    hint: bool = True


def place_of(exc: BaseException) -> str:
    """The innermost frame outside the libraries (or the last frame) that raised ``exc``."""
    frames = traceback.extract_tb(exc.__traceback__)
    lib = (sysconfig.get_paths()["stdlib"], "site-packages", "<frozen")
    ours = [f for f in frames if not any(s in f.filename for s in lib)]
    f = (ours or frames or [None])[-1]
    if f is None:
        return type(exc).__name__
    path = f.filename
    root = str(Path(__file__).resolve().parent.parent) + os.sep
    if path.startswith(root):
        path = path[len(root):]
    return f"{path}:{f.lineno} in {f.name}: {type(exc).__name__}"


def _shape(message: str) -> str:
    """A message with its numbers and quoted names blanked, to group alike ones."""
    out = re.sub(r"'[^']*'", "'_'", message)
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", out)[:120]


def _rejected(exc: Any, file: str, text: str | None = None) -> Outcome:
    lines = text.splitlines() if text is not None else None
    for d in exc.diagnostics:
        if d.loc.file != file or d.loc.line < 1 or d.loc.col < 1:
            return Outcome("defect", "unlocated", _shape(d.message),
                           f"{d.loc}: {d.message}")
        if lines is not None and (d.loc.line > len(lines) + 1 or (
                d.loc.line <= len(lines) and d.loc.col > len(lines[d.loc.line - 1]) + 1)):
            return Outcome("defect", "unlocated", "outside the file: " + _shape(d.message),
                           f"{d.loc} is past the end of its line or the file: {d.message}")
    if text is not None and "formula" in text:
        bad = _misplaced(text, exc)
        if bad is not None:
            return bad
    bare = [d for d in exc.diagnostics if not d.hint]
    first = bare[0] if bare else exc.diagnostics[0]
    return Outcome("rejected", type(exc).__name__, _shape(first.message), first.format(),
                   not bare)


def _formulas(text: str) -> list[tuple[str, Any]]:
    """Every ``formula`` scalar of a YAML text with the id of the node it belongs to (its
    parent key), as PyYAML composes it (with its marks); none when it does not compose."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # noqa: BLE001 - the project's reader had its say
        return []
    out: list[tuple[str, Any]] = []
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        node, key = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else ""
                if name == "formula" and isinstance(v, yaml.ScalarNode) and v.tag.endswith(":str"):
                    out.append((key, v))
                stack.append((v, str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(v, key) for v in node.value]
    return out


def _misplaced(text: str, exc: Any) -> Outcome | None:
    """A ``misplaced`` defect when the rejection reports a formula's syntax error
    anywhere but at the offending character (see the module docstring)."""
    from attngraph.algebra.formula import FormulaError, parse

    for nid, node in _formulas(text):
        try:
            parse(node.value)
        except FormulaError as fe:
            start, end = node.start_mark, node.end_mark
            raw = text[start.index:end.index]
            q = 1 if node.style in ("'", '"') else 0
            simple = start.line == end.line and raw[q:len(raw) - q] == node.value \
                and node.style in (None, "'", '"')
            want = (start.line + 1, start.column + 1 + (q + fe.offset if simple else 0))
            for d in exc.diagnostics:
                if not (d.message.endswith(": " + fe.message) and f"'{nid}'" in d.message):
                    continue
                # a scalar with escapes or on several lines: the reader may map the
                # offset through them, so anywhere inside the scalar is right
                inside = not simple and (start.line, start.column) \
                    <= (d.loc.line - 1, d.loc.col - 1) < (end.line, end.column)
                if (d.loc.line, d.loc.col) != want and not inside:
                    return Outcome("defect", "misplaced", "formula: " + _shape(fe.message),
                                   f"{d.loc}: {d.message} (the offending character is at "
                                   f"{want[0]}:{want[1]})")
        except Exception:  # noqa: BLE001 - the spec's own reading decides what is a crash
            continue
    return None


#: operations of a formula that can leave the real numbers on finite data: a division,
#: a power, a product (repeated, it overflows: a diverging iteration), a logarithm, a
#: square root, and the functions that grow without bound
_PARTIAL = ("/", "^", "**", "÷", "√", "*", "·", "×", "log", "sqrt", "exp", "mm(",
            "project(", "relu2", "sum(", "cumsum", "norm(", "softplus", "elu", "silu",
            "gelu")


def _partial(formula: str) -> bool:
    """Whether a formula has an operation that can leave the real numbers on finite data
    (a formula of sums, comparisons and bounded functions cannot)."""
    return any(op in formula for op in _PARTIAL)


def _first_nonfinite(model: Any, kw: dict[str, Any]) -> tuple[str, str, str | None]:
    """The kind, a description and the formula (None for a node without one) of the
    first node module (in run order) whose output is not finite although every tensor
    it was given is (run again, with hooks)."""
    import torch

    from attngraph.lower.runtime.module import NodeModule

    def bad(values: Any) -> bool:
        vals = values.values() if isinstance(values, dict) else (
            values if isinstance(values, (list, tuple)) else [values])
        return any(torch.is_tensor(v) and v.is_floating_point()
                   and not bool(torch.isfinite(v).all()) for v in vals)

    names = {id(m): n for n, m in model.named_modules()}
    found: list[Any] = []

    def hook(mod: Any, args: Any, out: Any) -> None:
        if not found and bad(out) and not bad(args[0] if args else ()):
            found.append(mod)

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, NodeModule)]
    try:
        with torch.no_grad():
            model(**kw)
    except Exception:  # noqa: BLE001 - only looking
        pass
    finally:
        for h in handles:
            h.remove()
    if not found:
        return "", "", None
    mod = found[0]
    nid = names.get(id(mod), "?").rsplit(".", 1)[-1].lstrip("@")
    what = type(mod).__name__
    formula = getattr(mod, "formula", None)
    desc = f"node '{nid}' ({what}" + (f": {formula!r}" if isinstance(formula, str) else "") + ")"
    return what, desc, formula if isinstance(formula, str) else None


def _cli(args: list[str]) -> Outcome | None:
    """Run a command in this process; a traceback or an odd exit is a defect."""
    from attngraph.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main.main(args=args, prog_name="attngraph", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # noqa: BLE001 - the point is to catch anything
        import click

        if isinstance(exc, click.ClickException):
            code = 2
        else:
            return Outcome("defect", "crash", place_of(exc), f"{args[0]}: {exc!r}"[:500])
    if code not in (0, 1, None) or "Traceback" in err.getvalue():
        return Outcome("defect", "exit", f"{args[0]} exit {code}",
                       err.getvalue()[-500:])
    return None


def _inputs(graph: Any, length: int, seed: int) -> dict[str, Any]:
    import torch

    from attngraph.lower.runtime.examples import random_inputs

    gen = torch.Generator().manual_seed(seed)
    kw = random_inputs(graph, batch=3, length=length, generator=gen)
    by_length: dict[str, Any] = {}  # inputs that share a length share its padding
    for n in graph.inputs:
        if "mask" in n.types and n.id in kw:
            # ragged prefix masks, one example fully padded
            sym = str(n.types["mask"].dims[0])
            if sym not in by_length:
                lengths = torch.randint(1, length + 1, (3,), generator=gen)
                lengths[0] = length
                lengths[2] = 0
                by_length[sym] = lengths
            lengths = by_length[sym]
            kw[f"{n.id}_mask"] = torch.arange(length)[None, :] < lengths[:, None]
            if n.types["mask"].rank == 2:  # nested tokens: ragged words in real sentences
                words = torch.randint(1, length + 1, (3, length), generator=gen)
                inner = torch.arange(length)[None, None, :] < words[:, :, None]
                kw[f"{n.id}_mask"] = kw[f"{n.id}_mask"][:, :, None] & inner
    for n in graph.inputs:
        if n.spec.type == "positions" and n.id in kw:
            # positions point at real items of their input: none where it has none
            of = kw.get(f"{n.spec.of}_mask")
            real = of.sum(-1) if of is not None else torch.full((3,), length)
            kw[n.id] = kw[n.id] % real.clamp(min=1)[:, None]
            own = kw.get(f"{n.id}_mask")
            if own is not None:
                kw[f"{n.id}_mask"] = own & (real > 0)[:, None]
    return kw


def _run(graph: Any, file: str, length: int) -> Outcome:
    import torch

    import attngraph
    from attngraph.errors import AttnGraphError

    try:
        model = attngraph.compile(graph, seed=0)
    except AttnGraphError as exc:
        return Outcome("defect", "late", "compile: " + _shape(exc.message), exc.format()[:500])
    kw = _inputs(graph, length, seed=1)
    try:
        out = model(**kw)
    except AttnGraphError as exc:
        # a node that refuses non-finite values (a policy's distribution) after a formula
        # made them: the formula's arithmetic, as below
        what, desc, formula = _first_nonfinite(model, kw)
        if formula is not None and _partial(formula):
            return Outcome("arithmetic", "nonfinite", f"from {what}",
                           f"forward failed after non-finite values, first made by {desc}")
        return Outcome("defect", "late", "forward: " + _shape(exc.message), exc.format()[:500])
    loss = None
    for name, v in out.items():
        if not torch.is_tensor(v) or not v.is_floating_point():
            continue
        if not bool(torch.isfinite(v).all()):
            what, desc, formula = _first_nonfinite(model, kw)
            if formula is not None and _partial(formula):
                return Outcome("arithmetic", "nonfinite", f"from {what}",
                               f"output '{name}' has non-finite values, first made by {desc}")
            return Outcome("defect", "nonfinite", f"from {what or 'output ' + name}",
                           f"output '{name}' has non-finite values"
                           + (f", first made by {desc} from finite inputs" if desc else ""))
        if v.requires_grad:
            term = v.float().mean()
            loss = term if loss is None else loss + term
    for v in model.aux.values() if isinstance(getattr(model, "aux", None), dict) else ():
        if torch.is_tensor(v) and v.is_floating_point() and v.requires_grad:
            loss = v.float().mean() if loss is None else loss + v.float().mean()
    if loss is not None:
        loss.backward()
    return _rows_alone(model, kw, out)


def _rows_alone(model: Any, kw: dict[str, Any], out: dict[str, Any]) -> Outcome:
    """A model that makes values at the items a formula reads alone (its rows plan)
    gives what it gives with every item made."""
    import torch

    plan = getattr(model, "rows_plan", None)
    if plan is None:
        return Outcome("valid")
    model.rows_plan = None
    try:
        with torch.no_grad():
            whole = model(**kw)
    finally:
        model.rows_plan = plan
    for name, v in out.items():
        w = whole[name]
        if torch.is_tensor(v) and v.is_floating_point() and not torch.allclose(
                v.detach(), w, rtol=1e-4, atol=1e-5):
            gap = float((v.detach() - w).abs().max())
            return Outcome("defect", "rows", f"output {name}",
                           f"output '{name}' made on the rows a formula reads differs from "
                           f"it made whole by {gap:.2e}")
    return Outcome("valid")


def check(text: str, file: str = "fuzz.yaml", *, run: bool = True, cli: bool = True,
          length: int = 5) -> Outcome:
    """Read ``text`` as the spec ``file``; on success draw, describe, compile and run it."""
    from attngraph.errors import AttnGraphError
    from attngraph.frontend import loads_spec

    try:
        graph = loads_spec(text, file, batch=3, length=length)
    except AttnGraphError as exc:
        return _rejected(exc, file, text)
    except Exception as exc:  # noqa: BLE001
        return Outcome("defect", "crash", place_of(exc), repr(exc)[:500])
    if cli:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "spec.yaml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            for args in (["validate", path],
                         ["render", path, "--format", "json"],
                         ["render", path, "--view", "unrolled", "--format", "mermaid"],
                         ["describe", path, "--format", "json"]):
                bad = _cli(args)
                if bad is not None:
                    return bad
    if not run:
        return Outcome("valid")
    try:
        return _run(graph, file, length)
    except AttnGraphError as exc:
        return Outcome("defect", "late", _shape(exc.message), exc.format()[:500])
    except Exception as exc:  # noqa: BLE001
        return Outcome("defect", "crash", place_of(exc), repr(exc)[:500])
