"""The docs cite what exists and repeat what the results files and the code say.

README.md and docs/*.md quote benchmark figures, file names, commands and constants. Where a
figure can be read back mechanically it is checked here, so a rerun of a benchmark or a change
of a constant that leaves the docs behind fails a test instead of misleading a reader.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from bmfdsl.apps._cli import build_parser
from bmfdsl.apps._datafiles import DATA_FILES

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RESULTS = REPO / "bench" / "results"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _cited(pattern: str) -> set[tuple[str, str]]:
    """``(document name, match)`` of every match of ``pattern`` in the documents."""
    return {(doc.name, hit) for doc in DOCUMENTS for hit in re.findall(pattern, _text(doc))}


def test_every_results_file_and_bench_script_the_docs_name_exists():
    results = _cited(r"bench/results/([\w./-]+\.(?:md|json))")
    for doc, (stem, suffixes) in _cited(r"bench/results/([\w./-]+)\.\{([\w,]+)\}"):
        results |= {(doc, f"{stem}.{suffix}") for suffix in suffixes.split(",")}
    scripts = _cited(r"bench/(bench_\w+\.py)")
    assert results and scripts
    missing = [(doc, name) for doc, name in results if not (RESULTS / name).is_file()]
    missing += [(doc, name) for doc, name in scripts if not (REPO / "bench" / name).is_file()]
    assert not missing, f"the docs name files that do not exist: {sorted(missing)}"


def _shell_commands(text: str) -> list[str]:
    """Every ``bmfdsl ...`` command of the ``sh`` blocks, continuations joined, comments and
    pipes before it dropped, ``&&`` chains split."""
    commands = []
    for info, body in FENCE.findall(text):
        if info.strip() != "sh":
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0]
            for part in line.split("&&"):
                part = part.split("|")[-1].strip()
                if part.startswith("bmfdsl "):
                    commands.append(part)
    return commands


def test_every_bmfdsl_command_in_the_docs_parses():
    commands = [command for doc in DOCUMENTS for command in _shell_commands(_text(doc))]
    assert len(commands) >= 10
    parser = build_parser()
    for command in commands:
        try:
            parser.parse_args(shlex.split(command)[1:])
        except SystemExit as exit:  # argparse has printed why (--help, --version: code 0)
            if exit.code not in (0, None):
                pytest.fail(f"a documented command does not parse: {command}")


def test_the_data_table_matches_the_checksums_the_command_uses():
    row = re.compile(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{64})` \|$", re.MULTILINE)
    rows = row.findall(_text(REPO / "docs" / "data.md"))
    assert sorted(rows) == sorted((f.path, str(f.size), f.sha256) for f in DATA_FILES)


def test_the_readme_counts_the_fingerprints_the_results_file_holds():
    count = re.search(r"hashes (\d+) seeded\s+answers", _text(REPO / "README.md"))
    assert count is not None
    fingerprints = json.loads(_text(RESULTS / "fingerprints.json"))
    assert int(count.group(1)) == len(fingerprints)


def test_the_readme_quotes_the_latest_mnist_ranks_run():
    """Error and wall seconds of every rank in bench/results/ranks.json, as the README's
    practical-ranks paragraph gives them (``r = 16 67,872 in 3.7 s``)."""
    figure = re.compile(r"r = (\d+)\s+(?:error\s+)?(\d{1,3}(?:,\d{3})*) in (\d+\.\d) s")
    quoted: dict[int, set[tuple[str, str]]] = {}
    for rank, error, seconds in figure.findall(_text(REPO / "README.md")):
        quoted.setdefault(int(rank), set()).add((error, seconds))
    records = json.loads(_text(RESULTS / "ranks.json"))["records"]
    assert records
    for record in records:
        expected = (f"{record['error']:,}", f"{record['wall_seconds']:.1f}")
        # every figure quoted for the rank (not only the last one read)
        assert quoted.get(record["rank"]) == {expected}, f"rank {record['rank']}"
