"""The one training step, its defaults and its RNG policy.

Every way to train a spec is built on this module, through the one step loop
(:func:`attngraph.train.engine.loop.step_loop`): the Python API ``train`` and the
CLI's :func:`attngraph.train.run.runner.run` (files, checkpoints, resume, ranks).

- :class:`TrainSettings` holds the defaults (300 steps, batch 32, lr 1e-3, Adam)
  and :meth:`TrainSettings.of` resolves them: a value given by the caller wins,
  else the spec's ``train:`` section, else the default.
- :func:`build` compiles the model (seeded) and :func:`make_optimizer` its optimiser.
- :func:`seeded` is the RNG policy: training runs inside
  :func:`torch.random.fork_rng` with torch's global RNG seeded from the run's
  seed. Sampling inside the model (hard-attention policies, dropout) draws from
  that RNG, so a run's figures do not depend on what ran before in the process,
  and the caller's RNG state is the same after training as before. A resumed
  run restores the saved RNG state inside the same context, so it continues the
  straight run's random stream exactly.
- :func:`train_step` is the step: forward, loss = :func:`task_loss` (the task's
  objective, :mod:`attngraph.train.tasks.objectives`: by default cross-entropy of the
  spec's ``logits`` against the task's target, :data:`IGNORE` entries skipped)
  plus the model's own terms (:func:`~attngraph.train.tasks.objectives.model_terms`,
  e.g. a latent's KL) plus, for specs with ``reinforce`` policies, the REINFORCE
  term of :func:`attngraph.lower.rules.hard.model_reinforce_loss` with the per-example
  reward :func:`reward_of` (for ``classify``: "every scored prediction right");
  then ``zero_grad``, ``backward``, ``step``.
- :func:`evaluate` measures the task's metrics in eval mode (greedy decoding
  for decoder loops) on the task's fixed validation batch, on a private RNG seeded
  with the task's seed: a model that samples in eval mode (a ``latent``, whose
  negative ELBO is an expectation over its codes) sees the same noise at every
  evaluation, and evaluating does not advance the training run's RNG.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from attngraph.spec.models import TrainSpec
from attngraph.train.tasks.lookup import Task, bind_inputs, compute_metrics
from attngraph.train.tasks.objectives import OBJECTIVES, model_terms

if TYPE_CHECKING:
    from torch import Tensor, nn

    from attngraph.ir.graph import Graph

__all__ = ["TrainSettings", "Step", "build", "make_optimizer", "seeded", "train_step",
           "evaluate", "collect", "task_loss", "reward_of", "check_fits", "dry_run"]


#: The defaults of a ``train:`` section, read from its model.
_DEFAULTS: dict[str, Any] = {
    name: f.default for name, f in TrainSpec.model_fields.items() if not f.is_required()
}


@dataclass(frozen=True)
class TrainSettings:
    """Steps, batch size, learning rate and optimiser of a training run.

    The defaults are those of the spec language's ``train:`` section
    (:class:`~attngraph.spec.models.TrainSpec`), written once there; a spec's
    ``train:`` section overrides them, and :meth:`of` lets a caller's values
    override both.
    """

    steps: int = _DEFAULTS["steps"]
    batch: int = _DEFAULTS["batch"]
    lr: float = _DEFAULTS["lr"]
    optimizer: str = _DEFAULTS["optimizer"]

    @classmethod
    def of(cls, graph: Graph, *, steps: int | None = None, batch: int | None = None,
           lr: float | None = None) -> TrainSettings:
        """The settings of training ``graph``: given values, else the spec's, else defaults.

        Parameters
        ----------
        graph : Graph
            The spec; its ``train:`` section, when it has one, gives the values
            not passed here (and always the optimiser).
        steps, batch, lr : optional
            The caller's values; ``None`` (or 0) means "not given".

        Returns
        -------
        TrainSettings
        """
        ts = graph.train
        spec = cls() if ts is None else cls(steps=ts.steps, batch=ts.batch, lr=ts.lr,
                                            optimizer=ts.optimizer)
        return cls(steps=steps or spec.steps, batch=batch or spec.batch, lr=lr or spec.lr,
                   optimizer=spec.optimizer)


def make_optimizer(model: nn.Module, settings: TrainSettings) -> Any:
    """The optimiser the settings name (``adam`` or ``sgd``) over ``model``'s parameters.

    Parameters
    ----------
    model : torch.nn.Module
        The model to optimise.
    settings : TrainSettings
        Gives the optimiser and the learning rate.

    Returns
    -------
    torch.optim.Optimizer
    """
    import torch

    cls = torch.optim.Adam if settings.optimizer == "adam" else torch.optim.SGD
    return cls(model.parameters(), lr=settings.lr)


def build(graph: Graph, settings: TrainSettings, seed: int) -> tuple[nn.Module, Any]:
    """The model to train (compiled with ``seed``, in training mode) and its optimiser.

    Parameters
    ----------
    graph : Graph
        The inferred spec.
    settings : TrainSettings
        Gives the optimiser and the learning rate.
    seed : int
        Seed of the parameter initialisation.

    Returns
    -------
    tuple
        ``(model, optimizer)``.
    """
    from attngraph.lower import compile as lower

    model = lower(graph, seed=seed)
    model.train()
    return model, make_optimizer(model, settings)


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block on a private copy of torch's global RNG, seeded with ``seed``.

    The caller's RNG state is restored when the block ends (see the module
    docstring for why training runs inside this).
    """
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


class Step(NamedTuple):
    """What :func:`train_step` returns: the loss and the (detached) outputs."""

    loss: float
    outputs: dict[str, Tensor]


def train_step(model: nn.Module, graph: Graph, task: Task, batch: Mapping[str, Tensor],
               opt: Any, *, net: nn.Module | None = None, bf16: bool = False) -> Step:
    """One optimisation step of ``model`` on ``batch``.

    Parameters
    ----------
    model : torch.nn.Module
        The compiled model (its policies record what the REINFORCE term needs).
    graph : Graph
        Its spec (to bind the batch to the spec's inputs).
    task : Task
        The task the batch comes from (names the target field).
    batch : mapping
        A batch of ``task`` (or a rank's slice of one).
    opt : torch.optim.Optimizer
        Optimiser over ``model``'s parameters.
    net : torch.nn.Module, optional
        What runs the forward pass when it is not ``model`` itself (``model``
        wrapped in DistributedDataParallel).
    bf16 : bool
        Run the forward pass under bfloat16 autocast.

    Returns
    -------
    Step
        The loss (task loss, model terms, REINFORCE term) and the outputs, detached.
        The batch is moved to the model's device first.
    """
    from attngraph.train.engine.device import autocast, device_of, float_outputs, to_device

    dev = device_of(model)
    batch = to_device(batch, dev)
    with autocast(dev, bf16):
        out = (net if net is not None else model)(**bind_inputs(graph, task, batch))
    out = float_outputs(out) if bf16 else out
    loss = _loss(model, graph, task, out, batch[task.target])
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return Step(float(loss.detach()), {k: v.detach() for k, v in out.items()})


def _loss(model: nn.Module, graph: Graph, task: Task, out: Mapping[str, Tensor],
          target: Tensor) -> Tensor:
    """The step's loss: the objective, the model's own terms, the REINFORCE term."""
    from attngraph.lower.rules.hard import model_reinforce_loss

    loss = task_loss(out, target, graph=graph, objective=task.objective)
    loss = loss + model_terms(model)
    if any(k.endswith(".log_prob") for k in getattr(model, "aux", {})):
        loss = loss + model_reinforce_loss(model, reward_of(out, target,
                                                            objective=task.objective))
    return loss


def dry_run(model: nn.Module, graph: Graph, task: Task, *, size: int = 2) -> None:
    """Run step 1's forward, loss and metrics on ``size`` validation examples, leaving no trace.

    A spec and data that compile and bind but do not train together (a per-item
    output on per-example labels, a target of another shape) fail here as they
    would at the first step, before a run writes anything. The pass runs on the
    model's device (the CPU before a run moves it) in its training mode, without
    gradients, on a private copy of torch's RNG; the model's buffers (a batch
    norm's running statistics) are put back afterwards.

    Raises
    ------
    TrainingError
        Located in the spec: the objective's output missing or of the wrong
        shape, or (naming the spec) any other failure of the forward pass.
    """
    import torch

    from attngraph.errors import AttnGraphError, SourceLoc, TrainingError
    from attngraph.train.engine.device import device_of, to_device

    batch = to_device(task.batch(size, split="valid"), device_of(model))
    kept = {k: b.detach().clone() for k, b in model.named_buffers()}
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            out = model(**bind_inputs(graph, task, batch))
            _loss(model, graph, task, out, batch[task.target])
            compute_metrics(task, out, batch)
    except AttnGraphError:
        raise
    except (RuntimeError, ValueError, IndexError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"the model fails on a batch of task '{task.name}': {first}"
        raise TrainingError(msg, SourceLoc(graph.file), "check the spec's dims and "
                            "outputs against the task's data") from None
    finally:
        with torch.no_grad():
            for k, b in model.named_buffers():
                b.copy_(kept[k])


def evaluate(model: nn.Module, graph: Graph, task: Task, size: int, *,
             bf16: bool = False) -> dict[str, float]:
    """Validation metrics of ``model`` on the task's validation set (eval mode).

    The validation set is :meth:`~attngraph.train.tasks.base.Task.valid_batches`: a
    built-in task's fixed held-out batch, or a data file's whole validation split
    (its batches padded alike, so the metrics are those of one batch of all).

    Parameters
    ----------
    model : torch.nn.Module
        The model; its training mode is restored afterwards.
    graph : Graph
        Its spec.
    task : Task
        Gives the validation batch and the metrics.
    size : int
        Size of the validation batch.
    bf16 : bool
        Run the forward passes under bfloat16 autocast.

    Returns
    -------
    dict
        Metric name -> value, for every metric of the task that applies.
    """
    outputs, batch, _ = collect(model, graph, task, size, bf16=bf16)
    return compute_metrics(task, outputs, batch)


def collect(model: nn.Module, graph: Graph, task: Task, size: int, *,
            bf16: bool = False) -> tuple[dict[str, Tensor], dict[str, Tensor], float]:
    """``(outputs, batch, terms)``: the model's eval-mode outputs on the task's
    validation batches joined into one, the batches joined alike, and the model's own
    loss terms (:func:`~attngraph.train.tasks.objectives.model_terms`) averaged over the
    examples. What :func:`evaluate` and the evaluation report
    (:mod:`attngraph.train.trained.evaluation`) compute from."""
    import torch

    from attngraph.train.engine.device import autocast, device_of, float_outputs, to_device

    was = model.training
    model.eval()
    dev = device_of(model)
    outs: list[dict[str, Tensor]] = []
    batches: list[dict[str, Tensor]] = []
    terms, n = 0.0, 0
    try:
        # a model that samples in eval (a latent) gets the same noise at every
        # evaluation, and evaluating leaves the training run's random stream as it was
        with seeded(task.seed), torch.no_grad(), autocast(dev, bf16):
            for b in task.valid_batches(size):
                b = to_device(b, dev)
                outs.append(float_outputs(model(**bind_inputs(graph, task, b))))
                batches.append(b)
                k = int(b[task.target].shape[0])
                terms, n = terms + float(model_terms(model)) * k, n + k
    finally:
        model.train(was)
    return _joined(outs), _joined(batches), terms / max(n, 1)


def _joined(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """One batch of several along the batch axis (the one itself when alone)."""
    import torch

    if len(parts) == 1:
        return parts[0]
    return {k: torch.cat([p[k] for p in parts]) for k in parts[0]
            if all(k in p for p in parts)}


def check_fits(graph: Graph, task: Task) -> None:
    """Refuse a spec and task that cannot train together, before anything is written.

    The spec must declare the output the task's objective reads (``logits``
    for ``classify`` and ``bernoulli``, ``prediction`` for ``regress``), and two
    of the task's validation examples must bind to its inputs
    (:func:`~attngraph.train.tasks.lookup.bind_inputs`). Every error is located in the spec.

    Raises
    ------
    TrainingError
        At the spec's ``outputs:`` without that output, or at the input the
        task's data does not fit.
    """
    obj = OBJECTIVES[task.objective]
    if obj.output not in dict(graph.outputs):
        raise obj.missing(graph)
    bind_inputs(graph, task, task.batch(2, split="valid"))


def task_loss(outputs: Mapping[str, Tensor], target: Tensor, *,
              graph: Graph | None = None, objective: str = "classify") -> Tensor:
    """The objective's mean loss of ``outputs`` on ``target``.

    Parameters
    ----------
    outputs : mapping
        A compiled model's outputs; must hold the objective's output
        (``logits`` ``[..., classes]`` for ``classify``).
    target : Tensor
        The task's targets (for ``classify``: class ids over the logits' leading
        axes, :data:`IGNORE` where nothing is scored).
    graph : Graph, optional
        The model's spec, to locate an error at its ``outputs:``.
    objective : str
        A name in :data:`~attngraph.train.tasks.objectives.OBJECTIVES`.

    Returns
    -------
    Tensor
        The mean loss (a scalar).

    Raises
    ------
    TrainingError
        When the output is missing or its shape does not fit the target.
    """
    return OBJECTIVES[objective].loss(outputs, target, graph=graph)


def reward_of(outputs: Mapping[str, Tensor], target: Tensor, *,
              objective: str = "classify") -> Tensor:
    """Per-example reward of the objective (``classify``: 1.0 when every scored
    prediction is right, else 0.0).

    Parameters
    ----------
    outputs : mapping
        A compiled model's outputs.
    target : Tensor
        As for :func:`task_loss`.
    objective : str
        As for :func:`task_loss`.

    Returns
    -------
    Tensor
        ``[B]`` floats.
    """
    return OBJECTIVES[objective].reward(outputs, target)
