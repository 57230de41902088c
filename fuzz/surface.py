"""The surfaces around the spec: what they share (a case, damage, the oracle's checks).

A *surface* is a module (:data:`MODULES`) with two functions:

- ``prepare(root) -> state``: valid inputs built once per worker process under
  ``root`` (small data files, a tiny finished run), deterministic;
- ``run(case) -> Outcome``: one case: build valid inputs, damage them with operators
  drawn from ``case.rng`` (each named in ``case.ops``), call the real code path in
  this process (the functions the CLI calls), and say what happened.

:func:`run_case` gives every case a fresh folder, seeds its random generator from
``(surface, seed, case)`` so case ``i`` of seed ``s`` is always the same, and applies
the oracle around it: one of the project's errors (or a click usage error) is a clean
rejection; any other exception a ``crash`` defect at the innermost project frame; a
non-finite number in an output a ``nonfinite`` defect; a file outside the case's own
output that changed, or a pre-existing output file changed by a rejected command, a
``lost-file`` defect (hashes taken before and after). The driver (:mod:`fuzz.run`)
adds hangs, memory and signals as for specs.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import io
import math
import os
import random
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from fuzz.oracle import Outcome, place_of

__all__ = ["AROUND", "CHOICES", "MODULES", "Case", "Defect", "fail", "expand", "surface_of",
           "run_case", "snapshot", "changed", "finite", "rejected", "cli", "damage_bytes",
           "special", "SPECIALS"]

#: Surface name -> its module.
MODULES = {"data": "fuzz.surface_data", "rundir": "fuzz.surface_rundir",
           "export": "fuzz.surface_export", "plugin": "fuzz.surface_plugin",
           "api": "fuzz.surface_api"}
#: The surfaces around the spec, in the order ``--surface around`` interleaves them.
AROUND = tuple(MODULES)
#: What ``--surface`` may name: one surface, ``around`` (every surface but the
#: spec's), or ``all`` (the spec's too).
CHOICES = ("spec", *AROUND, "around", "all")


def expand(name: str) -> tuple[str, ...]:
    """The surfaces a ``--surface`` value names."""
    if name == "around":
        return AROUND
    if name == "all":
        return ("spec", *AROUND)
    return (name,)


def surface_of(names: tuple[str, ...], i: int) -> str:
    """The surface case ``i`` of a run over ``names`` belongs to (they take turns)."""
    return names[i % len(names)]


class Defect(Exception):  # noqa: N818 - an outcome, raised to leave a case early
    """Raised inside a case to report a defect the oracle found (not a crash)."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


def fail(cls: str, place: str, message: str) -> NoReturn:
    """Leave the case with a defect of class ``cls`` at ``place``."""
    raise Defect(Outcome("defect", cls, place, message[:500]))


@dataclass
class Case:
    """One case of a surface: its random generator, folders, and the operators applied."""

    surface: str
    seed: int
    index: int
    rng: random.Random
    #: a fresh, empty folder of this case's own
    tmp: Path
    #: outside every case's folder: files that must never change (targets of symlinks)
    outside: Path
    #: what the surface's ``prepare`` made (read only)
    state: Any
    ops: list[str] = field(default_factory=list)

    def op(self, what: str) -> None:
        """Record an operator applied (shown with a defect, replayed by ``--case``)."""
        self.ops.append(what)

    def pick(self, options: list[Any] | tuple[Any, ...], what: str | None = None) -> Any:
        """One of ``options``, recorded when ``what`` is given."""
        x = options[self.rng.randrange(len(options))]
        if what is not None:
            self.op(f"{what}={x}" if not callable(x) else f"{what}={x.__name__}")
        return x


# -- damage -------------------------------------------------------------------------------

#: Text that tends to break readers: breaks other than \n, BOMs, NUL, surrogates, bidi.
ODD_TEXT = ("\u2028", "\u2029", "\r", "\r\n", "\x00", "\x0b", "\x1c", "\x85", "\ufeff",
            "\u202e", "\ud800", "\U0001f600", "e\u0301", "\t", '"', "\\", "\n\n")


def damage_bytes(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """``data`` with one kind of byte-level damage, and its name."""
    n = len(data)
    k = rng.randrange(12)
    if k == 0 and n:
        b = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(n)] = rng.randrange(256)
        return bytes(b), "flip-bytes"
    if k == 1:
        return data[:rng.randrange(n + 1)], "truncate"
    if k == 2:
        return b"", "empty"
    if k == 3:
        return b"\xef\xbb\xbf" + data, "bom"
    if k == 4:
        return data.decode("utf-8", "replace").encode("utf-16"), "utf-16"
    if k == 5:
        return data.decode("utf-8", "replace").encode("latin-1", "replace") + b"\xe9\xff", "latin-1"
    if k == 6:
        at = rng.randrange(n + 1)
        bad = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])
        return data[:at] + bad + data[at:], "invalid-utf8"
    if k == 7:
        at = rng.randrange(n + 1)
        odd = rng.choice(ODD_TEXT).encode("utf-8", "surrogatepass")
        return data[:at] + odd + data[at:], f"insert-{odd!r}"
    if k == 8:
        return data + data * rng.randint(1, 50), "repeat"
    if k == 9:
        at = rng.randrange(n + 1)
        return data[:at] + b"x" * rng.choice([10_000, 200_000]) + data[at:], "long-run"
    if k == 10:
        return data.replace(b"\n", rng.choice([b"\r", b"\r\n", b"\n\n\n", b" \n"])), "line-ends"
    return b"   \n\n\t\n", "blank"


def _sentinel(outside: Path) -> Path:
    p = outside / "sentinel.txt"
    if not p.exists():
        p.write_text("a file outside the case: it must never change\n", encoding="utf-8")
    return p


#: What :func:`special` can put in place of a file.
SPECIALS = ("fifo", "dev-zero", "dev-null", "outside", "dangling", "loop", "dir",
            "dir-with-file", "missing")


def special(path: Path, kind: str, outside: Path) -> None:
    """Put ``kind`` (see :data:`SPECIALS`) where ``path`` was (nothing when an earlier
    operator replaced its folder: nothing is ever written through a link)."""
    if not path.parent.is_dir() or path.parent.is_symlink():
        return
    if path.is_symlink() or path.is_file() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "dev-null":
        path.symlink_to("/dev/null")
    elif kind == "outside":
        path.symlink_to(_sentinel(outside))
    elif kind == "dangling":
        path.symlink_to(path.parent / "no-such-file")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "dir-with-file":
        path.mkdir()
        (path / "x").write_text("x\n", encoding="utf-8")


# -- the oracle's checks ------------------------------------------------------------------

def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"),
                       (stat.S_ISFIFO, "p")):
        if test(mode):
            return name
    return "?"


def snapshot(*roots: Path) -> dict[str, str]:
    """Path -> what it is (a regular file's hash, a link's target), under ``roots``;
    nothing is followed or opened but regular files."""
    out: dict[str, str] = {}
    for root in roots:
        stack = [root]
        while stack:
            p = stack.pop()
            try:
                st = p.lstat()
            except OSError:
                continue
            k = _kind(st.st_mode)
            if k == "f":
                h = hashlib.blake2b(digest_size=16)
                with open(p, "rb") as fh:
                    h.update(fh.read())
                out[str(p)] = "f" + h.hexdigest()
            elif k == "l":
                out[str(p)] = "l" + os.readlink(p)
            elif k == "d":
                out[str(p)] = "d"
                with contextlib.suppress(OSError):
                    stack += [p / n for n in os.listdir(p)]
            else:
                out[str(p)] = k
    return out


def changed(before: dict[str, str], after: dict[str, str],
            allowed: Callable[[str], bool] = lambda p: False) -> list[str]:
    """The paths of ``before`` that are gone or differ in ``after``, and new paths, that
    ``allowed`` does not excuse."""
    gone = [p for p, v in before.items() if after.get(p) != v and not allowed(p)]
    new = [p for p in after if p not in before and not allowed(p)]
    return sorted(gone + new)


def finite(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (tensors, numbers, lists, dicts) a number is not finite."""
    if isinstance(value, float):
        return None if math.isfinite(value) else where or "value"
    if isinstance(value, dict):
        for k, v in value.items():
            bad = finite(v, f"{where}.{k}" if where else str(k))
            if bad:
                return bad
        return None
    if isinstance(value, (list, tuple)):
        for j, v in enumerate(value):
            bad = finite(v, f"{where}[{j}]")
            if bad:
                return bad
        return None
    if type(value).__name__ == "Tensor":
        import torch

        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return where or "tensor"
    return None


def rejected(exc: BaseException) -> Outcome:
    """The outcome of an exception a case ended with: clean or a defect."""
    import click

    from attngraph.errors import AttnGraphError

    if isinstance(exc, AttnGraphError):
        bare = [d for d in exc.diagnostics if not d.hint]
        first = bare[0] if bare else exc.diagnostics[0]
        if not any(d.loc.file for d in exc.diagnostics):
            return Outcome("defect", "unlocated", _shape(first.message), first.format()[:500])
        return Outcome("rejected", type(exc).__name__, _shape(first.message),
                       first.format()[:500], not bare)
    if isinstance(exc, click.ClickException):
        return Outcome("rejected", "UsageError", _shape(exc.format_message()),
                       exc.format_message()[:500])
    if isinstance(exc, MemoryError):
        return Outcome("defect", "memory", place_of(exc), repr(exc)[:300])
    return Outcome("defect", "crash", place_of(exc), repr(exc)[:500])


def _shape(message: str) -> str:
    from fuzz.oracle import _shape as shape

    return shape(message)


class Exit(Exception):  # noqa: N818 - a command's exit status, not a failure
    """A command ran to an exit status other than 0 (its stderr says why)."""

    def __init__(self, code: Any, err: str) -> None:
        super().__init__(err)
        self.code, self.err = code, err


def cli(*args: str) -> str:
    """Run ``attngraph ARGS`` in this process and return its stdout.

    A located error (exit 1) or a usage error (exit 2) raises :class:`Exit`, a
    traceback any exception it was; a traceback printed to stderr is a defect.
    """
    from attngraph.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: Any = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main.main(args=list(args), prog_name="attngraph", standalone_mode=False)
    except SystemExit as exc:
        code = exc.code
    if "Traceback" in err.getvalue():
        fail("exit", f"{args[0]}: traceback on stderr", err.getvalue()[-500:])
    if code not in (0, None):
        if code not in (1, 2):
            fail("exit", f"{args[0]} exit {code}", err.getvalue()[-500:])
        raise Exit(code, err.getvalue())
    return out.getvalue()


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No output of the code under test reaches the terminal."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def prepare_all(surfaces: list[str], root: Path, states: dict[str, Any]) -> None:
    """Prepare each surface's state in worker folder ``root`` (once per worker)."""
    for surface in surfaces:
        if surface not in states:
            prep = root / "prepared" / surface
            prep.mkdir(parents=True, exist_ok=True)
            with quiet():
                states[surface] = importlib.import_module(MODULES[surface]).prepare(prep)


def run_case(surface: str, seed: int, i: int, root: Path,
             states: dict[str, Any]) -> tuple[Outcome, list[str]]:
    """Case ``i`` of ``surface`` (run ``seed``) in worker folder ``root``: its outcome
    and operators. ``states`` caches each surface's prepared state."""
    mod = importlib.import_module(MODULES[surface])
    outside = root / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    _sentinel(outside)
    prepare_all([surface], root, states)
    tmp = root / "case"
    if tmp.exists() or tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    case = Case(surface, seed, i, random.Random(f"{surface}:{seed}:{i}"), tmp, outside,
                states[surface])
    guarded = [outside, root / "prepared"]
    before = snapshot(*guarded)
    try:
        with quiet():
            o = mod.run(case)
    except Defect as d:
        o = d.outcome
    except Exit as e:
        o = Outcome("rejected", f"exit {e.code}", _shape(e.err.strip().splitlines()[0]
                                                          if e.err.strip() else "no message"),
                    e.err[:500], "hint:" in e.err or e.code == 2)
    except BaseException as exc:  # noqa: BLE001 - every other exception is the oracle's
        o = rejected(exc)
    lost = changed(before, snapshot(*guarded))
    if lost and o.outcome != "defect":
        o = Outcome("defect", "lost-file", "outside the case's output",
                    f"changed: {', '.join(lost[:5])}")
    shutil.rmtree(tmp, ignore_errors=True)
    return o, case.ops
