"""Images checked by their header before any pixel is decoded.

:func:`image_size` reads a PNG, GIF, BMP or JPEG header's width and height from
the bytes; :func:`read_image` refuses a header past :data:`MAX_IMAGE_PIXELS` (or
one its caller refuses) before PIL decodes, and keeps PIL's warnings (its
decompression-bomb warning among them) off the terminal.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import AttnGraphError
from attngraph.fileio.files import IMAGE, Role, read_bytes

if TYPE_CHECKING:
    from PIL.Image import Image

__all__ = ["MAX_IMAGE_PIXELS", "image_size", "read_image"]

#: Most pixels an image header may claim (8192 × 8192).
MAX_IMAGE_PIXELS = 1 << 26
_JPEG_SOF = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def image_size(data: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` as a PNG, GIF, BMP or JPEG header states them, or
    None when ``data`` starts as none of these.

    Examples
    --------
    >>> image_size(b"\\x89PNG\\r\\n\\x1a\\n" + bytes([0, 0, 0, 13]) + b"IHDR"
    ...            + (30000).to_bytes(4, "big") * 2)
    ('PNG', 30000, 30000)
    """
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        return "PNG", int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return "GIF", int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:2] == b"BM" and len(data) >= 26:
        if int.from_bytes(data[14:18], "little") == 12:  # the old OS/2 header: 16-bit sizes
            return "BMP", int.from_bytes(data[18:20], "little"), \
                int.from_bytes(data[20:22], "little")
        return "BMP", abs(int.from_bytes(data[18:22], "little", signed=True)), \
            abs(int.from_bytes(data[22:26], "little", signed=True))
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 <= len(data) and data[i] == 0xFF:
            marker = data[i + 1]
            if marker == 0xFF or marker == 0x01 or 0xD0 <= marker <= 0xD8:
                i += 1 if marker == 0xFF else 2  # fill bytes and markers without a length
                continue
            if marker in _JPEG_SOF:
                return "JPEG", int.from_bytes(data[i + 7:i + 9], "big"), \
                    int.from_bytes(data[i + 5:i + 7], "big")
            i += 2 + int.from_bytes(data[i + 2:i + 4], "big")
    return None


def read_image(path: str | Path, role: Role = IMAGE, *, mode: str,
               size_ok: Callable[[int, int], None] | None = None) -> Image:
    """The image file ``path`` decoded in PIL ``mode``, its header checked first.

    ``size_ok(width, height)`` may refuse the header's size (by raising) before
    any pixel is decoded.

    Raises
    ------
    AttnGraphError
        Of ``role.error`` at the file: what :func:`read_bytes` refuses, a file
        that is not a PNG, JPEG, GIF or BMP, a header claiming more than
        :data:`MAX_IMAGE_PIXELS`, or data PIL cannot decode.
    """
    name = str(path)
    data = read_bytes(name, role)
    head = image_size(data)
    hint = "give image files (png, jpg, bmp, gif)"
    if head is None:
        msg = f"{name} is not a PNG, JPEG, GIF or BMP image"
        raise role.refuse(msg, name, hint)
    fmt, width, height = head
    if width < 1 or height < 1 or width * height > MAX_IMAGE_PIXELS:
        msg = (f"the image's header says {width}×{height} pixels (the limit is "
               f"{MAX_IMAGE_PIXELS:,} pixels)")
        raise role.refuse(msg, name, "a damaged or hostile header; give the image at its "
                          "real size")
    if size_ok is not None:
        size_ok(width, height)
    from PIL import Image as PILImage

    try:
        with warnings.catch_warnings():  # no PIL warning reaches the terminal raw
            warnings.simplefilter("ignore")
            warnings.simplefilter("error", PILImage.DecompressionBombWarning)
            with PILImage.open(io.BytesIO(data), formats=[fmt]) as im:
                if im.size != (width, height):
                    msg = f"the image's header is inconsistent ({im.size} and {width}×{height})"
                    raise role.refuse(msg, name, hint)
                return im.convert(mode)
    except AttnGraphError:
        raise
    except Exception as exc:  # noqa: BLE001 - PIL raises many types for a damaged file
        msg = f"cannot decode the {fmt} image {name}: {exc}"
        raise role.refuse(msg, name, hint) from None
