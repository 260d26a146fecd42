"""Every ```python block of README.md and docs/*.md runs as written.

The blocks of one document run in order in one fresh interpreter (a subprocess started in an
empty temporary folder), so a snippet may use what an earlier one defined, exactly as a
reader pasting them would. A block that cannot run here (it needs credentials or data that a
fresh clone lacks) opens with the visible fence ```` ```python no-run ```` instead; nothing is
skipped silently.
"""

from __future__ import annotations

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


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """``(line number, code, runs)`` of each python block; ``runs`` is False for ``no-run``.

    >>> text = "x\\n```python\\na = 1\\n```\\n```python no-run\\nb\\n```\\n```sh\\nls\\n```\\n"
    >>> python_blocks(text)
    [(3, 'a = 1\\n', True), (6, 'b\\n', False)]
    """
    blocks = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        if not words or words[0] not in ("python", "py", "pycon"):
            continue
        line = text.count("\n", 0, match.start(2)) + 1
        blocks.append((line, match.group(2), "no-run" not in words[1:]))
    return blocks


RUNNER = textwrap.dedent(
    """
    import sys, traceback
    namespace = {"__name__": "__main__"}
    for label, code in BLOCKS:
        try:
            exec(compile(code, label, "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            print(f"FAILED in {label}", file=sys.stderr)
            sys.exit(1)
        print(f"ran {label}")
    """
)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_documented_python_runs_as_written(document, tmp_path):
    blocks = python_blocks(document.read_text(encoding="utf-8"))
    runnable = [
        (f"{document.name}, block at line {line}", code) for line, code, runs in blocks if runs
    ]
    if not runnable:
        pytest.skip(f"{document.name} has no runnable python block")
    script = tmp_path / "run_blocks.py"
    script.write_text(f"BLOCKS = {runnable!r}\n{RUNNER}", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.count("ran ") == len(runnable)
