"""Early stopping that keeps the best weights (``attngraph train --patience K``).

:class:`Patience` watches one validation metric (the task's first; its direction
is the metric's :func:`~attngraph.train.tasks.base.lower_is_better` trait). At each
evaluation it keeps a copy of the weights when the figure is the best so far,
and says to stop after ``patience`` evaluations without a better one. At the end
of the run the best weights go back into the model (:meth:`Patience.restore`),
so the run's model, the one ``predict``, ``evaluate`` and ``export`` load, is the
best step's, and the summary says which step that is.

A checkpoint holds the best weights as its ``model`` and, when the last step is
not the best, the last step's weights as ``resume_model``, from which
``--resume`` trains on (:meth:`Patience.weights_for`); its ``best`` entry is
:meth:`Patience.state`, so a killed run resumes with the same best so far and
the same count of evaluations without a better figure, to the same bits as one
straight run. A resume of a run that had stopped early trains on with a fresh
count of ``patience`` evaluations (the best so far stays unless beaten).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import METRICS, lower_is_better

if TYPE_CHECKING:
    from torch import Tensor, nn

__all__ = ["Patience"]


class Patience:
    """Early stopping on ``metric``, keeping the weights of its best evaluation.

    Parameters
    ----------
    patience : int
        Stop after this many evaluations without a better figure; 0 never stops
        and keeps nothing (the run's model is its last step's).
    metric : str
        The validation metric watched (a registered metric's name).
    """

    def __init__(self, patience: int, metric: str) -> None:
        self.patience, self.metric = patience, metric
        self.lower = metric in METRICS and lower_is_better(metric)
        self.best: float | None = None
        self.best_step: int | None = None
        self.best_metrics: dict[str, float] = {}
        self.weights: dict[str, Tensor] | None = None
        self.bad = 0
        #: the step the run stopped at, or None while it goes on
        self.step: int | None = None

    @property
    def active(self) -> bool:
        """True when the run stops early and keeps its best weights."""
        return self.patience > 0 and bool(self.metric)

    def _better(self, value: float) -> bool:
        if math.isnan(value):
            return False
        if self.best is None:
            return True
        return value < self.best if self.lower else value > self.best

    def stop(self, valid: dict[str, float], step: int, model: nn.Module) -> bool:
        """Count the evaluation at ``step``; True when training should stop there.

        A better figure than any before keeps a copy of ``model``'s weights.
        """
        if not self.active or self.metric not in valid:
            return False
        if self._better(valid[self.metric]):
            self.best, self.best_step, self.bad = valid[self.metric], step, 0
            self.best_metrics = dict(valid)
            self.weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            return False
        self.bad += 1
        if self.bad >= self.patience:
            self.step = step
            return True
        return False

    def weights_for(self, step: int, model: nn.Module) -> tuple[dict[str, Any],
                                                                 dict[str, Any] | None]:
        """What a checkpoint after ``step`` holds: ``(model, resume_model)``.

        The run's model is the best weights so far (the current ones before the
        first evaluation, or when nothing is kept); ``resume_model`` is the current
        weights when they are another step's, else None.
        """
        current = model.state_dict()
        if self.weights is None or self.best_step == step:
            return current, None
        return self.weights, current

    def restore(self, model: nn.Module) -> None:
        """Load the best weights kept into ``model`` (nothing when none were kept)."""
        if self.weights is not None:
            model.load_state_dict(self.weights)

    def state(self) -> dict[str, Any] | None:
        """The best so far as plain data (a checkpoint's ``best``), or None."""
        if self.best_step is None or self.best is None:
            return None
        return {"step": self.best_step, "metric": self.metric, "value": self.best,
                "bad": self.bad, "patience": self.patience,
                "metrics": dict(self.best_metrics)}

    def resume(self, state: dict[str, Any] | None, weights: dict[str, Tensor]) -> None:
        """Go on from a checkpoint's ``best`` entry and its ``model`` (the best weights)."""
        if state is None or state.get("metric") != self.metric:
            return
        self.best, self.best_step = float(state["value"]), int(state["step"])
        self.best_metrics = {k: float(v) for k, v in state["metrics"].items()}
        self.weights = {k: v.detach().clone() for k, v in weights.items()}
        # a run that had stopped early trains on, with a fresh count
        bad = int(state["bad"])
        self.bad = bad if bad < self.patience else 0
