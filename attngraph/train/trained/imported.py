"""``Run.predict`` and ``Run.evaluate`` (``attngraph predict``, ``evaluate``) of a run
written by ``attngraph import``: the model's own predictions for the text of each
record, read by the run's tokenizer (else as ids;
:class:`~attngraph.train.data.runtext.RunText`).

What a prediction is follows from the spec's outputs, not from the family
(:func:`attngraph.train.data.tokenized.plan_of`, as fine-tuning reads it):

- a model that generates (a causal decoder over its ``tokens``, as GPT-2 and Llama; an
  encoder–decoder whose decoder reads a second token input, as T5) gives the text it
  generates by :func:`attngraph.generate` (its key/value cache, greedy or beam search):
  after the record's text for a causal decoder, from it for an encoder–decoder, up to
  the end id of the model's configuration (``eos_token_id``, kept in ``import.json``)
  or ``max_length`` tokens (default: twice its own text, plus 2, within the
  model's positions), with its summed log-probability;
- a classifier (a ``logits`` output of one row per example, as BERT's) gives the
  label the configuration names (``id2label``) and every label's probability.

:func:`evaluate_imported` scores those predictions against each record's ``label``
(a classifier: loss, accuracy, per-class scores) or ``target`` (a generating model:
exact match and BLEU of the generated tokens).

Each record's text is in the column named like the model's text input, else
``text``, else the record's one column. Further token inputs (BERT's token types)
are 0. With ``attention``, the weights of the spec's ``heads`` output over the
record's tokens are added, every layer's with the heads averaged (``[layers, N, N]``),
with the tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.train.data.runtext import RunText, check_ids, position_bounds, text_of
from attngraph.train.store.imported import config_id, config_ids, import_info

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.train.data.records import Record
    from attngraph.train.trained.evaluation import Report
    from attngraph.train.trained.reloaded import Run

__all__ = ["evaluate_imported", "predict_imported"]

#: The output whose weights ``attention`` adds: every layer's, per head.
HEADS = "heads"


def _info(run: Run, run_dir: Path) -> dict[str, Any]:
    """What ``import.json`` holds, with the class names the run learnt when it was
    fine-tuned on records (:mod:`attngraph.train.data.tokenized`)."""
    from attngraph.train.data.tokenized import TokenizedTask

    info = import_info(run_dir)
    if isinstance(run.task, TokenizedTask) and run.task.enc.labels is not None:
        info["labels"] = list(run.task.enc.labels.names)
    return info


def _batch(run: Run, src: str, skip: str | None, ids: list[list[int]], pad: int
           ) -> dict[str, Tensor]:
    """The model's inputs for ``ids`` (padded last with ``pad``): the text at ``src``,
    every other token input but ``skip`` (a decoder's target) at 0, with masks."""
    import torch

    n = max(len(x) for x in ids)
    x = torch.full((len(ids), n), pad, dtype=torch.long)
    for i, row in enumerate(ids):
        x[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    mask = torch.arange(n)[None, :] < torch.tensor([len(r) for r in ids])[:, None]
    out: dict[str, Tensor] = {src: x, f"{src}_mask": mask}
    for node in run.graph.inputs:
        if node.id not in (src, skip):
            out[node.id] = torch.zeros_like(x)
            out[f"{node.id}_mask"] = mask
    return {k: v.to(run.device) for k, v in out.items()}


def _weights(out: Mapping[str, Tensor], i: int, n: int) -> list[Any] | None:
    """Example ``i``'s ``heads`` output over its ``n`` tokens, heads averaged:
    ``[layers, n, n]`` as lists (None when the spec has no such output)."""
    w = out.get(HEADS)
    if w is None:
        return None
    w = w[i].float().cpu()
    if w.dim() == 4:  # (heads, layers, N, N)
        w = w.mean(0)
    return [[[round(float(p), 6) for p in row[:n]] for row in layer[:n]] for layer in w]


def predict_imported(run: Run, data: str | Path | Iterable[Mapping[str, Any] | str], *,
                     attention: bool = False, batch: int = 16, max_length: int | None = None,
                     beam: int = 1, cache: bool = True, bf16: bool = False,
                     truncate: bool = False) -> list[dict[str, Any]]:
    """Predictions of an imported model for the text of each record (see the module
    docstring): what ``Run.predict`` gives for a run of ``attngraph import``.

    Parameters
    ----------
    run : Run
        A run written by ``attngraph import`` (``attngraph.load_run``).
    data : path or iterable of dict
        Records (any form ``--data`` reads), each with a text.
    attention : bool
        Add each example's ``attention`` (``[layers, N, N]``, heads averaged) and
        ``tokens``.
    batch : int
        Examples per forward pass (or generation).
    max_length : int, optional
        The most tokens generated per example.
    beam : int
        Beam width of generation; 1 is greedy.
    cache : bool
        Generate with the key/value cache (False: re-run the prefix; the same tokens).
    bf16 : bool
        bfloat16 autocast.
    truncate : bool
        A classifier's text, or an encoder–decoder's, longer than the model's positions
        is read by its first tokens (as its tokenizer truncates; the row says
        ``"truncated": true``) instead of refused. A causal decoder's prompt is never
        cut: what it generates would follow a text cut short.

    Returns
    -------
    list of dict
        Per example: ``index`` (and ``line``), ``prediction``, and ``probabilities``
        (a classifier) or ``score`` and ``generated`` (the generated tokens); on
        request ``attention`` and ``tokens``.

    Raises
    ------
    TrainingError
        Records without text, text that is not ids (a run without a tokenizer), ids
        outside the vocabulary or beyond the model's positions, a model that neither
        classifies nor generates, NaN or infinity in a prediction.
    """
    return _predict(run, run.path, run.records(data), _info(run, run.path),
                    RunText.of(run.path), attention=attention, batch=batch,
                    max_length=max_length, beam=beam, cache=cache, bf16=bf16,
                    truncate=truncate)


def _predict(run: Run, run_dir: Path, recs: list[Record], info: Mapping[str, Any],
             reader: RunText, *, attention: bool, batch: int, max_length: int | None,
             beam: int, cache: bool, bf16: bool = False,
             truncate: bool = False) -> list[dict[str, Any]]:
    """:func:`predict_imported` of records read, with the run's ``import.json`` read
    (``info``) and its text reader."""
    import torch

    from attngraph.train.data.tokenized import plan_of
    from attngraph.train.engine.device import autocast

    plan = plan_of(run.graph, SourceLoc(str(run_dir)))  # what the model does with a text
    src = plan.text
    pad = config_id(info, "pad") or 0
    bounds = position_bounds(run.graph)
    most = min((b.most for b in bounds), default=None)
    rows: list[dict[str, Any]] = []
    for lo in range(0, len(recs), batch):
        chunk = recs[lo:lo + batch]
        ids, cut = [], set()
        for i, rec in enumerate(chunk):
            text = text_of(rec, src)
            x = reader.ids(text, rec.loc, given=None)
            if truncate and plan.objective != "lm" and most is not None and len(x) > most:
                x = reader.cut(text, x, most, rec.loc)
                cut.add(lo + i)
            check_ids(run.graph, x, rec.loc, bounds)
            ids.append(x)
        inputs = _batch(run, src, plan.decoder, ids, pad)
        with torch.no_grad(), autocast(run.device, bf16):
            if plan.objective == "classify":
                rows += _classified(run, info, chunk, ids, inputs, reader, lo, attention)
            else:
                rows += _generated(run, info, chunk, ids, inputs, reader, lo, attention,
                                   target=plan.decoder, most=most,
                                   max_length=max_length, beam=beam, cache=cache)
        for row in rows[lo:]:
            if row["index"] in cut:
                row["truncated"] = True
    return rows


def _row(index: int, rec: Record) -> dict[str, Any]:
    """A row's start: the record's index, line and own ``label`` or ``target``."""
    row: dict[str, Any] = {"index": index}
    if rec.loc.line:
        row["line"] = rec.loc.line
    for key in ("label", "target"):
        if key in rec.values:
            row[key] = rec.values[key]
    return row


def _with_weights(row: dict[str, Any], out: Mapping[str, Tensor] | None, i: int,
                  ids: list[int], reader: RunText) -> dict[str, Any]:
    """``row`` with example ``i``'s ``attention`` over its ``ids`` and their ``tokens``,
    when ``out`` (the outputs of a forward, or None) holds the weights."""
    w = _weights(out, i, len(ids)) if out is not None else None
    if w is not None:
        row["attention"] = w
        row["tokens"] = reader.shown(ids)
    return row


def _finite(row: dict[str, Any], rec: Record, run_dir: Path) -> dict[str, Any]:
    from attngraph.train.trained.finite import nonfinite_at

    bad = nonfinite_at(row)
    if bad is not None:
        msg = f"the model of {run_dir} gives NaN or infinity for this example ({bad})"
        raise TrainingError(msg, rec.loc, "the run's parameters are damaged or too large")
    return row


def _classified(run: Run, info: Mapping[str, Any], chunk: list[Record], ids: list[list[int]],
                inputs: dict[str, Tensor], reader: RunText, lo: int,
                attention: bool) -> list[dict[str, Any]]:
    """A classifier's rows: the label of the largest logit, every label's probability
    (run under no_grad)."""
    out = run.model(**inputs)
    logits = out["logits"].float().cpu()
    given = info.get("labels")
    rows = []
    for i, rec in enumerate(chunk):
        probs = logits[i].reshape(-1).softmax(-1).tolist()
        labels = [str(x) for x in given] if isinstance(given, list) \
            and len(given) == len(probs) else [str(k) for k in range(len(probs))]
        row = _row(lo + i, rec)
        row["prediction"] = labels[max(range(len(probs)), key=probs.__getitem__)]
        row["probabilities"] = {k: round(p, 6) for k, p in zip(labels, probs, strict=True)}
        rows.append(_finite(_with_weights(row, out if attention else None, i, ids[i], reader),
                            rec, run.path))
    return rows


def _generated(run: Run, info: Mapping[str, Any], chunk: list[Record], ids: list[list[int]],
               inputs: dict[str, Tensor], reader: RunText, lo: int, attention: bool, *,
               target: str | None, most: int | None, max_length: int | None, beam: int,
               cache: bool) -> list[dict[str, Any]]:
    """A generating model's rows: the text it generates after the prompt (a causal
    decoder's own input), or from the source into the decoder's input ``target`` (run
    under no_grad)."""
    import torch

    from attngraph.lower.decode.generate import generate

    # each text's own budget, whatever else shares its batch
    budget = [max_length if max_length is not None else 2 * len(x) + 2 for x in ids]
    if target is None and most is not None:
        # the prompt and what follows share the model's positions (most)
        for i, x in enumerate(ids):
            if len(x) >= most:
                msg = (f"the text is {len(x)} tokens long: no room is left in the model's "
                       f"{most}")
                raise TrainingError(msg, chunk[i].loc, "give a shorter text")
            budget[i] = min(budget[i], most - len(x))
    vocab = int(run.graph.node(target or next(iter(inputs))).spec.vocab)
    eos, pad, start = config_ids(info, vocab)
    out = generate(run.model, inputs, max_length=budget, beam=beam, eos=eos, pad=pad,
                   start=None if target is None else start, cache=cache)
    heads = None
    if attention:
        feed = dict(inputs)
        if target is not None:  # the decoder's input: its start id alone
            first = torch.full((len(ids), 1), start or 0, dtype=torch.long, device=run.device)
            feed |= {target: first, f"{target}_mask": torch.ones_like(first, dtype=torch.bool)}
        heads = run.model(**feed)
    rows = []
    for i, rec in enumerate(chunk):
        made = out.tokens[i, :int(out.lengths[i])].tolist()
        text = made[:-1] if made and eos is not None and made[-1] == eos else made
        row = _row(lo + i, rec)
        row["prediction"] = reader.decode(text)
        row["generated"] = reader.shown(made)
        row["score"] = round(float(out.scores[i]), 6)
        rows.append(_finite(_with_weights(row, heads, i, ids[i], reader), rec, run.path))
    return rows


def evaluate_imported(run: Run, data: str | Path | Iterable[Mapping[str, Any] | str], *,
                      batch: int = 16, max_length: int | None = None, beam: int = 1,
                      bf16: bool = False, truncate: bool = False) -> Report:
    """Scores of an imported model on labelled records, from its predictions
    (:func:`predict_imported`): what ``Run.evaluate`` gives for a run of ``attngraph
    import``.

    A classifier's records name their class in ``label`` (a label of the model's
    ``id2label``, or its id): the report has the loss (mean cross-entropy), the
    accuracy, each class's precision, recall, F1 and support and the confusion matrix.
    A generating model's report has its loss, the mean cross-entropy of the tokens it
    is trained to give (as fine-tuning reads the records: a causal decoder's text, the
    end id closing it; an encoder–decoder's ``target`` given its text), its
    ``perplexity`` (exp(loss)) and the number of ``tokens`` scored; where the records
    hold the text the model should give (``target``, which an encoder–decoder's need),
    also the exact match and the BLEU of the generated tokens against the target's
    (by the run's tokenizer).

    Raises
    ------
    TrainingError
        A record without its label (or an encoder–decoder's without its target, or a
        target where others have one), a label the model does not have, and what
        :func:`predict_imported` refuses.
    """
    import math

    from attngraph.train.data.tokenized import plan_of
    from attngraph.train.trained.evaluation import Report, class_scores, corpus_bleu

    run_dir = run.path
    recs = run.records(data)
    info, reader = _info(run, run_dir), RunText.of(run_dir)
    n = len(recs)
    plan = plan_of(run.graph, SourceLoc(str(run_dir)))
    loss: dict[str, float] = {}
    said: list[str] = []
    if plan.objective != "classify":
        targets = _targets(recs, needed=plan.objective == "seq2seq")
        loss, cut = _loss(run, recs, batch=batch, bf16=bf16, truncate=truncate)
        said = ["loss: the mean cross-entropy of every token the model is trained to give "
                + ("(each text's next tokens, the end id closing it)" if plan.objective
                   == "lm" else "(the target's, given the text)")
                + "; perplexity: exp(loss)"]
        if not targets:
            return Report({"examples": n, **loss}, notes=[*said, *_cut(cut, n)])
    rows = _predict(run, run_dir, recs, info, reader, attention=False, batch=batch,
                    max_length=max_length, beam=beam, cache=True, bf16=bf16,
                    truncate=truncate)
    notes = _cut(sum(1 for row in rows if row.get("truncated")), n)
    if "probabilities" in rows[0]:
        labels = list(rows[0]["probabilities"])
        true = [_label_id(rec, labels) for rec in recs]
        pred = [labels.index(row["prediction"]) for row in rows]
        ce = -sum(math.log(max(row["probabilities"][labels[k]], 1e-12))
                  for row, k in zip(rows, true, strict=True)) / n
        scores = class_scores(true, pred, labels.__getitem__)
        right = sum(a == b for a, b in zip(true, pred, strict=True))
        return Report({"examples": n, "loss": ce, "accuracy": right / n, **scores.flat()},
                      scores, notes)
    eos = config_id(info, "eos")
    hyps, refs = [], []
    for rec, row in zip(recs, rows, strict=True):
        target = rec.values["target"]
        hyp = list(row["generated"])
        if hyp and eos is not None and hyp[-1] == reader.shown([eos])[0]:
            hyp = hyp[:-1]
        hyps.append(hyp)
        refs.append(reader.shown([t for t in reader.ids(target, rec.loc, given=None)
                                  if t != eos]))
    return Report({"examples": n, **loss,
                   "exact_match": sum(h == r for h, r in zip(hyps, refs, strict=True)) / n,
                   "bleu": corpus_bleu(hyps, refs)},
                  notes=[*said, "the generated tokens scored against the target's, by the "
                         "run's tokenizer (else as ids), the end token left out", *notes])


def _cut(cut: int, n: int) -> list[str]:
    """The report's note on records cut to the model's positions (none: no note)."""
    return [f"{cut} of {n} records were longer than the model reads: their first tokens "
            "were read (--truncate)"] if cut else []


def _targets(recs: list[Record], *, needed: bool) -> bool:
    """Whether the records hold the text the model should give (``target``): all of
    them, or (unless ``needed``) none; a record without one among others that have
    one is an error at it."""
    has = [isinstance(rec.values.get("target"), str) for rec in recs]
    if all(has) or not (needed or any(has)):
        return all(has)
    rec = recs[has.index(False)]
    msg = "this record has no 'target' text to score the generated text against"
    raise TrainingError(msg, rec.loc, 'give each record the text it should give: '
                        '{"text": ..., "target": ...}')


def _loss(run: Run, recs: list[Record], *, batch: int, bf16: bool,
          truncate: bool) -> tuple[dict[str, float], int]:
    """A generating model's loss on the records (the mean cross-entropy of every token
    it is trained to give: a causal decoder's next tokens of each text, the end id
    closing it; an encoder–decoder's target given its source), its perplexity,
    exp(loss), and the tokens scored; computed a batch at a time, as its fine-tuning
    reads the records; and how many records were cut to the model's positions."""
    import math

    import torch

    from attngraph.train.data.tokenized import scored_task
    from attngraph.train.engine.device import autocast, to_device
    from attngraph.train.engine.step import task_loss
    from attngraph.train.tasks.base import IGNORE
    from attngraph.train.tasks.lookup import bind_inputs

    task = scored_task(run.graph, run.path, recs, truncate=truncate)
    total, tokens = 0.0, 0
    with torch.no_grad(), autocast(run.device, bf16):
        for b in task.valid_batches(batch):
            b = to_device(b, run.device)
            out = run.model(**bind_inputs(run.graph, task, b))
            target = b[task.target]
            n = int((target != IGNORE).sum())
            loss = task_loss({k: v.float() for k, v in out.items()}, target,
                             graph=run.graph, objective=task.objective)
            total, tokens = total + float(loss) * n, tokens + n
    mean = total / max(tokens, 1)
    if not math.isfinite(mean):
        what = f"the loss on these records is {mean}"
        raise run._nonfinite(SourceLoc(recs[0].loc.file), what, "these records")
    return ({"loss": mean, "perplexity": math.exp(min(mean, 700.0)), "tokens": tokens},
            len(task.enc.cut))


def _label_id(rec: Record, labels: list[str]) -> int:
    """The class of a record's ``label``: one of ``labels``, or its id."""
    value = rec.values.get("label")
    if value is None:
        msg = "this record has no 'label' to score the prediction against"
        raise TrainingError(msg, rec.loc, 'give each record its class: {"text": ..., '
                            '"label": ...}')
    if str(value) in labels:
        return labels.index(str(value))
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(labels):
        return value
    shown = ", ".join(labels[:10]) + (", …" if len(labels) > 10 else "")
    msg = f"the label {str(value)[:40]!r} is not one of the model's ({shown})"
    raise TrainingError(msg, rec.loc, "use the labels of the model's configuration "
                        "(id2label), or their ids")
