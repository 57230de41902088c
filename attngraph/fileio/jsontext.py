"""JSON with limits: depth, integer digits, finite numbers (float32 for data), Unicode.

:func:`loads_json` refuses, each at its line and column with a hint: nesting past
:data:`MAX_JSON_DEPTH` (found by scanning the brackets before parsing, so the
parser never recurses that deep), integers past 64 bits (refused before ``int()``
sees thousands of digits), ``NaN``, ``Infinity`` and numbers beyond float32 (or
float64, for a run's own files), escapes that make a lone surrogate.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc
from attngraph.fileio.files import Role, excerpt_text, read_text

__all__ = ["MAX_JSON_DEPTH", "MAX_INT", "FLOAT32_MAX", "loads_json", "read_json"]

#: Deepest nesting of JSON arrays and objects (a record needs two or three).
MAX_JSON_DEPTH = 64
#: Largest magnitude of a JSON integer (64-bit).
MAX_INT = 2**63 - 1
#: Largest finite float32: data is trained on in float32.
FLOAT32_MAX = 3.4028234663852886e38
#: Strings (skipped whole), numbers as JSON writes them, the constants, brackets.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?'
                    r"|NaN|-?Infinity|[\[\]{}]")
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                        r"|\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_LONE = re.compile("[\ud800-\udfff]")


class _Refused(Exception):
    """Raised by a parse hook: the token refused, the message and the hint."""

    def __init__(self, token: str, msg: str, hint: str) -> None:
        super().__init__(msg)
        self.token, self.msg, self.hint = token, msg, hint


def _shown(token: str) -> str:
    return token if len(token) <= 24 else f"{token[:12]}...{token[-4:]} ({len(token)} characters)"


def _parse_int(token: str) -> int:
    # int() of thousands of digits is refused by Python itself (and slow): length first
    if len(token.lstrip("-")) > 19 or abs(int(token)) > MAX_INT:
        msg = f"integer {_shown(token)} is out of range"
        raise _Refused(token, msg, f"integers fit in 64 bits (at most {MAX_INT:,})")
    return int(token)


def _number_hooks(float32: bool, nonfinite: bool
                  ) -> tuple[Callable[[str], float], Callable[[str], float]]:
    """json's ``parse_float`` and ``parse_constant`` for these limits."""
    limit = FLOAT32_MAX if float32 else sys.float_info.max

    def parse_float(token: str) -> float:
        value = float(token)
        if not math.isfinite(value) or abs(value) > limit:
            where = "float32 (at most ±3.4e38)" if float32 else "a 64-bit float"
            msg = f"number {_shown(token)} is too large for {where}"
            raise _Refused(token, msg, "write a number of a sensible size (scale the data), "
                           "or leave the example out")
        return value

    def parse_constant(token: str) -> float:
        if not nonfinite:
            msg = f"{token} is not a finite number"
            raise _Refused(token, msg, "write a finite number, or leave the example out "
                           "(training on NaN or infinity gives NaN parameters)")
        return float(token)

    return parse_float, parse_constant


def _too_deep(text: str) -> int | None:
    """The offset of the bracket that nests past :data:`MAX_JSON_DEPTH`, if any."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return None
    depth = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if tok == "[" or tok == "{":
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return m.start()
        elif tok == "]" or tok == "}":
            depth -= 1
    return None


def _lone_surrogate(text: str, value: Any) -> int | None:
    """The offset of an escape that makes a lone surrogate (a pair is fine), if any."""
    at = next((m.start() for m in _SURROGATE.finditer(text) if len(m.group()) == 6), None)
    if at is None:
        return None
    todo = [value]  # the escape may be text (an escaped backslash): look at the strings
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str) and _LONE.search(v):
            return at
    return None


def loads_json(text: str, file: str, role: Role, *, line: int = 1, shown: str | None = None,
               what: str = "this line", float32: bool = True, nonfinite: bool = False) -> Any:
    """Parse one JSON text with limits (see the module docstring).

    Parameters
    ----------
    text : str
        The JSON text; its first line is line ``line`` of ``file``.
    file, role :
        Where it was read, and the role whose error and hints refusals take.
    shown : str, optional
        The whole file's text (for excerpts); default ``text``.
    what : str
        What the text is, in messages (``"this line"``, ``"this run's data.json"``).
    float32 : bool
        Refuse numbers beyond float32 (data); else beyond float64.
    nonfinite : bool
        Accept ``NaN`` and ``Infinity`` (a run's own logs, which Python writes so).

    Raises
    ------
    AttnGraphError
        Of ``role.error``, at the line and column of the problem, with a hint.
    """
    full = excerpt_text(text) if shown is None else shown

    def at(offset: int) -> SourceLoc:
        start = text.rfind("\n", 0, offset) + 1
        return SourceLoc(file, line + text.count("\n", 0, offset), offset - start + 1, full)

    deep = _too_deep(text)
    if deep is not None:
        msg = f"{what} nests deeper than {MAX_JSON_DEPTH} levels"
        raise role.refuse(msg, at(deep), role.damaged or "a record needs a few levels (a list "
                          "of lists at most); look for brackets never closed")
    try:
        floats, constants = _number_hooks(float32, nonfinite)
        value = json.loads(text, parse_int=_parse_int, parse_float=floats,
                           parse_constant=constants)
    except _Refused as exc:
        offset = next((m.start() for m in _TOKEN.finditer(text) if m.group() == exc.token), 0)
        raise role.refuse(exc.msg, at(offset), exc.hint) from None
    except json.JSONDecodeError as exc:
        msg = f"{what} is not JSON: {exc.msg}"
        raise role.refuse(msg, at(exc.pos), role.damaged or "write one JSON object per "
                          'line, e.g. {"text": "...", "label": "..."}') from None
    lone = _lone_surrogate(text, value)
    if lone is not None:
        msg = "this string escapes a lone surrogate, which is not Unicode text"
        raise role.refuse(msg, at(lone), role.damaged or "remove the escape (\\ud800 to "
                          "\\udfff stand for a character only in pairs)")
    return value


def read_json(path: str | Path, role: Role, *, what: str, float32: bool = False,
              nonfinite: bool = False) -> Any:
    """The JSON document in the regular file ``path`` (:func:`read_text`, then
    :func:`loads_json`); an empty file is refused too."""
    text = read_text(path, role)
    if not text.strip():
        msg = f"{what} is empty"
        raise role.refuse(msg, str(path), role.damaged or "give a JSON document")
    return loads_json(text, str(path), role, what=what, float32=float32, nonfinite=nonfinite)
