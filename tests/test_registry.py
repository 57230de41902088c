"""The one Registry type: duplicates refused, unknown names suggested, lazy entries.

Every extension point of attngraph is a Registry; each is checked here to refuse
a second entry under a taken name and to answer an unknown name with the sorted
known names and a did-you-mean.
"""

from __future__ import annotations

import pytest

from attngraph.analysis.diff import DIFF_FORMATS
from attngraph.analysis.formats import FORMATS as DESCRIBE_FORMATS
from attngraph.errors import AttnGraphError, RegistryError
from attngraph.kinds import KINDS, SCORERS
from attngraph.passes import PASSES
from attngraph.registry import Registry

REGISTRIES = {
    "kinds": (KINDS, "softmax", "sofmax"),
    "scorers": (SCORERS, "additive", "aditive"),
    "passes": (PASSES, "fuse_attention", "fuse_atention"),
    "describe formats": (DESCRIBE_FORMATS, "markdown", "markdwn"),
    "diff formats": (DIFF_FORMATS, "json", "jsno"),
}


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_every_registry_refuses_a_taken_name(name: str) -> None:
    """A second entry under a taken name raises and leaves the first in place."""
    reg, known, _ = REGISTRIES[name]
    first = reg[known]
    with reg.scoped(), pytest.raises(RegistryError, match="is registered already"):
        reg.register(known, first)
    assert reg[known] is first


@pytest.mark.parametrize("name", sorted(REGISTRIES))
def test_every_registry_suggests_names_for_an_unknown_one(name: str) -> None:
    """An unknown name fails with a did-you-mean and the sorted list of known names."""
    reg, known, typo = REGISTRIES[name]
    with pytest.raises(RegistryError) as info:
        reg[typo]
    assert info.value.message == f"unknown {reg.what} '{typo}'"
    assert info.value.hint == f"did you mean '{known}'? (known: {', '.join(sorted(reg))})"
    assert isinstance(info.value, AttnGraphError)


def test_a_far_name_lists_the_known_ones() -> None:
    """With nothing close, the hint is the sorted list alone."""
    reg = Registry[int]("number")
    reg.register("two", 2)
    reg.register("one", 1)
    with pytest.raises(RegistryError) as info:
        reg["zzzzzz"]
    assert info.value.hint == "known: one, two"


def test_decorator_registers_and_returns_the_function() -> None:
    """``@reg.register(name)`` adds the function and leaves it usable."""
    reg = Registry[object]("hook")

    @reg.register("f")
    def f() -> int:
        return 1

    assert reg["f"] is f and f() == 1
    assert list(reg) == ["f"] and "f" in reg and len(reg) == 1


def test_lazy_entries_load_on_first_lookup() -> None:
    """A ``module:attribute`` entry is imported when looked up, not when registered."""
    reg = Registry[object]("thing", lazy=True)
    reg.register("join", "os.path:join")
    import os.path

    assert reg["join"] is os.path.join


def test_scoped_and_unregister() -> None:
    """Entries added in ``scoped()`` are gone after it; unregister removes one entry."""
    reg = Registry[int]("number")
    reg.register("one", 1)
    with reg.scoped():
        reg.register("two", 2)
        assert "two" in reg
    assert reg.names() == ["one"]
    reg.unregister("one")
    assert reg.names() == []
    with pytest.raises(RegistryError):
        reg.unregister("one")


def test_scorer_kinds_never_load_torch_on_lookup() -> None:
    """Kinds name their lowerings lazily: looking a kind up imports no lowering code."""
    import subprocess
    import sys

    code = ("import sys; from attngraph.kinds import KINDS, SCORERS; "
            "KINDS['scorer']; SCORERS['additive']; "
            "print('torch' in sys.modules, 'attngraph.lower' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]


def test_every_lazy_lowering_reference_resolves() -> None:
    """Each kind's lowering and each scorer function's module names a real callable."""
    from attngraph.registry import resolve

    for name, k in KINDS.items():
        if k.role == "input":
            assert k.lowering is None, name
            continue
        target = resolve(k.lowering) if isinstance(k.lowering, str) else k.lowering
        assert callable(target), name
    for name, info in SCORERS.items():
        assert info.module is not None and callable(resolve(info.module)), name
