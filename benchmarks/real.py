"""The real-model specs against their `transformers` models (issue 27): forward+backward.

Usage: ``python benchmarks/real.py [--quick] [--repeats R] [--threads T]`` (or
``benchmarks/run.py --only real``). For each family of specs/real/ (:data:`FAMILIES`)
a model of one small configuration is built by ``transformers`` with random weights,
saved, and imported into its spec (:func:`attngraph.realmodels.load_model`), so both
sides hold the same weights and compute the same logits (checked, to 1e-4). Two rows
a family, each the same computation on both sides:

- the spec without the weights (its ``heads`` outputs, and the layer blocks'
  outputs that the repeats stack into them, left out, so every layer's attention
  is one fused SDPA call where the scores are plain scaled dot products) / the
  ``transformers`` model (its default ``sdpa`` attention, logits only; T5, which
  ``transformers`` runs with ``eager`` attention alone, with that);
- the spec as shipped (every layer's and head's weights as outputs: ``heads``, and
  T5's ``decoder`` and ``cross``) / the ``transformers`` model with
  ``output_attentions=True`` (``eager`` attention, which makes the same weights).

One step is a forward + backward of the sum of the logits, in eval mode (no
dropout on either side), gradients reset first; T5's step is one encoder-decoder
pass (source ids, and the same ids shifted right behind the start id 0 as the
decoder's input).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from report import Row, render_table  # noqa: E402
from timing import paired, ratio_stat  # noqa: E402

REAL = HERE.parent / "specs" / "real"
#: the lines of a real spec that ask for every layer's weights: the model's outputs
#: beside the logits, and the blocks' outputs beside the first, which the repeats stack
_HEADS = re.compile(r"^outputs: \{logits: logits(, \w+: [\w.]+)+\}$", re.M)
_BLOCK = re.compile(r"^(    outputs: \{\w+: \w+)(, \w+: \w+)+\}$", re.M)


@dataclass(frozen=True)
class Family:
    """One family of specs/real/: its transformers model at a size, and its inputs."""

    spec: str
    model: str  # the transformers class
    config: Callable[[dict[str, int]], Any]
    inputs: Callable[[torch.Tensor], tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]]
    #: transformers runs it with SDPA (else its eager attention alone: T5)
    sdpa: bool = True
    #: the spec's outputs of weights, and transformers' outputs of the same weights
    weights: tuple[tuple[str, str], ...] = (("heads", "attentions"),)
    #: an encoder and a decoder of ``layers`` layers each
    stacks: int = 1


def _gpt2(s: dict[str, int]) -> Any:
    import transformers

    return transformers.GPT2Config(vocab_size=s["vocab"], n_embd=s["d"], n_layer=s["layers"],
                                   n_head=s["heads"], n_positions=s["n"])


def _llama(s: dict[str, int]) -> Any:
    import transformers

    return transformers.LlamaConfig(vocab_size=s["vocab"], hidden_size=s["d"],
                                    intermediate_size=s["ff"], num_hidden_layers=s["layers"],
                                    num_attention_heads=s["heads"],
                                    num_key_value_heads=s["heads"] // 2,
                                    max_position_embeddings=s["n"])


def _bert(s: dict[str, int]) -> Any:
    import transformers

    return transformers.BertConfig(vocab_size=s["vocab"], hidden_size=s["d"],
                                   intermediate_size=s["ff"], num_hidden_layers=s["layers"],
                                   num_attention_heads=s["heads"],
                                   max_position_embeddings=s["n"], num_labels=2)


def _t5(s: dict[str, int]) -> Any:
    import transformers

    return transformers.T5Config(vocab_size=s["vocab"], d_model=s["d"],
                                 d_kv=s["d"] // s["heads"], d_ff=s["ff"],
                                 num_layers=s["layers"], num_decoder_layers=s["layers"],
                                 num_heads=s["heads"], decoder_start_token_id=0,
                                 pad_token_id=0)


def _causal(ids: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return {"tokens": ids}, {"input_ids": ids}


def _typed(ids: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    seg = torch.zeros_like(ids)
    return {"tokens": ids, "segments": seg}, {"input_ids": ids, "token_type_ids": seg}


def _seq2seq(ids: torch.Tensor) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The source ids, and the same ids shifted right behind the start id 0 (the target)."""
    tgt = torch.cat([torch.zeros_like(ids[:, :1]), ids[:, :-1]], 1)
    return {"source": ids, "target": tgt}, {"input_ids": ids, "decoder_input_ids": tgt}


#: Each family's spec, transformers model and inputs.
FAMILIES: dict[str, Family] = {
    "gpt2": Family("gpt2", "GPT2LMHeadModel", _gpt2, _causal),
    "llama": Family("llama", "LlamaForCausalLM", _llama, _causal),
    "bert": Family("bert", "BertForSequenceClassification", _bert, _typed),
    "t5": Family("t5", "T5ForConditionalGeneration", _t5, _seq2seq, sdpa=False,
                 weights=(("heads", "encoder_attentions"), ("decoder", "decoder_attentions"),
                          ("cross", "cross_attentions")), stacks=2),
}


def spec_without_heads(family: str, folder: Path) -> Path:
    """A copy of the family's spec (and its name map) that does not ask for the weights."""
    text = (REAL / f"{family}.yaml").read_text(encoding="utf-8")
    text, n = _HEADS.subn("outputs: {logits: logits}", text)
    text, m = _BLOCK.subn(r"\1}", text)
    if n != 1 or m < 1:
        msg = f"specs/real/{family}.yaml no longer has the outputs lines this reads"
        raise RuntimeError(msg)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{family}.yaml").write_text(text, encoding="utf-8")
    shutil.copyfile(REAL / f"{family}.names.yaml", folder / f"{family}.names.yaml")
    return folder / f"{family}.yaml"


def _fwd_bwd(model: torch.nn.Module, call: Callable[[], torch.Tensor]) -> Callable[[], None]:
    def step() -> None:
        model.zero_grad(set_to_none=True)
        call().sum().backward()
    return step


def _models(fam: Family, size: dict[str, int], tmp: Path) -> dict[str, torch.nn.Module]:
    """transformers' model (sdpa and eager), the spec, and the spec without weights."""
    import transformers

    from attngraph.realmodels import load_model

    torch.manual_seed(0)
    cls = getattr(transformers, fam.model)
    cls(fam.config(size)).save_pretrained(tmp / "model")
    return {
        "hf": cls.from_pretrained(tmp / "model", attn_implementation="sdpa" if fam.sdpa
                                  else "eager").eval(),
        "hf_eager": cls.from_pretrained(tmp / "model", attn_implementation="eager").eval(),
        "spec_heads": load_model(tmp / "model").model.eval(),
        "spec": load_model(tmp / "model",
                           spec=spec_without_heads(fam.spec, tmp / "spec")).model.eval(),
    }


def bench_family(name: str, size: dict[str, int], batch: int, repeats: int,
                 inner: int) -> list[Row]:
    """The family's two rows: weights not asked for, and every layer's weights."""
    fam = FAMILIES[name]
    with tempfile.TemporaryDirectory() as tmp:
        m = _models(fam, size, Path(tmp))
    ids = torch.randint(0, size["vocab"], (batch, size["n"]),
                        generator=torch.Generator().manual_seed(1))
    ours, theirs = fam.inputs(ids)
    with torch.no_grad():
        gap = max((m["spec"](**ours)["logits"] - m["hf"](**theirs).logits).abs().max().item(),
                  (m["spec_heads"](**ours)["logits"]
                   - m["hf_eager"](**theirs).logits).abs().max().item())
    if gap > 1e-4:
        msg = f"{name}: the spec's logits differ from transformers' by {gap:.1e}"
        raise RuntimeError(msg)
    times = paired({
        "spec": _fwd_bwd(m["spec"], lambda: m["spec"](**ours)["logits"]),
        "hf": _fwd_bwd(m["hf"], lambda: m["hf"](**theirs).logits),
        "spec_heads": _fwd_bwd(m["spec_heads"],
                               lambda: _with_heads(fam, m["spec_heads"], ours)),
        "hf_eager": _fwd_bwd(m["hf_eager"], lambda: _hf_with_heads(fam, m["hf_eager"], theirs)),
    }, [("spec", "hf"), ("spec_heads", "hf_eager")], repeats, inner=inner)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    n_params = sum(p.numel() for p in m["spec"].parameters())
    layers = "+".join([str(size["layers"])] * fam.stacks)
    cfg = (f"{n_params / 1e6:.1f}M params, d={size['d']}, layers={layers}, "
           f"heads={size['heads']}, B={batch}, {'N=T' if fam.stacks == 2 else 'N'}={size['n']}, "
           "fwd+bwd")
    r = ratio_stat(times, "spec", "hf")
    rh = ratio_stat(times, "spec_heads", "hf_eager")
    how = ("weights not asked for (fused SDPA) vs its sdpa attention" if fam.sdpa else
           "weights not asked for vs its eager attention (transformers has no SDPA path "
           "for it; the spec's scores carry the position bias: no fused SDPA either)")
    return [
        Row(f"{name} spec / transformers {fam.model}", cfg, r.fmt(), "<= 1.00x",
            r.median <= 1.0, f"{ms['spec']:.1f} ms vs {ms['hf']:.1f} ms; {how}; logits equal"),
        Row(f"{name} spec with every layer's weights / transformers, output_attentions",
            cfg, rh.fmt(), "<= 1.00x", rh.median <= 1.0,
            f"{ms['spec_heads']:.1f} ms vs {ms['hf_eager']:.1f} ms; the weights as an output "
            "on both sides (its eager attention)"),
    ]


def _with_heads(fam: Family, model: torch.nn.Module,
                ours: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(**ours)
    return out["logits"].sum() + sum(out[k].sum() for k, _ in fam.weights)


def _hf_with_heads(fam: Family, model: torch.nn.Module,
                   theirs: dict[str, torch.Tensor]) -> torch.Tensor:
    out = model(**theirs, output_attentions=True)
    return out.logits.sum() + sum(a.sum() for _, k in fam.weights for a in getattr(out, k))


#: the configuration each family is measured at, and a smoke size
FULL = {"vocab": 8192, "d": 256, "heads": 4, "ff": 1024, "layers": 4, "n": 128}
SMALL = {"vocab": 61, "d": 16, "heads": 4, "ff": 32, "layers": 2, "n": 8}


def missing() -> list[Row] | None:
    """A row saying the comparisons against transformers were not run, when it is absent."""
    import importlib.util

    if importlib.util.find_spec("transformers") is not None:
        return None
    return [Row("(skipped) real-model specs / transformers", "-", "-", "-", None,
                "transformers is not installed: pip install 'attngraph[real]'")]


def bench_real(quick: bool, repeats: int) -> list[Row]:
    """Every family's rows (issue 27: forward+backward <= 1.0x transformers)."""
    skipped = missing()
    if skipped is not None:
        return skipped
    size, batch = (SMALL, 2) if quick else (FULL, 4)
    rows: list[Row] = []
    for name in FAMILIES:
        rows += bench_family(name, size, batch, repeats, 1 if quick else 2)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--repeats", type=int, default=None, help="rounds (pairs alternate)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, all variants")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    print(render_table(bench_real(a.quick, a.repeats or (2 if a.quick else 36))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
