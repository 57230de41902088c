"""What a training run does differently on one rank of a data-parallel job.

:func:`attngraph.train.run.runner.run` uses these when ``world > 1``: every rank
draws the same seeded batch and trains on its :func:`shard` of it, the model is
:func:`wrap`'d in DistributedDataParallel (which averages the gradients), logged
figures are averaged with :func:`mean`, and :func:`rank_max_diff` checks at the
end that the ranks hold the same parameters. Starting the processes and the
process group is :mod:`attngraph.train.run.distributed`'s job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn

__all__ = ["shard", "wrap", "mean", "rank_max_diff"]


def shard(batch: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """Rank ``rank``'s contiguous slice of every field along the batch axis.

    Parameters
    ----------
    batch : dict
        Fields with the batch axis first, its size a multiple of ``world``.
    rank, world : int
        This process's rank and the number of processes.

    Returns
    -------
    dict
        The same fields, ``size // world`` examples each (``batch`` itself when
        ``world`` is 1).
    """
    if world == 1:
        return batch
    size = next(iter(batch.values())).shape[0]
    per = size // world
    return {k: v[rank * per:(rank + 1) * per] for k, v in batch.items()}


def wrap(model: nn.Module) -> nn.Module:
    """``model`` in DistributedDataParallel (CPU, gloo).

    Parameters
    ----------
    model : torch.nn.Module
        The compiled model; the process group must exist.

    Returns
    -------
    torch.nn.Module
        The wrapper that runs the forward pass and averages gradients over ranks.
    """
    from torch.nn.parallel import DistributedDataParallel

    # Not every spec uses every parameter in every step (a policy's baseline
    # when nothing is sampled, a decoder's unused branch): let DDP find them.
    return DistributedDataParallel(model, find_unused_parameters=True)


def mean(info: dict[str, float]) -> dict[str, float]:
    """Each value averaged over the ranks (a collective: every rank calls it).

    Parameters
    ----------
    info : dict
        Name -> value, with the same names on every rank.

    Returns
    -------
    dict
        The same names, each value the mean over the ranks.
    """
    import torch
    import torch.distributed as dist

    keys = list(info)
    t = torch.tensor([info[k] for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    t /= dist.get_world_size()
    return {k: float(v) for k, v in zip(keys, t.tolist(), strict=True)}


def rank_max_diff(model: nn.Module) -> float:
    """Largest |parameter difference| between any rank and rank 0 (a collective).

    Parameters
    ----------
    model : torch.nn.Module
        This rank's model.

    Returns
    -------
    float
        0.0 when every rank holds rank 0's parameters.
    """
    import torch
    import torch.distributed as dist

    flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    diff = (flat - ref).abs().max()
    dist.all_reduce(diff, op=dist.ReduceOp.MAX)
    return float(diff)
