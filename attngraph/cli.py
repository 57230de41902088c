"""The ``attngraph`` command line: subcommands that compose the stages.

Each group of subcommands lives in :mod:`attngraph.commands` and registers itself
on :data:`main`; heavy imports (torch, renderers) happen inside the commands so
that ``attngraph --help`` and ``attngraph validate`` start fast.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from attngraph.errors import AttnGraphError
from attngraph.fileio import write_file
from attngraph.registry import Registry

__all__ = ["main", "run_stage", "echo_error", "spec_argument", "write_output",
           "RegistryChoice"]

F = TypeVar("F", bound=Callable[..., Any])


def _color(stream: Any) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def echo_error(exc: AttnGraphError) -> None:
    """Print every diagnostic of ``exc`` to stderr, coloured on a terminal."""
    click.echo(exc.format(color=_color(sys.stderr)), err=True)
    n = len(exc.diagnostics)
    if n > 1:
        click.echo(f"{n} errors", err=True)


def run_stage(fn: F) -> F:
    """Wrap a command so that attngraph errors print as located lines and exit 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AttnGraphError as exc:
            echo_error(exc)
            sys.exit(1)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


spec_argument = click.argument("spec", type=click.Path(dir_okay=False))


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
    return f"{what} failed to load: {type(exc).__name__}: {exc}"


def load_plugins(modules: tuple[str, ...] = ()) -> None:
    """Import the installed plugins (entry points of :data:`PLUGIN_GROUP`), then
    ``modules`` (``--plugin``). A broken installed plugin is skipped with a warning
    naming it; a ``--plugin`` that fails is a clean error (exit 1). A spec never
    causes an import: only these do."""
    import importlib
    from importlib.metadata import entry_points

    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type(sys)):
                obj()
        except Exception as exc:  # noqa: BLE001 - a third party's code: report, go on
            what = _plugin_failed(f"plugin {ep.name!r} ({ep.value})", exc)
            click.echo(f"attngraph: warning: {what}; skipped", err=True)
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - the user's module: report it cleanly
            click.echo(f"attngraph: error: {_plugin_failed(f'--plugin {name}', exc)}", err=True)
            hint = ("give an importable module name (a package on the Python path, e.g. "
                    "mypkg.scorers), not a file path" if isinstance(exc, ImportError)
                    else "the error is raised by the plugin's own code while importing")
            click.echo(f"hint: {hint}", err=True)
            sys.exit(1)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
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
