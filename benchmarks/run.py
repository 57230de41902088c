"""Run every performance comparison (issues 7, 14 and 27) in one process and report them.

Usage: ``python benchmarks/run.py [--quick] [--repeats R] [--threads T] [--out FILE]``
(``make bench``). Prints a table of ratios (median of interleaved repeats, with
the interquartile range) and writes it, with the machine and the method, to
``docs/performance.md`` (``--out -`` writes nothing). ``--quick`` runs tiny sizes
and a couple of repeats: a smoke run whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from cases import (  # noqa: E402
    HandAdditive,
    HandDenseLocal,
    HandGlobal,
    HandMHSA,
    HandPackedRnn,
    additive_spec,
    deep_transformer_spec,
    global_spec,
    local_spec,
    masked_rnn_spec,
    mhsa_spec,
)
from generate import bench_generate  # noqa: E402
from loops import TWINS, HandBahdanauAfter, catalog, copy_into  # noqa: E402
from memory import peak_mib  # noqa: E402
from real import bench_real, missing  # noqa: E402
from report import Row, render_table, write_doc  # noqa: E402
from timing import interleaved, load, machine, median_stat, ratio_stat  # noqa: E402

import attngraph  # noqa: E402


@dataclass(frozen=True)
class Sizes:
    """Problem sizes; ``quick`` shrinks everything to a smoke run."""

    quick: bool
    repeats: int

    def pick(self, full: object, small: object) -> object:
        return small if self.quick else full


def _fwd_bwd(model: torch.nn.Module, call):  # noqa: ANN001, ANN202
    """A closure doing one forward+backward (grads reset first)."""
    def step() -> None:
        model.zero_grad(set_to_none=True)
        out = call()
        out.sum().backward()
    return step


def bench_mhsa(sz: Sizes) -> list[Row]:
    """(1) multi-head self-attention vs projections+SDPA and nn.MultiheadAttention."""
    b, n, d, h = sz.pick((4, 512, 256, 8), (2, 16, 16, 2))
    spec = attngraph.compile(mhsa_spec(d, h), seed=0)
    hand = HandMHSA(d, h)
    mha = torch.nn.MultiheadAttention(d, h, batch_first=True)
    x = torch.randn(b, n, d)
    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: spec(x=x)["z"]),
        "sdpa": _fwd_bwd(hand, lambda: hand(x)),
        "mha": _fwd_bwd(mha, lambda: mha(x, x, x, need_weights=False)[0]),
    }, sz.repeats, inner=1 if sz.quick else 3)
    cfg = f"B={b}, N={n}, d={d}, h={h}, fwd+bwd"
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    r1 = ratio_stat(times, "spec", "sdpa")
    r2 = ratio_stat(times, "spec", "mha")
    r3 = ratio_stat(times, "sdpa", "mha")
    return [
        Row("MHSA spec / projections+SDPA", cfg, r1.fmt(), "<= 1.05x", r1.median <= 1.05,
            f"{ms['spec']:.1f} ms vs {ms['sdpa']:.1f} ms"),
        Row("MHSA spec / nn.MultiheadAttention", cfg, r2.fmt(), "<= 0.90x", r2.median <= 0.90,
            f"{ms['spec']:.1f} ms vs {ms['mha']:.1f} ms"),
        Row("(context) projections+SDPA / nn.MultiheadAttention", cfg, r3.fmt(), "-", None,
            "the hand-written reference against torch's module"),
    ]


def bench_additive(sz: Sizes) -> list[Row]:
    """(2) global attention and Bahdanau additive attention vs hand-written."""
    rows = []
    b, n, vocab, d = sz.pick((64, 256, 1000, 128), (2, 8, 20, 8))
    spec = attngraph.compile(global_spec(vocab, d, 4), seed=0)
    hand = HandGlobal(vocab, d, 4)
    tok = torch.randint(0, vocab, (b, n))
    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: spec(tokens=tok)["logits"]),
        "hand": _fwd_bwd(hand, lambda: hand(tok)),
    }, sz.repeats, inner=1 if sz.quick else 3)
    r = ratio_stat(times, "spec", "hand")
    rows.append(Row("global attention spec / hand-written", f"B={b}, N={n}, d={d}, fwd+bwd",
                    r.fmt(), "<= 1.10x", r.median <= 1.10,
                    f"{statistics.median(times['spec'])*1e3:.2f} ms vs "
                    f"{statistics.median(times['hand'])*1e3:.2f} ms"))
    b, t, n, d, a = sz.pick((16, 32, 64, 128, 128), (2, 3, 5, 8, 8))
    spec = attngraph.compile(additive_spec(d, a), seed=0)
    hand = HandAdditive(d, a)
    dec, enc = torch.randn(b, t, d), torch.randn(b, n, d, requires_grad=True)
    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: spec(dec=dec, enc=enc)["c"]),
        "hand": _fwd_bwd(hand, lambda: hand(dec, enc)),
    }, sz.repeats, inner=1 if sz.quick else 3)
    r = ratio_stat(times, "spec", "hand")
    rows.append(Row("Bahdanau additive attention spec / hand-written",
                    f"B={b}, T={t}, N={n}, d={d}, hidden={a}, fwd+bwd", r.fmt(), "<= 1.10x",
                    r.median <= 1.10,
                    f"{statistics.median(times['spec'])*1e3:.2f} ms vs "
                    f"{statistics.median(times['hand'])*1e3:.2f} ms"))
    return rows


def bench_memory(sz: Sizes, threads: int) -> list[Row]:
    """(3) peak memory of fwd+bwd, weights not requested, vs hand-written SDPA."""
    n, h, dh = sz.pick((4096, 4, 32), (64, 2, 4))
    runs = 1 if sz.quick else 3
    peak = {v: [peak_mib(v, n, h, dh, threads) for _ in range(runs)]
            for v in ("spec", "sdpa", "spec_weights", "materialised")}
    med = {v: statistics.median(p) for v, p in peak.items()}
    cfg = f"B=1, N={n}, h={h}, d_head={dh}, fwd+bwd"
    r = median_stat([a / b for a, b in zip(peak["spec"], peak["sdpa"], strict=True)])
    rw = med["spec_weights"] / med["sdpa"]
    rm = med["materialised"] / med["sdpa"]
    return [
        Row("peak memory spec / hand-written SDPA", cfg, r.fmt(), "<= 1.2x", r.median <= 1.2,
            f"{med['spec']:.0f} MiB vs {med['sdpa']:.0f} MiB (peak RSS delta, fresh process)"),
        Row("(context) spec with weights requested / SDPA", cfg, f"{rw:.2f}x", "-", None,
            f"{med['spec_weights']:.0f} MiB: the N×N weights are an output, so they exist"),
        Row("(context) hand-written explicit softmax / SDPA", cfg, f"{rm:.2f}x", "-", None,
            f"{med['materialised']:.0f} MiB"),
    ]


def bench_local(sz: Sizes) -> list[Row]:
    """(4) local attention: banded lowering vs dense masked SDPA; growth with N."""
    w, d, h = sz.pick((64, 128, 4), (2, 8, 2))
    sizes = sz.pick((1024, 4096), (32, 64))
    spec = attngraph.compile(local_spec(d, h, w), seed=0)
    dense = HandDenseLocal(d, h, w)
    small, big = sizes
    xs = {n: torch.randn(1, n, d) for n in sizes}
    # both sizes in the same rounds, so that the growth ratio is paired in time
    t = interleaved({
        f"{kind}{n}": _fwd_bwd(mod, (lambda n=n: spec(x=xs[n])["z"]) if kind == "spec"
                               else (lambda n=n: dense(xs[n])))
        for n in sizes for kind, mod in (("spec", spec), ("dense", dense))
    }, max(3, sz.repeats // 2), inner=1 if sz.quick else 2)
    per_n = {n: {"spec": t[f"spec{n}"], "dense": t[f"dense{n}"]} for n in sizes}
    r = ratio_stat(per_n[big], "spec", "dense")
    grow_s = ratio_stat(t, f"spec{big}", f"spec{small}")
    grow_d = ratio_stat(t, f"dense{big}", f"dense{small}")
    ms = {k: statistics.median(v) * 1e3 for k, v in per_n[big].items()}
    return [
        Row("local spec (banded) / dense masked SDPA", f"B=1, N={big}, w={w}, d={d}, h={h}, "
            "fwd+bwd", r.fmt(), "<= 0.33x (wide margin)", r.median <= 0.33,
            f"{ms['spec']:.1f} ms vs {ms['dense']:.1f} ms"),
        Row(f"local spec time growth N={small} -> {big}", f"w={w}", grow_s.fmt(),
            "~4x (N·w), not ~16x (N²)", grow_s.median <= 6.0,
            f"dense masked SDPA grows {grow_d.fmt()}"),
    ]


def _fwd(call):  # noqa: ANN001, ANN202
    """A closure doing one forward without autograd (inference)."""
    def step() -> None:
        with torch.no_grad():
            call()
    return step


def bench_rnn(sz: Sizes) -> list[Row]:
    """(7) masked bidirectional GRU/LSTM vs pack_padded_sequence + nn.GRU/nn.LSTM."""
    b, n, d, hid = sz.pick((32, 60, 64, 128), (3, 5, 4, 4))
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, n + 1, (b,), generator=g)
    lengths[0] = n  # the longest row fills the padded length
    mask = torch.arange(n)[None, :] < lengths[:, None]  # (B, N), padding trailing
    x = torch.randn(b, n, d, generator=g)
    cfg = f"B={b}, N={n}, d={d}, h={hid}, lengths {int(lengths.min())}-{n}"
    rows = []
    for cell, name in (("gru", "GRU"), ("lstm", "LSTM")):
        spec = attngraph.compile(masked_rnn_spec(d, hid, cell), seed=0)
        hand = HandPackedRnn(d, hid, cell)

        def run_spec(spec=spec):  # noqa: ANN001, ANN202
            o = spec(x=x, x_mask=mask)
            return o["out"].sum() + o["state"].sum()

        def run_hand(hand=hand):  # noqa: ANN001, ANN202
            out, state = hand(x, lengths)
            return out.sum() + state.sum()

        variants = {"spec": _fwd_bwd(spec, run_spec), "packed": _fwd_bwd(hand, run_hand)}
        if cell == "gru":
            # the lowering before packing (the same weights, step by step), and
            # inference, where the loop cost more than in training on this CPU
            loop = attngraph.compile(masked_rnn_spec(d, hid, cell), seed=0)
            node = loop.nodes.enc
            node._packed = node._stepwise  # type: ignore[method-assign]
            variants.update({
                "loop": _fwd_bwd(loop, lambda loop=loop: run_spec(loop)),
                "spec_f": _fwd(run_spec), "packed_f": _fwd(run_hand),
                "loop_f": _fwd(lambda loop=loop: run_spec(loop)),
            })
        times = interleaved(variants, sz.repeats, inner=1 if sz.quick else 3)
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        r = ratio_stat(times, "spec", "packed")
        hand_name = f"pack_padded_sequence + nn.{name}"
        rows.append(Row(f"masked bidirectional {name}: spec rnn / {hand_name}",
                        f"{cfg}, fwd+bwd", r.fmt(), "<= 1.10x", r.median <= 1.10,
                        f"{ms['spec']:.1f} ms vs {ms['packed']:.1f} ms"))
        if cell != "gru":
            continue
        rf = ratio_stat(times, "spec_f", "packed_f")
        rl = ratio_stat(times, "loop", "packed")
        rlf = ratio_stat(times, "loop_f", "packed_f")
        before = "the masked lowering before packing (now only under torch.compile)"
        rows += [
            Row(f"(context) masked {name} spec rnn / {hand_name}", f"{cfg}, forward, no grad",
                rf.fmt(), "-", None, f"{ms['spec_f']:.1f} ms vs {ms['packed_f']:.1f} ms"),
            Row(f"(context) per-step masked {name} / {hand_name}", f"{cfg}, fwd+bwd",
                rl.fmt(), "-", None, f"{ms['loop']:.1f} ms: {before}"),
            Row(f"(context) per-step masked {name} / {hand_name}", f"{cfg}, forward, no grad",
                rlf.fmt(), "-", None, f"{ms['loop_f']:.1f} ms: {before}"),
        ]
    return rows


#: every catalog loop model at the benchmark's sizes: spec dims, twin arguments, inputs
def _loop_cases(sz: Sizes) -> dict[str, tuple[dict[str, int], tuple[int, ...], str]]:
    d = int(sz.pick(128, 8))  # type: ignore[call-overload]
    return {
        "bahdanau_translation": ({"e": d, "h": d, "s": d}, (12, d, d, d), "seq2seq"),
        "luong_translation": ({"e": d, "h": d, "hh": d // 2}, (12, d, d, d // 2), "seq2seq"),
        "luong_local_p": ({"e": d, "h": d}, (12, d, d), "seq2seq"),
        "memory_network": ({"e": d, "hs": d, "slots": 24, "width": d}, (16, d, d, 24, d),
                           "seq"),
        "glimpse_soft": ({"d": d}, (d, 10), "image"),
        "glimpse_hard": ({"gd": d, "hs": d}, (d, d, 10), "image"),
    }


def bench_loops(sz: Sizes) -> list[Row]:
    """(8) each catalog loop model, whole, vs its hand-written twin (same weights)."""
    b, n = sz.pick((32, 24), (2, 5))
    g = torch.Generator().manual_seed(0)
    inputs = {
        "seq2seq": {"source": torch.randint(1, 12, (b, n), generator=g),
                    "target": torch.randint(1, 12, (b, n), generator=g)},
        "seq": {"seq": torch.randint(0, 16, (b, n), generator=g)},
        "image": {"image": torch.rand(b, 1, 32, 32, generator=g)},
    }
    rows = []
    for name, (dims, args, kind) in _loop_cases(sz).items():
        spec = attngraph.compile(catalog(name, **dims), seed=0).train()
        twin = TWINS[name](*args).train()
        copy_into(twin, model=spec)
        kw = inputs[kind]

        def total(out: dict[str, torch.Tensor]) -> torch.Tensor:
            return sum(v.sum() for v in out.values() if v.is_floating_point())  # type: ignore[return-value]

        variants = {
            "spec": _fwd_bwd(spec, lambda spec=spec, kw=kw: total(spec(**kw))),
            "hand": _fwd_bwd(twin, lambda twin=twin, kw=kw: total(twin(*kw.values()))),
        }
        times = interleaved(variants, sz.repeats, inner=1 if sz.quick else 3)
        r = ratio_stat(times, "spec", "hand")
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        limit = 1.0 if name == "bahdanau_translation" else 1.05
        size = ", ".join(f"{k}={v}" for k, v in dims.items())
        cfg = (f"B={b}, N=T={n}, {size}" if kind != "image" else f"B={b}, 32×32, {size}")
        n_params = sum(p.numel() for p in spec.parameters())
        rows.append(Row(f"{name} spec / hand-written twin", f"{cfg}, fwd+bwd", r.fmt(),
                        f"<= {limit:.2f}x", r.median <= limit,
                        f"{ms['spec']:.1f} ms vs {ms['hand']:.1f} ms; {n_params:,} "
                        "parameters each, equal outputs"))
    rows += _loop_context(sz, inputs)
    return rows


def _loop_context(sz: Sizes, inputs: dict[str, dict[str, torch.Tensor]]) -> list[Row]:
    """Where the loop rows' figures come from: the twin with bahdanau's output layer
    after the loop; glimpse_hard at a larger batch; the spec under torch.compile."""
    rows = []
    cases = _loop_cases(sz)
    dims, args, _ = cases["bahdanau_translation"]
    spec = attngraph.compile(catalog("bahdanau_translation", **dims), seed=0).train()
    twin, after = TWINS["bahdanau_translation"](*args), HandBahdanauAfter(*args)
    copy_into(twin, spec)
    copy_into(after, spec)
    kw = inputs["seq2seq"]
    backend = "eager" if sz.quick else "inductor"
    torch._dynamo.reset()
    compiled = torch.compile(spec, fullgraph=True, backend=backend)
    t0 = time.perf_counter()
    _fwd_bwd(spec, lambda: compiled(**kw)["logits"])()
    comp_s = time.perf_counter() - t0
    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: spec(**kw)["logits"]),
        "twin": _fwd_bwd(twin, lambda: twin(*kw.values())["logits"]),
        "after": _fwd_bwd(after, lambda: after(*kw.values())["logits"]),
        "compiled": _fwd_bwd(spec, lambda: compiled(**kw)["logits"]),
    }, sz.repeats, inner=1 if sz.quick else 3)
    b, n = kw["source"].shape
    cfg = f"B={b}, N=T={n}, e=h=s={dims['e']}, fwd+bwd"
    ra, rt = ratio_stat(times, "spec", "after"), ratio_stat(times, "after", "twin")
    rc = ratio_stat(times, "compiled", "twin")
    rows += [
        Row("(context) bahdanau spec / twin with its output layer after the loop", cfg,
            ra.fmt(), "-", None, f"that twin / the plain one: {rt.fmt()}; the spec runs "
            "its output layer after the steps (the hoisting pass)"),
        Row(f"(context) bahdanau spec under torch.compile(fullgraph, {backend}) / twin",
            cfg, rc.fmt(), "-", None, f"first call (compilation) {comp_s:.0f} s; the rnn "
            "runs by steps under compile"),
    ]
    dims, args, _ = cases["glimpse_hard"]
    big = int(sz.pick(128, 4))  # type: ignore[call-overload]
    spec = attngraph.compile(catalog("glimpse_hard", **dims), seed=0).train()
    twin = TWINS["glimpse_hard"](*args).train()
    copy_into(twin, spec)
    img = torch.rand(big, 1, 32, 32, generator=torch.Generator().manual_seed(1))

    def total(out: dict[str, torch.Tensor]) -> torch.Tensor:
        return sum(v.sum() for v in out.values() if v.is_floating_point())  # type: ignore[return-value]

    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: total(spec(image=img))),
        "hand": _fwd_bwd(twin, lambda: total(twin(img))),
    }, sz.repeats, inner=1 if sz.quick else 3)
    r = ratio_stat(times, "spec", "hand")
    rows.append(Row("(context) glimpse_hard spec / twin at a larger batch",
                    f"B={big}, gd=hs={dims['gd']}, fwd+bwd", r.fmt(), "-", None,
                    "the same per-node Python over more rows"))
    return rows


def _validate_wall(spec: str) -> float:
    exe = Path(sys.executable).with_name("attngraph")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "attngraph"]
    t0 = time.perf_counter()
    subprocess.run([*cmd, "validate", "-q", spec], check=True, capture_output=True)
    return time.perf_counter() - t0


def _py_wall(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


VALIDATE_IMPORTS = """
import sys
sys.argv = ["attngraph", "validate", "-q", {spec!r}]
from attngraph.cli import main
try:
    main()
except SystemExit:
    pass
print(",".join(m for m in ("networkx", "torch", "numpy") if m in sys.modules) or "none")
"""


def bench_front(sz: Sizes) -> list[Row]:
    """(5) cold `attngraph validate` and compiling a 24-layer transformer."""
    root = HERE.parent
    spec = str(root / "specs" / "global_attention.yaml")
    floors = {"validate": [], "pass": [], "pydantic": [], "import": []}
    for _ in range(sz.pick(7, 1)):  # interleaved with the floors it is compared to
        floors["validate"].append(_validate_wall(spec))
        floors["pass"].append(_py_wall("pass"))
        floors["pydantic"].append(_py_wall("from pydantic import BaseModel"))
        floors["import"].append(_py_wall("import attngraph.cli"))
    v = median_stat(floors["validate"])
    heavy = subprocess.run([sys.executable, "-c", VALIDATE_IMPORTS.format(spec=spec)],
                           check=True, capture_output=True, text=True).stdout.strip()
    fl = {k: median_stat(x) for k, x in floors.items()}
    layers = sz.pick(24, 2)
    text = deep_transformer_spec(layers)
    attngraph.compile(text, seed=0)  # imports and rule registration out of the way
    ct = []
    for _ in range(sz.pick(7, 1)):
        t0 = time.perf_counter()
        attngraph.compile(text, seed=0)
        ct.append(time.perf_counter() - t0)
    c = median_stat(ct)
    return [
        Row("`attngraph validate` cold (subprocess wall)", "specs/global_attention.yaml",
            v.fmt(" s", 3), "< 0.3 s", v.median < 0.3,
            "interpreter start-up included; see the floors below"),
        Row("(context) floor: `python -c pass`", "same rounds", fl["pass"].fmt(" s", 3),
            "-", None, "interpreter start-up"),
        Row("(context) floor: `from pydantic import BaseModel`", "same rounds",
            fl["pydantic"].fmt(" s", 3), "-", None, "start-up + pydantic import"),
        Row("(context) `import attngraph.cli` (no validation)", "same rounds",
            fl["import"].fmt(" s", 3), "-", None,
            "pydantic, yaml, click, spec model classes, kinds"),
        Row("heavy modules imported by `attngraph validate`", "networkx, torch, numpy",
            heavy, "none", heavy == "none", "checked in sys.modules after the command"),
        Row(f"`attngraph.compile` of a {layers}-layer transformer",
            "transformer_encoder.yaml, times: " + str(layers) + ", text in memory",
            c.fmt(" s", 3), "< 0.2 s", c.median < 0.2, "parse, validate, infer, fuse, lower"),
    ]


def bench_torch_compile(sz: Sizes) -> list[Row]:
    """(6) torch.compile speedup of the compiled spec vs of the hand-written module."""
    b, n, d, h = sz.pick((16, 64, 64, 4), (2, 8, 8, 2))
    backend = "eager" if sz.quick else "inductor"
    spec = attngraph.compile(mhsa_spec(d, h), seed=0)
    hand = HandMHSA(d, h)
    cspec = torch.compile(spec, backend=backend)
    chand = torch.compile(hand, backend=backend)
    x = torch.randn(b, n, d)
    t0 = time.perf_counter()
    for m, call in ((cspec, lambda: cspec(x=x)["z"]), (chand, lambda: chand(x))):
        _fwd_bwd(m, call)()
    comp_s = time.perf_counter() - t0
    times = interleaved({
        "spec": _fwd_bwd(spec, lambda: spec(x=x)["z"]),
        "cspec": _fwd_bwd(spec, lambda: cspec(x=x)["z"]),
        "hand": _fwd_bwd(hand, lambda: hand(x)),
        "chand": _fwd_bwd(hand, lambda: chand(x)),
    }, sz.repeats * (1 if sz.quick else 3))  # short steps: more rounds for the same noise
    sp = median_stat([a / b for a, b in zip(times["spec"], times["cspec"], strict=True)])
    sh = median_stat([a / b for a, b in zip(times["hand"], times["chand"], strict=True)])
    rel = median_stat([(a / b) / (c / e) for a, b, c, e in zip(
        times["spec"], times["cspec"], times["hand"], times["chand"], strict=True)])
    cc = ratio_stat(times, "cspec", "chand")
    cfg = f"B={b}, N={n}, d={d}, h={h}, fwd+bwd, backend={backend}"
    return [
        Row("torch.compile speedup: spec's / hand-written's", cfg, rel.fmt(), ">= 1.00x",
            rel.median >= 1.0, f"spec {sp.fmt()}, hand-written {sh.fmt()}; "
            f"first calls (compilation) {comp_s:.0f} s"),
        Row("(context) compiled spec / compiled hand-written", cfg, cc.fmt(), "-", None, ""),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved rounds")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, all variants")
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "performance.md"),
                    help="markdown report to write ('-' for none)")
    ap.add_argument("--only", default="", help="comma list: mhsa,additive,memory,local,"
                    "front,compile,rnn,loops,real,generate")
    a = ap.parse_args(argv)
    load_start = load()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    sz = Sizes(a.quick, a.repeats or (2 if a.quick else 15))
    parts = {
        "mhsa": lambda: bench_mhsa(sz), "additive": lambda: bench_additive(sz),
        "memory": lambda: bench_memory(sz, a.threads), "local": lambda: bench_local(sz),
        "front": lambda: bench_front(sz), "compile": lambda: bench_torch_compile(sz),
        "rnn": lambda: bench_rnn(sz), "loops": lambda: bench_loops(sz),
        # the real-model specs against transformers (issue 27): rows at parity within a
        # few per cent, so more rounds than the others (a median of 8 moved by +-2%)
        "real": lambda: bench_real(sz.quick, a.repeats or sz.pick(36, 2)),
        "generate": lambda: missing() or bench_generate(sz.quick, a.repeats or sz.pick(3, 2),
                                                        sz.pick(256, 16)),
    }
    only = [p for p in a.only.split(",") if p] or list(parts)
    rows: list[Row] = []
    for name in only:
        t0 = time.perf_counter()
        rows += parts[name]()
        print(f"[{name}: {time.perf_counter() - t0:.0f} s]", file=sys.stderr)
    table = render_table(rows)
    print(table)
    if a.out != "-":
        write_doc(Path(a.out), rows, machine(a.threads, load_start), sz.quick, sz.repeats)
        print(f"wrote {a.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
