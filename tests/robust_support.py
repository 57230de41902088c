"""Helpers of the robustness tests: call a reader in a thread so that a hang fails the
test instead of hanging the suite, and return the error it raised."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from attngraph.errors import TrainingError


def refused(fn: Callable[[], Any], kind: type[BaseException] = TrainingError) -> Any:
    """The error of ``kind`` that ``fn`` raises, within 20 s (a hang fails the test)."""
    box: dict[str, BaseException | None] = {"exc": None}

    def call() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            box["exc"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(20)
    assert not t.is_alive(), "the reader hangs"
    assert isinstance(box["exc"], kind), repr(box["exc"])
    return box["exc"]
