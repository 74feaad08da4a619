"""The packages form layers and the modules no cycle, counting imports inside functions too.

Layers, lowest first: ``precision`` (numerics) < ``probes.store`` (the store) < ``probes`` (what
is measured) < ``reports`` (tables from the store) < ``precision.cli`` (the command); a module
belongs to the longest layer its name starts with. A module
may import its own layer and the layers below it, never one above; and no chain of imports,
module-level or lazy, leads from a module back to itself. The graph is read from the source
with :mod:`ast`, so an import hidden in a function body counts.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("precision", "probes.store", "probes", "reports", "precision.cli")
#: The top-level packages the layers live in.
PACKAGES = ("precision", "probes", "reports")


def _module_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            files[name] = path
    return files


def _resolve(name: str | None, modules: dict[str, Path]) -> str | None:
    """The longest project module that ``name`` (a module or module.attribute) names."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def import_graph() -> dict[str, set[str]]:
    """Module -> project modules it imports (anywhere in its source)."""
    modules = _module_files()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                names = [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for n in names:
                target = _resolve(n, modules)
                if target and target != name:
                    targets.add(target)
        graph[name] = targets
    return graph


def _layer(module: str) -> int:
    if module == "precision.__main__":   # ``python -m precision``: the command's entry
        module = "precision.cli"
    return LAYERS.index(max((layer for layer in LAYERS
                             if module == layer or module.startswith(layer + ".")), key=len))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_packages():
    graph = import_graph()
    assert "precision.cli.main" in graph and "probes.store.db" in graph
    assert "probes.store.db" in graph["probes.runner"]


def test_no_import_runs_up_a_layer():
    graph = import_graph()
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                    if _layer(b) > _layer(a))
    assert upward == []


def test_no_import_cycles():
    assert _cycles(import_graph()) == []


def test_the_checks_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"]]
    assert _layer("reports.build") > _layer("probes.store.db")
    assert _layer("precision.cli.main") > _layer("reports.build") > _layer("probes.runner")
    assert _layer("probes.runner") > _layer("probes.store.db") > _layer("precision.invariants")
