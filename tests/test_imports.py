"""Dependencies point one way: no cycle among attngraph's packages, lazy imports included.

Every ``import`` and ``from ... import`` in attngraph/ and renderers/ counts,
wherever it stands (module level, inside a function, under ``TYPE_CHECKING``);
between the modules of one package, only the imports that run.
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


def _type_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:`` (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def _imports(path: Path, module: str, *, typing: bool = True) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    skip = set() if typing else _type_only(tree)
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def module_graph(*, typing: bool = True) -> nx.DiGraph:
    """Modules and the import edges between them (importer -> imported); with
    ``typing=False``, imports under ``if TYPE_CHECKING:`` are left out."""
    g = nx.DiGraph()
    files = [*(ROOT / "attngraph").rglob("*.py"), *(ROOT / "renderers").rglob("*.py")]
    known = {_module(f) for f in files}
    for f in files:
        mod = _module(f)
        g.add_node(mod)
        for target in _imports(f, mod, typing=typing):
            # "from attngraph.kinds import KINDS" names a module or a name in one
            while target not in known and "." in target:
                target = target.rsplit(".", 1)[0]
            if target in known and target != mod:
                g.add_edge(mod, target)
    return g


def package_graph() -> nx.DiGraph:
    """Packages and the import edges between them (importer -> imported)."""
    g = nx.DiGraph()
    for mod, target in module_graph().edges:
        src, dst = _package(mod), _package(target)
        g.add_node(src)
        if dst != src:
            g.add_edge(src, dst)
    return g


def test_no_cycle_among_packages() -> None:
    """No package imports, directly or through others, a package that imports it."""
    cycles = [c for c in nx.simple_cycles(package_graph()) if frozenset(c) not in ALLOWED]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles)


def test_no_cycle_among_modules() -> None:
    """Within a package too, modules import one way at run time, lazy imports included
    (a launcher does not import back the runner that imports it; a registry's module
    is not imported back by the modules of its entries). Imports for type hints
    only (``if TYPE_CHECKING:``) never run and are left out here, so a module may
    name in its annotations the types of a module that uses it (the IR's printer
    and the graph it prints); between packages they count (the tests above)."""
    allowed = {"attngraph.cli", "attngraph.commands"}
    cycles = [c for c in nx.simple_cycles(module_graph(typing=False))
              if not all(any(m == a or m.startswith(a + ".") for a in allowed) for m in c)]
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
