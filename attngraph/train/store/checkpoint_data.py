"""What a checkpoint holds, checked whole and declaratively when it is read back.

:func:`attngraph.train.store.checkpoints.load_checkpoint` reads a file with
``torch.load(weights_only=True)``: nothing in it runs, but anything of the
allowed kinds may stand anywhere (``True`` for the settings, an empty tensor
for the step, text for the seconds trained). :class:`CheckpointData` is the
checkpoint's structure (pydantic, strict, no extra keys): the format, the step,
the model's parameters (named tensors), the optimizer's state and parameter
groups, the random states (torch's state tensor, the task's numpy stream), the
spec's hash and text, the last validation metrics (numbers), the best step early
stopping kept (:class:`Best`) with the last step's weights when they differ
(``resume_model``), and the run's settings
(:class:`Config`: each key's type and range, a data run's files and split in
:class:`DataSettings`). :func:`problems` says in words what does not fit it;
:func:`nonfinite` names a parameter or buffer that holds NaN or infinity, which
would make every prediction NaN. Whether the optimizer's state fits the
optimizer, and the parameters the model, is checked when they are restored
(:func:`attngraph.train.store.checkpoints.restore`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
)
from pydantic_core import ErrorDetails

from attngraph.train.store.seeds import seed_problem

__all__ = ["FORMAT", "CheckpointData", "Config", "DataSettings", "Best", "problems",
           "nonfinite", "numpy_generator"]

#: The checkpoint format this version writes and reads.
FORMAT = 1
_STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


def _tensor(value: Any) -> Any:
    import torch

    if not isinstance(value, torch.Tensor):
        msg = f"a tensor is expected here, not {type(value).__name__}"
        raise ValueError(msg)  # noqa: TRY004 - pydantic reports ValueError, not TypeError
    return value


Tensor = Annotated[Any, AfterValidator(_tensor)]
Text = Annotated[str, Field(min_length=1)]
Count = Annotated[int, Field(ge=1)]


class DataSettings(BaseModel):
    """A data run's files, fields and split, as ``--resume`` reads them again."""

    model_config = _STRICT
    data: Text
    valid: Text | None
    valid_fraction: Annotated[float, Field(gt=0, lt=1)]
    fields: dict[str, Text]
    tokenize: Literal["word", "char"]
    #: absent in checkpoints written before --truncate and --blocks
    truncate: bool = False
    blocks: Count | None = None
    epochs: Count | None
    patience: Annotated[int, Field(ge=0)]


class Config(BaseModel):
    """The run's settings (:data:`attngraph.train.store.checkpoints.CONFIG`, the total asked
    for, a data run's :class:`DataSettings`, the seconds trained so far)."""

    model_config = _STRICT
    task: Text
    batch: Count
    lr: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    seed: int
    options: dict[str, JsonValue]
    eval_every: Count
    eval_size: Count
    checkpoint_every: Count
    #: the total of steps the run was asked for (absent in older checkpoints)
    steps: Count | None = None
    data: DataSettings | None = None
    seconds: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0

    @field_validator("seed")
    @classmethod
    def _seed(cls, v: int) -> int:
        problem = seed_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v


class Optimizer(BaseModel):
    """An optimizer's ``state_dict``: its content is checked against the optimizer
    the run builds (:mod:`attngraph.train.store.optimizer_state`)."""

    model_config = _STRICT
    state: dict[int, dict[str, Any]]
    param_groups: list[dict[str, Any]]


def numpy_generator(state: Mapping[str, Any]) -> Any:
    """A numpy Generator in ``state`` (raises ValueError, TypeError or KeyError if bad)."""
    import numpy as np

    gen = np.random.default_rng()
    gen.bit_generator.state = dict(state)
    return gen


class Rng(BaseModel):
    """Every random state a run draws from: torch's, and the task's training stream."""

    model_config = _STRICT
    torch: Tensor
    #: None for a task without a training stream (absent in older checkpoints)
    task: dict[str, JsonValue] | None = None

    @field_validator("torch")
    @classmethod
    def _torch(cls, t: Any) -> Any:
        import torch

        if t.dtype != torch.uint8 or t.shape != torch.get_rng_state().shape:
            msg = "not torch's random state (a byte tensor of its size)"
            raise ValueError(msg)
        try:  # torch checks the generator's state only when it is set
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(t)
        except RuntimeError:
            msg = "not a state torch's generator can be set to"
            raise ValueError(msg) from None
        return t

    @field_validator("task")
    @classmethod
    def _task(cls, state: dict[str, Any] | None) -> dict[str, Any] | None:
        if state is None:
            return state
        try:
            numpy_generator(state)
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            msg = "not the state of the task's numpy generator"
            raise ValueError(msg) from None
        return state


class Best(BaseModel):
    """Which step a checkpoint's ``model`` comes from (early stopping kept the best),
    and where early stopping stood (:meth:`attngraph.train.run.earlystop.Patience.state`)."""

    model_config = _STRICT
    step: Count
    metric: Text
    value: Annotated[float, Field(allow_inf_nan=False)]
    bad: Annotated[int, Field(ge=0)]
    patience: Count
    metrics: dict[str, float]


class CheckpointData(BaseModel):
    """Everything a checkpoint file holds (see the module docstring)."""

    model_config = _STRICT
    format: Literal[1]
    step: Annotated[int, Field(ge=0)]
    model: Annotated[dict[Text, Tensor], Field(min_length=1)]
    optimizer: Optimizer
    rng: Rng
    spec_hash: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    spec_text: str
    spec_file: str
    config: Config
    #: the last validation figures, as logged (NaN where a metric was undefined)
    metrics: dict[str, float] = Field(default_factory=dict)
    #: the weights at ``step`` when ``model`` holds the best step's (absent in older
    #: checkpoints, and None when they are the same)
    resume_model: Annotated[dict[Text, Tensor], Field(min_length=1)] | None = None
    best: Best | None = None


#: What each top-level entry is, said when it is damaged as a whole.
_WHAT = {"step": "not a step number", "model": "not a dict of named tensors",
         "optimizer": "no state and param_groups", "rng": "not torch's and the task's "
         "random states", "spec_hash": "not a spec hash", "spec_text": "not text",
         "spec_file": "not text", "metrics": "not a dict of numbers",
         "resume_model": "not a dict of named tensors",
         "best": "not the best step's record (step, metric, value, bad, patience, metrics)",
         "config": "not a dict of the run's settings"}


def _found(value: Any) -> str:
    text = repr(value) if not hasattr(value, "shape") else f"a tensor of shape {tuple(value.shape)}"
    return text if len(text) <= 40 else text[:37] + "..."


def _words(err: ErrorDetails) -> str:
    """One pydantic error in words, a phrase that starts "this checkpoint"."""
    loc = tuple(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if loc[0] == "config" and len(loc) > 1:
        key = ".".join(loc[1:])
        if err["type"] == "missing":
            return f"this checkpoint's config lacks valid {key}"
        if err["type"] == "extra_forbidden":
            return f"this checkpoint's config holds {key!r}, which is not a run's setting"
        if loc == ("config", "seed") and err["type"] == "value_error":
            return f"this checkpoint's stored {msg}"
        return f"this checkpoint's config lacks valid {key}: {msg} (found {_found(err['input'])})"
    if len(loc) == 1 and err["type"] == "missing":
        return f"this checkpoint lacks {loc[0]}"
    if len(loc) == 1 and err["type"] == "extra_forbidden":
        return f"this checkpoint holds {loc[0]!r}, which a checkpoint does not"
    what = _WHAT.get(loc[0], "damaged")
    if len(loc) > 1:  # say which part of the entry
        what += f": {msg} at {'.'.join(loc)}"
    return f"this checkpoint has a damaged {loc[0]} ({what}; found {_found(err['input'])})"


def problems(data: Any) -> str | None:
    """What in ``data`` (a loaded checkpoint) does not fit :class:`CheckpointData`, in
    words ("this checkpoint lacks rng"), or None when it fits."""
    fmt = data.get("format") if isinstance(data, dict) else None
    if type(fmt) is not int or fmt != FORMAT:  # a tensor or a str compares otherwise
        return f"this is not an attngraph checkpoint (format {FORMAT})"
    if isinstance(data.get("config"), dict) and not data["config"]:
        return "this checkpoint's config (the run's settings) is empty"
    try:
        CheckpointData.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors(include_url=False)
        missing = [str(e["loc"][0]) for e in errs if e["type"] == "missing"
                   and len(e["loc"]) == 1]
        if missing:
            return f"this checkpoint lacks {', '.join(missing)}"
        said = list(dict.fromkeys(_words(e) for e in errs))
        more = f"; and {len(said) - 3} more" if len(said) > 3 else ""
        return "; ".join(said[:3]) + more
    return None


def nonfinite(model: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first floating tensor of ``model`` holding NaN or infinity, and which."""
    import torch

    for name, t in model.items():
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
            return name, "NaN" if bool(torch.isnan(t).any()) else "infinity"
    return None
