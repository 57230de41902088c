"""Reading a real model: its configuration, its tensors, its tokenizer.

A source is a ``transformers`` model directory (``config.json`` and
``model.safetensors``, a sharded ``model.safetensors.index.json``, or
``pytorch_model.bin``), or a safetensors file with a ``config.json`` beside it (or
given). Nothing here imports ``transformers``: safetensors files are read with the
``safetensors`` package, ``.bin`` files with ``torch.load(weights_only=True)``, so
no file can run code.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import Role, loads_json, read_text

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["Checkpoint", "read_source"]

CONFIG = Role("model configuration", 16 * 2**20, missing_hint=(
    "a transformers model directory holds config.json; beside a lone safetensors file, "
    "give --config"))
#: Files of a tokenizer that ``transformers.AutoTokenizer`` reads from a directory.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "vocab.txt", "special_tokens_map.json", "tokenizer.model", "spiece.model")
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


@dataclass(frozen=True)
class Checkpoint:
    """A real model's configuration and tensors, and where they came from."""

    config: dict[str, Any]
    config_file: str
    tensors: dict[str, Tensor]
    weights_file: str
    tokenizer: Path | None


def _error(msg: str, where: str | Path, hint: str) -> TrainingError:
    return TrainingError(msg, SourceLoc(str(where)), hint)


def read_source(source: str | Path, *, config: str | Path | None = None) -> Checkpoint:
    """The configuration and tensors of a model directory or safetensors file.

    Raises
    ------
    TrainingError
        At the path: no such directory or file, no weights in it, no configuration,
        a configuration that is not a JSON object, an unreadable weights file.
    """
    path = Path(source)
    if path.is_dir():
        weights = next((path / w for w in _WEIGHTS if (path / w).is_file()), None)
        if weights is None:
            msg = f"{path} holds no model weights ({', '.join(_WEIGHTS)})"
            raise _error(msg, path, "give a transformers model directory (save_pretrained "
                         "writes one) or a .safetensors file")
        folder = path
    elif path.is_file():
        weights, folder = path, path.parent
    else:
        msg = f"no model directory or weights file at {path}"
        raise _error(msg, path, "give a transformers model directory or a .safetensors file")
    cfg_path = Path(config) if config is not None else folder / "config.json"
    cfg = loads_json(read_text(cfg_path, CONFIG), str(cfg_path), CONFIG,
                     what="this model configuration", float32=False)
    if not isinstance(cfg, dict):
        msg = "the model configuration is not a JSON object"
        raise _error(msg, cfg_path, "give a transformers config.json")
    tok = folder if any((folder / f).is_file() for f in TOKENIZER_FILES) else None
    return Checkpoint(cfg, str(cfg_path), _tensors(weights), str(weights), tok)


def _tensors(path: Path) -> dict[str, Tensor]:
    """Every tensor of a weights file (a sharded index: of all its shards), as float32."""
    import torch

    try:
        if path.name.endswith(".index.json"):
            index = loads_json(read_text(path, CONFIG), str(path), CONFIG,
                               what="this weights index", float32=False)
            shards = sorted(set(index["weight_map"].values()))
            out: dict[str, Tensor] = {}
            for shard in shards:
                out.update(_tensors(path.parent / shard))
            return out
        if path.suffix == ".bin":
            data = torch.load(path, map_location="cpu", weights_only=True)
        else:
            from safetensors.torch import load_file

            data = load_file(str(path))
    except (OSError, RuntimeError, ValueError, KeyError, TypeError) as exc:
        msg = f"cannot read the weights in {path.name}: {str(exc)[:200]}"
        raise _error(msg, path, "is the file complete? Save the model again") from None
    except ImportError:
        msg = "reading safetensors files needs the safetensors package"
        raise _error(msg, path, "pip install 'attngraph[real]'") from None
    if not isinstance(data, dict):
        msg = f"{path.name} is not a mapping of named tensors"
        raise _error(msg, path, "give a transformers checkpoint")
    return {str(k): v.float() if v.is_floating_point() else v for k, v in data.items()}
