"""The docs' tables of the open choices, written from their registries.

docs/spec-language.md lists the scorer functions, normalisers, feature maps and
activations in tables that ``attngraph docs`` rewrites between marker comments
(:data:`TABLES`: each table's markers and its writer), so that registering an
entry and running ``attngraph docs`` is all it takes to document it. A table
holds an entry's formula, what its definition adds in words (``doc``) and the
traits that the passes and ``describe`` read.

Examples
--------
>>> normaliser_table().splitlines()[2].startswith("| `entmax15` |")
True
"""

from __future__ import annotations

from collections.abc import Callable

from attngraph.kinds.activations import ACTIVATIONS, FEATURE_MAPS
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.kinds.scorers import SCORERS, ScorerInfo

__all__ = ["TABLES", "Table", "normaliser_table", "feature_map_table", "activation_table",
           "scorer_table", "with_tables"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def normaliser_table() -> str:
    """Markdown table of every registered normaliser (a softmax node's ``fn``)."""
    rows = ["| `fn` | weights | traits | reference |", "|---|---|---|---|"]
    for name, n in NORMALISERS.items():
        traits = [t for t, on in (("sparse: exact zeros", n.sparse), ("needs `k`", n.needs_k),
                                  ("kernel scores: linear attention", n.kernel),
                                  ("fused with a dot-product scorer", n.fusable)) if on]
        weights = f"{n.formula}: {n.doc}" if n.doc else n.formula
        rows.append(f"| `{name}` | {_cell(weights)} | {', '.join(traits)} | "
                    f"{_cell(n.reference)} |")
    return "\n".join(rows) + "\n"


def feature_map_table() -> str:
    """Markdown table of every registered feature map (a feature_map node's ``fn``)."""
    rows = ["| `fn` | φ(x) | positive | notes |", "|---|---|---|---|"]
    for name, f in FEATURE_MAPS.items():
        rows.append(f"| `{name}` | {_cell(f.formula)} | {'yes' if f.positive else 'no'} | "
                    f"{_cell(f.doc)} |")
    return "\n".join(rows) + "\n"


def activation_table() -> str:
    """Markdown table of every registered activation (``act`` of linear, mlp, readout)."""
    rows = ["| `act` | f(x) | notes |", "|---|---|---|"]
    for name, a in ACTIVATIONS.items():
        rows.append(f"| `{name}` | {_cell(a.formula)} | {_cell(a.doc)} |")
    return "\n".join(rows) + "\n"


def _needs(s: ScorerInfo) -> str:
    if not s.takes_query:
        return "no query"
    if not s.needs_query:
        return "query optional"
    return "query, d_q = d_k" if s.same_size else "query"


def scorer_table() -> str:
    """Markdown table of every registered scorer function (a scorer node's ``fn``)."""
    rows = ["| fn | formula | needs | parameters | notes |", "|---|---|---|---|---|"]
    for name, s in SCORERS.items():
        traits = _join("a dot product" if s.dot_product else "",
                       ("fusable (one scaled_dot_product_attention call"
                        + ("" if s.scaled else ", scale 1") + ")") if s.fusable else "",
                       "positions only" if not s.content else "")
        rows.append(f"| `{name}` | {_cell(s.formula)} | {_needs(s)} | "
                    f"{_cell(s.parameters)} | {_cell(_join(s.doc, traits))} |")
    return "\n".join(rows) + "\n"


def _markers(what: str, registry: str) -> tuple[str, str]:
    return (f"<!-- {what}:start (written by `attngraph docs` from the {registry} registry) -->",
            f"<!-- {what}:end -->")


class Table:
    """One generated table: its start and end marker lines and its writer."""

    def __init__(self, what: str, registry: str, write: Callable[[], str]) -> None:
        self.start, self.end = _markers(what, registry)
        self.write = write


#: Every generated table of docs/spec-language.md.
TABLES = (
    Table("scorer-functions", "scorer", scorer_table),
    Table("normalisers", "normaliser", normaliser_table),
    Table("feature-maps", "feature-map", feature_map_table),
    Table("activations", "activation", activation_table),
)


def with_tables(text: str) -> str:
    """``text`` (a page) with each table of :data:`TABLES` rewritten between its
    markers, where the page has them."""
    from attngraph.kinds.reference import with_reference

    for t in TABLES:
        if t.start in text:
            text = with_reference(text, t.write(), t.start, t.end)
    return text
