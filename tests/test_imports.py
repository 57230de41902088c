"""Dependencies point one way: no cycle among attngraph's packages, lazy imports included.

Every ``import`` and ``from ... import`` in attngraph/ and renderers/ counts,
wherever it stands (module level, inside a function, under ``TYPE_CHECKING``).
Modules are grouped into packages (``attngraph.ir``, ``renderers``) or stand
alone (``attngraph.errors``). The one cycle allowed is the CLI's command
registration (``attngraph.cli`` loads ``attngraph.commands``, whose modules
import the ``main`` group from it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {frozenset({"attngraph.cli", "attngraph.commands"})}
#: The compiler's stages, each importing only the ones before it.
LAYERS = ["attngraph.spec", "attngraph.ir", "attngraph.kinds", "attngraph.passes",
          "attngraph.lower"]


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "renderers":
        return "renderers"
    if len(parts) >= 2 and (ROOT / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else parts[0]


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            out.add(name)
            out |= {f"{name}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in ("attngraph", "renderers")}


def package_graph() -> nx.DiGraph:
    """Packages and the import edges between them (importer -> imported)."""
    g = nx.DiGraph()
    files = [*(ROOT / "attngraph").rglob("*.py"), *(ROOT / "renderers").rglob("*.py")]
    known = {_module(f) for f in files}
    for f in files:
        mod = _module(f)
        src = _package(mod)
        g.add_node(src)
        for target in _imports(f, mod):
            # "from attngraph.kinds import KINDS" names a module or a name in one
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            dst = _package(target)
            if dst != src and target in known:
                g.add_edge(src, dst)
    return g


def test_no_cycle_among_packages() -> None:
    """No package imports, directly or through others, a package that imports it."""
    cycles = [c for c in nx.simple_cycles(package_graph()) if frozenset(c) not in ALLOWED]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_the_stages_import_only_earlier_stages() -> None:
    """spec -> ir -> kinds -> passes -> lower: no stage imports a later one."""
    g = package_graph()
    for i, layer in enumerate(LAYERS):
        later = set(LAYERS[i + 1:])
        assert not (set(g.successors(layer)) & later), (layer, set(g.successors(layer)))


def test_the_ir_and_the_analysis_do_not_import_the_renderers_or_torch_code() -> None:
    """The IR, the kinds and the analysis know nothing of diagrams or the lowering."""
    g = package_graph()
    for pkg in ("attngraph.spec", "attngraph.ir", "attngraph.kinds", "attngraph.analysis"):
        reach = nx.descendants(g, pkg)
        assert "renderers" not in reach, pkg
        assert "attngraph.lower" not in reach, pkg
        assert "attngraph.train" not in reach, pkg


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    """An import inside a function counts (the check would catch a lazy cycle)."""
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from attngraph.lower import compile\n    return compile\n")
    assert _imports(f, "attngraph.ir.m") == {"attngraph.lower", "attngraph.lower.compile"}
