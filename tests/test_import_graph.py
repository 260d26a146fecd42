"""The package's layering, read from its source with ``ast`` (no imports run).

* the core (``bmfdsl`` minus ``bmfdsl.backends`` and ``bmfdsl.models``) never imports a model,
  and reaches the backends only through ``bmfdsl.backends.registry``;
* no module takes another module's private (``_name``) names;
* no import circles among the core's modules (lazy imports inside functions included), and
  none at import time across the whole package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Where each package's source lives (pyproject.toml maps models/ and backends/ into bmfdsl).
PACKAGE_DIRS = {
    "bmfdsl": ROOT / "bmfdsl",
    "bmfdsl.backends": ROOT / "backends",
    "bmfdsl.models": ROOT / "models",
}
OUTER = ("bmfdsl.backends", "bmfdsl.models")
REGISTRY = "bmfdsl.backends.registry"


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in folder.rglob("*.py"):
            relative = path.relative_to(folder).with_suffix("")
            parts = [part for part in relative.parts if part != "__init__"]
            name = ".".join([package, *parts])
            if package == "bmfdsl" and name.startswith(OUTER):
                continue
            found[name] = path
    return found


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def _imports(name: str) -> Iterator[tuple[str, str | None, bool]]:
    """``(imported module, imported name or None, at import time)`` for each import."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    top_level = set(map(id, tree.body))
    for node in ast.walk(tree):
        eager = id(node) in top_level
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, eager
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if _is_package(name) else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    package = package.rsplit(".", 1)[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if submodule in MODULES:  # `from package import module`
                    yield submodule, None, eager
                else:
                    yield base, alias.name, eager


def _edges(*, eager_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name in MODULES:
        for target, _, eager in _imports(name):
            if target in MODULES and target != name and (eager or not eager_only):
                graph[name].add(target)
    return graph


def _is_core(name: str) -> bool:
    return not name.startswith(OUTER)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read():
    # a guard against a vacuous pass: the modules and the known edges are there
    assert {"bmfdsl._factorize", "bmfdsl.bls", REGISTRY, "bmfdsl.models"} <= set(MODULES)
    assert "bmfdsl.matrix" in _edges(eager_only=True)["bmfdsl.bls"]
    assert REGISTRY in _edges(eager_only=False)["bmfdsl._factorize"]


def test_core_reaches_backends_only_through_the_registry_and_never_models():
    offending = [
        f"{name} imports {target}"
        for name in MODULES
        if _is_core(name)
        for target, _, _ in _imports(name)
        if target.startswith(OUTER) and target != REGISTRY
    ]
    assert offending == []


def test_no_module_takes_another_modules_private_names():
    offending = [
        f"{name}: from {target} import {imported}"
        for name in MODULES
        for target, imported, _ in _imports(name)
        if target.startswith("bmfdsl")
        and imported is not None
        and imported.startswith("_")
        and not imported.startswith("__")
    ]
    assert offending == []


@pytest.mark.parametrize("eager_only", [False, True], ids=["core-with-lazy", "import-time"])
def test_no_import_circles(eager_only):
    graph = _edges(eager_only=eager_only)
    if not eager_only:  # lazy imports: the core alone (the registry loads backends on demand)
        graph = {
            name: {target for target in targets if _is_core(target)}
            for name, targets in graph.items()
            if _is_core(name)
        }
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
