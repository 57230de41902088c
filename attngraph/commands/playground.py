"""``attngraph playground``: a local web page to write a spec and watch it become a model."""

from __future__ import annotations

import click

from attngraph.cli import main, run_stage


@main.command()
@click.argument("folder", required=False, default=".",
                type=click.Path(file_okay=False, exists=True))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Anything but 127.0.0.1/localhost lets other "
              "machines open, edit and save the specs of FOLDER.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--verbose", is_flag=True, help="Log each request's route and status.")
@run_stage
def playground(folder: str, host: str, port: int, verbose: bool) -> None:
    """Serve the playground for FOLDER (default: here) and print its address.

    \b
    The page: an editor with the spec (the catalog, the mechanisms and the spec
    files of FOLDER to open; saving back asks first), errors located in the editor
    as you type, the architecture and unrolled diagrams, describe's sites, the
    parameters, a diff against another spec, and the attention picture of a run
    trained under FOLDER. It opens no browser; Ctrl-C stops it.
    """
    import sys

    from attngraph.errors import AttnGraphError, SourceLoc
    from attngraph.playground.server import LOOPBACK, make_server

    try:
        server = make_server(folder, host=host, port=port, verbose=verbose)
    except OSError as exc:
        msg = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
        raise AttnGraphError(msg, SourceLoc(f"{host}:{port}"),
                             hint="choose another --port (0 picks a free one)") from None
    click.echo(f"attngraph playground: {server.url}  (folder {server.workspace.root})")
    if host not in LOOPBACK:
        click.echo("attngraph: warning: listening beyond this machine: anyone who can reach "
                   f"{host}:{server.server_address[1]} can read and save the specs of the "
                   "folder", err=True)
    click.echo("Ctrl-C stops it.")
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
