"""Where training and inference run: ``--device cpu|cuda|mps|auto`` and bf16 autocast.

:func:`pick_device` turns the option into a :class:`torch.device`, refusing a
device this machine lacks with one clear error; :func:`to_device` moves a
batch; :func:`autocast` is ``torch.autocast`` in bfloat16 when asked (the loss
and the metrics are computed from its outputs in float32 by torch's autocast
rules), else nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

__all__ = ["DEVICES", "pick_device", "to_device", "autocast", "device_of", "float_outputs"]

#: The values ``--device`` takes.
DEVICES = ("cpu", "cuda", "mps", "auto")


def _has(kind: str) -> bool:
    import torch

    if kind == "cuda":
        return bool(torch.cuda.is_available())
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        return bool(mps is not None and mps.is_available())
    return kind == "cpu"


def pick_device(name: str) -> torch.device:
    """The device ``name`` names (``auto``: cuda when available, else cpu).

    Raises
    ------
    TrainingError
        An unknown name, or a device this machine does not have.

    Examples
    --------
    >>> str(pick_device("cpu"))
    'cpu'
    """
    import torch

    if name not in DEVICES:
        msg = f"unknown device {name!r}"
        raise TrainingError(msg, SourceLoc("--device"), f"use one of: {', '.join(DEVICES)}")
    if name == "auto":
        name = "cuda" if _has("cuda") else "cpu"
    if not _has(name):
        msg = f"--device {name}: this machine has no {name} device (or torch was built without it)"
        raise TrainingError(msg, SourceLoc("--device"),
                            "use --device cpu, or --device auto to take what there is")
    return torch.device(name)


def device_of(model: nn.Module) -> torch.device:
    """The device ``model``'s parameters are on (cpu for a model without any)."""
    import torch

    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def to_device(batch: Mapping[str, Any], device: torch.device) -> dict[str, Any]:
    """``batch`` with every tensor on ``device`` (unchanged when it is already there)."""
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in batch.items()}


def autocast(device: torch.device, bf16: bool) -> AbstractContextManager[Any]:
    """bfloat16 autocast on ``device`` when ``bf16``, else a context doing nothing."""
    if not bf16:
        return nullcontext()
    import torch

    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def float_outputs(outputs: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Floating outputs as float32 (bf16 autocast leaves some in bfloat16)."""
    return {k: v.float() if v.is_floating_point() else v for k, v in outputs.items()}
