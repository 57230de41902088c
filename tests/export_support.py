"""Helpers of the export tests (pt2, ONNX, jit.trace): inputs at a shape other than
the one a program was traced at, with a different size for each symbolic length; a
spec's exported files, made once per test session and shared by the test files and
their processes; a process without attngraph that runs pt2 programs."""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import torch

from attngraph.lower.runtime.examples import random_inputs


def symbols(graph: Any) -> list[str]:
    """The symbolic lengths of the graph's inputs, sorted (``["N", "T"]``)."""
    return sorted({d for n in graph.inputs for t in n.types.values() for d in t.dims
                   if isinstance(d, str)})


def new_inputs(graph: Any, *, batch: int, lengths: tuple[int, ...],
               seed: int) -> dict[str, torch.Tensor]:
    """Random inputs with the i-th symbolic length (sorted) of size ``lengths[i]``
    (cycled): e.g. a source of 11 items and a target of 6 steps, so that a program
    that tied two lengths together, or fixed one, is caught."""
    syms = symbols(graph)
    out: dict[str, torch.Tensor] = {}
    for node in graph.inputs:
        mine = [d for t in node.types.values() for d in t.dims if isinstance(d, str)]
        size = lengths[syms.index(mine[0]) % len(lengths)] if mine else lengths[0]
        drawn = random_inputs(graph, batch=batch, length=size,
                              generator=torch.Generator().manual_seed(seed))
        out.update({k: v for k, v in drawn.items()
                    if k == node.id or k.startswith(f"{node.id}_")})
    return out


def positional(model: Any, inputs: dict[str, torch.Tensor]) -> list[torch.Tensor]:
    """The inputs in the order of the model's signature (how programs take them)."""
    return [inputs[k] for k in model._positional if k in inputs]


#: the traced example of every export below, as ``attngraph export`` traces by default
TRACE_BATCH, TRACE_LENGTH = 2, 8


#: the folder where the exported files of this test session are kept for every test
#: process (pytest-xdist workers) to read; set by the ``shared_exports`` fixture of
#: tests/conftest.py; None: each process makes its own
SHARED: Path | None = None


def exported(path: Path, fmt: str, batch: int = TRACE_BATCH,
             length: int = TRACE_LENGTH) -> tuple[Any, Any]:
    """A spec file's compiled model (eval, seed 0) and its exported file of format
    ``fmt`` (:func:`attngraph.lower.export.programs.export_file`, traced at ``batch`` and every
    length ``length``), made once per test session.

    The export tests (tests/test_onnx.py, tests/test_export.py,
    tests/test_export_masks.py) check the same catalog specs in the same formats: they
    share these files. A process keeps what it made or read; a pt2 or ONNX file is
    also kept in :data:`SHARED`, keyed by the spec's text, behind a file lock, so that
    another worker reads it instead of exporting again (one worker waits while another
    exports the same file). The model is compiled in each process (seed 0: the same
    weights) and shared by its tests, which must not change it.

    A file read back from :data:`SHARED` has its ``exported`` result (dynamic axes,
    traced example, length) but no ``exported.program``: the file's bytes are the
    program.
    """
    # one key however it is called (functools.cache tells keywords from positions)
    return _exported(str(Path(path).resolve()), fmt, int(batch), int(length))


#: the formats :func:`_exported` makes together, from one trace of the model
TRACED = ("pt2", "onnx")


@functools.cache
def _exported(path: str, fmt: str, batch: int, length: int) -> tuple[Any, Any]:
    import attngraph
    from attngraph.lower.export.programs import export_file

    model = attngraph.compile(Path(path), seed=0).eval()
    if SHARED is None or fmt not in TRACED:  # the python file is model.code: no export
        return model, export_file(model, fmt, batch=batch, length=length)
    from filelock import FileLock

    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    key = f"{Path(path).stem}-{batch}-{length}-{digest}"
    kept = SHARED / f"{key}-{fmt}.pt"
    with FileLock(str(SHARED / f"{key}.lock")):
        if kept.is_file():
            return model, _read(kept)
        for made in _traced_once(model, fmt, batch, length).values():
            _keep(made, SHARED / f"{key}-{made.format}.pt")
    return model, _read(kept)


def _traced_once(model: Any, fmt: str, batch: int, length: int) -> dict[str, Any]:
    """The model's pt2 and ONNX files from one trace (:func:`export_files`, as
    ``attngraph export`` makes each: the same program), which every spec checked here
    is exported to; ``fmt`` alone when the other format cannot be made (the ONNX of a
    node torch cannot convert: its own error is the test's, raised here)."""
    from attngraph.errors import LoweringError
    from attngraph.lower.export.programs import export_file, export_files

    try:
        return export_files(model, TRACED, batch=batch, length=length)
    except LoweringError:
        return {fmt: export_file(model, fmt, batch=batch, length=length)}


def _keep(made: Any, where: Path) -> None:
    """Write an exported file and its export's result (without the program)."""
    done = made.exported
    torch.save({"format": made.format, "data": made.data, "class_name": made.class_name,
                "weights": made.weights,
                "exported": None if done is None else {
                    "example": done.example, "batch_dynamic": done.batch_dynamic,
                    "lengths_dynamic": done.lengths_dynamic, "length": done.length}},
               where.with_suffix(".part"))
    where.with_suffix(".part").replace(where)


def _read(where: Path) -> Any:
    """An exported file written by :func:`_keep`."""
    from attngraph.lower.export.programs import Exported, ExportedFile

    kept = torch.load(where, weights_only=False)  # written by this session
    done = kept.pop("exported")
    return ExportedFile(**kept, exported=None if done is None else Exported(
        program=None, **done))


def traced_as_the_command_does(made: Any) -> None:
    """The file of :func:`exported` was traced as ``attngraph export`` traces by
    default (batch 2, every length 8): its example has batch 2, the program says length
    8."""
    done = made.exported
    assert done is not None, made.format
    assert done.length == TRACE_LENGTH, done.length
    assert {int(t.shape[0]) for t in done.example.values()} == {TRACE_BATCH}, \
        {k: tuple(t.shape) for k, t in done.example.items()}


#: loads exported programs in a process where attngraph cannot be imported, one request
#: a line (``program<TAB>inputs<TAB>outputs``, three files): runs the program on the saved
#: inputs and saves its outputs; answers a line of ``ANSWER`` and ``ok`` or the traceback
#: (as JSON)
ANSWER = "standalone-answer: "
STANDALONE = """
import json
import sys
import traceback
sys.modules["attngraph"] = None  # the programs must not need it
import torch
for line in sys.stdin:
    try:
        program_file, inputs_file, out_file = line.rstrip("\\n").split("\\t")
        program = torch.export.load(program_file).module()
        inputs = torch.load(inputs_file)
        torch.manual_seed(0)  # a latent samples in eval: the same draws as the model's
        with torch.no_grad():
            out = program(*inputs)
        torch.save({k: v for k, v in out.items()}, out_file)
        answer = "ok"
    except Exception:
        answer = json.dumps(traceback.format_exc())
    print(%r + answer, flush=True)
""" % ANSWER


@functools.cache
def _standalone() -> tuple[subprocess.Popen[str], queue.Queue[str], Any]:
    """The process of ``STANDALONE`` (one per test process: importing torch takes
    seconds), without PYTHONPATH; the lines it prints ("" once it ends), read by a
    thread; the file that keeps its stderr."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-c", STANDALONE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=read, daemon=True).start()

    def close() -> None:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):  # it may have died
                proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr.close()

    atexit.register(close)
    return proc, lines, stderr


def run_without_attngraph(program: Path, inputs: list[torch.Tensor],
                          *, timeout: float = 300) -> dict[str, torch.Tensor]:
    """The outputs of the pt2 program saved at ``program`` on ``inputs`` (positional),
    run in another process where attngraph cannot be imported, after
    ``torch.manual_seed(0)``.

    That process is started once per test process and runs each program it is sent
    (a fresh Python per program would import torch again: seconds each); the property
    checked is the same, since attngraph stays unimportable there throughout."""
    proc, lines, stderr = _standalone()
    inputs_file = program.parent / f"{program.stem}.in.pt"
    out_file = program.parent / f"{program.stem}.out.pt"
    torch.save(inputs, inputs_file)
    out_file.unlink(missing_ok=True)
    assert proc.stdin is not None
    deadline = time.monotonic() + timeout
    answer = " "
    try:
        proc.stdin.write(f"{program}\t{inputs_file}\t{out_file}\n")
        proc.stdin.flush()
        while answer and not answer.startswith(ANSWER):  # anything else it prints
            answer = lines.get(timeout=max(0.0, deadline - time.monotonic()))
    except (queue.Empty, BrokenPipeError):
        answer = ""
    if not answer:  # it hangs or died: it cannot be used again
        _standalone.cache_clear()
        proc.kill()
        proc.wait()
        stderr.seek(0)
        msg = f"the program did not run in {timeout:.0f}s or its process died:\n"
        raise AssertionError(msg + stderr.read()[-3000:])
    said = answer[len(ANSWER):].strip()
    if said != "ok":
        raise AssertionError(json.loads(said)[-3000:])
    return dict(torch.load(out_file))
