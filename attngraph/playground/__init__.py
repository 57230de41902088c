"""The playground: a local web page where a spec is checked, drawn and described as
it is typed (``attngraph playground``; docs/playground.md).

:mod:`~attngraph.playground.server` serves the page (``static/``, no script from
elsewhere) and a JSON API; :mod:`~attngraph.playground.check` turns a spec's text
into what the page shows, through the same stages as the command line;
:mod:`~attngraph.playground.locate` maps drawn nodes to the lines that write them;
:mod:`~attngraph.playground.workspace` holds the files it may open and save.
"""

from __future__ import annotations

from attngraph.playground.check import Checker
from attngraph.playground.server import PlaygroundServer, make_server
from attngraph.playground.workspace import Workspace

__all__ = ["Checker", "PlaygroundServer", "Workspace", "make_server"]
