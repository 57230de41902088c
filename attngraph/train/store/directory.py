"""A training run's output directory: never overwritten, written whole or not at all.

- :func:`check` refuses, before a run starts, a directory that already holds
  another run (unless ``overwrite``) or that cannot be written; :func:`prepare`
  then moves an earlier run aside to ``OUT.old-<time>`` (one rename: nothing is
  deleted) and removes the temporary files a killed run left (those named by
  :func:`attngraph.fileio.temporary_name` for a run file: never the user's own
  ``*.tmp``).
- :func:`check_own` refuses, before a command reads or writes anything of a run
  (``--resume``, predict, evaluate, export), a run directory one of whose files
  is a symbolic link, a FIFO, a device or a folder, or (for a resume) cannot be
  replaced: a run that could not be finished is refused before step one, and no
  file outside the run is read or written through a link. A fresh run counts a
  link of a run file's name as a run (:func:`holds_run`).
- :func:`atomic_write` writes a whole file through
  :func:`attngraph.fileio.write_file` (a temporary file beside it, then
  :func:`os.replace`), never through a link or into a FIFO (:func:`own_file`);
  :class:`Log` appends to the metrics log with one ``write`` call per step. Both
  write through :func:`os.write`, and turn a full disk or a read-only directory
  into a :class:`~attngraph.errors.TrainingError` naming the file, leaving no
  temporary file behind.
- :func:`read_metrics` reads the metrics log back on resume, through
  :mod:`attngraph.fileio` (a regular file, bounded, strict UTF-8, each line JSON
  with limits: no recursion on deep nesting, no ``int()`` of thousands of
  digits). A last line without its newline is what ``kill -9`` during a write
  leaves: it lies past the checkpoint (the log is written before the checkpoint
  of a step), so it is dropped with a note. Any other line that is not a step's
  JSON object is damage, reported at its line. :func:`run_file` gives the
  :class:`~attngraph.fileio.Role` of any stored file of a run.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from pathlib import Path
from typing import NamedTuple

from attngraph.errors import SourceLoc, TrainingError, whole
from attngraph.fileio import (
    TEMPORARY,
    Role,
    check_regular,
    excerpt_text,
    lines,
    loads_json,
    read_bytes,
    write_file,
)

__all__ = ["CSV_FILE", "RUN_FILES", "holds_run", "check", "check_own", "own_file", "prepare",
           "atomic_write", "Log", "Kept", "read_metrics", "write_error", "run_file"]

#: The files that make a directory a run's (metrics log, checkpoint, summary, and a
#: data run's vocabularies and labels).
RUN_FILES = ("metrics.jsonl", "checkpoint.pt", "summary.json", "data.json")
#: The metrics log as a table, which a run writes beside its log (and a resume anew).
CSV_FILE = "metrics.csv"
#: What a full disk or a refused write says, by errno.
_WHY = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
        errno.EACCES: "permission denied", errno.EPERM: "permission denied",
        errno.EROFS: "read-only file system"}
_FULL = (errno.ENOSPC, errno.EDQUOT)
_AGAIN = ("the run directory holds files attngraph train wrote, and this one is damaged: "
          "train again (--overwrite moves this run aside)")
_LINK = ("a run's files are its own: attngraph neither reads nor writes a run's file "
         "through a link; put a copy of the file there instead of the link (or remove it)")
_LOG_DAMAGED = ("the log is damaged: delete or repair that line, then --resume again (the "
                "checkpoint is separate and intact)")


def run_file(name: str, limit: int = 64 * 2**20, *, damaged: str = _AGAIN) -> Role:
    """The :class:`~attngraph.fileio.Role` of a run's stored file ``name`` (``data.json``):
    read as every file is (regular, bounded, strict UTF-8), damage told as such."""
    return Role(f"this run's {name}", limit, a=f"a run's {name}", dir_hint=_AGAIN,
                special_hint=_AGAIN, size_hint=_AGAIN, damaged=damaged)


#: The metrics log read back on resume (a long run's log is long).
_METRICS = run_file("metrics log", 1 << 30, damaged=_LOG_DAMAGED)


def _loc(path: str | Path, line: int = 0, text: str | None = None) -> SourceLoc:
    return SourceLoc(file=str(path), line=line, col=1 if line else 0, text=text)


def _why(exc: OSError) -> str:
    return _WHY.get(exc.errno or 0) or exc.strerror or str(exc)


def write_error(path: str | Path, exc: OSError) -> TrainingError:
    """The TrainingError for a failed write of ``path``, with the fix for its cause."""
    if exc.errno in _FULL:
        hint = ("free some space (or train into another --out); the last checkpoint is "
                "intact, so --resume continues from it")
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "train into a directory you can write: --out DIR"
    else:
        hint = "check the directory, then train again (--resume continues from the checkpoint)"
    return TrainingError(f"cannot write this file: {_why(exc)}", _loc(path), hint)


def holds_run(out: Path) -> list[str]:
    """The run files in ``out`` (empty when it holds no run); a link or a FIFO of a run
    file's name counts, so that a fresh run never writes through it."""
    return [name for name in RUN_FILES if os.path.lexists(out / name)]


def own_file(path: Path, *, write: bool = False) -> None:
    """Refuse a run's file that is a symbolic link, or exists and is not a regular file
    (a directory, a FIFO, a device), or, with ``write``, cannot be replaced.

    A missing file passes (the reader or writer that needs it says so).

    Raises
    ------
    TrainingError
        At ``path``, naming what it is, with a hint.
    """
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        msg = f"cannot read this run's {path.name}: {_why(exc)}"
        raise TrainingError(msg, _loc(path), "check the run directory's permissions") from None
    if stat.S_ISLNK(st.st_mode):
        try:
            target = f" (to {os.readlink(path)})"
        except OSError:
            target = ""
        msg = f"this run's {path.name} is a symbolic link{target}, not a file of the run"
        raise TrainingError(msg, _loc(path), _LINK)
    check_regular(path, run_file(path.name))  # a directory, FIFO, device or socket
    if write and not os.access(path, os.W_OK):
        raise write_error(path, PermissionError(errno.EACCES, os.strerror(errno.EACCES)))


def check_own(out: Path, *, write: bool = False) -> None:
    """Refuse a run directory any of whose files (:data:`RUN_FILES`, and with ``write``
    the table :data:`CSV_FILE` a resume writes anew) is a link or not a regular file
    (:func:`own_file`), before anything of the run is read or written: a command that
    cannot finish leaves the run as it was."""
    for name in (*RUN_FILES, CSV_FILE) if write else RUN_FILES:
        own_file(out / name, write=write)


def _temporaries(out: Path) -> list[Path]:
    """Temporary files a killed :func:`atomic_write` of a run file left in ``out``
    (named by :func:`attngraph.fileio.temporary_name`), and an earlier version's
    ``metrics.jsonl.tmp``; never another ``*.tmp`` (the user's own)."""
    found = []
    for p in out.glob("*.tmp"):
        m = TEMPORARY.fullmatch(p.name)
        if (m is not None and m.group(1) in RUN_FILES) or p.name == "metrics.jsonl.tmp":
            found.append(p)
    return found


def _probe(directory: Path) -> None:
    """Create and remove a file in ``directory``: refuse it when that fails."""
    probe = directory / f".attngraph-probe.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as exc:
        msg = f"cannot write in this directory: {_why(exc)}"
        raise TrainingError(msg, _loc(directory),
                            "train into a directory you can write: --out DIR") from None


def check(out: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse ``out`` before a run starts: another run there, a file, or not writable.

    Raises
    ------
    TrainingError
        When ``resume`` and ``overwrite`` are both set; when ``out`` holds a run
        and neither is set; when ``out`` is not a directory or cannot be written.
    """
    if resume and overwrite:
        msg = "--resume continues the run in this directory, --overwrite moves it aside"
        raise TrainingError(msg, _loc(out), "give one of them")
    if out.exists() and not out.is_dir():
        msg = "--out must be a directory; this is a file"
        raise TrainingError(msg, _loc(out), "train into a directory: --out DIR")
    found = holds_run(out) if out.is_dir() else []
    if found and not resume and not overwrite:
        msg = f"this directory already holds a run ({', '.join(found)})"
        raise TrainingError(msg, _loc(out), "continue it with --resume, train into another "
                            "--out, or add --overwrite to move it aside to "
                            f"{out.name}.old-<time> (nothing is deleted)")
    if found and overwrite:
        _movable(out)
    directory = out
    while not directory.exists() and directory != directory.parent:
        directory = directory.parent
    _probe(directory)


def _movable(out: Path) -> None:
    """Refuse to move the current directory (or one holding it) aside."""
    here, there = Path.cwd().resolve(), out.resolve()
    if here == there or there in here.parents:
        msg = "--overwrite cannot move this run aside: it is the current directory"
        raise TrainingError(msg, _loc(out), "train into another --out, or move the "
                            "earlier run yourself")


def _aside(out: Path) -> Path:
    """A free name beside ``out``: ``OUT.old-YYYYmmdd-HHMMSS`` (with ``-2``... if taken)."""
    out = out.resolve() if out.name in ("", ".", "..") else out
    base = f"{out.name}.old-{time.strftime('%Y%m%d-%H%M%S')}"
    dest, n = out.with_name(base), 1
    while dest.exists():
        n += 1
        dest = out.with_name(f"{base}-{n}")
    return dest


def prepare(out: Path, *, resume: bool, overwrite: bool) -> Path | None:
    """Make ``out`` ready for a run's files; return where an earlier run was moved.

    A fresh run with ``overwrite`` renames a directory that holds a run to a free
    ``OUT.old-<time>`` (everything in it, nothing deleted); the temporary files of
    a killed run are removed. Call :func:`check` first.
    """
    check(out, resume=resume, overwrite=overwrite)
    moved = None
    if not resume and holds_run(out):  # check() let it through: overwrite is set
        moved = _aside(out)
        try:
            os.rename(out, moved)
        except OSError as exc:
            msg = f"cannot move the earlier run aside to {moved}: {_why(exc)}"
            raise TrainingError(msg, _loc(out), "move it yourself, or train into "
                                "another --out") from None
    try:
        out.mkdir(parents=True, exist_ok=True)
        for tmp in _temporaries(out):
            tmp.unlink()
    except OSError as exc:
        raise write_error(out, exc) from None
    return moved


def _write_all(fd: int, data: bytes) -> None:
    """``os.write`` until every byte is written (a write may take only part)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def atomic_write(path: str | Path, data: bytes, *, mode: int = 0o666) -> None:
    """Replace ``path`` by ``data`` whole (:func:`attngraph.fileio.write_file`: a
    temporary file beside it, then a rename).

    ``mode`` is the new file's permission bits before the umask. Unlike
    :func:`~attngraph.fileio.write_file` for a path the user gave, a file of a run
    is never written through a link or into a FIFO (:func:`own_file`).

    Raises
    ------
    TrainingError
        When ``path`` is a link or not a regular file, or a write fails (full disk,
        read-only directory); ``path`` is then as it was and no temporary file is left.
    """
    own_file(Path(path))  # never through a link, never into a FIFO
    write_file(path, data, mode=mode, failed=write_error)


class Log:
    """The metrics log, opened for appending; each :meth:`write` is one ``write`` call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            own_file(path)  # never appended through a link
            self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT
                              | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            raise write_error(path, exc) from None

    def write(self, text: str) -> None:
        """Append ``text`` (whole lines)."""
        try:
            _write_all(self.fd, text.encode("utf-8"))
        except OSError as exc:
            raise write_error(self.path, exc) from None

    def close(self) -> None:
        """Close the file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _damaged(path: Path, line: int, text: str, what: str) -> TrainingError:
    return TrainingError(f"line {line} of the metrics log {what}", _loc(path, line, text),
                         _LOG_DAMAGED)


def _step_of(obj: object) -> int | None:
    """The step of a parsed log line, or None when it is not a step's record."""
    if not isinstance(obj, dict):
        return None
    step = obj.get("step")
    return step if whole(step, 1) else None


class Kept(NamedTuple):
    """What :func:`read_metrics` keeps of a log."""

    text: str
    """The lines of the steps kept, each with its newline."""
    changed: bool
    """True when that differs from the file (lines past the step, or a torn one)."""
    note: str | None
    """A note on a torn last line that was dropped, or None."""


def read_metrics(path: Path, upto: int) -> Kept:
    """The metrics log's lines of steps up to ``upto``, and a note on a dropped torn line.

    Returns
    -------
    Kept
        The text is ``""`` when there is no log.

    Raises
    ------
    TrainingError
        At the first line (but a torn last one) that is not a step's JSON object,
        or when the file cannot be read.
    """
    if not path.exists() and not path.is_symlink():
        return Kept("", False, None)
    data = read_bytes(path, _METRICS)
    cut = data.rfind(b"\n") + 1
    # what follows the last newline is a write cut off (perhaps inside a character)
    torn = data[cut:].decode("utf-8", errors="replace")
    try:
        text = data[:cut].decode("utf-8")
    except UnicodeDecodeError as exc:
        n = data.count(b"\n", 0, exc.start) + 1
        raise _damaged(path, n, data[:cut].decode("utf-8", "replace"),
                       "is not UTF-8 text") from None
    shown = excerpt_text(text)
    keep, note = [], None
    body = lines(text)
    for n, ln in enumerate(body, 1):
        if not ln.strip():
            continue
        step = _step_of(_json(ln, path, n, shown))
        if step is None:
            raise _damaged(path, n, shown, "is not a step's record (an object with a step)")
        if step <= upto:
            keep.append(ln + "\n")
    if torn.strip():
        try:
            step = _step_of(loads_json(torn, str(path), _METRICS, nonfinite=True,
                                       float32=False))
        except TrainingError:
            step = None
        if step is None:
            note = (f"{path}:{len(body) + 1}: note: dropped a torn last line of the metrics "
                    "log (the run was stopped while writing it)")
        elif step <= upto:
            keep.append(torn + "\n")
    kept = "".join(keep)
    return Kept(kept, kept != text + torn, note)


def _json(line: str, path: Path, n: int, shown: str) -> object:
    """Line ``n`` of the metrics log, parsed with limits (NaN as Python writes it)."""
    try:
        return loads_json(line, str(path), _METRICS, line=n, shown=shown, nonfinite=True,
                          float32=False)
    except TrainingError as exc:
        if exc.message.startswith("this line is not JSON"):
            raise _damaged(path, n, shown, "is not JSON") from None
        raise
