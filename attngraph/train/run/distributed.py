"""Data-parallel training on CPU: ``attngraph train --nproc K``.

:func:`launch` spawns K processes with :mod:`torch.multiprocessing`, sets the
torchrun-style variables (``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``,
``RANK``, ``WORLD_SIZE``), joins a ``gloo`` process group and runs
:func:`attngraph.train.run.runner.run` in each. Every rank draws the same seeded
batch and trains on its own contiguous slice of it; the model is wrapped in
:class:`torch.nn.parallel.DistributedDataParallel`, which averages gradients,
so K ranks follow one process with the whole batch (up to float rounding).
Logged losses and metrics are averaged over the ranks; rank 0 writes the files.

A process started by ``torchrun`` (``RANK``/``WORLD_SIZE`` already set) joins
its group with :func:`from_env` instead.

This module only starts processes and process groups: what a rank does
differently inside the run (slicing batches, DDP, averaging figures) is in
:mod:`attngraph.train.run.ddp`, which the runner imports. Nothing but the
``attngraph train`` command imports this module.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from attngraph.errors import AttnGraphError, Diagnostic, TrainingError
from attngraph.train.run.runner import RunConfig, RunSummary, run, settle

__all__ = ["launch", "from_env", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _init(rank: int, world: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # K processes share the CPU cores
    dist.init_process_group("gloo", rank=rank, world_size=world)


def _worker(rank: int, world: int, port: int, config: RunConfig, queue: Any) -> None:
    """One spawned rank: join the group, train, report to the parent."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    _init(rank, world)
    try:
        summary = run(config, rank=rank, world=world)
        if rank == 0:
            queue.put(("ok", summary))
        _finish()
    except AttnGraphError as exc:
        queue.put(("error", exc.diagnostics))  # with their locations (the file at fault)
        raise
    finally:
        dist.destroy_process_group()


def _finish() -> None:
    """Wait, after a finished run, until every rank has finished too.

    The DistributedDataParallel wrapper of a finished run is held in reference
    cycles; left to the interpreter's shutdown, its gloo work would be destroyed
    after the group and abort the process (SIGABRT). Collect it first, then wait
    for every rank, so that no rank leaves the group while another still uses it.
    (Only after success: a failed rank leaves at once, and the others fail.)
    """
    import gc

    import torch.distributed as dist

    gc.collect()
    dist.barrier()


def _reported(diagnostics: tuple[Diagnostic, ...]) -> TrainingError:
    """The error a rank reported, with its diagnostics' locations."""
    return TrainingError(diagnostics[0].message, diagnostics=diagnostics)


def launch(config: RunConfig, nproc: int) -> RunSummary:
    """Run ``config`` on ``nproc`` local processes; rank 0's summary.

    Parameters
    ----------
    config : RunConfig
        The run's settings (the batch is split over the processes).
    nproc : int
        Number of processes; 1 runs :func:`~attngraph.train.run.runner.run` in this one.

    Returns
    -------
    RunSummary
        Rank 0's summary (``world`` and ``rank_max_diff`` set).

    Raises
    ------
    TrainingError
        For ``nproc < 1``, or the first error a rank reports.
    """
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import ProcessException

    if nproc < 1:
        msg = f"--nproc must be at least 1, not {nproc}"
        raise TrainingError(msg)
    if nproc == 1:
        return run(config)
    settle(config, nproc)  # settings and spec errors show here, not in every rank
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    # DDP's C++ reducer warns on every rank when find_unused_parameters finds none
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    try:
        mp.spawn(_worker, args=(nproc, free_port(), config, queue), nprocs=nproc, join=True)
    except ProcessException as exc:
        reply = queue.get() if not queue.empty() else None
        if reply is not None and reply[0] == "error":
            raise _reported(reply[1]) from None
        msg = f"a training process failed: {str(exc).strip().splitlines()[-1]}"
        raise TrainingError(msg) from exc
    reply = queue.get()
    if reply[0] != "ok":
        raise _reported(reply[1])
    summary: RunSummary = reply[1]
    return summary


def from_env(config: RunConfig) -> RunSummary:
    """Run this process's rank of a job started by ``torchrun``.

    Parameters
    ----------
    config : RunConfig
        The run's settings, the same on every rank.

    Returns
    -------
    RunSummary
        This rank's summary (only rank 0 writes files).

    Raises
    ------
    KeyError
        When ``RANK`` or ``WORLD_SIZE`` is not set.
    """
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    _init(rank, world)
    try:
        summary = run(config, rank=rank, world=world)
        _finish()
        return summary
    finally:
        dist.destroy_process_group()
