"""Evaluation as a report: the loss and every figure of a task on labelled data.

:func:`evaluate_model` runs a model over a task's validation batches in eval mode
(:func:`attngraph.train.engine.step.collect`, as training's evaluation does) and
:func:`report_of` turns its outputs into a :class:`Report`:

- ``examples`` and ``loss``: the training objective's loss
  (:func:`attngraph.train.engine.step.task_loss`: cross-entropy of ``logits`` with
  padding skipped, squared error, or Bernoulli NLL) on all the examples as one
  batch, plus the model's own terms (a latent's KL) averaged over the examples;
  the REINFORCE term of hard attention is a gradient estimator, not a loss of
  the data, and is left out. The outputs are the eval-mode ones the metrics
  read: a decoder loop that feeds back its own tokens runs on its predictions;
- every metric the task declares (``accuracy``, ``token_accuracy``, ...);
- for a ``classify`` objective, scored per class (:func:`class_scores`, with
  scikit-learn): precision, recall, F1 and support per class, their macro and
  weighted averages, and the confusion matrix (rows: true class, columns:
  predicted), over every scored target: one per example, or one per item (a
  node's or a token's tag) with :data:`~attngraph.train.tasks.base.IGNORE`
  padding left out;
- for a ``regress`` objective: ``mse`` and ``mae`` over the targets that are
  not NaN (padding).

A decoder's generated text adds ``bleu`` (:func:`corpus_bleu`) and
``exact_match`` (:func:`generated_figures`); :meth:`attngraph.train.trained.reloaded.Run.evaluate`
generates it. A :class:`Report` is the dict of its scalar figures that earlier
versions returned (``report["accuracy"]``), with the per-class tables beside it;
:meth:`Report.to_dict` is the whole report as JSON-ready data.

Examples
--------
>>> s = class_scores([0, 0, 1, 1], [0, 1, 1, 1], ["cat", "dog"].__getitem__)
>>> s.labels, s.recall, s.confusion
(('cat', 'dog'), (0.5, 1.0), ((1, 1), (0, 2)))
>>> round(corpus_bleu([["a", "b", "c", "d"]], [["a", "b", "c", "d"]]), 6)
1.0
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attngraph.train.data.vocab import EOS, RESERVED, UNK, Vocab, tokenize
from attngraph.train.tasks.base import IGNORE, Task
from attngraph.train.tasks.objectives import OBJECTIVES

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor, nn

    from attngraph.ir.graph import Graph

__all__ = ["ZERO_DIVISION", "VALUE_FIGURES", "ClassScores", "Report", "class_scores",
           "corpus_bleu", "generated_figures", "target_tokens", "text_tokens",
           "regression_errors", "report_of", "evaluate_model"]

#: scikit-learn's ``zero_division``: a precision with no prediction of its class, or a
#: recall with no example of it, reads as 0 (never NaN, which JSON cannot hold).
ZERO_DIVISION = 0.0
_AVERAGES = ("macro", "weighted")


@dataclass(frozen=True)
class ClassScores:
    """Per-class precision, recall, F1 and support, their averages, the confusion matrix.

    Classes are those among the true or predicted classes, by class id; every
    tuple runs over :attr:`labels` in that order.
    """

    ids: tuple[int, ...]
    labels: tuple[str, ...]
    precision: tuple[float, ...]
    recall: tuple[float, ...]
    f1: tuple[float, ...]
    support: tuple[int, ...]
    #: ``"macro"`` / ``"weighted"`` -> ``precision``, ``recall``, ``f1``
    averages: dict[str, dict[str, float]]
    #: ``confusion[i][j]``: targets of class ``labels[i]`` predicted as ``labels[j]``
    confusion: tuple[tuple[int, ...], ...]

    def flat(self) -> dict[str, float]:
        """The averages as scalar figures: ``macro_f1``, ``weighted_recall``, ..."""
        return {f"{avg}_{k}": v for avg in _AVERAGES for k, v in self.averages[avg].items()}

    def to_dict(self) -> dict[str, Any]:
        """``per_class`` (label -> scores) and ``confusion_matrix`` (the averages are
        among the scalar figures, :meth:`flat`)."""
        per = {name: {"precision": p, "recall": r, "f1": f, "support": s}
               for name, p, r, f, s in zip(self.labels, self.precision, self.recall, self.f1,
                                           self.support, strict=True)}
        return {"per_class": per,
                "confusion_matrix": {"labels": list(self.labels), "rows": "true",
                                     "columns": "predicted",
                                     "matrix": [list(r) for r in self.confusion]},
                "zero_division": ZERO_DIVISION}


def class_scores(true: Sequence[int] | np.ndarray, pred: Sequence[int] | np.ndarray,
                 names: Callable[[int], str] | None = None) -> ClassScores:
    """Per-class scores of predicted class ids against true ones, by scikit-learn.

    Parameters
    ----------
    true, pred : sequence of int
        Class ids, one per scored target (padding already left out).
    names : callable, optional
        Class id -> its name (default: the id as text).

    Returns
    -------
    ClassScores
        Over the classes that occur in ``true`` or ``pred``; undefined ratios are
        :data:`ZERO_DIVISION`.
    """
    import numpy as np
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    y, p = np.asarray(true, dtype=np.int64), np.asarray(pred, dtype=np.int64)
    ids = sorted({int(i) for i in np.concatenate([y, p])})
    prec, rec, f1, sup = precision_recall_fscore_support(
        y, p, labels=ids, zero_division=ZERO_DIVISION)
    avgs = {}
    for avg in _AVERAGES:
        a = precision_recall_fscore_support(y, p, labels=ids, average=avg,
                                            zero_division=ZERO_DIVISION)
        avgs[avg] = {"precision": float(a[0]), "recall": float(a[1]), "f1": float(a[2])}
    with warnings.catch_warnings():  # labels= is given: one class alone has its shape
        warnings.filterwarnings("ignore", message="A single label was found")
        cm = confusion_matrix(y, p, labels=ids)
    name = names or str
    return ClassScores(tuple(ids), tuple(name(i) for i in ids),
                       tuple(map(float, prec)), tuple(map(float, rec)), tuple(map(float, f1)),
                       tuple(map(int, sup)), avgs, tuple(tuple(map(int, r)) for r in cm))


def corpus_bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]],
                *, max_n: int = 4) -> float:
    """Corpus BLEU of token sequences, one reference each (Papineni et al. 2002).

    The geometric mean of the modified (clipped) n-gram precisions for n = 1 to
    ``max_n``, each summed over the corpus before dividing, times the brevity
    penalty ``exp(1 - r / c)`` when the hypotheses' total length ``c`` is not
    longer than the references' ``r``. No smoothing: a corpus with no matching
    n-gram of some order scores 0. Written here rather than taken from sacrebleu,
    which would re-tokenise detokenised text by its own rules: a run's text is
    already its tokens (words, or characters), and BLEU is read over those.

    Returns
    -------
    float
        From 0 to 1 (sacrebleu prints 100 times this).

    Examples
    --------
    >>> corpus_bleu([["the"] * 7], [["the", "cat", "is", "on", "the", "mat"]], max_n=1)
    0.2857142857142857
    """
    matched, total = [0] * max_n, [0] * max_n
    c = r = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        c, r = c + len(hyp), r + len(ref)
        for n in range(1, max_n + 1):
            h, rc = _ngrams(hyp, n), _ngrams(ref, n)
            matched[n - 1] += sum(min(k, rc[g]) for g, k in h.items())
            total[n - 1] += max(len(hyp) - n + 1, 0)
    if c == 0 or min(matched) == 0:
        return 0.0
    log_p = sum(math.log(m / t) for m, t in zip(matched, total, strict=True)) / max_n
    bp = 1.0 if c > r else math.exp(1 - r / c)
    return bp * math.exp(log_p)


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    """Counts of the n-grams of ``tokens``."""
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def generated_figures(hypotheses: Sequence[Sequence[str]],
                      references: Sequence[Sequence[str]]) -> dict[str, float]:
    """``bleu`` (:func:`corpus_bleu`) and ``exact_match`` (the share of generated
    sequences equal to their reference) of a decoder's generated tokens."""
    same = sum(list(h) == list(r) for h, r in zip(hypotheses, references, strict=True))
    return {"bleu": corpus_bleu(hypotheses, references),
            "exact_match": same / max(len(references), 1)}


def target_tokens(vocab: Vocab, ids: Sequence[int]) -> list[str]:
    """The tokens of generated ``ids`` up to ``<eos>``, as :meth:`Vocab.decode` keeps
    them (``<unk>`` kept, the other reserved ids left out)."""
    out = []
    for i in ids:
        if i == EOS:
            break
        if 0 <= i < len(vocab) and (i >= len(RESERVED) or i == UNK):
            out.append(vocab.tokens[i])
    return out


def text_tokens(value: str | Sequence[Any], mode: str) -> list[str]:
    """The tokens of a record's target: its text split as training split it, or its
    list of tokens."""
    return tokenize(value, mode) if isinstance(value, str) else [str(t) for t in value]


def regression_errors(pred: Tensor, target: Tensor) -> dict[str, float]:
    """``mse`` and ``mae`` (scikit-learn's) over the targets that are not NaN."""
    from sklearn.metrics import mean_absolute_error, mean_squared_error

    keep = ~target.isnan()
    p = pred.detach()[keep].double().cpu().numpy()
    t = target[keep].double().cpu().numpy()
    if t.size == 0:
        return {}
    return {"mse": float(mean_squared_error(t, p)), "mae": float(mean_absolute_error(t, p))}


#: objective -> the figures of its output against float targets (beyond loss and metrics)
VALUE_FIGURES: dict[str, Callable[[Tensor, Tensor], dict[str, float]]] = {
    "regress": regression_errors}


class Report(dict[str, float]):
    """What evaluating gives: a dict of the scalar figures, with the tables beside it.

    As a dict (what earlier versions returned) it holds ``examples``, ``loss``, the
    task's metrics, the averages (``macro_f1``, ...), ``bleu`` / ``exact_match``,
    ``mse`` / ``mae``: ``report["accuracy"]``. :attr:`classes` holds the per-class
    scores and the confusion matrix of a classifier; :attr:`notes` says what could
    not be measured and why; :meth:`to_dict` is all of it as JSON-ready data.
    """

    def __init__(self, figures: Mapping[str, float], classes: ClassScores | None = None,
                 notes: Sequence[str] = ()) -> None:
        super().__init__(figures)
        self.classes = classes
        self.notes = tuple(notes)

    def with_figures(self, more: Mapping[str, float], *notes: str) -> Report:
        """A copy of this report with ``more`` figures (and notes) added."""
        return Report({**self, **more}, self.classes, self.notes + notes)

    def to_dict(self) -> dict[str, Any]:
        """Every figure and table as JSON-ready data (no NaN: undefined ratios are 0)."""
        out: dict[str, Any] = dict(self)
        if self.classes is not None:
            out.update(self.classes.to_dict())
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def _class_figures(out: Tensor, target: Tensor,
                   names: Callable[[int], str] | None) -> ClassScores | None:
    """Per-class scores of ``logits`` fitted to ``target``, padding left out."""
    keep = (target != IGNORE).reshape(-1).cpu().numpy()
    if not keep.any():
        return None
    pred = out.argmax(-1).reshape(-1).cpu().numpy()
    return class_scores(target.reshape(-1).cpu().numpy()[keep], pred[keep], names)


def report_of(task: Task, outputs: Mapping[str, Tensor], batch: Mapping[str, Tensor], *,
              graph: Graph | None = None, terms: float = 0.0,
              names: Callable[[int], str] | None = None,
              per_class: bool | None = None) -> Report:
    """The report of a model's ``outputs`` on ``batch`` of ``task``.

    Parameters
    ----------
    task : Task
        Names the target, the objective and the metrics.
    outputs, batch : mapping
        The model's outputs on ``batch`` (e.g. from :func:`collect`).
    graph : Graph, optional
        The model's spec, to locate an output that does not fit the target.
    terms : float
        The model's own loss terms, added to the objective's loss.
    names : callable, optional
        Class id -> label name.
    per_class : bool, optional
        Score each class (default: when the objective scores classes); a
        decoder's classes are its vocabulary, scored by BLEU instead.

    Returns
    -------
    Report
    """
    from attngraph.train.engine.step import task_loss
    from attngraph.train.tasks.lookup import compute_metrics

    target = batch[task.target]
    loss = float(task_loss(outputs, target, graph=graph, objective=task.objective)) + terms
    figures: dict[str, float] = {"examples": int(target.shape[0]), "loss": loss,
                                 **compute_metrics(task, outputs, batch)}
    obj = OBJECTIVES[task.objective]
    out = obj.fitted(outputs, target, graph)
    classes = None
    if obj.classes and per_class is not False:
        classes = _class_figures(out, target, names)
        figures.update(classes.flat() if classes is not None else {})
    elif task.objective in VALUE_FIGURES:
        figures.update(VALUE_FIGURES[task.objective](out, target))
    return Report(figures, classes)


def evaluate_model(model: nn.Module, graph: Graph, task: Task, size: int = 256, *,
                   bf16: bool = False, names: Callable[[int], str] | None = None,
                   per_class: bool | None = None) -> Report:
    """The report of ``model`` on the task's test batches (:func:`collect`, :func:`report_of`).

    Examples
    --------
    >>> import attngraph
    >>> from attngraph.train.tasks.lookup import task_for
    >>> graph = attngraph.load_spec("specs/graph_attention.yaml")
    >>> model = attngraph.compile(graph, seed=0)
    >>> report = evaluate_model(model, graph, task_for(graph, None, 0))
    >>> sum(map(sum, report.classes.confusion)) == sum(report.classes.support)
    True
    """
    from attngraph.train.engine.step import collect

    outputs, batch, terms = collect(model, graph, task, size, bf16=bf16)
    return report_of(task, outputs, batch, graph=graph, terms=terms, names=names,
                     per_class=per_class)
