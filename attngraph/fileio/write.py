"""Writing a file whole: a temporary file only this writer made, then a rename.

:func:`write_file` is the one place attngraph writes a whole file (outputs given
with ``-o``, a run directory's files, reports): on any failure the old file is
as it was and the only file removed is the temporary one this call created.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Callable
from pathlib import Path

from attngraph.errors import AttnGraphError, SourceLoc

__all__ = ["write_file", "temporary_name", "TEMPORARY"]

#: The names :func:`temporary_name` makes (group 1: the file written); a killed
#: write's leftovers are found by this, never by a bare ``*.tmp``.
TEMPORARY = re.compile(r"\.(.+)\.[0-9]+\.[0-9a-f]+\.tmp")


def temporary_name(name: str) -> str:
    """A fresh temporary file name for a write of ``name``: ``.NAME.PID.HEX8.tmp``
    (a file of that name is created with ``O_EXCL``, so never one already there)."""
    return f".{name[:200]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may take only part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _make_parents(given: str | Path, error: type[AttnGraphError]) -> None:
    """Make the missing parent folders of the path ``given``; refuse a path naming a
    folder (ending in a separator, which :class:`Path` drops) or under a file."""
    p = Path(given)
    if str(given).endswith(("/", os.sep)):
        msg = f"{given} names a folder, not a file"
        raise error(msg, SourceLoc(str(given)), f"give a file name, e.g. {p / 'out'}")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        msg = f"cannot write {p}: {above} is a file, not a folder"
        raise error(msg, SourceLoc(str(p)), "give a path whose folders are folders")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"cannot make the folder {p.parent} for {p}: {exc.strerror}"
        raise error(msg, SourceLoc(str(p)),
                    "check the permissions of the folders above it") from None


def _write_special(path: Path, data: bytes) -> None:
    """Write into an existing FIFO or device the user named (``-o /dev/stdout``)."""
    flags = os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)  # a FIFO nothing reads: ENXIO, not a hang
    try:
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        _write_all(fd, data)
    finally:
        os.close(fd)


def _sync_dir(directory: Path) -> None:
    """Flush a directory's entries (the rename) to disk where the system allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename stands
    finally:
        os.close(fd)


def _replace_via_temporary(target: Path, raw: bytes, mode: int, keep: int | None) -> None:
    """Write ``raw`` to a fresh temporary file beside ``target``, flush it, and rename
    it over ``target``; the new file gets ``mode`` less the umask, or the permission
    bits ``keep`` of the file it replaces. On any failure the temporary file is
    removed (only that one: it is made with ``O_EXCL``) and the error raised."""
    tmp = target.with_name(temporary_name(target.name))
    fd, made = -1, False
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                     mode)
        made = True
        if keep is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, keep)
        _write_all(fd, raw)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        if made:  # only the file this call created
            tmp.unlink(missing_ok=True)
        raise


def write_file(path: str | Path, data: str | bytes, *,
               error: type[AttnGraphError] = AttnGraphError,
               failed: Callable[[Path, OSError], AttnGraphError] | None = None,
               mode: int = 0o666, parents: bool = False) -> Path:
    """Replace ``path`` by ``data`` (text as UTF-8) whole, or leave it as it was.

    The bytes go to a temporary file beside ``path`` that this call creates
    (``O_EXCL``, see :func:`temporary_name`), are flushed to disk, and the file is
    renamed over ``path``; an existing file keeps its permission bits, a new one
    gets ``mode`` less the umask. A symbolic link is written through (its target
    is replaced); an existing FIFO or device (``/dev/stdout``) is written into.

    Parameters
    ----------
    parents : bool
        Make missing parent folders (an output path a user gave).
    error, failed :
        The error class of a refusal, or a function making the error of a failed
        write (full disk, no permission) from the path and the ``OSError``.

    Raises
    ------
    AttnGraphError
        At ``path``; the old file is then whole and no temporary file is left.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def fail(exc: OSError) -> AttnGraphError:
        if failed is not None:
            return failed(p, exc)
        return error(f"cannot write {p}: {exc.strerror or exc}", SourceLoc(str(p)),
                     "give a file path in a folder you can write to (and a disk with room)")

    if parents:
        _make_parents(path, error)
    try:
        st: os.stat_result | None = os.stat(p)
    except OSError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise fail(IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)))
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            _write_special(p, raw)
        except OSError as exc:
            raise fail(exc) from None
        return p
    if st is not None and not os.access(p, os.W_OK):  # as an in-place write would refuse
        raise fail(PermissionError(errno.EACCES, os.strerror(errno.EACCES)))
    target = Path(os.path.realpath(p)) if os.path.islink(p) else p
    try:
        _replace_via_temporary(target, raw, mode,
                               None if st is None else stat.S_IMODE(st.st_mode))
    except OSError as exc:
        raise fail(exc) from None
    _sync_dir(target.parent)
    return p
