"""The hand-written twins the loop benchmarks time are the catalog's models: the same
parameter count, and with the spec's weights copied in, the same outputs and
gradients (so that the benchmark compares the same computation)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import loops  # noqa: E402

import attngraph  # noqa: E402

#: small sizes: spec dims, the twin's arguments, and the inputs
CASES = {
    "bahdanau_translation": ({"e": 6, "h": 5, "s": 7}, (12, 6, 5, 7)),
    "luong_translation": ({"e": 6, "h": 8, "hh": 4}, (12, 6, 8, 4)),
    "luong_local_p": ({"e": 6, "h": 8}, (12, 6, 8)),
    "memory_network": ({"e": 6, "hs": 10, "slots": 7, "width": 5}, (16, 6, 10, 7, 5)),
    "glimpse_soft": ({"d": 12}, (12, 10)),
    "glimpse_hard": ({"gd": 12, "hs": 10}, (12, 10, 10)),
    "speech_recognition": ({"vocab": 8, "feat": 6, "e": 5, "h": 7, "s": 9, "filters": 3,
                            "width": 3}, (8, 6, 5, 7, 9, 3, 3)),
    "pointer_sort": ({"vocab": 16, "d": 6, "hidden": 7}, (16, 6, 7)),
    "caption_generation": ({"vocab": 12, "feat": 6, "embed": 5, "hidden": 7, "att": 4},
                           (12, 6, 5, 7, 4)),
    "object_recognition": ({"d": 6, "hs": 7, "att": 4}, (10, 6, 7, 4)),
    "ntm_copy": ({"vocab": 10, "e": 6, "hs": 10, "slots": 7, "width": 5}, (10, 6, 10, 7, 5)),
    "handwriting_generation": ({"letters": 6, "h": 7, "k": 2}, (6, 7, 2)),
    "image_generation": ({"enc": 7, "dec": 6, "z": 3, "read_n": 3, "write_n": 4,
                          "patch_px": 16, "draws": 3}, (7, 6, 3, 3, 4, 3)),
}


def _inputs(name: str, gen: torch.Generator) -> dict[str, torch.Tensor]:
    if name in ("bahdanau_translation", "luong_translation", "luong_local_p"):
        return {"source": torch.randint(1, 12, (3, 5), generator=gen),
                "target": torch.randint(1, 12, (3, 4), generator=gen)}
    if name == "memory_network":
        return {"seq": torch.randint(0, 16, (3, 6), generator=gen)}
    if name == "ntm_copy":
        return {"seq": torch.randint(0, 10, (3, 7), generator=gen)}
    if name == "speech_recognition":
        return {"frames": torch.randn(3, 7, 6, generator=gen),
                "target": torch.randint(1, 8, (3, 4), generator=gen)}
    if name == "pointer_sort":
        return {"source": torch.randint(1, 16, (3, 5), generator=gen),
                "target": torch.randint(0, 5, (3, 5), generator=gen)}
    if name == "caption_generation":
        return {"image": torch.rand(3, 1, 16, 24, generator=gen),
                "target": torch.randint(1, 12, (3, 4), generator=gen)}
    if name == "handwriting_generation":
        return {"chars": torch.randint(1, 6, (3, 4), generator=gen),
                "pen": torch.randn(3, 9, 2, generator=gen) * 0.5}
    if name == "image_generation":  # binary pixels, as the task's
        return {"image": (torch.rand(3, 1, 12, 12, generator=gen) > 0.5).float()}
    if name == "object_recognition":
        return {"image": torch.rand(3, 1, 8, 40, generator=gen),
                "target": torch.randint(0, 10, (3, 3), generator=gen)}
    return {"image": torch.rand(3, 1, 32, 32, generator=gen)}


def test_every_catalog_loop_model_has_a_twin() -> None:
    loop_specs = {p.stem for p in (ROOT / "specs").glob("*.yaml")
                  if "kind: loop" in p.read_text(encoding="utf-8")}
    assert loop_specs <= set(loops.TWINS)
    assert set(CASES) == set(loops.TWINS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_twin_equals_the_compiled_spec(name: str) -> None:
    dims, args = CASES[name]
    model = attngraph.compile(loops.catalog(name, **dims), seed=0).train()
    twin = loops.TWINS[name](*args).train()
    assert sum(p.numel() for p in twin.parameters()) == \
        sum(p.numel() for p in model.parameters())
    loops.copy_into(twin, model)
    kw = _inputs(name, torch.Generator().manual_seed(0))
    outs = []
    for call in (lambda: model(**kw), lambda: twin(*kw.values())):
        torch.manual_seed(1)  # the same draws for the glimpse policy
        out = call()
        sum(v.sum() for v in out.values() if v.is_floating_point()).backward()
        outs.append(out)
    for k, v in outs[1].items():
        torch.testing.assert_close(outs[0][k], v, atol=1e-5, rtol=1e-5, msg=k)
    theirs = dict(model.named_parameters())
    for tname, p in twin.named_parameters():
        src, tr = loops._lookup(type(twin).names, tname)
        g = theirs[src].grad
        torch.testing.assert_close(p.grad, g.T if tr else g, atol=1e-5, rtol=1e-5, msg=tname)
