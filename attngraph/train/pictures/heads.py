"""The ``heads`` picture of ``attngraph attend``: a memory's write and read heads.

A spec that declares both ``write`` (its write head's weights) and ``weights``
(its read head's), ``[T, S]`` each over the same ``S`` slots, is drawn as one
heatmap: a row per step (labelled by the step's input token), the write
weights over the slots on the left, the read weights on the right. In the
NTM copy (``specs/ntm_copy.yaml``) the write head's bright cells step one
slot per input vector and the read head's repeat that walk after the
delimiter.

Examples
--------
>>> import torch
>>> both = {"write": torch.eye(3), "weights": torch.eye(3).flip(0)}
>>> has_heads(both)
True
>>> has_heads({"weights": torch.eye(3)})
False
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.train.tasks.base import Task

__all__ = ["has_heads", "draw_heads"]


def has_heads(outputs: dict[str, Tensor]) -> bool:
    """Whether one example's outputs hold write and read weights ``[T, S]`` alike."""
    w, r = outputs.get("write"), outputs.get("weights")
    return w is not None and r is not None and w.dim() == 2 and w.shape == r.shape


def draw_heads(ax: Any, outputs: dict[str, Tensor], ex: dict[str, Tensor], task: Task) -> str:
    """Draw one example's write | read weights on ``ax``; returns what the picture shows."""
    import torch

    write, read = outputs["write"].float(), outputs["weights"].float()
    steps, slots = write.shape
    gap = torch.full((steps, 1), float("nan"))
    im = ax.imshow(torch.cat([write, gap, read], 1).numpy(), cmap="viridis", aspect="auto",
                   vmin=0.0, vmax=1.0)
    ax.set_xticks([*range(slots), *range(slots + 1, 2 * slots + 1)],
                  [str(i) for i in range(slots)] * 2, fontsize=7)
    ax.set_xlabel(f"slot: write head (left) | read head (right), {slots} slots each")
    field = next((f for f, t in task.provides.items() if t == "tokens"), None)
    if field is not None and field in ex and ex[field].shape[0] == steps:
        ax.set_yticks(range(steps), task.token_names(field, ex[field].tolist()), fontsize=7)
    ax.set_ylabel("step (its input)")
    ax.axvline(slots, color="white", lw=2)
    ax.figure.colorbar(im, ax=ax, fraction=0.046)
    return "write and read weights over the memory's slots per step"
