r"""Opening a file to read it: regular files only, a size bound, strict UTF-8 with ``\n`` lines.

A :class:`Role` says what a file is to its reader (its name in messages, its
size bound, the error class and the hints); :func:`read_bytes` is the one place
that opens a file attngraph reads (:mod:`attngraph.spectext` reads specs through it).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from attngraph.errors import AttnGraphError, SourceLoc, TrainingError

__all__ = ["Role", "DATA", "IMAGE", "check_regular", "read_bytes", "read_text", "lines",
           "excerpt_text"]

MAX_JSON_DEPTH = 64
#: Largest magnitude of a JSON integer (64-bit).
MAX_INT = 2**63 - 1
#: Largest finite float32: data is trained on in float32.
FLOAT32_MAX = 3.4028234663852886e38
#: Most pixels an image header may claim (8192 × 8192).
MAX_IMAGE_PIXELS = 1 << 26

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
_UTF8_HINT = "save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)"


@dataclass(frozen=True)
class Role:
    """What a file is to the reader that opens it: the words and bound of its errors.

    ``noun`` starts messages (``"data file is not UTF-8 text"``); ``a`` and
    ``a_file`` end them (``"... is a directory, not a spec"``, ``"... is a FIFO
    (named pipe), not a spec file"``), both ``"a " + noun`` by default.
    ``damaged`` is the hint for a file attngraph wrote itself whose content is bad.
    """

    noun: str
    limit: int
    error: type[AttnGraphError] = TrainingError
    a: str = ""
    a_file: str = ""
    missing_hint: str = "check the path"
    dir_hint: str = "give the path of a file"
    special_hint: str = "save it to a regular file and give that file's path"
    size_hint: str = "check that this is the file you meant"
    damaged: str | None = None

    def refuse(self, msg: str, loc: SourceLoc | str, hint: str) -> AttnGraphError:
        """The error of this role at ``loc`` (a location, or a file name)."""
        return self.error(msg, loc if isinstance(loc, SourceLoc) else SourceLoc(loc), hint)


#: A data file (``train --data``, ``predict --data``).
DATA = Role("data file", 256 * 2**20, size_hint=(
    "a data file is read whole into memory; split it, or train on a sample"),
    special_hint="save the data to a regular file and give its path")
#: An image a data record names, or an image in a class folder.
IMAGE = Role("image", 64 * 2**20, a_file="an image file", size_hint=(
    "training images are the spec's small height × width; check the file"),
    missing_hint="an image named in a data file is found relative to that file's folder",
    special_hint="give image files (png, jpg, bmp, gif)")


def _special(mode: int) -> str | None:
    """What a file of ``mode`` is, when it is not a regular file or a directory."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((w for test, w in _KINDS if test(mode)), "not a regular file")


def _refuse_mode(name: str, mode: int, role: Role) -> None:
    if stat.S_ISDIR(mode):
        msg = f"{name} is a directory, not {role.a or 'a ' + role.noun}"
        raise role.refuse(msg, name, role.dir_hint)
    what = _special(mode)
    if what is not None:
        msg = f"{name} is {what}, not {role.a_file or role.a or 'a ' + role.noun}"
        raise role.refuse(msg, name, role.special_hint)


def _too_big(name: str, size: int, role: Role) -> AttnGraphError:
    msg = f"{role.noun} is {size:,} bytes, more than the limit of {role.limit:,}"
    return role.refuse(msg, SourceLoc(name, 1, 1), role.size_hint)


def check_regular(path: str | Path, role: Role) -> None:
    """Refuse ``path`` unless it is a regular file (missing, a directory, a FIFO or
    device), without opening it."""
    name = str(path)
    if not name:
        msg = f"the path of the {role.noun} is empty"
        raise role.refuse(msg, "<empty path>", f"give the path of the {role.noun}")
    try:
        st = os.stat(name)
    except FileNotFoundError:
        msg = f"no such file: {name}"
        raise role.refuse(msg, name, role.missing_hint) from None
    except OSError as exc:
        msg = f"cannot read {role.noun}: {exc.strerror}"
        raise role.refuse(msg, name, "check the path and its permissions") from None
    except ValueError:  # a NUL character: no file can be named so
        msg = f"the path of the {role.noun} holds a NUL character"
        raise role.refuse(msg, name.replace("\0", "\\0"),
                          "give the path without control characters") from None
    _refuse_mode(name, st.st_mode, role)


def read_bytes(path: str | Path, role: Role) -> bytes:
    """The bytes of the regular file ``path``, no more than ``role.limit``.

    Raises
    ------
    AttnGraphError
        Of ``role.error``: a missing path, a directory, FIFO, device or socket
        (never opened for reading), an unreadable file, or one over the limit.
    """
    name = str(path)
    check_regular(name, role)
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        fd = os.open(name, flags)  # non-blocking: a FIFO swapped in cannot hang the open
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            msg = f"no such file: {name}"
            raise role.refuse(msg, name, role.missing_hint) from None
        msg = f"cannot read {role.noun}: {exc.strerror}"
        raise role.refuse(msg, name, "check the path and its permissions") from None
    try:
        st = os.fstat(fd)
        _refuse_mode(name, st.st_mode, role)
        if st.st_size > role.limit:
            raise _too_big(name, st.st_size, role)
        with os.fdopen(fd, "rb") as f:
            fd = -1  # closed with f
            data = f.read(role.limit + 1)  # a file can grow after fstat (/proc says 0)
    except OSError as exc:
        msg = f"cannot read {role.noun}: {exc.strerror}"
        raise role.refuse(msg, name, "check the file and the disk") from None
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > role.limit:
        raise _too_big(name, len(data), role)
    return data


#: The characters other than ``\n`` that str.splitlines (and so an excerpt) breaks at.
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def excerpt_text(text: str) -> str:
    r"""``text`` for a :class:`~attngraph.errors.SourceLoc`: the characters other
    than ``\n`` that :meth:`str.splitlines` breaks at shown as U+FFFD, so that an
    excerpt's line N is the reader's line N (each stays one character wide)."""
    return _OTHER_BREAKS.sub("\ufffd", text) if _OTHER_BREAKS.search(text) else text


def _decode(data: bytes, name: str, role: Role) -> str:
    """Strict UTF-8 (a BOM dropped), ``\\r\\n`` as ``\\n``; a bad byte located."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[:exc.start].decode("utf-8").replace("\r\n", "\n")
        shown = excerpt_text(data.decode("utf-8", "replace").replace("\r\n", "\n"))
        line, col = good.count("\n") + 1, len(good) - good.rfind("\n")
        msg = f"{role.noun} is not UTF-8 text: byte 0x{data[exc.start]:02x} ({exc.reason})"
        raise role.refuse(msg, SourceLoc(name, line, col, shown), _UTF8_HINT) from None
    return text.replace("\r\n", "\n") if "\r" in text else text


def read_text(path: str | Path, role: Role) -> str:
    r"""The UTF-8 text of the regular file ``path`` with ``\n`` lines (see the module)."""
    return _decode(read_bytes(path, role), str(path), role)


def lines(text: str) -> list[str]:
    r"""``text`` split at ``\n`` only (never :meth:`str.splitlines`); no empty last piece."""
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts
