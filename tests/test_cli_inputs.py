"""Hostile inputs on the command line: every command ends in one located error and
exit 1 (a usage error, exit 2, only where click checks the arguments), never a
traceback, a hang or a signal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from attngraph import source

ROOT = Path(__file__).resolve().parent.parent
GOOD = ROOT / "specs" / "global_attention.yaml"


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The real command in its own process (a crash in C would kill it)."""
    return subprocess.run([sys.executable, "-m", "attngraph", *args], capture_output=True,
                          text=True, timeout=timeout, check=False, cwd=ROOT)


def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Name -> (file, what its first error line says, after 'FILE:')."""
    files = {
        "tag": (b"attngraph: !!bool 1\nname: x\n",
                "1:12: error: YAML tag '!!bool' is not allowed"),
        "tag_int": (b"attngraph: 1\nname: x\nnodes:\n  a: {kind: !!int values}\n",
                    "4:13: error: YAML tag '!!int' is not allowed"),
        "deep": (b"x: " + b"[" * 30_000 + b"]" * 30_000 + b"\n",
                 "1:68: error: document nests deeper than 64 levels"),
        "empty": (b"", "1:1: error: the spec is empty"),
        "binary": (b"\x89PNG\r\n\x1a\n\x00\x00", "1:1: error: spec is not UTF-8 text"),
        "latin1": (b"attngraph: 1\nname: caf\xe9\n",
                   "2:10: error: spec is not UTF-8 text: byte 0xe9"),
        "nul": (b"attngraph: 1\nname: a\x00b\n",
                "2:8: error: spec holds the control character U+0000"),
        "huge_int": (b"attngraph: " + b"9" * 5000 + b"\n",
                     "1:12: error: integer 999999999999...9999 (5000 characters) is out of range"),
    }
    out = {}
    for name, (data, said) in files.items():
        p = tmp / f"{name}.yaml"
        p.write_bytes(data)
        out[name] = (p, said)
    return out


COMMANDS = [["validate"], ["describe"], ["render"], ["diff", str(GOOD)]]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: c[0])
def test_every_command_locates_each_bad_file(cmd: list[str], tmp_path: Path, cli) -> None:
    """validate, describe, render and diff, given a tagged scalar, a deep nesting, an
    empty, binary, Latin-1 or NUL-holding file or a 5000-digit number, each print one
    located error and exit 1."""
    for name, (path, said) in _bad_inputs(tmp_path).items():
        r = cli(*cmd, path)
        assert r.exit_code == 1, (name, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit), (name, r.exception)
        assert r.output.startswith(f"{path}:{said}"), (name, r.output)
        assert "Traceback" not in r.output


def test_compile_locates_a_bad_file(tmp_path: Path, cli) -> None:
    """compile (which imports torch) gives the same located error as validate."""
    path, said = _bad_inputs(tmp_path)["tag_int"]
    r = cli("compile", path)
    assert r.exit_code == 1 and r.output.startswith(f"{path}:{said}"), r.output


def test_deep_nesting_never_kills_the_process(tmp_path: Path) -> None:
    """`x: [[[...]]]` 100,000 deep (once a segfault, signal 11, in the composer) is one
    located error and exit 1 from the real command."""
    path = tmp_path / "deep.yaml"
    path.write_text("x: " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    r = _cli("validate", str(path))
    assert r.returncode == 1, r.stderr[-2000:]
    assert r.stderr.startswith(f"{path}:1:68: error: document nests deeper than 64 levels")
    assert "Traceback" not in r.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_fifo_and_devices_are_refused_at_once(tmp_path: Path) -> None:
    """A named pipe (no writer: reading would wait forever) and /dev/zero (reading
    never ends) are refused without reading; the command exits 1 at once."""
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    r = _cli("validate", str(fifo), "/dev/zero", timeout=60)
    assert r.returncode == 1
    assert f"{fifo}: error: {fifo} is a FIFO (named pipe), not a spec file" in r.stderr
    assert "/dev/zero: error: /dev/zero is a character device, not a spec file" in r.stderr
    assert "2 of 2 specs have errors" in r.stderr


def test_oversized_file_is_located_with_both_figures(tmp_path: Path, cli) -> None:
    """A file one byte over the limit is refused at FILE:1:1 with its size, the limit
    and a hint."""
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * (source.MAX_BYTES + 1))
    r = cli("validate", path, code=1)
    assert r.output.splitlines()[:2] == [
        f"{path}:1:1: error: spec is 2,000,001 bytes, more than the limit of 2,000,000",
        "hint: a spec is a few kilobytes of YAML; check that this is the file you meant",
    ]


def test_missing_file_and_directory(tmp_path: Path, cli) -> None:
    """A missing spec is one error naming the path (exit 1); a directory that is no run
    (compile, render, describe and diff read a run directory's spec) is one error too."""
    r = cli("describe", tmp_path / "nope.yaml", code=1)
    assert r.output.startswith(f"{tmp_path / 'nope.yaml'}: error: no such file:")
    for command in ("render", "compile"):
        r = cli(command, tmp_path, code=1)
        assert r.output.startswith(f"{tmp_path}: error: a directory, but neither a spec file "
                                   "nor a run") and "hint:" in r.output


@pytest.mark.parametrize("command", ["describe", "compile", "render", "diff"])
def test_a_path_too_long_for_the_system_is_one_error(command: str, tmp_path: Path, cli) -> None:
    """A spec path the system refuses to look up (a name over its limit) is one located
    error, as a missing file is; the commands that also take a run directory ask whether
    it is one first, and that question must not raise."""
    long = str(tmp_path / ("a" * 5000))
    args = (command, long, long) if command == "diff" else (command, long)
    r = cli(*args, code=1)
    assert r.output.startswith(f"{long}: error: cannot read spec: File name too long")
    assert "hint:" in r.output


@pytest.mark.parametrize("name", ["odd name ü $x;'.yaml", "-dash.yaml", "new\nline.yaml"])
def test_odd_characters_in_a_spec_path(name: str, tmp_path: Path, cli) -> None:
    """A spec path with spaces, quotes, non-ASCII letters, a leading dash or a newline
    reads like any other (a leading dash after `--`)."""
    path = tmp_path / name
    path.write_bytes(GOOD.read_bytes())
    r = cli("validate", "--", path, code=0)
    assert "ok — global_attention" in r.output


# --- numeric options ---------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [("--length", "-3"), ("--length", "0"), ("--length", "4097"),
     ("--length", "100000000000000000000"), ("--batch", "-1"), ("--batch", "0"),
     ("--batch", "257"), ("--seed", "-1"), ("--seed", str(2**63))],
)
def test_compile_options_out_of_range(option: str, value: str, cli) -> None:
    """compile refuses a negative, zero or huge --length/--batch and a seed torch cannot
    take as a usage error naming the range (once a traceback from torch)."""
    r = cli("compile", GOOD, option, value, code=2)
    assert f"Invalid value for '{option}': {value} is not in the range" in r.output


@pytest.mark.parametrize(
    ("option", "value"),
    [("--items", "0"), ("--items", "10"), ("--query", "0"), ("--query", "-1"),
     ("--query", "100")],
)
def test_render_options_out_of_range(option: str, value: str, cli) -> None:
    """render's --items and --query are bounded the same way."""
    r = cli("render", GOOD, "--view", "unrolled", option, value)
    assert r.exit_code == 2 and f"Invalid value for '{option}'" in r.output


def test_compile_inputs_that_cannot_be_made(monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """If the test inputs cannot be allocated, compile says so at the spec, with a
    hint, instead of a traceback."""
    import attngraph.lower.runtime.examples as examples

    def no_memory(*_a: object, **_k: object) -> None:
        msg = "DefaultCPUAllocator: can't allocate memory: you tried ..."
        raise RuntimeError(msg)

    monkeypatch.setattr(examples, "random_inputs", no_memory)
    r = cli("compile", GOOD, "--batch", "256", "--length", "4096", code=1)
    lines = r.output.splitlines()
    assert f"{GOOD}: error: cannot make test inputs of batch 256 and length 4096: " \
        "DefaultCPUAllocator: can't allocate memory: you tried ..." in lines
    assert "hint: give a smaller --batch or --length" in lines
