"""Every export equals its model: for every catalog spec (specs/, specs/real/), every
mechanism and every whole spec of the docs, the ``--format python`` file, loaded with
the compiled model's state dict, returns the same outputs and gives every parameter
the same gradient (one small padded batch, eval mode)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("torch")

from codegen_support import assert_file_equals_model, compiled, every_spec  # noqa: E402

SPECS = every_spec()


@pytest.mark.parametrize(("name", "spec"), SPECS, ids=[n for n, _ in SPECS])
def test_the_file_equals_the_compiled_model(name: str, spec: Any) -> None:
    """Outputs to 1e-5 and the gradients of every parameter (module doc)."""
    assert_file_equals_model(compiled(spec), "equal_" + name.replace("/", "_")
                             .replace(".", "_").replace(":", "_"))
