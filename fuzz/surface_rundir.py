"""Surface ``rundir``: damaged run directories through predict, evaluate, resume and export.

The seed is a tiny finished data run (``global_attention`` trained two steps on 20
JSON lines, :func:`make_run`), or (a third of the cases, with ``transformers``) an
imported BERT fine-tuned two steps on records read by its tokenizer
(:func:`make_finetuned`: ``import.json`` and ``tokenizer/`` among its files), made
once per worker process and copied into every case. Operators damage one or two of
its stored files (``checkpoint.pt``, ``data.json``, ``metrics.jsonl``,
``summary.json``; an import's ``import.json`` and tokenizer files), or the directory
itself:
truncated, bytes flipped, emptied, retyped (a JSON value or a checkpoint entry of
another type, a weight of another shape or dtype, NaN or infinite weights, a key
dropped or added), or replaced by a FIFO, a symlink (to /dev/zero, outside the run,
dangling, to itself), a directory, or nothing. The case then reloads the run as
``predict`` and ``evaluate`` do (:func:`attngraph.train.trained.reloaded.load_run`, in process
and through the CLI with ``-o``), resumes training (``train --resume``), or exports
it (``export RUN --format python``). A rejected command must leave the run directory
byte-identical; predictions and metrics must be finite.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from fuzz.oracle import Outcome
from fuzz.seeds import ROOT
from fuzz.surface import (
    SPECIALS,
    Case,
    Defect,
    Exit,
    changed,
    cli,
    damage_bytes,
    fail,
    finite,
    rejected,
    snapshot,
    special,
)

__all__ = ["SPEC", "make_run", "prepare", "run"]

SPEC = ROOT / "specs" / "global_attention.yaml"
_LABELS = ("food", "sport", "tech")


def make_run(root: Path) -> Path:
    """A finished data run, trained once under ``root``'s parent (shared by the surfaces
    of one worker): its directory. Its data file is ``train.jsonl`` beside it."""
    from attngraph.train.run.runner import RunConfig
    from attngraph.train.run.runner import run as train

    base = root.parent / "shared"
    out = base / "run"
    if (out / "checkpoint.pt").is_file():
        return out
    base.mkdir(parents=True, exist_ok=True)
    data = base / "train.jsonl"
    words = "the storm rain sun match team coach chef recipe late big small".split()
    data.write_text("".join(json.dumps({"text": " ".join(words[(i * k) % 12] for k in
                                                         range(1, 6)),
                                        "label": _LABELS[i % 3]}) + "\n"
                            for i in range(20)), encoding="utf-8")
    train(RunConfig(spec=str(SPEC), data=str(data), steps=2, batch=4, out=str(out),
                    quiet=True), stream=io.StringIO())
    return out


def make_finetuned(root: Path) -> Path | None:
    """An imported BERT (:func:`fuzz.surface_data.make_imports`, with its tokenizer)
    fine-tuned two steps on records of its words (``train.jsonl`` beside it); None
    without ``transformers``."""
    from attngraph.train.run.runner import RunConfig
    from attngraph.train.run.runner import run as train
    from fuzz.surface_data import BERT_WORDS, make_imports

    made = make_imports(root)
    if "bert" not in made:
        return None
    base = root.parent / "shared" / "finetuned"
    out = base / "run"
    if (out / "checkpoint.pt").is_file():
        return out
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(made["bert"], out, symlinks=True)
    data = base / "train.jsonl"
    words = BERT_WORDS[4:]
    data.write_text("".join(json.dumps({"text": " ".join(words[(i * k) % len(words)]
                                                         for k in range(1, 5)),
                                        "label": ("cats", "dogs")[i % 2]}) + "\n"
                            for i in range(20)), encoding="utf-8")
    train(RunConfig(spec=str(out / "spec.yaml"), resume=True, data=str(data), steps=2,
                    batch=4, out=str(out), quiet=True), stream=io.StringIO())
    return out


def prepare(root: Path) -> dict[str, Any]:
    """The run and its data file; an imported run fine-tuned on records and its data
    file (with ``transformers``)."""
    out = make_run(root)
    tuned = make_finetuned(root)
    return {"run": out, "data": out.parent / "train.jsonl", "tuned": tuned,
            "tuned_data": tuned.parent / "train.jsonl" if tuned is not None else None}


#: values a JSON field or a checkpoint entry may be given instead of its own
_ODD = (None, "x", "", 0, -1, 1, 2**70, 1.5, float("nan"), float("inf"), [], {}, [1, 2],
        {"a": 1}, True, "../../outside", "/dev/zero", "a" * 10_000)


def _retype_json(case: Case, value: Any, depth: int = 0) -> Any:
    """``value`` (parsed JSON) with one value somewhere replaced or a key dropped."""
    if isinstance(value, dict) and value and (depth < 4 and case.rng.random() < 0.6):
        key = case.rng.choice(sorted(value, key=str))
        k = case.rng.randrange(4)
        out = dict(value)
        if k == 0:
            del out[key]
            case.op(f"drop {key}")
        elif k == 1:
            out[key] = _retype_json(case, value[key], depth + 1)
        elif k == 2:
            out[key] = case.pick(_ODD)
            case.op(f"{key}={str(out[key])[:20]}")
        else:
            out["extra"] = case.pick(_ODD)
            case.op("extra key")
        return out
    if isinstance(value, list) and value and depth < 4 and case.rng.random() < 0.6:
        out_l = list(value)
        j = case.rng.randrange(len(out_l))
        out_l[j] = _retype_json(case, out_l[j], depth + 1) if case.rng.random() < 0.5 \
            else case.pick(_ODD)
        case.op(f"[{j}]")
        return out_l
    new = case.pick(_ODD)
    case.op(f"value={str(new)[:20]}")
    return new


def _dump(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


def _retype_checkpoint(case: Case, path: Path) -> None:
    import torch

    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - damaged by an earlier operator: damage its bytes
        new, what = damage_bytes(case.rng, path.read_bytes())
        case.op(what)
        path.write_bytes(new)
        return
    if not isinstance(data, dict) or not data or not data.get("model"):
        new, what = damage_bytes(case.rng, path.read_bytes())
        case.op(what)
        path.write_bytes(new)
        return
    key = case.pick(sorted(data), "entry")
    k = case.rng.randrange(6)
    if key == "model" and k < 4 and isinstance(data["model"], dict):
        name = case.pick(sorted(data["model"]), "weight")
        w = data["model"][name]
        how = case.pick(("nan", "inf", "shape", "dtype", "drop", "extra", "huge", "scalar"),
                        "weight-damage")
        sd = dict(data["model"])
        if how == "nan":
            sd[name] = w.clone().fill_(float("nan"))
        elif how == "inf":
            sd[name] = w.clone().fill_(float("inf"))
        elif how == "huge":
            sd[name] = w.clone().fill_(3e38)
        elif how == "shape":
            sd[name] = torch.zeros(w.shape[0] + 1, *w.shape[1:])
        elif how == "dtype":
            sd[name] = w.to(torch.int64)
        elif how == "drop":
            del sd[name]
        elif how == "extra":
            sd["nodes.zz.weight"] = torch.zeros(2)
        else:
            sd[name] = torch.tensor(1.0)
        data["model"] = sd
    elif k < 3 and isinstance(data[key], (dict, list)):
        data[key] = _retype_json(case, data[key])
    elif k == 3:
        del data[key]
    elif k == 4:
        data[key] = case.pick(_ODD + (torch.tensor(float("nan")), torch.zeros(0)))
        case.op(f"value={str(data[key])[:20]}")
    else:
        data = case.pick(([], None, "x", {"format": 1}, {}))
    buf = io.BytesIO()
    torch.save(data, buf)
    path.write_bytes(buf.getvalue())


def _damage(case: Case, path: Path) -> None:
    """Damage the stored file ``path`` one way."""
    how = case.pick(("bytes", "bytes", "truncate", "retype", "retype", "special"), "how")
    if how == "special":
        special(path, case.pick(SPECIALS, "special"), case.outside)
        return
    if not path.is_file() or path.is_symlink():
        return  # replaced by an earlier operator: nothing is written through a link
    data = path.read_bytes()
    if how == "truncate":
        path.write_bytes(data[:case.rng.randrange(len(data) + 1)])
    elif how == "bytes":
        new, what = damage_bytes(case.rng, data)
        case.op(what)
        path.write_bytes(new)
    elif path.suffix == ".pt":
        _retype_checkpoint(case, path)
    elif not _parses(data, path.suffix):  # damaged by an earlier operator
        path.write_bytes(data[:-1])
    elif path.suffix == ".jsonl":
        lines = data.decode("utf-8").splitlines()
        if not lines:  # emptied by an earlier operator: retype the whole file instead
            path.write_text("[]\n", encoding="utf-8")
            case.op("empty log retyped")
            return
        j = case.rng.randrange(len(lines))
        lines[j] = _dump(_retype_json(case, json.loads(lines[j])))
        case.op(f"line {j + 1}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text(_dump(_retype_json(case, json.loads(data))), encoding="utf-8")


def _parses(data: bytes, suffix: str) -> bool:
    try:
        if suffix == ".jsonl":
            return all(json.loads(ln) is not None for ln in data.decode("utf-8").splitlines())
        json.loads(data)
    except ValueError:
        return False
    return True


def _stable(name: str) -> str:
    """A run file's name as a case names it: event files by their pattern."""
    return "events.out.tfevents.*" if name.startswith("events.out.tfevents.") else name


def run(case: Case) -> Outcome:
    """One damaged copy of the run through predict, evaluate, resume or export."""
    from attngraph.train.trained.reloaded import load_run

    run_dir = case.tmp / "run"
    tuned = case.state["tuned"] is not None and case.rng.random() < 0.3
    if tuned:
        case.op("an imported run fine-tuned on records")
    shutil.copytree(case.state["tuned" if tuned else "run"], run_dir, symlinks=True)
    # a TensorBoard event file is named by the time and process that wrote it: the case
    # names it by its pattern, so that case i is the same case every time
    real = {_stable(p.name): p.name for p in run_dir.iterdir()}
    if tuned:  # the tokenizer's files too
        real |= {f"tokenizer/{p.name}": f"tokenizer/{p.name}"
                 for p in (run_dir / "tokenizer").iterdir()}
    names = sorted(real)
    for _ in range(case.rng.randint(1, 2)):
        target = case.pick(names + ["."], "file")
        target = real.get(target, target)
        if target == ".":
            if case.rng.random() < 0.5:
                special(run_dir, case.pick(SPECIALS, "run-dir"), case.outside)
                break
            (run_dir / case.pick(("extra.txt", ".checkpoint.pt.1.ab.tmp", "metrics.jsonl.tmp"),
                                 "extra")).write_text("x\n", encoding="utf-8")
            continue
        _damage(case, run_dir / target)
    data = case.state["tuned_data" if tuned else "data"]
    action = case.pick(("predict", "predict", "evaluate", "evaluate", "predict-cli", "resume",
                        "resume", "export"), "action")
    before = snapshot(case.tmp)
    try:
        if action == "predict":  # an import's through its own tokenizer, as Run reads it
            rows = load_run(run_dir).predict(str(data), attention=case.rng.random() < 0.5)
            bad = finite(rows)
            if bad:
                fail("nonfinite", "Run.predict", f"prediction {bad} is not finite")
        elif action == "evaluate":
            bad = finite(load_run(run_dir).evaluate(str(data)))
            if bad:
                fail("nonfinite", "Run.evaluate", f"metric {bad} is not finite")
        elif action == "predict-cli":
            out = case.tmp / "preds.jsonl"
            out.write_text("an earlier file\n", encoding="utf-8")
            before = snapshot(case.tmp)
            cli("predict", str(run_dir), "--data", str(data), "-o", str(out))
            bad = finite([json.loads(ln) for ln in out.read_text(encoding="utf-8").splitlines()])
            if bad:
                fail("nonfinite", "predict -o", f"prediction {bad} is not finite")
            return Outcome("valid")
        elif action == "export":
            out = case.tmp / "model.py"
            out.write_text("an earlier file\n", encoding="utf-8")
            before = snapshot(case.tmp)
            cli("export", str(run_dir), "--format", "python", "-o", str(out))
            compile(out.read_text(encoding="utf-8"), str(out), "exec")
            return Outcome("valid")
        else:
            from attngraph.train.run.runner import RunConfig
            from attngraph.train.run.runner import run as train

            spec = run_dir / "spec.yaml" if tuned else SPEC
            summary = train(RunConfig(spec=str(spec), resume=True, steps=3, out=str(run_dir),
                                      quiet=True), stream=io.StringIO())
            bad = finite(dict(summary.metrics))
            if bad:
                fail("nonfinite", "train --resume", f"metric {bad} is not finite")
            return Outcome("valid")
    except (Exit, Exception) as exc:
        if isinstance(exc, Defect):
            raise
        lost = changed(before, snapshot(case.tmp))
        if lost and (isinstance(exc, Exit) or rejected(exc).outcome == "rejected"):
            fail("lost-file", f"{action} after an error",
                         f"{type(exc).__name__} and changed {lost[:3]}")
        raise
    lost = changed(before, snapshot(case.tmp))
    if lost:
        fail("lost-file", f"{action} changed the run", f"changed {lost[:3]}")
    return Outcome("valid")
