"""Lazy public APIs: a package lists its exports once, as imports under ``TYPE_CHECKING``.

Type checkers read those imports; at run time :func:`lazy_exports` reads the same lines from the
package's source and imports each name on first use (PEP 562), so importing a package (or
``bmfdsl`` itself) stays cheap and loads no solver library until one is needed.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any


def exported_names(source: str) -> dict[str, str]:
    """``{public name: module}`` from the ``from M import a, b`` lines under ``if TYPE_CHECKING``.

    >>> exported_names("if TYPE_CHECKING:\\n    from x.y import a, b as c\\n")
    {'a': 'x.y', 'c': 'x.y'}
    """
    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        exports[alias.asname or alias.name] = statement.module
    return exports


def lazy_exports(
    namespace: dict[str, Any],
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for the package whose ``globals()`` is ``namespace``:
    each name imported under its ``if TYPE_CHECKING:`` block, imported for real on first use."""
    package = namespace["__name__"]
    exports = exported_names(Path(namespace["__file__"]).read_text(encoding="utf-8"))

    def get_attribute(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def list_names() -> list[str]:
        return sorted(set(namespace) | set(exports))

    return get_attribute, list_names, sorted(exports)
