"""Peak memory of one forward+backward, each variant in a fresh process.

Method: the child process builds the model and the input, then resets the
kernel's peak-RSS counter (``echo 5 > /proc/self/clear_refs``, Linux >= 4.0) and
reads its current RSS; after one forward+backward it reads the peak (``VmHWM``).
The figure is peak - baseline: the memory the step itself needed (activations
kept for backward, the N×N weights if any, gradients). A fresh process per
run means that no allocator cache from an earlier run hides an allocation.
Where clear_refs is unavailable, ``ru_maxrss`` minus the RSS before the step
is used (an underestimate if importing peaked higher).

Run as ``python benchmarks/memory.py VARIANT N HEADS D_HEAD THREADS``; prints
the peak delta in MiB.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

VARIANTS = ("spec", "spec_weights", "sdpa", "materialised")


def _status(key: str) -> int:
    """A ``/proc/self/status`` field in KiB."""
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    msg = f"no {key} in /proc/self/status"
    raise OSError(msg)


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _child(variant: str, n: int, heads: int, dh: int, threads: int) -> float:
    import torch
    import torch.nn.functional as F

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cases import HandMHSA, mhsa_spec

    import attngraph

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    d = heads * dh
    x = torch.randn(1, n, d)
    if variant in ("spec", "spec_weights"):
        text = mhsa_spec(d, heads)
        if variant == "spec_weights":  # ask for the weights: no fusion possible
            text = text.replace("outputs: {z: z}", "outputs: {z: z, p: p}")
        model = attngraph.compile(text, seed=0)

        def step() -> torch.Tensor:
            return model(x=x)["z"]
    else:
        hand = HandMHSA(d, heads)
        if variant == "materialised":
            def sdpa_explicit(q, k, v, attn_mask=None):  # noqa: ANN001, ANN202
                w = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
                return w @ v
            F_sdpa = F.scaled_dot_product_attention
            F.scaled_dot_product_attention = sdpa_explicit  # type: ignore[assignment]

        def step() -> torch.Tensor:
            return hand(x)
    ok = _reset_peak()
    base = _status("VmRSS")
    step().sum().backward()
    peak = _status("VmHWM") if ok else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if variant == "materialised":
        F.scaled_dot_product_attention = F_sdpa
    return (peak - base) / 1024


def peak_mib(variant: str, n: int, heads: int, dh: int, threads: int) -> float:
    """Run one variant in a fresh interpreter; its peak memory delta in MiB."""
    out = subprocess.run(
        [sys.executable, __file__, variant, str(n), str(heads), str(dh), str(threads)],
        capture_output=True, text=True, check=True, timeout=600,
    )
    return float(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    v, *rest = sys.argv[1:]
    if v not in VARIANTS:
        msg = f"variant must be one of {VARIANTS}"
        raise SystemExit(msg)
    print(f"{_child(v, *map(int, rest)):.3f}")
