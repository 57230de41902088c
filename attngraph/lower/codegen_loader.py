"""The loader of an exported Python file that has its weights beside it.

``attngraph export RUN --format python -o model.py`` writes the run's weights to
``model.safetensors`` and ends ``model.py`` with :data:`LOAD` (``load(path=None)``:
the model with those weights, in eval mode) and :data:`READ` (``read_weights``: a
safetensors file read with torch alone), so that ``from model import load`` works
where only torch is installed. The safetensors format is small and fixed: an 8-byte
little-endian header size, a JSON header (per tensor its dtype, shape and byte
offsets), then the bytes.
"""

from __future__ import annotations

from string import Template
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError, SourceLoc
from attngraph.lower.codegen_text import quote

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.lower.codegen_bundle import Bundle

__all__ = ["LOADER_NAMES", "loader_source", "weights_bytes", "with_weights"]

#: the file's own top-level names, kept from bundled helpers (which are renamed)
LOADER_NAMES = ("load", "read_weights")

_SOURCE = Template('''

def load(path: str | None = None) -> $top:
    """The model with the weights exported beside this file, in eval mode.

    ``path`` is a safetensors file of its state dict; by default the one that
    ``attngraph export`` wrote beside this file.
    """
    file = $Path(__file__).with_name($weights) if path is None else $Path(path)
    model = $top()
    model.load_state_dict(read_weights(file))
    model.eval()
    return model


def read_weights(path: str | $Path) -> dict[str, $Tensor]:
    """The tensors of a safetensors file, read with torch alone."""
    dtypes = {"F64": $torch.float64, "F32": $torch.float32, "F16": $torch.float16,
              "BF16": $torch.bfloat16, "I64": $torch.int64, "I32": $torch.int32,
              "I16": $torch.int16, "I8": $torch.int8, "U8": $torch.uint8,
              "BOOL": $torch.bool}
    raw = $Path(path).read_bytes()
    size = int.from_bytes(raw[:8], "little")  # then a JSON header of that many bytes
    header = $json.loads(raw[8:8 + size])
    header.pop("__metadata__", None)
    out = {}
    for name, entry in header.items():
        start, end = (8 + size + i for i in entry["data_offsets"])
        dtype = dtypes[entry["dtype"]]
        data = bytearray(raw[start:end])
        flat = $torch.frombuffer(data, dtype=dtype) if data else $torch.empty(0, dtype=dtype)
        out[name] = flat.reshape(entry["shape"])
    return out
''')


def loader_source(bundle: Bundle, top: str, weights: str) -> str:
    """``load`` and ``read_weights`` of a file whose spec class is ``top`` and whose
    weights are the file ``weights`` beside it (the imports they use added to
    ``bundle``, under the names it gives them)."""
    names = {
        "torch": bundle.add_import("torch", None, "torch"),
        "Tensor": bundle.add_import("torch", "Tensor", "Tensor"),
        "json": bundle.add_import("json", None, "json"),
        "Path": bundle.add_import("pathlib", "Path", "Path"),
    }
    return _SOURCE.substitute(names, top=top, weights=quote(weights))


def weights_bytes(state: dict[str, Tensor]) -> bytes:
    """A state dict as the bytes of a safetensors file (each tensor its own contiguous
    copy on the CPU: shared and tied parameters are written once per name)."""
    from safetensors.torch import save

    return save({k: v.detach().to("cpu").contiguous().clone() for k, v in state.items()})


def with_weights(model: Any, weights: str) -> tuple[str, bytes]:
    """The file of ``model`` that loads its weights from ``weights`` beside it, and
    those weights (safetensors, read back before they are returned).

    Raises
    ------
    LoweringError
        What ``model.code`` raises; weights that do not read back (attngraph's bug).
    """
    try:
        from safetensors.torch import load
    except ImportError:
        msg = "exporting the weights beside the Python file needs the 'safetensors' package"
        raise LoweringError(msg, None, "pip install safetensors") from None

    from attngraph.lower.codegen import python_source
    from attngraph.lower.module import Runtime, _run_linear_group

    code = python_source(model, runtime=Runtime, linear_group=_run_linear_group,
                         weights=weights)
    state = model.state_dict()
    data = weights_bytes(state)
    try:
        back = load(data)
        same = set(back) == set(state) and all(back[k].equal(v.cpu()) for k, v in state.items())
    except Exception as exc:  # noqa: BLE001 - safetensors' reader: said as our bug
        same, why = False, str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    else:
        why = "its tensors are not the state dict's"
    if not same:
        graph = model.graph
        msg = f"{graph.name}: the exported weights do not load back: {why}"
        raise LoweringError(msg, SourceLoc(graph.file), "this is a bug in attngraph's "
                            "export: report it with the spec")
    return code, data
