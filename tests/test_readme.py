"""Every python example of README.md and docs/*.md runs as written and shows what it says.

The blocks of one document run in order in one fresh interpreter (a subprocess started in an
empty temporary folder), so a snippet may use what an earlier one defined, exactly as a
reader pasting them would. Two kinds of block run:

* ```` ```pycon ```` blocks are doctests: each ``>>>`` line runs and its printed value must
  match the lines under it (``...`` stands for any text, whitespace runs are equal);
* ```` ```python ```` blocks define things and must show nothing: they may not print, and a
  bare expression (``result.U, result.V``), whose value a reader would expect to see, is
  refused: it belongs in a ``pycon`` block with its output.

A block that cannot run here (it needs credentials or data that a fresh clone lacks) opens
with the visible fence ```` ```python no-run ```` instead; nothing is skipped silently.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

#: A fenced block: the info string (language and flags) and its body.
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, code)`` of each python block; ``kind`` is ``"python"``,
    ``"pycon"`` (a doctest) or ``"no-run"``.

    >>> text = "```python\\na = 1\\n```\\n```pycon\\n>>> a\\n1\\n```\\n"
    >>> text += "```python no-run\\nb\\n```\\n"
    >>> python_blocks(text)
    [(2, 'python', 'a = 1\\n'), (5, 'pycon', '>>> a\\n1\\n'), (9, 'no-run', 'b\\n')]
    """
    blocks = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        if not words or words[0] not in ("python", "py", "pycon"):
            continue
        line = text.count("\n", 0, match.start(2)) + 1
        kind = "no-run" if "no-run" in words[1:] else "pycon" if words[0] == "pycon" else "python"
        blocks.append((line, kind, match.group(2)))
    return blocks


def unshown_expressions(code: str) -> list[int]:
    """Lines of a python block's top-level bare expressions other than calls: a REPL would
    show their value, a script shows nothing.

    >>> unshown_expressions("x = 1\\nx, 2\\nprint(x)\\n")
    [2]
    """
    return [
        node.lineno
        for node in ast.parse(code).body
        if isinstance(node, ast.Expr)
        and not isinstance(node.value, ast.Call | ast.Await | ast.Constant)
    ]


RUNNER = textwrap.dedent(
    """
    import contextlib, doctest, io, sys, traceback
    namespace = {"__name__": "__main__"}
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    for label, kind, code in BLOCKS:
        shown = io.StringIO()
        if kind == "pycon":
            test = doctest.DocTestParser().get_doctest(code, namespace, label, label, 0)
            runner = doctest.DocTestRunner(optionflags=flags)
            runner.run(test, out=shown.write, clear_globs=False)
            namespace.update(test.globs)
            if runner.failures or not test.examples:
                sys.stderr.write(shown.getvalue() or "a pycon block without >>> examples")
                print(f"FAILED in {label}", file=sys.stderr)
                sys.exit(1)
        else:
            try:
                with contextlib.redirect_stdout(shown):
                    exec(compile(code, label, "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"FAILED in {label}", file=sys.stderr)
                sys.exit(1)
            if shown.getvalue():
                print(f"{label} printed {shown.getvalue()[:300]!r}; show output in a pycon "
                      "block under its >>> line, where it is checked", file=sys.stderr)
                print(f"FAILED in {label}", file=sys.stderr)
                sys.exit(1)
        print(f"ran {label}")
    """
)


def run_blocks(name: str, text: str, folder: Path) -> tuple[subprocess.CompletedProcess, int]:
    """Run a document's runnable blocks in a fresh interpreter in ``folder``; the process
    and the number of blocks it had to run."""
    runnable = [
        (f"{name}, block at line {line}", kind, code)
        for line, kind, code in python_blocks(text)
        if kind != "no-run"
    ]
    script = folder / "run_blocks.py"
    script.write_text(f"BLOCKS = {runnable!r}\n{RUNNER}", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return result, len(runnable)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_documented_python_runs_and_shows_what_it_says(document, tmp_path):
    text = document.read_text(encoding="utf-8")
    blocks = python_blocks(text)
    if not [kind for _, kind, _ in blocks if kind != "no-run"]:
        pytest.skip(f"{document.name} has no runnable python block")
    unshown = [
        f"{document.name} line {line + offset - 1}"
        for line, kind, code in blocks
        if kind == "python"
        for offset in unshown_expressions(code)
    ]
    assert unshown == [], "bare expressions show nothing: put them in a pycon block"
    result, count = run_blocks(document.name, text, tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("ran ") == count


@pytest.mark.parametrize(
    ("block", "complaint"),
    [
        ("```pycon\n>>> 1 + 1\n3\n```\n", "Expected:"),
        ("```python\nprint('hello')\n```\n", "printed 'hello\\n'"),
        ("```pycon\n>>> x = 1\n```\n```pycon\n>>> x + 1\n2\n>>> y\n```\n", "NameError"),
    ],
    ids=["wrong-output", "unchecked-print", "undefined-name"],
)
def test_the_checker_fails_a_wrong_example(block, complaint, tmp_path):
    result, _ = run_blocks("doc.md", block, tmp_path)
    assert result.returncode == 1 and complaint in result.stderr
    assert "FAILED in doc.md" in result.stderr


def test_a_pycon_block_passes_names_on_to_the_next_blocks(tmp_path):
    text = "```pycon\n>>> x = 20\n```\n```python\ny = x + 1\n```\n```pycon\n>>> y * 2\n42\n```\n"
    result, count = run_blocks("doc.md", text, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("ran ") == count == 3
