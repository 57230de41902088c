"""The benchmark table and docs/performance.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["Row", "render_table", "write_doc"]


@dataclass(frozen=True)
class Row:
    """One line of the table; ``met`` is None for context rows without a target."""

    comparison: str
    config: str
    figure: str
    target: str
    met: bool | None
    note: str = ""


def render_table(rows: list[Row]) -> str:
    """A markdown table."""
    head = ["comparison", "configuration", "median (IQR)", "target", "met", "notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        met = "-" if r.met is None else ("yes" if r.met else "**no**")
        cells = [r.comparison, r.config, r.figure, r.target, met, r.note]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


METHOD = """\
## Method

- Every comparison runs in one process (`benchmarks/run.py`), with
  `torch.set_num_threads` set once for all variants. Variants are timed in
  interleaved rounds whose order rotates each round, after two warm-up rounds;
  a figure is the **median over rounds of the per-round ratio**
  `time(spec) / time(reference)`, with the interquartile range in brackets
  (min-max below four rounds). The machine is shared with other engineers, so
  absolute times drift; per-round ratios cancel most of that drift.
- Times are one forward + backward (`.sum().backward()`, gradients reset first),
  on random inputs, with the same parameter shapes on both sides.
- Memory (3): each variant runs once in a fresh interpreter
  (`benchmarks/memory.py`). After building the model and input, the child resets
  the kernel's peak-RSS counter (`echo 5 > /proc/self/clear_refs`) and reads its
  RSS; after one forward + backward it reads the peak (`VmHWM`). The figure is
  peak - baseline, the memory the step itself needed; the median of three runs.
  A fresh process per run keeps allocator caches from hiding allocations.
- Front end (5): `attngraph validate -q` timed as a subprocess (wall clock,
  interpreter start-up included); `attngraph.compile(text)` timed in process
  after one warm-up call (so imports are not counted), on
  `specs/transformer_encoder.yaml` with `times: 24`.
- torch.compile (6): inductor (gcc is installed) at a small size, where eager
  Python overhead matters most and compilation on two cores stays short; the
  figure is `(eager/compiled of the spec) / (eager/compiled of the hand-written
  module)`. On this CPU inductor barely changes either module (the step is
  matmuls and one SDPA call), so both speedups are near 1.
- Masked rnn (7): a bidirectional GRU/LSTM over a padded batch of ragged lengths
  (the longest row fills N) against `pack_padded_sequence` + `nn.GRU`/`nn.LSTM` +
  `pad_packed_sequence`, given the lengths on the CPU; the spec gets the mask.
  Context rows time the lowering's former per-step loop and forward-only calls.
- Loop models (8): each catalog model with a loop (and glimpse_soft), whole, at
  B=32, N=T=24, every feature size 128, in training mode (teacher forcing), against
  a hand-written twin in `benchmarks/loops.py`: the plain PyTorch loop of the
  paper's equations, with the usual hand optimisation (an additive score's U h_j
  computed once, before the loop). The twins have the specs' parameter counts;
  `tests/test_bench_twins.py` copies each spec's weights into its twin and checks
  equal outputs and gradients. The loss is the sum of every float output. Context
  rows: bahdanau against a twin that also applies its output layer after the loop
  (as the compiled spec does), the spec under `torch.compile(fullgraph=True)`
  (inductor; the first call's compilation time is given), and glimpse_hard at
  B=128.
- Real models (9, `benchmarks/real.py`): each family of `specs/real/` (GPT-2,
  Llama with grouped keys and values, BERT, and T5, an encoder and a decoder of 4
  layers each, 32 buckets up to distance 128) at one small configuration, d=256, 4
  layers, 4 heads, ff=1024, a vocabulary of 8,192, B=4, N=128 (T5: 128 source and
  128 target tokens, the target the source shifted right behind the start id 0, as
  `decoder_input_ids`). `transformers` builds the model with random weights and saves
  it; `attngraph.realmodels.load_model` imports it into the spec, so both hold the
  same weights, and the logits are checked equal (1e-4) before timing. A step is a
  forward + backward of the sum of the logits in eval mode (no dropout either side),
  gradients reset first. 36 rounds; in each, the spec and the model it is compared
  with run alternately, two steps each (a b b a, then b a a b), each keeping its
  faster step, so that the two steps of a ratio are taken moments apart (every row
  here is within a few per cent of parity; with 24 rounds of back-to-back steps a
  median moved by about 2% from one run to the next). Two rows a family, each the
  same computation on both sides:
  the spec without the weights (its `heads` outputs and the layer blocks' outputs
  that the repeats stack into them left out, so that each layer's attention is one
  fused SDPA call where the scores are plain scaled dot products) against the model
  with its default `sdpa` attention; and the spec as shipped, every layer's and
  head's weights an output, against the model with `output_attentions=True` (its
  `eager` attention; the weights added to the loss on both sides: for T5 the
  encoder's, the decoder's and the cross-attention's). `transformers` runs T5 with
  its `eager` attention alone, and the spec's T5 scores (unscaled, plus a position
  bias) are not fused either: both of T5's rows materialise the weights, and differ
  only by the weights being outputs.
- Generation (10, `benchmarks/generate.py`): GPT-2 small's configuration (124M
  parameters, random weights) imported as above; 256 greedy tokens from one 8-token
  prompt, `attngraph.generate` (the key/value cache) against
  `GPT2LMHeadModel.generate(do_sample=False)` (its own cache), in interleaved rounds
  of one call each; the tokens are checked equal. The uncached path (`cache=False`,
  the prefix re-run at every step) is too slow to run 256 steps in every round: its
  time is the sum of its steps' forwards, each timed at nine prefix lengths and
  interpolated; a context row runs it for real at 32 tokens beside that estimate.
- Front end: no change to the front-end files was needed for the compile
  target; the validate target is discussed below the table when unmet.
- There is no GPU on this machine: no CUDA table.
"""

LOWERING = """\
## What the lowering does for speed

- **Values of the positions alone, once per forward** (`attngraph/lower/runtime/memo.py`):
  a repeat's rounds, and the nodes within a round, ask for the same rotary tables
  (cos and sin of every position's angles), causal and window masks (with the
  padding they combine), ALiBi biases and T5 buckets; the first request of a
  forward makes each, the others read it, as a hand-written model makes them before
  its layers. Each lives in the forward's runtime, keyed by what it is made of
  (sizes, dtype, device, and the tensors it reads by identity and version); a new
  forward starts empty, a runtime that lives on (a decoder's steps) keeps a few,
  and nothing is kept while torch.compile, torch.export or jit.trace follows the
  forward. `tests/test_repeat_invariants.py` checks outputs and gradients equal
  making each where it is used, bit for bit.

- **Fusion** (`attngraph/passes/fuse_attention.py`): scaled-dot scorer -> softmax
  -> readout whose weights nobody reads becomes one `attention` node, lowered to
  a single `F.scaled_dot_product_attention` call, so the N×N weights are never
  materialised (the memory row) and the fused CPU kernel runs.
- **Masks**: with no mask, or a causal mask alone, the fused node calls SDPA with
  `is_causal` instead of building an N×N bool mask; padding, window and
  adjacency masks are built once per call.
- **Banded local attention** (`attngraph/lower/rules/banded.py`): a softmax `window: w`
  over M = N items, when the band covers at most half a row, runs as blocks of
  about w queries against their `c + 2w` keys (a strided view of the padded
  keys), each block one SDPA call with a small mask: cost and memory grow with
  N·w. It gives the dense masked numbers (to 1e-5, padding and causal included;
  `tests/test_lower_banded.py`). When the weights are requested the dense chain
  stays: the weights are an N×N output by type.
- **Stacked projections** (`attngraph/lower/runtime/stacked.py`): queries, keys and
  values that apply a plain linear to the same value (self-attention) run as one
  `F.linear` over their concatenated weights, then split; parameters and their
  names stay per node.
- **Rows read alone** (`attngraph/lower/runtime/rows.py`): a value a formula reads at
  fixed items alone (`take(h, 0, items)`, BERT's pooler on the first token), or at one
  item per example worked out from the lengths (`take(h, N - 1, items)`, the last real
  token a GPT-style classifier reads), is made at those items alone, back through the
  nodes that work on each item alone (their step trait) and the attentions whose rows
  are their queries (no causal, window or adjacency mask): in BERT's last layer the
  readout, the output projection, both norms and the MLP run on one row, the keys,
  values and any weights asked for on every item. A repeat runs its last round so.
  Outputs and gradients equal the whole computation (`tests/test_lower_rows.py`);
  nothing changes while a tracer follows the forward.
- **Learned queries** are scored once and broadcast over the batch, not
  expanded to B copies first (built-in scorers).
- **Masked rnn** (`attngraph/lower/rules/rnn.py`): a padding mask becomes lengths and
  the rows run packed (`pack_padded_sequence`) through torch's fused GRU/LSTM,
  rather than step by step in Python; rows without a real item get zeros and their
  initial state, as before. The per-step loop remains for `torch.compile`, which
  traces neither packing nor `nn.GRU`/`nn.LSTM` (the weights live in a module of
  their own, with `nn.GRU`'s names, so that compile can read them). On this CPU
  the gain is in inference (about 2x at B=32, N=60); forward + backward gains
  little (about 5%), as torch's own GRU backward takes about six times its forward
  here. Not measured on a GPU (none on this machine).
- **Additive scorers** contract the hidden axis with a matmul (`tanh(...) @ v`)
  rather than a broadcast multiply and sum, which saves one (B, M, N, H) tensor.
- **Loops** (`attngraph/passes/hoist.py`, `attngraph/lower/rules/loop.py`): the
  hoisting pass sorts a loop body's nodes by when they run (`attngraph compile
  --print-after hoist_invariants` marks them). What reads only the loop's inputs
  runs `once`, before the steps, and so does an additive score's U h_j (a `prepare`
  node, with the scorer's own weights): a decoder no longer projects every encoder
  state at every target word. What reads only the feeds (the embedding of the
  teacher-forced word) runs `before` the steps on all of them at once; what no
  carried state depends on (the output layer) runs `after` them, one matrix product
  over B·T rows in place of T small ones. While a feedback reads them (greedy
  decoding), they run at each step. Every catalog loop spec equals its model
  compiled without the pass (`tests/test_pass_hoist.py`).
- **Per-step overhead**: the interpreter reads each node's module once per call
  and calls its `forward` directly when no hook is registered; a step forgets the
  values it read for the last time, so memory is reused while warm; the hot nodes of
  a decoder step (an additive score over prepared keys, a plain readout, a cell
  step, a linear with its activation) take one direct path each. What remains is
  a few microseconds of Python per node and step, which matters for a small model
  with many nodes per step (glimpse_hard; see its rows).
"""


#: Why a target can fail on this machine and what would meet it, by row prefix.
REASONS = {
    "MHSA spec / nn.MultiheadAttention": (
        "The spec is level with the hand-written projections + SDPA in the same run "
        "(the row above); what moves is torch's own module against that reference, the "
        "context row: 0.81x on the Intel Xeon of the run of 2026-11-24, 0.91x on the "
        "AMD EPYC of the run of 2026-11-25. The margin over nn.MultiheadAttention is "
        "the CPU's, not the spec's; the target was set on the first machine."
    ),
    "`attngraph validate` cold": (
        "The floor rows of the same run show where the time goes: interpreter "
        "start-up, then importing pydantic, take most of the 0.3 s budget before any "
        "attngraph code runs; `import attngraph.cli` (pydantic, PyYAML, click, the ~40 "
        "spec model classes, the kind registries) is almost the whole command, and "
        "validating the spec is the small remainder. torch, numpy and networkx are "
        "not imported. On this shared, slow CPU the target cannot be met while "
        "validation goes through pydantic models. What would meet it: validating the "
        "parsed YAML with plain checks (keeping the pydantic models for "
        "`attngraph schema` and the Python API), or a resident process (an editor "
        "integration or language server) that pays start-up once."
    ),
    "torch.compile speedup": (
        "Both sides run the same kernels (projections, one SDPA call, output "
        "projection); after compilation the spec's per-node Python is gone and the "
        "compiled spec runs at the compiled hand-written module's speed (the context "
        "row). The speedup ratio then differs from 1 by the eager overhead of the "
        "spec and by timing noise; the per-round spread shows how much."
    ),
    "Bahdanau additive attention spec": (
        "The lowered scorer runs the hand-written module's operations (W s + b, U h, "
        "one broadcast add, tanh, a matmul with v, softmax, a batched matmul); this "
        "row has the widest run-to-run spread of the table on this shared machine "
        "(earlier full runs in the same session gave 0.71x and 1.02x; on 2026-11-27 a "
        "full run gave 1.30x (1.09-1.44) with the hand-written side itself 17% slower "
        "than in the run before, and three alternating runs of 150 rounds each gave "
        "1.12x, 0.94x, 1.01x for the spec of the day before and 0.98x, 0.94x, 0.94x "
        "for the spec after that day's changes). A quiet machine, or more rounds "
        "(`--repeats`), settles it."
    ),
    "masked bidirectional": (
        "The spec runs the reference's kernels (one packed nn.GRU/nn.LSTM call); the "
        "spec adds the forward's input checks and the mask-to-lengths step, about "
        "0.5 ms a call. The LSTM row has a wide spread on this shared machine (ten "
        "runs gave medians 0.92x-1.17x); rerun with `--only rnn`."
    ),
    "glimpse_soft spec": (
        "A step of under 3 ms (2.5-2.7 ms either side), where the spec's per-node "
        "Python, a dozen node calls, is a few per cent; its full runs give 1.01x-1.07x "
        "from one to the next on this shared machine (1.01x, 1.03x and 1.07x on "
        "2026-11-26 and 27). The computation is the twin's (equal outputs)."
    ),
    "bert spec / transformers": (
        "BERT's step has no rotary positions, no causal mask and, in this batch, no "
        "padding: nothing of issue 27's work changes it, and its full runs give "
        "1.00x, 1.01x and 1.01x (IQR about 0.96-1.06): parity within the spread, the "
        "matmuls being the same work on both sides."
    ),
    "glimpse_hard spec": (
        "The twin's autograd graph has the spec's nodes but for one: the location "
        "network scores a learned vector per cell, which the spec's position node gives "
        "as a batch-expanded [B, 16, gd] tensor; reading its first row back costs a "
        "[B, 16, gd] gradient per step that the twin, holding the parameter, never "
        "makes (about 4% here: a replica of the spec's operations with the parameter "
        "matches the twin). The rest is per-node Python: about 30 node calls for 3 "
        "glimpses of a 4 ms model. The larger batch context row shows the share "
        "fall as the rows grow; under torch.compile the Python is gone. What would "
        "meet it: values shared by the batch kept unexpanded ([1, ...]) end to end."
    ),
    "llama spec / transformers": (
        "Parity within the spread: the operators of a step, profiled at 2 threads, are "
        "150.6 ms on the spec's side against 146.0 ms of `transformers`' before the "
        "rotary change below and level after it, the matmuls 119.9 against 118.6 ms. "
        "The rotary node now turns each pair of features as one complex multiply "
        "(`attngraph/lower/rules/relative.py`, eager float32/float64 on the CPU and "
        "CUDA), a third of the time of the swap-and-two-multiplies form forward and "
        "backward (0.47 -> 0.17 ms per call, 8 calls a step): rounds of this row gave "
        "0.96x-0.99x in separate runs and 1.01x-1.02x inside `make bench`, where the "
        "same code meets a heap that the sections before left behind. Tried and not "
        "kept: separate q/k/v projections instead of the stacked one (0.98x against "
        "0.99x, within the spread)."
    ),
    "llama spec with every layer's weights": (
        "Parity within the rounds' spread: the matmuls are 75-80% of a step and the "
        "same work on both sides (a profile at 2 threads: 105.0 ms of the spec's "
        "operators against 105.9 ms of `transformers`'), and outside them the spec now "
        "does less: the rotary cos/sin and the causal mask once a forward "
        "(`attngraph/lower/runtime/memo.py`), the masked softmax one `where` and no "
        "multiply by the mask where no row can be fully masked (a causal mask always "
        "has its first item; `no_empty_row` in `attngraph/lower/rules/masks.py`), the "
        "grouped keys and values read in place (SDPA's `enable_gqa`, a grouped matmul "
        "for the weights) instead of repeated per query head: 1.1-1.2 ms a step less "
        "(same-process profile, old against new). What the spec still does that "
        "`transformers` does not: the `heads` output stacks every layer's weights into "
        "one tensor (0.6-1.2 ms) and the stacked q/k/v projection concatenates its "
        "weights each forward and their gradients each backward. Same-process runs also "
        "move by +-3% with the heap's history (which side pays for re-zeroing pages the "
        "system just handed back), more than is left to win."
    ),
    "bert spec with every layer's weights": (
        "BERT's step has no rotary positions, no causal mask and, in this batch, no "
        "padding, so none of the changes of issue 27 touch it: its runs give 0.96x-1.03x "
        "from one run to the next (0.99x and 1.03x in the last two), the noise floor of "
        "this comparison on this machine. A profile of the plain row shows the spec's "
        "operators 97.1 ms against 100.5 ms (its stacked q/k/v matmul saves more than "
        "its concatenations cost); in wall time the forward is 1-2% slower and the "
        "backward level. Tried and not kept: the queries, keys and values copied once "
        "into the heads' layout for the explicit matmuls (T5 0.98x of before, BERT "
        "1.01x-1.02x), separate projections (1.00x). One run of 80 rounds "
        "(2026-11-27): 0.99x (IQR 0.96-1.02), 90.9 ms against 89.8 ms."
    ),
    "t5 spec with every layer's weights": (
        "The relative position bias is made once a forward: the bucket of each pair of "
        "positions is a value of the positions alone, computed at batch 1 and handed "
        "on as a view over the batch (`broadcast`/`unbroadcast` in "
        "`attngraph/lower/runtime/memo.py`), so the take gathers h·N·N entries, as "
        "`transformers` embeds N·N once (gather 0.53 -> 0.15 ms, its scatter_add "
        "0.87 -> 0.23 ms), and `take` reads the table where it is "
        "(`attngraph/lower/rules/algebra_take.py`: no [B, h, N, N, buckets] zeros "
        "in the backward). The operators outside the matmuls: 37.6 -> 33.3 ms a step; "
        "the matmuls are the same work either side (169.2 vs 168.8 ms). What is left: "
        "the decoder's causal mask could be folded into the shared bias as "
        "`transformers` does (about 0.5%), and with padding the bucket is zeroed per "
        "example (the benchmark does not pad). Not done: the unscaled attention as one "
        "SDPA call with the bias as its mask: with a bias that needs a gradient SDPA "
        "takes its math path, no faster at this size. Runs of this row: 0.98x-1.01x; "
        "the row without the weights as outputs, the same computation, 0.95x-0.97x in "
        "the same runs. One run of 80 rounds (2026-11-27): 1.00x for both T5 rows "
        "(IQR 0.98-1.02), 0.99x for BERT's, 0.98x-0.99x for Llama's, 0.94x-0.95x for "
        "GPT-2's. Measured in the model and not kept, each under 0.3% of a step: an "
        "RMS norm with its gradient written out (fewer passes, but the norm's own "
        "pass costs what the square's did), the keys copied into the heads' layout "
        "before q·kᵀ (the transposing copy inside the matmul goes, a row copy "
        "comes), torch's fused masked softmax (slower on the CPU than a `where` and a "
        "softmax)."
    ),
    "t5 spec / transformers": (
        "The row below without the weights as outputs (see its note): the same "
        "computation but for the cross-attention, whose unscaled scores carry no bias "
        "and run fused (one SDPA call, scale 1) since the dot-product scorer became "
        "fusable; the self-attention's scores carry the bias and stay explicit. Parity "
        "within the spread, 0.95x-1.01x from one run to the next, 1.00x over 80 rounds."
    ),
    "MHSA spec / projections+SDPA": (
        "The spec lowers to the same kernels as the hand-written module (one stacked "
        "q/k/v matmul, one SDPA call, one output projection); a median above target "
        "here is within the run's spread on this shared machine."
    ),
}


def write_doc(path: Path, rows: list[Row], mach: dict[str, str], quick: bool,
              repeats: int) -> None:
    """Write the report: machine, method, table, notes."""
    lines = [
        "# Performance",
        "",
        "Generated by `make bench` (`python benchmarks/run.py`); do not edit by hand.",
        "Compiled specs compared side by side with hand-written PyTorch (issues 7 and 14)",
        "and the real-model specs with their `transformers` models (issue 27).",
        "",
    ]
    if quick:
        lines += ["**Quick smoke run: tiny sizes, figures meaningless.**", ""]
    lines += ["## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in mach.items()]
    lines += [f"- interleaved rounds per timing: {repeats}", ""]
    lines += ["## Results", "", render_table(rows), ""]
    unmet = [r for r in rows if r.met is False]
    if unmet:
        lines += ["## Targets not met in this run", ""]
        for r in unmet:
            why = next((v for k, v in REASONS.items() if r.comparison.startswith(k)),
                       "no explanation recorded; see the figure and its spread")
            lines += [f"- **{r.comparison}**: {r.figure} (target {r.target}). {why}", ""]
    lines += [METHOD, LOWERING]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
