"""The rows of :meth:`Run.predict <attngraph.train.trained.reloaded.Run.predict>`:
one example's prediction decoded back to a label name or to text, and on request
its attention weights (heads averaged, cut to its own tokens) with the tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

    from attngraph.train.data.encoding import Encoding
    from attngraph.train.data.records import Record
    from attngraph.train.trained.reloaded import Run

__all__ = ["prediction_row"]

#: Outputs read as attention weights, in order of preference (as ``attend`` does).
_WEIGHTS = ("pooling", "attention", "weights")


def prediction_row(run: Run, enc: Encoding, index: int, rec: Record, b: dict[str, Tensor],
                   res: dict[str, Tensor], i: int, *, attention: bool) -> dict[str, Any]:
    """The row of example ``i`` of the batch ``b`` (the ``index``-th record, ``rec``)
    from the model's outputs ``res``: ``index``, the line, ``prediction``, the
    ``score`` and ``target`` of a decoder or the ``probabilities`` and ``label`` of a
    classifier, and on request ``attention`` and ``tokens``."""
    row: dict[str, Any] = {"index": index}
    if rec.loc.line:
        row["line"] = rec.loc.line
    tgt = enc.seq_target
    n_out = None
    if tgt is not None:
        n_out = int(res["lengths"][i])  # steps up to and including <eos>
        ids = res["tokens"][i].tolist()[:n_out]
        row["prediction"] = enc.vocabs[tgt].decode(ids)
        row["score"] = round(float(res["scores"][i]), 6)  # summed log-probability
        if enc.fields[tgt] in rec.values:
            row["target"] = rec.values[enc.fields[tgt]]
    elif enc.labels is not None:
        logits = res["logits"][i].reshape(-1)
        probs = logits.softmax(-1).tolist()
        # every class of the spec, each once: one the data never named shows as
        # <class K>, which no label can be (a label "3" is not class 3)
        names = enc.labels.names_for(len(probs))
        row["prediction"] = names[int(logits.argmax())]
        row["probabilities"] = dict(zip(names, (round(p, 6) for p in probs),
                                        strict=True))
        if enc.label is not None and enc.label in rec.values:
            row["label"] = str(rec.values[enc.label])
    if attention:
        row.update(_attention(run, enc, rec, b, res, i, n_out))
    return row


def _attention(run: Run, enc: Encoding, rec: Record, b: dict[str, Tensor],
               res: dict[str, Tensor], i: int, n_out: int | None) -> dict[str, Any]:
    """Example ``i``'s attention weights, cut to its tokens (and a decoder's
    ``n_out`` steps), with those tokens as written; {} when the model gives none."""
    name = next((k for k in _WEIGHTS if k in res), None)
    if name is None:
        return {}
    w = res[name][i].float()
    while w.dim() > 2:  # (h, T, N): heads averaged
        w = w.mean(0)
    src = next((k for k, t in enc.types.items() if t == "tokens"), None)
    row: dict[str, Any] = {}
    if src is not None and f"{src}_mask" in b:
        n = int(b[f"{src}_mask"][i].sum())
        w = w[..., :n]
        row["tokens"] = run.words(rec)[src]  # the example's own tokens, not <unk>
    if n_out is not None and w.dim() == 2:
        w = w[:n_out]
    if w.dim() == 2 and w.shape[0] == 1:
        w = w[0]
    row["attention"] = [[round(x, 6) for x in r] for r in w.tolist()] if w.dim() == 2 \
        else [round(x, 6) for x in w.tolist()]
    return row
