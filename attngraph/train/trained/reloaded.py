"""A trained run, reloaded: predict, evaluate and attend on new data.

:func:`load_run` (public as ``attngraph.load_run``) rebuilds a run directory
written by ``attngraph train``: the spec from the text stored in its checkpoint
(refused when it does not match the stored hash), the model with the trained
parameters (read with ``torch.load(weights_only=True)``), and, for a run
trained with ``--data``, its vocabularies and labels from ``data.json``. The
:class:`Run` it returns reads raw records the way training did:

- :meth:`Run.predict` -> one dict per example: the prediction decoded back to a
  label name or to text, and on request the attention weights
  (:mod:`attngraph.train.trained.rows`);
- :meth:`Run.evaluate` -> the run's metrics on labelled data;
- :meth:`Run.batch_of` -> the model's inputs for raw records (for pictures).

A run whose files are not its own (a link, a FIFO, a folder) is refused before
anything is read (:func:`attngraph.train.store.directory.check_own`); a prediction or a
metric that is NaN or infinite is an error at its example, never a number that
would make the JSON written invalid.

Decoders (a spec with a per-item ``labels`` input) predict without a target:
:func:`attngraph.generate` runs a loop that feeds back its own tokens, or a causal
decoder, greedily or by beam search, for at most ``max_length`` steps, each
example stopping at ``<eos>`` (see :func:`_generate`). A decoder that does neither
is refused with generate's own error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import (
    AttnGraphError,
    SourceLoc,
    TrainingError,
    count_problem,
    flag_problem,
)
from attngraph.train.data.inputs import listlike, table_rows
from attngraph.train.data.records import Record, read_records
from attngraph.train.data.vocab import EOS, tokenize
from attngraph.train.trained.finite import nonfinite_at

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn

    from attngraph.ir.graph import Graph
    from attngraph.train.data.encoding import Encoding
    from attngraph.train.store.checkpoints import Checkpoint
    from attngraph.train.tasks.base import Task
    from attngraph.train.trained.evaluation import Report

__all__ = ["Run", "load_run"]

@dataclass
class Run:
    """A reloaded run (see :func:`load_run`)."""

    path: Path
    graph: Graph
    model: nn.Module
    task: Task
    checkpoint: Checkpoint
    encoding: Encoding | None
    device: torch.device

    @property
    def labels(self) -> list[str] | None:
        """The label names by class id (a classifying data run, or an import fine-tuned
        on records), else None."""
        from attngraph.train.data.batches import DataTask

        enc = self.encoding if self.encoding is not None else \
            self.task.enc if isinstance(self.task, DataTask) else None
        return list(enc.labels.names) if enc is not None and enc.labels is not None else None

    @property
    def vocabs(self) -> dict[str, list[str]]:
        """Input id -> its vocabulary's tokens by id (a data run's text inputs)."""
        enc = self.encoding
        return {k: list(v.tokens) for k, v in enc.vocabs.items()} if enc is not None else {}

    @property
    def imported(self) -> bool:
        """Whether this is a run of ``attngraph import`` (fine-tuned or not), whose
        records its own tokenizer reads (:mod:`attngraph.train.trained.imported`)."""
        from attngraph.train.store.imported import is_imported

        return self.encoding is None and is_imported(self.path)

    def _enc(self) -> Encoding:
        if self.imported:
            msg = ("this run was written by attngraph import: its records are read with the "
                   "model's own tokenizer, not a vocabulary of the run's")
            raise TrainingError(msg, SourceLoc(str(self.path)), "Run.predict and "
                                "Run.evaluate read them so (the commands do)")
        if self.encoding is None:
            msg = (f"this run was trained on the built-in task '{self.task.name}', "
                   "not on data files: it has no vocabulary or labels to read records with")
            raise TrainingError(msg, SourceLoc(str(self.path)),
                                "train with --data PATH to predict on your own data")
        return self.encoding

    def records(self, data: str | Path | Iterable[Mapping[str, Any] | str]) -> list[Record]:
        """Records of a data path, or of dicts or texts, or a DataFrame's rows (located
        as ``<input>:N``): a text is a record of the run's text input alone."""
        if isinstance(data, (str, Path)):
            return read_records(data)
        given = table_rows(data)
        if not listlike(given):
            msg = (f"data is a path, a list of records (dicts or texts) or a DataFrame, not "
                   f"{type(given).__name__}")
            raise TrainingError(msg, SourceLoc("<input>"), 'e.g. [{"text": "..."}] or '
                                '["..."]; one record is a list of one')
        out = []
        for i, r in enumerate(given, 1):
            loc = SourceLoc("<input>", i, 1)
            if isinstance(r, str):
                values = {"text": r} if self.imported else dict(self.text_record(r).values)
            elif isinstance(r, Mapping):
                values = dict(r)
            else:
                msg = (f"record {i} is of type {type(r).__name__}: a record is a dict of its "
                       "columns, or a text")
                raise TrainingError(msg, loc, 'give dicts ({"text": ..., "label": ...}) '
                                    "or texts")
            out.append(Record(values, loc))
        if not out:
            msg = "no records given"
            raise TrainingError(msg, SourceLoc("<input>"), "give at least one record")
        return out

    def _dataset(self, records: list[Record], *, need_label: bool) -> Any:
        from attngraph.train.data.batches import EncodedDataset

        return EncodedDataset(self.graph, self._enc(), records, need_label=need_label)

    def batch_of(self, records: list[Record], *, max_length: int | None = None
                 ) -> dict[str, Tensor]:
        """The model's batch for ``records`` (labels not needed; a decoder's target a
        ``max_length`` budget of padding)."""
        ds = self._dataset(records, need_label=False)
        return self._complete(ds.collate(list(ds)), ds, max_length)

    def words(self, rec: Record) -> dict[str, list[str]]:
        """Text input id -> the tokens of ``rec`` as written (before the vocabulary)."""
        enc = self._enc()
        out = {}
        for k, t in enc.types.items():
            v = rec.values.get(enc.fields[k])
            if t == "tokens" and isinstance(v, (str, list)):
                out[k] = tokenize(v, enc.mode) if isinstance(v, str) else [str(x) for x in v]
        return out

    def text_record(self, text: str) -> Record:
        """A record holding ``text`` in the column of the run's (first) text input.

        Raises
        ------
        TrainingError
            When the run has no text input.
        """
        enc = self._enc()
        src = next((k for k, t in enc.types.items() if t == "tokens"), None)
        if src is None:
            msg = f"--input gives text, but this run's inputs are {', '.join(enc.types)}"
            raise TrainingError(msg, SourceLoc(str(self.path)),
                                "draw an example of a data file instead: --data PATH --example N")
        return Record({enc.fields[src]: text}, SourceLoc("--input", 1, 1, text))

    def _complete(self, batch: dict[str, Tensor], ds: Any,
                  max_length: int | None) -> dict[str, Tensor]:
        """Give a decoder's target input the generation budget (its values are not read),
        as wide as the largest, and each example's own (``max_length``, else twice its
        longest source, plus 2) under ``<target>.budget`` (a key no input can have), so
        that an example generates the same in any batch or file."""
        import torch

        from attngraph.train.data.vocab import PAD

        enc = self._enc()
        tgt = enc.seq_target
        if tgt is None:
            return batch
        size = next(iter(batch.values())).shape[0]
        src = torch.full((size,), 0, dtype=torch.long)
        for k, n in ds.lengths.items():
            if k != tgt:
                mask = batch.get(f"{k}_mask")
                src = torch.maximum(src, mask.sum(1) if mask is not None
                                   else torch.full_like(src, n))
        if not ds.lengths.keys() - {tgt}:
            src.fill_(8)
        budget = torch.full_like(src, max_length) if max_length is not None else 2 * src + 2
        n = int(budget.max())
        return {**batch, tgt: torch.full((size, n), PAD, dtype=torch.long),
                f"{tgt}.budget": budget}

    def predict(self, data: str | Path | Iterable[Mapping[str, Any] | str], *,
                attention: bool = False, batch: int = 64, max_length: int | None = None,
                beam: int = 1, bf16: bool = False, cache: bool = True,
                truncate: bool = False) -> list[dict[str, Any]]:
        """Predictions for raw records: a file (as ``--data`` takes) or dicts. A run of
        ``attngraph import`` reads them with its own tokenizer
        (:func:`attngraph.train.trained.imported.predict_imported`).

        Parameters
        ----------
        data : path, or iterable of dict or str
            Records with the columns training read (labels not needed); a text alone
            is a record of the run's text input.
        attention : bool
            Also give each example's attention weights (heads averaged), cut
            to its own tokens, with the tokens.
        batch : int
            Examples per forward pass.
        max_length : int, optional
            A decoder's step budget (default: twice each example's own source, plus 2).
        beam : int
            Beam width for decoders; 1 is greedy.
        bf16 : bool
            bfloat16 autocast.
        cache : bool
            Decoders generate with a key/value cache (False: re-run the prefix).
        truncate : bool
            A run of ``attngraph import``: a text longer than the model's positions is
            read by its first tokens (``--truncate``); refused for other runs.

        Returns
        -------
        list of dict
            Per example: ``index``, ``prediction`` (a label name, or text),
            ``probabilities`` (label -> probability) when classifying, ``label``
            when the record had one, and ``attention`` / ``tokens`` on request.

        Raises
        ------
        TrainingError
            A run of a built-in task, or records that do not read.
        """
        from torch.utils.data import DataLoader

        from attngraph.train.data.tokenized import only_imports
        from attngraph.train.trained.rows import prediction_row

        _check_batch(batch, attention=attention, bf16=bf16, cache=cache, truncate=truncate)
        if self.imported:
            from attngraph.train.trained.imported import predict_imported

            return predict_imported(self, data, attention=attention, batch=batch,
                                    max_length=max_length, beam=beam, cache=cache,
                                    bf16=bf16, truncate=truncate)
        only_imports(truncate)
        recs = self.records(data)
        ds = self._dataset(recs, need_label=False)
        enc = self._enc()
        out: list[dict[str, Any]] = []
        for lo, b in zip(range(0, len(ds), batch),
                         DataLoader(ds, batch_size=batch, collate_fn=ds.collate), strict=True):
            b = self._complete(b, ds, max_length)
            res = self.outputs(b, beam=beam, bf16=bf16, cache=cache)
            for i in range(next(iter(b.values())).shape[0]):
                row = prediction_row(self, enc, lo + i, recs[lo + i], b, res, i,
                                     attention=attention)
                bad = nonfinite_at(row)
                if bad is not None:
                    raise self._nonfinite(recs[lo + i].loc, f"its {bad}")
                out.append(row)
        return out

    def _nonfinite(self, loc: SourceLoc, what: str, of: str = "this example") -> TrainingError:
        """The error of an example whose prediction is NaN or infinite (``what`` is)."""
        msg = f"the model of the run in {self.path} gives NaN or infinity for {of} ({what})"
        return TrainingError(msg, loc, "the run's parameters are damaged or too large "
                             "(its training diverged): train it again, e.g. with a smaller "
                             "--lr")

    def _first_nonfinite(self, recs: list[Record]) -> Record | None:
        """The first of ``recs`` whose outputs hold NaN or infinity (None when none do)."""
        from torch.utils.data import DataLoader

        ds = self._dataset(recs, need_label=False)
        lo = 0
        for b in DataLoader(ds, batch_size=64, collate_fn=ds.collate):
            res = self.outputs(self._complete(b, ds, None))
            n = next(iter(b.values())).shape[0]
            for i in range(n):
                if any(v.is_floating_point() and v.dim() and v.shape[0] == n
                       and not bool(v[i].isfinite().all()) for v in res.values()):
                    return recs[lo + i]
            lo += n
        return None

    def outputs(self, batch: dict[str, Tensor], *, beam: int = 1,
                bf16: bool = False, cache: bool = True) -> dict[str, Tensor]:
        """The model's outputs on ``batch`` (eval mode, on the CPU; decoders generate)."""
        import torch

        from attngraph.train.engine.device import autocast, float_outputs, to_device
        from attngraph.train.tasks.lookup import bind_inputs

        inputs = to_device(bind_inputs(self.graph, self.task, batch), self.device)
        with torch.no_grad(), autocast(self.device, bf16):
            tgt = self.encoding.seq_target if self.encoding is not None else None
            if tgt is not None:
                res = _generate(self.model, inputs, tgt, beam=beam, cache=cache,
                                budget=batch.get(f"{tgt}.budget"))
            else:
                res = self.model(**inputs)
        return {k: v.cpu() for k, v in float_outputs(res).items()}

    def export(self, path: str | Path, *, format: str = "pt2") -> Path:  # noqa: A002
        """Write the trained model to ``path`` as ``pt2``, ``onnx`` or ``python``, as
        ``attngraph export RUN`` does (:func:`attngraph.train.trained.export.export_run`)."""
        from attngraph.train.trained.export import export_run

        return export_run(self, path, format=format)

    def evaluate(self, data: str | Path | Iterable[Mapping[str, Any] | str], *, batch: int = 256,
                 bf16: bool = False, beam: int = 1, max_length: int | None = None,
                 truncate: bool = False) -> Report:
        """The run's report on labelled records (every one scored; eval mode).

        ``data``, ``batch`` and ``bf16`` are as :meth:`predict` takes them, and so are
        ``beam``, ``max_length`` (for the text a decoder generates to be scored) and
        ``truncate``. A run of ``attngraph import`` reads them with its own tokenizer
        (:func:`attngraph.train.trained.imported.evaluate_imported`).

        Returns
        -------
        Report
            The dict of ``examples``, ``loss`` and the metrics (``accuracy``, or a
            decoder's ``token_accuracy``, ``sequence_accuracy``, ``bleu``,
            ``exact_match``); a classifier's per-class scores and confusion matrix
            in ``.classes``; all of it as JSON-ready data by ``.to_dict()``
            (:mod:`attngraph.train.trained.evaluation`).

        Raises
        ------
        TrainingError
            A run of a built-in task, records without labels, records that do not read,
            a model that gives NaN or infinity.
        """
        from attngraph.train.data.tokenized import only_imports
        from attngraph.train.trained.evaluate_run import evaluate_run

        _check_batch(batch, bf16=bf16, truncate=truncate)
        if self.imported:
            from attngraph.train.trained.imported import evaluate_imported

            return evaluate_imported(self, data, batch=batch, max_length=max_length,
                                     beam=beam, bf16=bf16, truncate=truncate)
        only_imports(truncate)
        return evaluate_run(self, data, batch=batch, bf16=bf16, beam=beam,
                            max_length=max_length)


def _check_batch(batch: object, **flags: object) -> None:
    """Refuse a batch size that is not a whole number of 1 or more, or a switch that is
    not True or False, naming it."""
    msg = count_problem("batch", batch, 1)
    if msg is not None:
        raise TrainingError(msg, SourceLoc("batch"), "give e.g. batch=64")
    bad = flag_problem(**flags)
    if bad is not None:
        raise TrainingError(bad[1], SourceLoc(bad[0]), f"give {bad[0]}=True or False")


def _generate(model: nn.Module, inputs: dict[str, Tensor], target: str, *,
              beam: int = 1, cache: bool = True,
              budget: Tensor | None = None) -> dict[str, Tensor]:
    """A decoder's outputs without a target, by :func:`attngraph.generate`.

    ``target`` (the decoder's token input) carries only the step budget: its
    length is ``max_length``, unless ``budget`` gives each example's own. Greedy
    (``beam`` 1) or beam search, each example stopping at ``<eos>``. Returns
    ``tokens`` (B, L), ``lengths`` (B,), ``scores`` (B,) and the decoder's attention
    outputs, ``(B, L, ...)``, under the names of the model's outputs.
    """
    from attngraph.lower.decode.generate import generate
    from attngraph.train.data.vocab import PAD

    steps = budget if budget is not None else int(inputs[target].shape[1])
    given = {k: v for k, v in inputs.items() if k not in (target, f"{target}_mask")}
    gen = generate(model, given, max_length=steps, beam=beam, eos=EOS, pad=PAD,
                   return_attention=True, cache=cache)
    return {"tokens": gen.tokens, "lengths": gen.lengths, "scores": gen.scores,
            **gen.attention}


def load_run(path: str | Path, *, device: str = "cpu") -> Run:
    """Reload the run in directory ``path`` (written by ``attngraph train``).

    Parameters
    ----------
    path : str or Path
        The run directory.
    device : str
        ``cpu``, ``cuda``, ``mps`` or ``auto``.

    Returns
    -------
    Run
        With ``.model`` (eval mode), ``.graph``, ``.labels``, ``.vocabs``,
        ``.predict(...)`` and ``.evaluate(...)``.

    Raises
    ------
    TrainingError
        No run there, a damaged checkpoint or ``data.json``, a stored spec
        that does not match its hash, or a device this machine lacks; a run of
        ``attngraph import`` (allowed past the parameter limit of specs) too large
        for this machine's memory.
    """
    from attngraph.lower import compile as lower
    from attngraph.train.data.batches import DataTask, EncodedDataset, load_encoding
    from attngraph.train.engine.device import pick_device
    from attngraph.train.store import checkpoints as ck
    from attngraph.train.store.directory import check_own as own_files
    from attngraph.train.store.imported import check_memory, is_imported

    if not isinstance(path, (str, Path)):
        msg = f"load_run takes a run directory's path, not {type(path).__name__}"
        raise TrainingError(msg, SourceLoc("<load_run>"), "give the folder attngraph train "
                            "or attngraph import wrote, e.g. load_run('runs/mine')")
    run_dir = Path(path)
    dev = pick_device(device)
    try:
        is_dir = run_dir.is_dir()
    except OSError as exc:  # a name the system refuses (too long, ...)
        msg = f"cannot read the run directory: {exc.strerror or exc}"
        raise TrainingError(msg, SourceLoc(str(path)[:200]), "give the folder attngraph "
                            "train or attngraph import wrote") from None
    if is_dir:  # its files its own: no link, FIFO or folder among them
        own_files(run_dir)
    # a run written by `attngraph import` is a model that exists: past the spec's
    # parameter limit, bounded by what the machine can hold
    imported = is_imported(run_dir)
    if imported:
        check_memory([run_dir / ck.CHECKPOINT], run_dir / ck.CHECKPOINT)
    ckpt = ck.load_checkpoint(run_dir)
    graph = _stored_graph(ckpt, run_dir, imported=imported)
    cfg = ckpt.config
    enc = None
    task: Task
    if isinstance(cfg.get("data"), dict) and imported:  # fine-tuned on records
        from attngraph.train.data.tokenized import stored_task

        task = stored_task(graph, run_dir, cfg)
    elif isinstance(cfg.get("data"), dict):
        enc = load_encoding(run_dir, graph)
        empty = EncodedDataset(graph, enc, [])
        task = DataTask(enc, empty, empty, seed=int(cfg["seed"]))
    else:
        task = _stored_task(graph, cfg, run_dir, imported=imported)
    model = lower(graph, seed=cfg["seed"])
    ck.restore(ckpt, run_dir, model)
    model.eval()
    model.to(dev)
    return Run(run_dir, graph, model, task, ckpt, enc, dev)


def _stored_graph(ckpt: Checkpoint, run_dir: Path, *, imported: bool) -> Graph:
    """The spec stored in the checkpoint, refused when it does not match its hash."""
    from attngraph.frontend import loads_spec
    from attngraph.train.store import checkpoints as ck

    # errors name the spec it came from
    graph = loads_spec(ckpt.spec_text, ckpt.spec_file, allow_large=imported)
    if ck.spec_hash(graph) != ckpt.spec_hash:
        msg = "the spec text stored in this checkpoint does not match its hash"
        raise TrainingError(msg, SourceLoc(file=str(run_dir / ck.CHECKPOINT)),
                            "the checkpoint is damaged; train again")
    return graph


def _stored_task(graph: Graph, cfg: dict[str, Any], run_dir: Path, *, imported: bool) -> Task:
    """The built-in task of the checkpoint's settings (its task, options and test
    batch's size), checked to fit; settings that do not are a damaged checkpoint."""
    from attngraph.guard import check_resources
    from attngraph.train.store import checkpoints as ck
    from attngraph.train.tasks.lookup import task_for

    try:
        task = task_for(graph, cfg["task"], cfg["seed"], cfg["options"])
        n = task.opts.get("length")
        check_resources(graph, batch=cfg["eval_size"], allow_large=imported,
                        length=n if isinstance(n, int) and n > 0 else None)
    except AttnGraphError as exc:
        msg = ("this checkpoint's stored settings do not make a run: "
               f"{exc.diagnostics[0].message}")
        raise TrainingError(msg, SourceLoc(file=str(run_dir / ck.CHECKPOINT)),
                            "the checkpoint is damaged; train again") from None
    return task
