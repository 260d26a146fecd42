"""MkDocs hook of the API reference: a page's ``<!-- exports PACKAGE -->`` line becomes one
``::: PACKAGE.name`` entry per public name of the package, read from the package itself (the
imports under ``if TYPE_CHECKING:``, or ``__all__``), so that the list is kept in one place.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

from bmfdsl._lazy import exported_names

MARKER = re.compile(r"^<!-- exports ([\w.]+) -->$", re.MULTILINE)


def public_names(package: str) -> list[str]:
    """The public names a package exports, in the order its ``__init__`` lists them."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise ValueError(f"no package {package!r}")
    source = Path(spec.origin).read_text(encoding="utf-8")
    names = list(exported_names(source))
    if names:
        return names
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return []


def on_page_markdown(markdown: str, **_: Any) -> str:
    def entries(match: re.Match[str]) -> str:
        package = match.group(1)
        return "\n\n".join(f"::: {package}.{name}" for name in public_names(package))

    return MARKER.sub(entries, markdown)


def fence_doctests(text: str) -> str:
    """Docstrings end in doctests (``>>>`` lines and their output) that Markdown would read as
    quotes and links: wrap each run of them in a ``pycon`` code fence.

    >>> fence_doctests("Sum.\\n>>> 1 + 1\\n2\\n\\nMore.").split("\\n")
    ['Sum.', '```pycon', '>>> 1 + 1', '2', '```', '', 'More.']
    """
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        stripped = line.lstrip()
        if not inside and stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}```pycon")
            inside = True
        elif inside and not stripped:
            out.append(f"{indent}```")
            inside = False
        out.append(line)
    if inside:
        out.append(f"{indent}```")
    return "\n".join(out)


ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc|obj):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """Sphinx roles read as code spans (``~`` keeps the last part of the name).

    >>> plain_roles("see :func:`~bmfdsl.pipeline.factorize` and :mod:`bmfdsl.linalg`")
    'see `factorize` and `bmfdsl.linalg`'
    """
    return ROLE.sub(lambda m: f"`{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}`", text)


try:  # a griffe extension when mkdocstrings loads this file (`extensions:` in mkdocs.yml)
    import griffe

    class DoctestBlocks(griffe.Extension):
        """Fence the doctests and plain the Sphinx roles of every docstring before it is
        parsed."""

        def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
            if obj.docstring is not None:
                obj.docstring.value = fence_doctests(plain_roles(obj.docstring.value))

except ImportError:  # only the MkDocs hook is used
    pass
