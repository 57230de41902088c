"""The ``attngraph`` command line: subcommands that compose the stages.

Each group of subcommands lives in :mod:`attngraph.commands` and registers itself
on :data:`main`; heavy imports (torch, renderers) happen inside the commands so
that ``attngraph --help`` and ``attngraph validate`` start fast.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import click

from attngraph.errors import AttnGraphError
from attngraph.fileio import write_file
from attngraph.kinds.hooks import raiser
from attngraph.registry import Registry

__all__ = ["main", "run_stage", "echo_error", "spec_argument", "write_output",
           "RegistryChoice", "load_plugins", "user_warnings", "guarded", "EXIT_CODES"]

F = TypeVar("F", bound=Callable[..., Any])


def _color(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def echo_error(exc: AttnGraphError) -> None:
    """Print every diagnostic of ``exc`` to stderr, coloured on a terminal."""
    click.echo(exc.format(color=_color(sys.stderr)), err=True)
    n = len(exc.diagnostics)
    if n > 1:
        click.echo(f"{n} errors", err=True)


#: The exit statuses of every command (docs/robustness.md "Exit codes" shows this table).
EXIT_CODES: dict[int, str] = {
    0: "success",
    1: "an error in the input (spec, data, run directory, plugin), reported as located "
       "errors; or a check that found problems (validate of several specs, docs)",
    2: "a usage error on the command line: an unknown command or option, a bad or "
       "missing argument, options that exclude each other (click's convention)",
    130: "interrupted (Ctrl-C)",
}

#: The modules the plugins loaded at start-up are (``--plugin`` and entry points):
#: a ``BaseException`` raised from code in them is reported naming the plugin.
PLUGIN_MODULES: dict[str, str] = {}


def _warning_text(message: Warning | str) -> str:
    return " ".join(str(message).split()) or type(message).__name__


@contextlib.contextmanager
def user_warnings() -> Iterator[None]:
    """Show each Python warning raised inside (numpy's overflow in a cast, PIL's
    decompression-bomb warning, a torch UserWarning) once, as ``attngraph: warning:
    <message>`` on stderr: never the file and line of library code. The filters in
    force (``-W``, ``PYTHONWARNINGS``, a library's own) still decide which are shown."""
    seen: set[tuple[type, str]] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        text = _warning_text(message)
        if (category, text) not in seen:
            seen.add((category, text))
            click.echo(f"attngraph: warning: {text}", err=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


def _culprit(exc: BaseException) -> str | None:
    """The plugin (or other code outside attngraph) whose frame raised ``exc``: the
    innermost frame of a loaded plugin's module, else the innermost function outside
    attngraph, the libraries it runs and Python's own (:func:`~attngraph.kinds.hooks.raiser`)."""
    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in reversed(frames):
        mod = str(frame.f_globals.get("__name__", ""))
        for name, what in PLUGIN_MODULES.items():
            if mod == name or mod.startswith(name + "."):
                return f"{what} ({mod}.{frame.f_code.co_qualname})" \
                    if hasattr(frame.f_code, "co_qualname") else f"{what} ({mod})"
    foreign = raiser(exc)
    return f"code outside attngraph ({foreign})" if foreign else None


def _report_foreign(exc: BaseException, culprit: str | None) -> None:
    text = type(exc).__name__ + (f": {exc}" if str(exc) else "")
    who = culprit or "code outside attngraph (a plugin)"
    click.echo(f"attngraph: error: {who} raised {text}", err=True)
    click.echo("hint: the error is in the plugin's code, not in the spec: fix it there, or "
               "run without it", err=True)


def guarded(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` at the command boundary: attngraph errors print as
    located lines and exit 1; what a plugin raised past its hooks (an exception from a
    loaded plugin's module, ``SystemExit(4)``, a ``BaseException`` of its own) is one
    error naming the plugin, exit 1; Ctrl-C exits 130; warnings print as
    ``attngraph: warning: ...`` (:func:`user_warnings`). Click's own exits (usage
    errors, 2) and attngraph's own ``sys.exit`` pass unchanged."""
    try:
        with user_warnings():
            return fn(*args, **kwargs)
    except AttnGraphError as exc:
        echo_error(exc)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
    except (click.exceptions.ClickException, click.exceptions.Abort, click.exceptions.Exit):
        raise
    except SystemExit as exc:
        culprit = _culprit(exc)  # attngraph's own sys.exit passes unchanged
        if culprit is None:
            raise
        _report_foreign(exc, culprit)
        sys.exit(1)
    except Exception as exc:
        culprit = _culprit(exc)
        if culprit is None:
            raise  # a bug of attngraph's own: the traceback is for its tests and fuzzer
        _report_foreign(exc, culprit)
        sys.exit(1)
    except BaseException as exc:  # noqa: BLE001 - attngraph raises no other kind itself
        _report_foreign(exc, _culprit(exc))
        sys.exit(1)


def run_stage(fn: F) -> F:
    """Wrap a command in :func:`guarded`: errors print as located lines and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return guarded(fn, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class _Main(click.Group):
    """The command group: every subcommand runs inside :func:`guarded`, whether or not
    it is wrapped in :func:`run_stage` (plugins load inside it too)."""

    def invoke(self, ctx: click.Context) -> Any:
        return guarded(super().invoke, ctx)


spec_argument = click.argument("spec", type=click.Path(dir_okay=False))
#: a spec file, or a run directory (its spec: :func:`attngraph.commands.load_spec_or_run`)
spec_or_run_argument = click.argument("spec", type=click.Path())


def write_output(path: str | Path, data: str | bytes, *,
                 error: type[AttnGraphError] = AttnGraphError) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, making its missing parent folders.

    Through :func:`attngraph.fileio.write_file`: a temporary file beside ``path``,
    then a rename, so a failed write (a full disk) leaves the previous file whole.
    A folder that cannot be made, or a file that cannot be written (no permission,
    a directory in the way, a full disk), is one ``error`` at ``path``.
    """
    write_file(path, data, error=error, parents=True)


class RegistryChoice(click.Choice):  # type: ignore[type-arg]
    """A choice among a registry's names, read when the option is used (so entries
    registered after the CLI was built are offered too)."""

    def __init__(self, registry: Registry[Any]) -> None:
        self.registry = registry
        super().__init__(registry.names())

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        return tuple(self.registry.names())

    @choices.setter
    def choices(self, _value: Any) -> None:
        """Click sets the choices once; the registry is what counts."""


#: The entry-point group of installed plugins: each entry names a module to import
#: (which registers scorer functions or kinds) or a callable to call, at start-up.
PLUGIN_GROUP = "attngraph.plugins"


def _plugin_failed(what: str, exc: BaseException) -> str:
    return f"{what} failed to load: {type(exc).__name__}" + (f": {exc}" if str(exc) else "")


def _load_failed(what: str, exc: BaseException, *, installed: bool) -> None:
    """Report a plugin that failed to load: a warning (an installed one is skipped),
    or an error and exit 1 (``--plugin``); Ctrl-C while loading exits 130."""
    if isinstance(exc, KeyboardInterrupt):
        click.echo(f"interrupted (while loading {what})", err=True)
        sys.exit(130)
    text = _plugin_failed(what, exc)
    if installed:
        click.echo(f"attngraph: warning: {text}; skipped", err=True)
        return
    click.echo(f"attngraph: error: {text}", err=True)
    hint = ("give an importable module name (a package on the Python path, e.g. "
            "mypkg.scorers), not a file path" if isinstance(exc, ImportError)
            else "the error is raised by the plugin's own code while importing")
    click.echo(f"hint: {hint}", err=True)
    sys.exit(1)


def load_plugins(modules: tuple[str, ...] = ()) -> None:
    """Import the installed plugins (entry points of :data:`PLUGIN_GROUP`), then
    ``modules`` (``--plugin``). A broken installed plugin is skipped with a warning
    naming it; a ``--plugin`` that fails is a clean error (exit 1): whatever it
    raises, ``SystemExit`` and ``BaseException`` of its own included (Ctrl-C exits
    130). A spec never causes an import: only these do."""
    import importlib
    from importlib.metadata import entry_points

    with user_warnings():
        for ep in entry_points(group=PLUGIN_GROUP):
            what = f"plugin {ep.name!r} ({ep.value})"
            PLUGIN_MODULES.setdefault(ep.value.partition(":")[0].strip(), what)
            try:
                obj = ep.load()
                if callable(obj) and not isinstance(obj, type(sys)):
                    obj()
            except BaseException as exc:  # noqa: BLE001 - a third party's code: report, go on
                _load_failed(what, exc, installed=True)
        for name in modules:
            PLUGIN_MODULES.setdefault(name, f"plugin {name!r} (--plugin {name})")
            try:
                importlib.import_module(name)
            except BaseException as exc:  # noqa: BLE001 - the user's module: report it cleanly
                _load_failed(f"--plugin {name}", exc, installed=False)


@click.group(cls=_Main,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="attngraph", prog_name="attngraph")
@click.option("--plugin", "plugins", multiple=True, metavar="MODULE",
              help="Import MODULE first (it registers scorer functions or kinds); "
              "repeatable. Installed packages can also register through the "
              f"'{PLUGIN_GROUP}' entry-point group.")
def main(plugins: tuple[str, ...] = ()) -> None:
    """Write attention mechanisms as small YAML graphs; check, draw, compile, compare.

    \b
    Start with:  attngraph validate SPEC.yaml
    Language:    docs/spec-language.md (or `attngraph schema` for editors)
    Extensions:  attngraph --plugin mypkg.scorers validate SPEC.yaml
    """
    load_plugins(plugins)


def _register() -> None:
    import importlib
    import pkgutil

    import attngraph.commands as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"attngraph.commands.{mod.name}")


_register()
