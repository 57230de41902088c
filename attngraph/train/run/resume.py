"""What ``--resume`` continues: the stored settings, and the total to train on to.

A checkpoint stores the settings a run was started with
(:data:`attngraph.train.store.checkpoints.CONFIG`, a data run's files and split, and
the total it was asked for); on resume those win over the given ones but the
total. Of the settings a user gives (:data:`CHOSEN`: the learning rate, the batch,
how often to evaluate), one that differs from a trained run's own is refused rather
than dropped; a run that trained no step yet (a run of ``attngraph import``) takes
the given ones. ``--resume`` means "train on to the total asked for":

- ``--steps N`` or ``--epochs N`` given: that is the new total (an epoch total
  for a data run only);
- neither: the stored total (the run's own ``--steps``/``--epochs``, or for a
  checkpoint without it the spec's), so a killed run finishes as asked;
- a total at or below the steps already done is refused (:func:`check_total`)
  rather than a silent run that trains nothing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import SourceLoc, TrainingError
from attngraph.train.store import checkpoints as ck

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.run.config import RunConfig

__all__ = ["CHOSEN", "STORED", "DATA", "resumed", "check_total"]

#: Settings a checkpoint stores, which win over the given ones on resume (but the total).
STORED = tuple(ck.CONFIG)
#: A data run's settings its checkpoint stores (a resume reads the same files the same way).
DATA = ("data", "valid", "valid_fraction", "fields", "tokenize", "truncate", "blocks",
        "epochs", "patience")
#: The total a run was asked for, stored beside the settings (absent in older checkpoints).
TOTAL = "steps"
#: Stored settings a user may give (setting -> its option): on a resume of a run that
#: trained no step yet (an import's) the given ones win; otherwise one that differs
#: from the run's own is refused, not silently dropped.
CHOSEN = {"lr": "--lr", "batch": "--batch", "eval_every": "--eval-every"}


def resumed(config: RunConfig, prior: ck.Checkpoint) -> RunConfig:
    """``config`` with the checkpoint's stored settings, and the total to train on to.

    The stored settings were checked when the checkpoint was read
    (:mod:`attngraph.train.store.checkpoint_data`).

    Raises
    ------
    TrainingError
        At ``--epochs`` when the run is not a data run.
    """
    given_total = config.steps is not None or config.epochs is not None
    own = {k: prior.config[k] for k in STORED}
    for key, flag in CHOSEN.items():
        value = getattr(config, key)
        if not value or value == own[key]:
            continue
        if prior.step == 0:  # nothing trained yet (a run of attngraph import): it wins
            own[key] = value
            continue
        msg = (f"{flag} {value}: a resume goes on with the run's own {key.replace('_', ' ')} "
               f"({own[key]}), as one straight run would, so {flag} would not be used")
        raise TrainingError(msg, SourceLoc(flag), f"leave out {flag}; to train with another, "
                            "start a new run (--overwrite moves this one aside)")
    config = replace(config, **own)
    stored = prior.config.get("data")
    if stored is not None:  # a data run: its files, fields and split again
        given = {k: getattr(config, k) for k in ("data", "valid", "truncate", "blocks")
                 if getattr(config, k)}
        merged = {k: stored[k] for k in DATA if k in stored}
        if given_total:  # the user's --steps or --epochs is the total
            merged["epochs"] = config.epochs
        config = replace(config, **{**merged, **given})
    elif config.epochs is not None:
        msg = (f"--epochs counts passes over --data, but this run trains on the built-in "
               f"task '{prior.config['task']}'")
        raise TrainingError(msg, SourceLoc("--epochs"), "give the total as --steps N")
    total = prior.config.get(TOTAL)
    if not given_total and config.epochs is None and _count(total):
        config = replace(config, steps=total)
    return config


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def check_total(cfg: RunConfig, prior: ck.Checkpoint, graph: Graph, *, given: RunConfig,
                per_epoch: int | None) -> None:
    """Refuse a resume whose total (``cfg.steps``) is no more than the steps done.

    ``given`` is the configuration before the stored settings were merged (it
    says whether the total came from ``--steps``, ``--epochs``, the checkpoint or
    the spec); ``per_epoch`` is a data run's steps per epoch.
    """
    done, total = prior.step, cfg.steps or 0
    if total > done:
        return
    path = Path(cfg.out or "") / ck.CHECKPOINT
    if given.steps is not None:
        loc, asked = SourceLoc("--steps"), f"--steps {total}"
    elif given.epochs is not None:
        loc, asked = SourceLoc("--epochs"), f"--epochs {cfg.epochs} ({total} steps)"
    elif _count(prior.config.get(TOTAL)) or cfg.epochs is not None:
        loc, asked = SourceLoc(str(path)), f"its own total of {total} steps"
    else:
        loc, asked = graph.where("train", "steps"), f"the spec's {total} steps"
    msg = (f"this run has already trained {done} steps, and --resume trains on to the "
           f"total asked for: {asked} is no more than that, so nothing would be trained")
    more = [f"--steps {done + max(1, done)}"]
    if per_epoch:
        more.append(f"--epochs {done // per_epoch + 1}")
    hint = (f"give a larger total, e.g. {' or '.join(more)} (a total, not a number of "
            "further steps); the run's files are as they were")
    raise TrainingError(msg, loc, hint)
