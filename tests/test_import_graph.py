"""The package's layering, read from its source with ``ast`` (no imports run).

The layers, lowest first (``docs/architecture.md`` draws them):

* shared leaves: ``errors``, ``validation``, ``timings``, ``progress``, ``credentials``,
  ``result``, ``registry``;
* ``bmfdsl.linalg`` (binary matrices, exact kernels, errors of an answer);
* ``bmfdsl.modeling`` (the DSL, compilation, BQMs), with the model scripts of
  ``bmfdsl.models`` on top of it;
* ``bmfdsl.solvers`` (registry, BLS/ALS, native, da, classical methods, CP-SAT), with the
  adapters of ``bmfdsl.backends`` on top of it;
* ``bmfdsl.pipeline`` (factorize, solve, sampling, bounds), then ``bmfdsl.testing``;
* ``bmfdsl.apps`` (cli, estimator, io, datasets, experiments), then the top-level ``bmfdsl``.

A module imports only its own layer or lower ones; no module imports an adapter or a model
(the registries load them by name); a private module (``_name``) is imported only from inside
its own package, everyone else goes through the package's ``__init__``; no module takes
another module's private names; and there are no import circles.
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
LEAVES = (
    "bmfdsl.errors",
    "bmfdsl.validation",
    "bmfdsl.timings",
    "bmfdsl.progress",
    "bmfdsl.credentials",
    "bmfdsl.result",
    "bmfdsl.registry",
    "bmfdsl._lazy",
)
# (prefix, rank): a module's layer is that of the longest prefix it matches.
LAYERS = {
    **dict.fromkeys(LEAVES, 0),
    "bmfdsl.linalg": 1,
    "bmfdsl.modeling": 2,
    "bmfdsl.models": 2.5,
    "bmfdsl.solvers": 3,
    "bmfdsl.backends": 3.5,
    "bmfdsl.pipeline": 4,
    "bmfdsl.testing": 4.5,
    "bmfdsl.apps": 5,
    "bmfdsl.__main__": 6,
    "bmfdsl": 6,
}


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


def _layer(name: str) -> str:
    matches = [prefix for prefix in LAYERS if name == prefix or name.startswith(prefix + ".")]
    return max(matches, key=len)


def _public_package(name: str) -> str:
    """``bmfdsl.solvers.native._portfolio`` -> ``bmfdsl.solvers.native``."""
    parts = name.split(".")
    while parts[-1].startswith("_") and not parts[-1].startswith("__"):
        parts.pop()
    return ".".join(parts)


def test_the_graph_is_read():
    # a guard against a vacuous pass: the modules and the known edges are there
    assert {"bmfdsl.pipeline._factorize", "bmfdsl.solvers._bls", "bmfdsl.models"} <= set(MODULES)
    assert "bmfdsl.linalg" in _edges(eager_only=True)["bmfdsl.solvers._bls"]
    assert "bmfdsl.solvers._registry" in _edges(eager_only=False)["bmfdsl.solvers._bls"]
    assert "bmfdsl.solvers" in _edges(eager_only=False)["bmfdsl.pipeline._factorize"]


def test_every_module_sits_in_a_layer():
    # a new module placed flat in bmfdsl/ fails here until it is given a layer
    flat = [
        name
        for name in MODULES
        if _layer(name) == "bmfdsl" and name not in ("bmfdsl", "bmfdsl.__main__")
    ]
    assert flat == []


def test_imports_go_down_the_layers():
    offending = [
        f"{name} ({_layer(name)}) imports {target} ({_layer(target)})"
        for name in MODULES
        for target, _, _ in _imports(name)
        if target in MODULES
        and _layer(target) != _layer(name)
        and LAYERS[_layer(target)] > LAYERS[_layer(name)]
    ]
    assert offending == []


def test_nothing_imports_an_adapter_or_a_model():
    offending = [
        f"{name} imports {target}"
        for name in MODULES
        for target, _, _ in _imports(name)
        if target.startswith(OUTER) and _layer(target) != _layer(name)
    ]
    assert offending == []


def test_private_modules_are_imported_only_inside_their_package():
    offending = [
        f"{name} imports {target}"
        for name in MODULES
        for target, _, _ in _imports(name)
        if target in MODULES
        and (package := _public_package(target)) != target
        and not (name == package or name.startswith(package + "."))
    ]
    assert offending == []


def test_the_layer_rules_catch_a_violation():
    assert _layer("bmfdsl.linalg._kernels") == "bmfdsl.linalg"
    assert _layer("bmfdsl.errors") == "bmfdsl.errors"
    assert LAYERS[_layer("bmfdsl.modeling._dsl")] < LAYERS[_layer("bmfdsl.solvers._bls")]
    assert _public_package("bmfdsl.solvers.native._portfolio") == "bmfdsl.solvers.native"
    assert _public_package("bmfdsl.__main__") == "bmfdsl.__main__"


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
