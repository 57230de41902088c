"""A reloaded run's report on labelled records: ``Run.evaluate``.

The records are read with the run's own fields, vocabularies and labels and
scored all together (:mod:`attngraph.train.trained.evaluation`): the loss and the
metrics; for a classifier every class by name and the confusion matrix; for a
decoder also the text it generates (greedy, or by beam search, as ``predict``
writes it) against each record's own target, by BLEU and exact match. A figure
that is NaN or infinite is an error at the first example whose outputs are not
finite (else at the data), never a number in the report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc
from attngraph.train.trained.finite import nonfinite_at

if TYPE_CHECKING:
    from attngraph.train.data.batches import EncodedDataset
    from attngraph.train.trained.evaluation import Report
    from attngraph.train.trained.reloaded import Run

__all__ = ["evaluate_run"]

#: Why a decoder that cannot generate has no ``bleu`` or ``exact_match``.
NO_GENERATION = ("bleu, exact_match: this decoder reads its target only by teacher "
                 "forcing, so it cannot generate text to score")


def evaluate_run(run: Run, data: str | Path | Iterable[Mapping[str, Any] | str], *,
                 batch: int = 256, bf16: bool = False, beam: int = 1,
                 max_length: int | None = None) -> Report:
    """The report of ``run`` on labelled records (see :meth:`Run.evaluate`).

    Raises
    ------
    TrainingError
        A run of a built-in task, records without labels, records that do not
        read, a model that gives NaN or infinity.
    """
    from attngraph.train.data.batches import DataTask
    from attngraph.train.engine.step import collect
    from attngraph.train.trained.evaluation import report_of

    enc = run._enc()
    recs = run.records(data)
    ds = run._dataset(recs, need_label=True)
    task = DataTask(enc, ds, ds, seed=0)
    outputs, b, terms = collect(run.model, run.graph, task, batch, bf16=bf16)
    report = report_of(task, outputs, b, graph=run.graph, terms=terms,
                       names=enc.labels.name if enc.labels is not None else None,
                       per_class=enc.seq_target is None)
    bad = nonfinite_at(dict(report))
    if bad is not None:  # name the example that made it, when its outputs show it
        rec = run._first_nonfinite(recs)
        what = f"the run's {bad} on these records is {report[bad]}"
        if rec is None:
            raise run._nonfinite(SourceLoc(recs[0].loc.file), what, "these records")
        raise run._nonfinite(rec.loc, what)
    if enc.seq_target is not None:
        report = _generated(run, report, ds, batch=batch, beam=beam, max_length=max_length,
                            bf16=bf16)
    return report


def _generated(run: Run, report: Report, ds: EncodedDataset, *, batch: int, beam: int,
               max_length: int | None, bf16: bool) -> Report:
    """``report`` with a decoder's ``bleu`` and ``exact_match``: the tokens it generates
    against the tokens of each record's target as training split them."""
    from torch.utils.data import DataLoader

    from attngraph.lower.decode.decoders import generating_outputs
    from attngraph.train.trained.evaluation import generated_figures, target_tokens, text_tokens

    enc = run._enc()
    if not generating_outputs(run.model):  # type: ignore[arg-type]
        return report.with_figures({}, NO_GENERATION)
    tgt = str(enc.seq_target)
    hyps: list[list[str]] = []
    for b in DataLoader(ds, batch_size=batch, collate_fn=ds.collate):
        res = run.outputs(run._complete(b, ds, max_length), beam=beam, bf16=bf16)
        hyps += [target_tokens(enc.vocabs[tgt], res["tokens"][i].tolist()[:int(n)])
                 for i, n in enumerate(res["lengths"])]
    refs = [text_tokens(r.values[enc.fields[tgt]], enc.mode) for r in ds.records]
    return report.with_figures(generated_figures(hyps, refs))
