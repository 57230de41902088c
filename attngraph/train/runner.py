"""The full training run behind ``attngraph train``.

:func:`run` trains a spec on a built-in task and leaves in its output
directory ``metrics.jsonl`` (one JSON object per training step, and one per
evaluation with ``"split": "test"``), ``checkpoint.pt`` (see
:mod:`attngraph.train.checkpoints`) and ``summary.json`` (the final summary).
It shows a tqdm progress bar with loss and accuracy on a terminal, or prints a
line every few steps otherwise, and returns a :class:`RunSummary` (final test
metrics against the spec's ``train.target``).

With ``resume=True`` it continues from the directory's checkpoint; the model,
optimizer, step and every random state are restored, so N steps straight and
N/2 steps then a resume to N give the same parameters.

The step is :func:`attngraph.train.loop`'s: cross-entropy on ``logits`` plus
the REINFORCE term for hard-attention specs, reusing its ``task_loss``,
``reward_of`` and ``evaluate``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from attngraph.errors import TrainingError

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.tasks import Task

__all__ = ["RunConfig", "RunSummary", "run", "settle", "summary_dict",
           "METRICS_FILE", "SUMMARY_FILE"]

#: File name of the metrics log inside a run's output directory.
METRICS_FILE = "metrics.jsonl"
#: File name of the final summary (JSON) inside a run's output directory.
SUMMARY_FILE = "summary.json"
#: Parameter count under which a run uses one torch thread by default.
SMALL = 1_000_000


@dataclass(frozen=True)
class RunConfig:
    """Settings of one training run; ``None`` means the spec's ``train:`` value.

    ``eval_every``, ``checkpoint_every`` and ``log_every`` of 0 mean "a fifth
    (a tenth for log lines) of the steps"; evaluation and a checkpoint also
    always happen at the last step. ``threads`` of 0 means one torch thread for
    models under :data:`SMALL` parameters (intra-op threads only add overhead
    at that size, and many when the cores are busy), else torch's default.
    """

    spec: str
    task: str | None = None
    steps: int | None = None
    batch: int | None = None
    lr: float | None = None
    seed: int = 0
    out: str | None = None
    resume: bool = False
    quiet: bool = False
    eval_every: int = 0
    eval_size: int = 256
    checkpoint_every: int = 0
    log_every: int = 0
    threads: int = 0
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunSummary:
    """What a run reached, and where its files are."""

    spec: str
    task: str
    steps: int
    metrics: dict[str, float]
    target: dict[str, float]
    seconds: float
    out: str
    files: dict[str, str]
    world: int = 1
    rank_max_diff: float | None = None

    @property
    def reached(self) -> bool:
        """True when every target metric is at least its value."""
        return all(self.metrics.get(k, float("-inf")) >= v for k, v in self.target.items())

    def format(self) -> str:
        """A few lines: metrics against targets, time, files."""
        lines = [f"{self.spec} on {self.task}: {self.steps} steps in {self.seconds:.1f} s"
                 + (f" on {self.world} processes" if self.world > 1 else "")]
        for k, v in sorted(self.metrics.items()):
            want = self.target.get(k)
            mark = "" if want is None else (f"  target >= {want:g} "
                                            + ("reached" if v >= want else "NOT reached"))
            lines.append(f"  {k:<18} {v:.4f}{mark}")
        lines.extend(f"  {k:<18} (missing)  target >= {v:g} NOT reached"
                     for k, v in sorted(self.target.items()) if k not in self.metrics)
        if self.rank_max_diff is not None:
            lines.append(f"  ranks in sync      max |Δparameter| = {self.rank_max_diff:.2e}")
        lines.extend(f"{k + ':':<11} {v}" for k, v in self.files.items())
        return "\n".join(lines)


def _resolve(cfg: RunConfig, graph: Graph) -> RunConfig:
    """Fill the ``None`` settings from the spec's ``train:`` section."""
    ts = graph.train
    steps = cfg.steps or (ts.steps if ts is not None else 300)
    return replace(
        cfg, steps=steps,
        batch=cfg.batch or (ts.batch if ts is not None else 32),
        lr=cfg.lr or (ts.lr if ts is not None else 1e-3),
        out=cfg.out or str(Path("runs") / graph.name),
        eval_every=cfg.eval_every or max(1, steps // 5),
        checkpoint_every=cfg.checkpoint_every or max(1, steps // 5),
        log_every=cfg.log_every or max(1, steps // 10),
    )


_SHORT = {"accuracy": "acc", "token_accuracy": "tok_acc", "sequence_accuracy": "seq_acc",
          "attention_peak": "peak", "test_accuracy": "test_acc",
          "test_token_accuracy": "test_tok_acc", "test_sequence_accuracy": "test_seq_acc",
          "test_attention_peak": "test_peak", "test_alignment": "test_align"}


def _width(stream: TextIO) -> int:
    """Columns of the terminal behind ``stream``; 0 when it is none (or has no width)."""
    try:
        if not stream.isatty():
            return 0
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


class _Log:
    """Progress on rank 0: a tqdm bar on a terminal, else a line every few steps."""

    def __init__(self, cfg: RunConfig, name: str, start: int, stream: TextIO) -> None:
        from tqdm import tqdm

        self.every = cfg.log_every
        self.total = cfg.steps or 0
        self.stream = stream
        self.bar_on = not cfg.quiet and _width(stream) > 0
        self.bar = tqdm(total=self.total, initial=start, file=stream, desc=name,
                        disable=not self.bar_on, dynamic_ncols=True, leave=True)

    def step(self, step: int, info: dict[str, float]) -> None:
        shown = {k: f"{v:.3f}" for k, v in info.items() if k != "step"}
        if self.bar_on:
            short = {_SHORT.get(k, k): v for k, v in shown.items()}
            self.bar.set_postfix(short, refresh=False)
            self.bar.update(1)
        elif step % self.every == 0 or step == self.total:
            text = "  ".join(f"{k} {v}" for k, v in shown.items())
            print(f"step {step}/{self.total}  {text}", file=self.stream, flush=True)

    def close(self) -> None:
        self.bar.close()


def _optimizer(graph: Graph, model: Any, lr: float) -> Any:
    import torch

    name = graph.train.optimizer if graph.train is not None else "adam"
    cls = torch.optim.Adam if name == "adam" else torch.optim.SGD
    return cls(model.parameters(), lr=lr)


def _shard(batch: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """Rank ``rank``'s contiguous slice of every field along the batch axis."""
    if world == 1:
        return batch
    size = next(iter(batch.values())).shape[0]
    per = size // world
    return {k: v[rank * per:(rank + 1) * per] for k, v in batch.items()}


def _train_info(task: Task, out: dict[str, Any], batch: dict[str, Any],
                loss: float) -> dict[str, float]:
    """Loss and the task's first applicable metric on the training batch."""
    from attngraph.train.tasks import compute_metrics

    detached = {k: v.detach() for k, v in out.items()}
    metrics = compute_metrics(task, detached, batch)
    info = {"loss": loss}
    for name in task.metrics:
        if name in metrics:
            info[name] = metrics[name]
            break
    return info


def _trim_metrics(path: Path, upto: int) -> None:
    """Keep the log lines of steps <= ``upto`` (a resume rewrites the rest)."""
    if not path.exists():
        return
    keep = [ln for ln in path.read_text().splitlines()
            if ln.strip() and json.loads(ln).get("step", 0) <= upto]
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(ln + "\n" for ln in keep))
    os.replace(tmp, path)


def settle(config: RunConfig, world: int = 1) -> tuple[Graph, RunConfig, Any]:
    """Check a run before it starts: ``(graph, settings filled in, checkpoint or None)``.

    Loads the spec, and on ``resume`` the checkpoint (refusing another spec's)
    whose stored settings then win over ``config``'s except ``steps``; makes the
    task once to check its options; checks the batch splits over ``world``.
    """
    from attngraph.pipeline import load_spec
    from attngraph.train import checkpoints as ck

    graph = load_spec(config.spec)
    out_dir = Path(config.out or Path("runs") / graph.name)
    prior = None
    if config.resume:
        prior = ck.load_checkpoint(out_dir / ck.CHECKPOINT, graph)
        stored = prior.config
        config = replace(config, task=stored["task"], batch=stored["batch"], lr=stored["lr"],
                         seed=stored["seed"], options=stored["options"],
                         eval_every=stored["eval_every"], eval_size=stored["eval_size"],
                         checkpoint_every=stored["checkpoint_every"])
    cfg = _resolve(replace(config, out=str(out_dir)), graph)
    if (cfg.batch or 0) % world:
        msg = f"batch {cfg.batch} does not split evenly over {world} processes"
        raise TrainingError(msg, hint=f"use a batch that is a multiple of {world}")
    from attngraph.train.tasks import task_for

    task_for(graph, cfg.task, cfg.seed, cfg.options)  # fail before spawning ranks
    return graph, cfg, prior


def run(config: RunConfig, *, rank: int = 0, world: int = 1,
        stream: TextIO | None = None) -> RunSummary:
    """Train ``config.spec``; write metrics and checkpoints; return the summary.

    Parameters
    ----------
    config : RunConfig
        The run's settings.
    rank, world : int
        This process's rank and the number of processes (set by
        :mod:`attngraph.train.distributed`; the process group must exist when
        ``world > 1``). Each rank trains on its slice of every batch; only rank 0
        writes files and shows progress.
    stream : file, optional
        Where progress goes (default: stderr).

    Raises
    ------
    TrainingError
        Bad settings, a batch not divisible by ``world``, or a checkpoint of a
        different spec on ``resume``.
    """
    import torch

    from attngraph.lower import compile as lower
    from attngraph.lower.hard import model_reinforce_loss
    from attngraph.train import checkpoints as ck
    from attngraph.train import distributed as dd
    from attngraph.train.loop import evaluate, reward_of, task_loss
    from attngraph.train.tasks import bind_inputs, task_for

    wall = time.perf_counter()
    graph, cfg, prior = settle(config, world)
    spec_text = Path(config.spec).read_text(encoding="utf-8")
    out_dir = Path(cfg.out or "")
    ckpt_path = out_dir / ck.CHECKPOINT
    assert cfg.steps is not None and cfg.batch is not None and cfg.lr is not None  # noqa: S101
    task = task_for(graph, cfg.task, cfg.seed, cfg.options)
    model = lower(graph, seed=cfg.seed)
    opt = _optimizer(graph, model, cfg.lr)
    torch.manual_seed(cfg.seed)
    start, before = 0, 0.0
    if prior is not None:
        model.load_state_dict(prior.model)
        opt.load_state_dict(prior.optimizer)
        ck.set_rng_state(prior.rng, task)
        start, before = prior.step, float(prior.config.get("seconds", 0.0))
    net = dd.wrap(model) if world > 1 else model
    threads = torch.get_num_threads()
    if cfg.threads or sum(p.numel() for p in model.parameters()) < SMALL:
        torch.set_num_threads(cfg.threads or 1)
    lead = rank == 0
    metrics_path = out_dir / METRICS_FILE
    if lead:
        out_dir.mkdir(parents=True, exist_ok=True)
        if prior is not None:
            _trim_metrics(metrics_path, start)
        else:  # a fresh run replaces an earlier run's files
            metrics_path.unlink(missing_ok=True)
            ckpt_path.unlink(missing_ok=True)
    stored = {"task": task.name, "batch": cfg.batch, "lr": cfg.lr, "seed": cfg.seed,
              "options": dict(task.opts), "eval_every": cfg.eval_every,
              "eval_size": cfg.eval_size, "checkpoint_every": cfg.checkpoint_every}
    log = _Log(cfg, graph.name, start, stream or sys.stderr) if lead else None
    test: dict[str, float] = dict(prior.metrics) if prior is not None else {}
    fh = metrics_path.open("a", encoding="utf-8") if lead else None
    try:
        model.train()
        for step in range(start + 1, cfg.steps + 1):
            b = _shard(task.batch(cfg.batch), rank, world)
            out = net(**bind_inputs(graph, task, b))
            target = b[task.target]
            loss = task_loss(out, target) + model_reinforce_loss(model, reward_of(out, target))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            info = _train_info(task, out, b, float(loss.detach()))
            if world > 1:
                info = dd.mean(info)
            if step % cfg.eval_every == 0 or step == cfg.steps:
                test = evaluate(model, graph, task, cfg.eval_size)
            if lead and fh is not None and log is not None:
                fh.write(json.dumps({"step": step, "split": "train", **info}) + "\n")
                if step % cfg.eval_every == 0 or step == cfg.steps:
                    fh.write(json.dumps({"step": step, "split": "test", **test}) + "\n")
                fh.flush()
                log.step(step, {**info, **{f"test_{k}": v for k, v in test.items()}})
            if lead and (step % cfg.checkpoint_every == 0 or step == cfg.steps):
                seconds = before + time.perf_counter() - wall
                ck.save_checkpoint(ckpt_path, ck.Checkpoint(
                    step=step, model=model.state_dict(), optimizer=opt.state_dict(),
                    rng=ck.rng_state(task), spec_hash=ck.spec_hash(graph),
                    spec_text=spec_text, spec_file=str(config.spec),
                    config={**stored, "seconds": seconds}, metrics=test))
    finally:
        torch.set_num_threads(threads)
        if fh is not None:
            fh.close()
        if log is not None:
            log.close()
    if prior is not None and not test:
        test = evaluate(model, graph, task, cfg.eval_size)
    target = dict(graph.train.target) if graph.train is not None and \
        graph.train.task == task.name else {}
    summary_path = out_dir / SUMMARY_FILE
    summary = RunSummary(
        spec=graph.name, task=task.name, steps=max(cfg.steps, start), metrics=test,
        target=target, seconds=before + time.perf_counter() - wall, out=str(out_dir),
        files={"metrics": str(metrics_path), "checkpoint": str(ckpt_path),
               "summary": str(summary_path)}, world=world,
        rank_max_diff=dd.rank_max_diff(model) if world > 1 else None,
    )
    if lead:
        tmp = summary_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(summary_dict(summary), indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, summary_path)
    return summary


def summary_dict(summary: RunSummary) -> dict[str, Any]:
    """The summary as plain data (what ``summary.json`` holds), with ``reached``."""
    return {**asdict(summary), "reached": summary.reached}
