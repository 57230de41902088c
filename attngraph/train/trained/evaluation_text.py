"""A :class:`~attngraph.train.trained.evaluation.Report` as the table ``attngraph evaluate`` prints.

The scalar figures one per line, then for a classifier one row per class
(precision, recall, F1, support), the macro and weighted averages, and the
confusion matrix with the true classes down and the predicted across (up to
:data:`MATRIX_CLASSES` classes; a larger one is in the JSON and the picture).

Examples
--------
>>> from attngraph.train.trained.evaluation import Report, class_scores
>>> scores = class_scores([0, 0, 1], [0, 1, 1], ["cat", "dog"].__getitem__)
>>> print(format_report(Report({"examples": 3, "accuracy": 2 / 3}, scores), "pets"))
pets: 3 examples
  accuracy           0.6667
<BLANKLINE>
  class         precision  recall      f1  support
  cat              1.0000  0.5000  0.6667        2
  dog              0.5000  1.0000  0.6667        1
  macro avg        0.7500  0.7500  0.6667        3
  weighted avg     0.8333  0.6667  0.6667        3
<BLANKLINE>
  confusion matrix (rows: true, columns: predicted)
       cat  dog
  cat    1    1
  dog    0    1
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attngraph.train.trained.evaluation import ClassScores, Report

__all__ = ["MATRIX_CLASSES", "format_report"]

#: The most classes whose confusion matrix is printed.
MATRIX_CLASSES = 20
#: The widest a class name is printed (longer ones are cut, ending in "…").
_NAME = 24


def format_report(report: Report, title: str) -> str:
    """The report as lines of text under ``title`` (``"<spec> on <data>"``)."""
    figures = dict(report)
    n = int(figures.pop("examples", 0))
    shown = {k: v for k, v in figures.items() if not k.startswith(("macro_", "weighted_"))}
    width = max([18, *(len(k) + 1 for k in shown)])
    lines = [f"{title}: {n} example{'s' if n != 1 else ''}"]
    # counts (the tokens scored) as whole numbers, the figures to 4 places
    lines += [f"  {k:<{width}} {v if isinstance(v, int) else format(v, '.4f')}"
              for k, v in shown.items()]
    if report.classes is not None:
        lines += ["", *_class_rows(report.classes), "", *_matrix(report.classes)]
    lines += [f"  note: {note}" for note in report.notes]
    return "\n".join(lines)


def _cut(name: str) -> str:
    return name if len(name) <= _NAME else name[:_NAME - 1] + "…"


def _class_rows(s: ClassScores) -> list[str]:
    """One row per class, then the macro and weighted averages."""
    names = [_cut(x) for x in s.labels]
    w = max([12, *(len(x) for x in names)])
    rows = [f"  {'class':<{w}}  precision  recall      f1  support"]
    for name, p, r, f, k in zip(names, s.precision, s.recall, s.f1, s.support, strict=True):
        rows.append(f"  {name:<{w}}  {p:9.4f}  {r:6.4f}  {f:6.4f}  {k:7d}")
    total = sum(s.support)
    for avg in ("macro", "weighted"):
        a = s.averages[avg]
        rows.append(f"  {avg + ' avg':<{w}}  {a['precision']:9.4f}  {a['recall']:6.4f}  "
                    f"{a['f1']:6.4f}  {total:7d}")
    return rows


def _matrix(s: ClassScores) -> list[str]:
    """The confusion matrix, true classes down, predicted across."""
    k = len(s.labels)
    if k > MATRIX_CLASSES:
        return [f"  confusion matrix: {k} × {k} classes, in the JSON (--json, -o) and the "
                "picture (--picture)"]
    names = [_cut(x) for x in s.labels]
    w = max(len(x) for x in names)
    cols = [max(len(x), *(len(str(r[j])) for r in s.confusion)) for j, x in enumerate(names)]
    head = "  ".join(f"{x:>{c}}" for x, c in zip(names, cols, strict=True))
    rows = ["  confusion matrix (rows: true, columns: predicted)", f"  {'':<{w}}  {head}"]
    for name, r in zip(names, s.confusion, strict=True):
        cells = "  ".join(f"{v:>{c}}" for v, c in zip(r, cols, strict=True))
        rows.append(f"  {name:<{w}}  {cells}")
    return rows
