r"""Reading and writing every file attngraph handles, trusting nothing.

Every file attngraph reads (data files, images, a run's stored files, and the
bytes of a spec, which :mod:`attngraph.spectext` then checks as YAML text) is
opened by :func:`read_bytes`, and every file it writes whole goes through
:func:`write_file`. A :class:`Role` says what a file is to its reader: its
name in messages, its size bound, the error class and the hints.

- :func:`read_bytes` reads a regular file only: a FIFO, a device, a socket or a
  directory is refused by :func:`os.stat` before it is opened (and checked
  again after a non-blocking open, so a swap cannot make it hang), and no more
  than the role's limit plus one byte is read.
- :func:`read_text` is strict UTF-8 (a byte-order mark is dropped) with ``\n``
  lines (``\r\n`` reads as ``\n``): U+2028, U+0085 and the other characters
  :meth:`str.splitlines` breaks at are ordinary characters; :func:`lines` splits.
- :func:`loads_json` parses one JSON text with limits: nesting past
  :data:`MAX_JSON_DEPTH` is refused at its bracket before parsing (never by
  recursing), integers past 64 bits before ``int()`` sees their digits,
  ``NaN``/``Infinity`` and numbers beyond float32 (for data), and escapes that
  make a lone surrogate.
- :func:`read_image` reads a PNG, JPEG, GIF or BMP header's size before PIL
  decodes a pixel; PIL's warnings never reach the terminal.
- :func:`write_file` writes a temporary file beside the target under a name
  only it made (``O_EXCL``), flushes it to disk and renames it over the target:
  on any failure the old file is whole and only that temporary file is removed.

Every refusal is one error of the role's class at ``FILE:LINE:COL`` (or at the
file) with a hint. The modules: :mod:`~attngraph.fileio.files` (opening, text),
:mod:`~attngraph.fileio.jsontext`, :mod:`~attngraph.fileio.images`,
:mod:`~attngraph.fileio.write`.

Examples
--------
>>> import pathlib, tempfile
>>> p = pathlib.Path(tempfile.mkdtemp()) / "d.jsonl"
>>> _ = write_file(p, '{"a": "x\u2028y"}\n{"a": 2}\n')
>>> [loads_json(ln, str(p), DATA) for ln in lines(read_text(p, DATA))]
[{'a': 'x\u2028y'}, {'a': 2}]
"""

from __future__ import annotations

from attngraph.fileio.files import (
    DATA,
    IMAGE,
    Role,
    check_regular,
    excerpt_text,
    lines,
    read_bytes,
    read_text,
)
from attngraph.fileio.images import MAX_IMAGE_PIXELS, image_size, read_image
from attngraph.fileio.jsontext import FLOAT32_MAX, MAX_INT, MAX_JSON_DEPTH, loads_json, read_json
from attngraph.fileio.write import TEMPORARY, temporary_name, write_file

__all__ = [
    "Role", "DATA", "IMAGE", "MAX_JSON_DEPTH", "MAX_INT", "FLOAT32_MAX", "MAX_IMAGE_PIXELS",
    "TEMPORARY", "check_regular", "read_bytes", "read_text", "lines", "excerpt_text",
    "loads_json", "read_json", "image_size", "read_image", "write_file", "temporary_name",
]
