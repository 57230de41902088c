"""A compiled model as a ``torch.export`` program with a dynamic batch and lengths.

:func:`export_program` traces the model in eval mode on random inputs of the
declared types, marking the batch axis and every axis of a symbolic length
(``N``, ``T``, ...) ``Dim.AUTO``: torch.export keeps each one dynamic unless the model
fixes it, and never fails for that. It then runs the program at another batch and
other lengths to say which stayed dynamic. A recurrence (a ``loop`` over a length,
an ``rnn`` over items) runs its step through torch's ``scan`` while exporting
(:mod:`attngraph.lower.rules.scan`), so its length stays dynamic: a Python loop over
the items would unroll at the traced length.

The program takes every argument of the model's forward, in its order, the padding
masks included (``<input>_mask``, bool, True at the real items): a program has no
optional inputs, and one traced without masks would compute a padded batch as if
every item were real. It is traced on padded masks
(:mod:`attngraph.lower.export.inputs`), their axes dynamic like their inputs'; a
batch without padding passes all-True masks.

The saved program (``torch.export.save``) loads with ``torch.export.load`` and runs
without attngraph.

:func:`export_file` makes the bytes of one of :data:`FORMATS` (what ``attngraph
export`` writes) and checks them before anyone writes them: a pt2 program loads
back, an ONNX model passes ``onnx.checker``, a Python file parses and compiles.
:func:`export_files` makes several, traced once; :func:`export_text` does so for a
spec's text, in-process (what a fuzzer calls).

:func:`export_onnx` converts that program to ONNX with torch's exporter
(``torch.onnx.export(..., dynamo=True)``; a scan becomes an ONNX ``Scan``), so the
ONNX model keeps the same dynamic axes. It needs the ``onnx`` and ``onnxscript``
packages (``pip install 'attngraph[onnx]'``).
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError, RegistryError, SourceLoc, did_you_mean

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["FORMATS", "Exported", "ExportedFile", "export_file", "export_files",
           "export_onnx", "export_program", "export_text"]

#: what ``attngraph export --format`` offers: a torch.export program, an ONNX model,
#: the model's PyTorch source
FORMATS = ("pt2", "onnx", "python")


@dataclass(frozen=True)
class Exported:
    """An exported program, the inputs it was traced on, and what may vary when it
    runs: the batch, the lengths (every symbolic length), or neither."""

    program: Any
    #: the example inputs, in the order the program takes them
    example: dict[str, Tensor]
    batch_dynamic: bool
    lengths_dynamic: bool
    #: the length the lengths are fixed at when they are not dynamic
    length: int


def _runs(program: Any, inputs: dict[str, Tensor]) -> bool:
    """Whether the exported program accepts these inputs (its guards pass)."""
    import torch

    try:
        with torch.no_grad():
            program.module()(*inputs.values())
    except Exception:  # noqa: BLE001 - a failed guard is what is being probed
        return False
    return True


def export_program(model: Any, *, batch: int = 2, length: int = 8,
                   seed: int = 0) -> Exported:
    """Export ``model`` (from :func:`attngraph.compile`) with dynamic batch and lengths.

    The program takes the model's inputs and then every padding mask it takes
    (:func:`~attngraph.lower.export.inputs.program_inputs`), traced on padded masks.
    Every batch axis and every axis of a symbolic length is marked ``Dim.AUTO``; the
    program is then run at another batch and other lengths to learn which stayed
    dynamic (its guards refuse the sizes it specialised).

    Raises
    ------
    LoweringError
        When torch.export cannot trace the model (the message of torch's error).
    """
    import torch
    from torch.export import Dim, export

    from attngraph.lower.export.inputs import with_masks
    from attngraph.lower.runtime.examples import random_inputs

    model = model.eval()
    graph = model.graph
    gen = torch.Generator().manual_seed(seed)
    example = with_masks(model, random_inputs(graph, batch=batch, length=length,
                                              generator=gen), generator=gen)
    axes: dict[str, list[int]] = {}
    for a in model.binder.args:
        axes[a.name] = [0] + [i + 1 for i, d in enumerate(a.t.dims) if isinstance(d, str)]
    shapes = {k: dict.fromkeys(axes[k], Dim.AUTO) for k in example}
    # positionally, in the signature's order, so that the program takes them so too
    order = list(model._positional) or list(example)
    args = tuple(example[k] for k in order if k in example)
    if len(args) != len(example):
        msg = f"{graph.name}: its inputs cannot be given positionally"
        raise LoweringError(msg, None, "rename the inputs that are Python keywords")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = export(model, args, dynamic_shapes=shapes)
    except Exception as exc:  # noqa: BLE001 - torch's tracer: report it at the spec
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"torch.export could not trace {graph.name}: {first}"
        raise LoweringError(msg, None, "the model runs in eager mode and under "
                            "torch.compile; report the spec") from None
    probe = torch.Generator().manual_seed(seed + 1)
    longer, same = (with_masks(model, random_inputs(graph, batch=batch + 1, length=n,
                                                    generator=probe), generator=probe)
                    for n in (length + 3, length))
    longer, same = ({k: d[k] for k in order if k in d} for d in (longer, same))
    lengths = _runs(program, longer)
    batched = lengths or _runs(program, same)
    example = {k: example[k] for k in order if k in example}
    return Exported(program, example, batched, lengths, length)


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    """A logger's warnings silenced for a while (the exporter's notes on optional
    packages it does not need here, such as torchvision)."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def _frozen(model: Any) -> Iterator[None]:
    """The parameters without ``requires_grad`` for a while (then as they were): an
    inference program, whose scans torch's ONNX decompositions can retrace."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    try:
        for p, _ in flags:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def export_onnx(model: Any, *, batch: int = 2, length: int = 8, seed: int = 0,
                traced: Exported | None = None) -> tuple[bytes, Exported]:
    """Export ``model`` to ONNX with dynamic batch and lengths.

    The model is exported by :func:`export_program` (parameters frozen for the
    while; ``traced``, that function's result for the same model and sizes, is used
    instead when given: the program does not depend on the frozen flags), and the
    program converted by ``torch.onnx.export(program, dynamo=True)``
    (with the work-arounds of :mod:`attngraph.lower.export.onnx_fixes`). The ONNX inputs
    are named like the model's arguments (in its order, the masks included,
    ``tensor(bool)``), its outputs like the spec's outputs.

    Returns
    -------
    bytes, Exported
        The serialised ONNX model, and the torch.export program it came from (which
        axes are dynamic).

    Raises
    ------
    LoweringError
        When ``onnx``/``onnxscript`` are missing, or the exporter fails (torch's
        message, with the operator it could not convert).
    """
    import torch

    from attngraph.lower.export.onnx_errors import onnx_error
    from attngraph.lower.export.onnx_fixes import decompositions, name_outputs

    try:
        import onnx  # noqa: F401 - torch's exporter needs both; say so up front
        import onnxscript  # noqa: F401
    except ImportError as exc:
        msg = f"ONNX export needs the '{exc.name}' package, which is not installed"
        raise LoweringError(msg, None, "pip install 'attngraph[onnx]' (onnx and "
                            "onnxscript)") from None
    graph = model.graph
    with _frozen(model):
        done = traced or export_program(model, batch=batch, length=length, seed=seed)
        outputs = [name for name, _ in graph.outputs]
        try:
            with warnings.catch_warnings(), _quiet("torch.onnx"):
                warnings.simplefilter("ignore")
                fixed = done.program.run_decompositions(decompositions())
                program = torch.onnx.export(fixed, (), dynamo=True, verbose=False,
                                            input_names=list(done.example))
                if program is not None:
                    name_outputs(program.model, outputs)
        except Exception as exc:  # noqa: BLE001 - torch's exporter: report it at the node
            raise onnx_error(graph, done.program, exc) from None
    if program is None:  # the exporter returns None only when given a file to write
        msg = f"torch.onnx returned no program for {graph.name}"
        raise LoweringError(msg, None, "report the spec")
    return program.model_proto.SerializeToString(), done


@dataclass(frozen=True)
class ExportedFile:
    """The bytes of an exported model, checked (:func:`export_file`)."""

    format: str
    data: bytes
    #: the torch.export program it came from (pt2, onnx); None for python
    exported: Exported | None = None
    #: python: the name of the model's class in the file
    class_name: str | None = None
    #: python with weights: the safetensors file of the state dict, which the file's
    #: ``load()`` reads from beside it
    weights: bytes | None = None


def _internal(model: Any, fmt: str, why: str) -> LoweringError:
    """An exported file that does not load back: attngraph's bug, said at the spec."""
    graph = model.graph
    msg = f"{graph.name}: the exported {fmt} file does not load back: {why}"
    return LoweringError(msg, SourceLoc(graph.file), "this is a bug in attngraph's export: "
                         "report it with the spec")


def _read_back(model: Any, fmt: str, check: Callable[[], object]) -> None:
    """Run ``check`` (torch's reader, onnx's checker) on the bytes just written; its
    failure is said as attngraph's bug (:func:`_internal`), in its first line."""
    try:
        check()
    except Exception as exc:  # noqa: BLE001 - the reader's failure: said as our bug
        text = str(exc).strip()
        raise _internal(model, fmt, text.splitlines()[0] if text else type(exc).__name__
                        ) from None


def export_file(model: Any, fmt: str, *, batch: int = 2, length: int = 8,
                seed: int = 0, weights: str | None = None,
                traced: Exported | None = None) -> ExportedFile:
    """``model`` (from :func:`attngraph.compile`) as the bytes of a file of format
    ``fmt`` (one of :data:`FORMATS`), checked before it is returned.

    ``python`` is ``model.code`` (UTF-8), which parses and compiles; with ``weights``
    (the name of a file beside it) the code ends with ``load()``, which reads that
    file, and :attr:`ExportedFile.weights` holds its bytes (safetensors of the state
    dict, read back before they are returned). ``pt2`` is a saved
    :func:`export_program`, which ``torch.export.load`` reads back; ``onnx`` the model
    of :func:`export_onnx`, which ``onnx.checker`` accepts. Both take every padding
    mask the model takes (:func:`~attngraph.lower.export.inputs.program_inputs`);
    ``traced`` is a :func:`export_program` of the model at the same sizes to use
    instead of tracing again (:func:`export_files`).

    Raises
    ------
    RegistryError
        For a format not in :data:`FORMATS`.
    LoweringError
        When the model cannot be exported so (see :func:`export_program`,
        :func:`export_onnx`, ``model.code``), or the file does not load back.
    """
    if fmt == "python":
        return _python_file(model, weights)
    if fmt == "pt2":
        import torch

        done = traced or export_program(model, batch=batch, length=length, seed=seed)
        buf = io.BytesIO()
        torch.export.save(done.program, buf)
        data = buf.getvalue()
        _read_back(model, fmt, lambda: torch.export.load(io.BytesIO(data)))
        return ExportedFile(fmt, data, done)
    if fmt == "onnx":
        import onnx

        data, done = export_onnx(model, batch=batch, length=length, seed=seed,
                                 traced=traced)
        _read_back(model, fmt, lambda: onnx.checker.check_model(onnx.load_from_string(data)))
        return ExportedFile(fmt, data, done)
    msg = f"unknown export format {fmt!r}"
    raise RegistryError(msg, None, did_you_mean(fmt, FORMATS))


def _known(formats: Iterable[str]) -> list[str]:
    """``formats`` as a list, each one of :data:`FORMATS` (else the error)."""
    out = list(formats)
    for fmt in out:
        if fmt not in FORMATS:
            msg = f"unknown export format {fmt!r}"
            raise RegistryError(msg, None, did_you_mean(fmt, FORMATS))
    return out


def export_files(model: Any, formats: Iterable[str], *, batch: int = 2, length: int = 8,
                 seed: int = 0) -> dict[str, ExportedFile]:
    """:func:`export_file` of each of ``formats``, the model traced once for all of
    them (pt2 and ONNX share one :func:`export_program`, which is most of a pt2
    export's time and half of an ONNX one's)."""
    formats = _known(formats)
    traced = None
    if {"pt2", "onnx"} & set(formats):
        traced = export_program(model, batch=batch, length=length, seed=seed)
    return {fmt: export_file(model, fmt, batch=batch, length=length, seed=seed,
                             traced=traced) for fmt in formats}


def _python_file(model: Any, weights: str | None) -> ExportedFile:
    """``model.code``, or with ``weights`` the code with its loader and the weights."""
    from attngraph.lower.export.codegen import class_name

    name = class_name(model.graph.name)
    if weights is None:
        code = model.code  # parsed and compiled before it is returned
        return ExportedFile("python", code.encode("utf-8"), None, name)
    from attngraph.lower.export.weights import with_weights

    code, data = with_weights(model, weights)
    return ExportedFile("python", code.encode("utf-8"), None, name, data)


def export_text(text: str, *, file: str = "<spec>", formats: Iterable[str] = FORMATS,
                seed: int = 0, batch: int = 2, length: int = 8,
                allow_large: bool = False) -> dict[str, ExportedFile]:
    """A spec's YAML text compiled (eval mode, fresh weights of ``seed``) and exported
    to each of ``formats``, in-process: what ``attngraph export`` writes, checked
    (:func:`export_file`), without touching the disk.

    Raises
    ------
    AttnGraphError
        The spec's own errors (``SpecError``, ``GraphError``, ``ShapeError``...), and
        the ``LoweringError`` of a format it cannot be exported to.

    Examples
    --------
    >>> text = open("specs/kvq_attention.yaml").read().replace("kvq_attention", "none")
    >>> files = export_text(text, formats=["python"])
    >>> files["python"].class_name
    'NoneModel'
    """
    from attngraph.frontend import loads_spec
    from attngraph.lower import compile as lower

    formats = _known(formats)
    graph = loads_spec(text, file, allow_large=allow_large, batch=batch, length=length)
    model = lower(graph, seed=seed).eval()
    return export_files(model, formats, batch=batch, length=length, seed=seed)
