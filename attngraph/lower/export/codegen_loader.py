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
from typing import TYPE_CHECKING

from attngraph.lower.export.codegen_text import quote

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.lower.export.codegen_bundle import Bundle

__all__ = ["LOADER_NAMES", "loader_source", "weights_bytes"]

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
