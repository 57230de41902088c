"""A spec's bytes to checked text, before any YAML is parsed.

:func:`read_text` reads only a regular file (through
:func:`attngraph.fileio.read_bytes`: a FIFO, device or directory is refused before
it is opened) and never more than ``limit + 1`` bytes; :func:`check_text` refuses
text over the limit, text that is not UTF-8 and control characters YAML does not
allow. Each problem that has a place is a
:class:`~attngraph.errors.SpecError` at its line and column (the size limit at
1:1); :mod:`attngraph.source` passes its ``MAX_BYTES`` as the limit.
"""

from __future__ import annotations

import re
from dataclasses import replace

from attngraph.errors import SourceLoc, SpecError
from attngraph.fileio.files import Role, read_bytes

__all__ = ["SIZE_HINT", "check_text", "read_text"]

SIZE_HINT = "a spec is a few kilobytes of YAML; check that this is the file you meant"

#: Characters YAML refuses in a stream (PyYAML's reader uses the same set).
_NON_PRINTABLE = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
#: Line breaks as YAML 1.1 counts them (and str.splitlines, which excerpts use).
_BREAK = re.compile("\r\n|[\n\r\x85\u2028\u2029]")
#: A spec to :func:`attngraph.fileio.read_bytes` (the limit is the caller's).
_SPEC = Role("spec", 0, SpecError, a="a spec", a_file="a spec file",
             dir_hint="give the path of a .yaml file",
             special_hint="save the spec to a file and give its path", size_hint=SIZE_HINT)


def _offset_loc(file: str, text: str, offset: int) -> SourceLoc:
    """The (line, column) of character ``offset`` of ``text``, counted as YAML does."""
    breaks = list(_BREAK.finditer(text, 0, offset))
    start = breaks[-1].end() if breaks else 0
    return SourceLoc(file, len(breaks) + 1, offset - start + 1, text)


def _control_error(file: str, text: str, m: re.Match[str]) -> SpecError:
    msg = f"spec holds the control character U+{ord(m.group()):04X}"
    return SpecError(msg, _offset_loc(file, text, m.start()),
                     "a spec is YAML text; remove the character (a binary file is not "
                     "a spec), or write it as an escape in a double-quoted string")


def _not_utf8(file: str, text: str, offset: int, byte: int, why: str) -> SpecError:
    msg = f"spec is not UTF-8 text: byte 0x{byte:02x} ({why})"
    return SpecError(msg, _offset_loc(file, text, offset),
                     "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8); "
                     "a binary file is not a spec")


def _too_big(file: str, size: int, limit: int, text: str | None = None) -> SpecError:
    msg = f"spec is {size:,} bytes, more than the limit of {limit:,}"
    return SpecError(msg, SourceLoc(file, 1, 1, text), SIZE_HINT)


def check_text(text: str, file: str, limit: int) -> None:
    """Refuse ``text`` over ``limit`` bytes of UTF-8, not Unicode, or holding a
    character YAML does not allow, at the first offending character.

    A byte kept by ``errors="surrogateescape"`` is reported as the file's byte
    that is not UTF-8, as :func:`read_text` reports it.
    """
    if len(text) > limit:  # over at one byte a character: no need to encode it all
        raise _too_big(file, len(text.encode("utf-8", "surrogatepass")), limit)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        m = _NON_PRINTABLE.search(text, 0, exc.start)
        if m:
            raise _control_error(file, text, m) from None
        code = ord(text[exc.start])
        if 0xDC80 <= code <= 0xDCFF:
            raise _not_utf8(file, text, exc.start, code - 0xDC00, "undecodable") from None
        msg = f"spec text holds a lone surrogate U+{code:04X}, which is not Unicode text"
        raise SpecError(msg, _offset_loc(file, text, exc.start),
                        "remove the character") from None
    if size > limit:
        raise _too_big(file, size, limit, text)
    m = _NON_PRINTABLE.search(text)
    if m:
        raise _control_error(file, text, m)


def read_text(path: str, limit: int) -> str:
    """The text of the regular file ``path``, read no further than ``limit + 1``
    bytes, decoded as UTF-8 with universal newlines.

    A missing file, a directory, a FIFO or device (refused before it is opened),
    a file over ``limit`` bytes or one that is not UTF-8 is a :class:`SpecError`
    (the last at its first bad byte). The file is opened by
    :func:`attngraph.fileio.read_bytes`, as every file attngraph reads.
    """
    return _decode(read_bytes(path, replace(_SPEC, limit=limit)), path)


def _decode(data: bytes, path: str) -> str:
    """UTF-8 text with universal newlines; a bad byte is an error at its line and column."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = _newlines(data[: exc.start].decode("utf-8"))
        text = _newlines(data.decode("utf-8", "replace"))
        m = _NON_PRINTABLE.search(good)
        if m:  # a control character comes first: report the first problem
            raise _control_error(path, text, m) from None
        raise _not_utf8(path, text, len(good), data[exc.start], exc.reason) from None
    return _newlines(text)


def _newlines(text: str) -> str:
    r"""``\r\n`` and ``\r`` as ``\n``, as ``Path.read_text`` reads them."""
    if "\r" in text:
        return text.replace("\r\n", "\n").replace("\r", "\n")
    return text
