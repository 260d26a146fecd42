"""Markdown tables in the paper's layout, our results beside the published values.

For each table and block (``m = 30``, ..., a data set), one row per method we ran and one
row per method of the paper. A cell of ours reads ``mean ± std / paper (difference)``, where
"paper" is the paper's row we compare with (``DA+ALS`` for ``bmfdsl`` and ``qubo:*+als``,
``DA`` for ``qubo:*``, and the same name for the comparison methods).
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.apps._io import write_text_atomic
from bmfdsl.apps.experiments._records import read_json_object, read_records
from bmfdsl.apps.experiments._runner import record_seconds
from bmfdsl.apps.experiments._tables import EXPERIMENTS, paper_method_for
from bmfdsl.errors import InvalidParameterError

PAPER_METHODS: tuple[str, ...] = ("DA", "DA+ALS", "Penalized", "Thresholded", "Baseline")
"""The paper's rows, in its order."""

# Paper values are printed with 4 decimals: a mean within half a unit of the last digit ties.
_TIE = 5e-5


def load_paper_tables() -> dict[tuple[int, str, str, int], float]:
    """The paper's published mean relative errors, from the copy shipped in the package.

    Returns:
        ``{(table, dataset, method, rank): value}``, e.g. ``(5, "mnist", "DA+ALS", 1)``.

    >>> load_paper_tables()[(5, "mnist", "DA+ALS", 1)]
    0.5796
    """
    text = resources.files("bmfdsl").joinpath("data", "paper_tables.csv").read_text("utf-8")
    values = {}
    for row in csv.DictReader(io.StringIO(text)):
        group = f"m={row['m']}" if row["dataset"].startswith(("exact", "bern")) else row["dataset"]
        key = (int(row["table"]), group, row["method"], int(row["rank"]))
        values[key] = float(row["mean_relative_error"])
    return values


def summarize(records: Iterable[Mapping[str, Any]]) -> dict[tuple[int, str, str, int], dict]:
    """Mean, std, count and mean time per ``(table, group, method, rank)`` of ok records."""
    buckets: dict[tuple[int, str, str, int], list[Mapping[str, Any]]] = defaultdict(list)
    for record in records:
        if record.get("status") == "ok":
            key = (int(record["table"]), record["group"], record["method"], int(record["rank"]))
            buckets[key].append(record)
    summary = {}
    for key, items in buckets.items():
        errors = np.array([r["relative_error"] for r in items], dtype=float)
        times = np.array([record_seconds(r) for r in items], dtype=float)
        entry: dict[str, Any] = {
            "mean": float(errors.mean()),
            "std": float(errors.std(ddof=1)) if len(errors) > 1 else 0.0,
            "count": len(errors),
            "time": float(np.nanmean(times)) if np.isfinite(times).any() else float("nan"),
            "certified": sum(record.get("certified_optimal") is True for record in items),
            "gap": _mean_gap(items),
        }
        ari: dict[str, list[float]] = defaultdict(list)
        for record in items:
            for name, value in (record.get("ari") or {}).items():
                ari[name].append(float(value))
        entry["ari"] = {name: (float(np.mean(v)), float(np.std(v))) for name, v in ari.items()}
        summary[key] = entry
    return summary


def _mean_gap(records: Sequence[Mapping[str, Any]]) -> float | None:
    """The mean proven gap ``(error - lower_bound) / error`` (None: no record has one)."""
    gaps = [float(r["gap"]) for r in records if isinstance(r.get("gap"), int | float)]
    return float(np.mean(gaps)) if gaps else None


def order_methods(methods: Iterable[str]) -> list[str]:
    """Our default first, then QUBO pipelines, the paper's comparison methods, the rest.

    >>> order_methods(["baseline", "zeta", "qubo:neal", "bmfdsl-no-onehot", "bmfdsl"])
    ['bmfdsl', 'bmfdsl-no-onehot', 'qubo:neal', 'baseline', 'zeta']
    """
    fixed = ["bmfdsl", "penalized", "thresholded", "baseline"]

    def key(method: str) -> tuple[int, str]:
        if method == "bmfdsl" or method.startswith("bmfdsl-"):
            return (0, method)
        if method.startswith("qubo:"):
            return (1, method)
        if method in fixed:
            return (2, str(fixed.index(method)))
        return (3, method)

    return sorted(set(methods), key=key)


def group_order(groups: Iterable[str]) -> list[str]:
    """Blocks in the paper's order: by m, then data sets by name."""

    def key(group: str) -> tuple[int, Any]:
        return (0, int(group[2:])) if group.startswith("m=") else (1, group)

    return sorted(set(groups), key=key)


def _group_title(group: str) -> str:
    return f"m = {group[2:]}" if group.startswith("m=") else group


def _best(values: Sequence[float | None]) -> float:
    """The smallest value present (``inf`` when none is)."""
    return min((v for v in values if v is not None), default=float("inf"))


def _ranks_in(keys: Iterable[tuple[int, str, str, int]], table: int, group: str) -> list[int]:
    """The ranks of ``keys`` (``(table, group, method, rank)``) in one table's group.

    >>> _ranks_in([(1, "m=30", "bmfdsl", 2), (1, "m=30", "baseline", 1), (2, "m=30", "x", 5)],
    ...           1, "m=30")
    [1, 2]
    """
    return sorted({k[3] for k in keys if k[0] == table and k[1] == group})


@dataclass(frozen=True)
class _Group:
    """One group of one table, as every section of its report reads it."""

    table: int
    group: str
    summary: Mapping[tuple[int, str, str, int], dict]
    paper: Mapping[tuple[int, str, str, int], float]
    methods: Sequence[str]

    @property
    def ranks(self) -> list[int]:
        """The columns: the ranks measured here, else the ranks the paper published."""
        return _ranks_in(self.summary, self.table, self.group) or _ranks_in(
            self.paper, self.table, self.group
        )

    def measured(self, method: str, rank: int) -> dict | None:
        """Our summary of ``method`` at ``rank`` (None: not run)."""
        return self.summary.get((self.table, self.group, method, rank))

    def published(self, method: str, rank: int) -> float | None:
        """The paper's value of ``method`` at ``rank`` (None: not published)."""
        return self.paper.get((self.table, self.group, method, rank))

    def measured_means(self, methods: Iterable[str], rank: int) -> list[float]:
        """Our mean of each of ``methods`` run at ``rank``."""
        return [e["mean"] for m in methods if (e := self.measured(m, rank)) is not None]


def _render_group(group: _Group) -> list[str]:
    ranks = group.ranks
    header = "| Method | compared with | " + " | ".join(f"r = {r}" for r in ranks) + " | time (s) |"
    lines = [header, "|" + "---|" * (len(ranks) + 3)]
    paper_best = {r: _best([group.published(m, r) for m in PAPER_METHODS]) for r in ranks}
    lines += _measured_rows(group, ranks)
    lines += _paper_rows(group, ranks, paper_best)
    lines += _verdict_lines(group, ranks, paper_best)
    lines += _certified_lines(group, ranks)
    lines += _same_instance_lines(group, ranks)
    return lines


def _measured_rows(group: _Group, ranks: Sequence[int]) -> list[str]:
    """A row per method run here: mean ± std (bold where best of ours), the paper's value."""
    ours_best = {r: _best(group.measured_means(group.methods, r)) for r in ranks}
    lines = []
    for method in group.methods:
        reference = paper_method_for(method)
        cells, times = [], []
        for rank in ranks:
            entry = group.measured(method, rank)
            if entry is None:
                cells.append("—")
                continue
            mean = f"{entry['mean']:.4f}"
            if entry["mean"] <= ours_best[rank] + 1e-12:
                mean = f"**{mean}**"
            cell = f"{mean} ± {entry['std']:.4f}"
            published = group.published(reference, rank) if reference else None
            if published is not None:
                cell += f" / {published:.4f} ({entry['mean'] - published:+.4f})"
            cells.append(cell)
            times.append(entry["time"])
        mean_time = f"{np.nanmean(times):.3g}" if times else "—"
        lines.append(
            f"| {method} | {reference or '—'} | " + " | ".join(cells) + f" | {mean_time} |"
        )
    return lines


def _paper_rows(group: _Group, ranks: Sequence[int], paper_best: Mapping[int, float]) -> list[str]:
    """A row per published method, its best values of each column in italics."""
    lines = []
    for method in PAPER_METHODS:
        cells = []
        for rank in ranks:
            value = group.published(method, rank)
            if value is None:
                cells.append("—")
            elif value <= paper_best[rank] + 1e-12:
                cells.append(f"_{value:.4f}_")
            else:
                cells.append(f"{value:.4f}")
        lines.append(f"| {method} (paper) | | " + " | ".join(cells) + " | |")
    return lines


def _verdict_lines(
    group: _Group, ranks: Sequence[int], paper_best: Mapping[int, float]
) -> list[str]:
    """How many columns each method is at or below the paper's best value in."""
    verdicts = []
    for method in group.methods:
        means = {
            r: entry["mean"]
            for r in ranks
            if (entry := group.measured(method, r)) is not None and np.isfinite(paper_best[r])
        }
        if means:
            wins = sum(mean <= paper_best[r] + _TIE for r, mean in means.items())
            verdicts.append(f"{method} {wins}/{len(means)}")
    if not verdicts:
        return []
    return ["", "At or below the paper's best value of the column: " + ", ".join(verdicts) + "."]


def _markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """Lines of a GitHub markdown table.

    >>> _markdown_table(["r", "x"], [["1", "0.5"]])
    ['| r | x |', '|---|---|', '| 1 | 0.5 |']
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


WORSE_MARK = "▲"
"""Marks a lead-view cell where our mean is above the paper's best by more than a tie."""


def _lead_view(group: _Group) -> list[str]:
    """A table to scan first: each bmfdsl method's mean beside the paper's best row.

    One row per rank: our mean, the paper's best value and which of its methods has it, and
    the difference, marked ▲ where ours is worse. The detailed table follows it.
    """
    ours = [m for m in group.methods if m == "bmfdsl" or m.startswith("bmfdsl-")]
    ranks = _ranks_in(group.summary, group.table, group.group)
    if not ours or not ranks:
        return []
    rows = []
    for rank in ranks:
        published = {
            m: value for m in PAPER_METHODS if (value := group.published(m, rank)) is not None
        }
        best_method = min(published, key=published.__getitem__) if published else None
        row = [str(rank)]
        for method in ours:
            entry = group.measured(method, rank)
            if entry is None:
                row.append("—")
                continue
            cell = f"{entry['mean']:.4f}"
            if best_method is not None:
                difference = entry["mean"] - published[best_method]
                mark = f" {WORSE_MARK}" if difference > _TIE else ""
                cell += f" ({difference:+.4f}){mark}"
            row.append(cell)
        row.append("—" if best_method is None else f"{published[best_method]:.4f} ({best_method})")
        rows.append(row)
    header = ["r", *(f"{m} (− paper's best)" for m in ours), "paper's best"]
    return [
        f"Lead view: our mean relative error and its difference to the paper's best row "
        f"({WORSE_MARK}: ours is worse). Details below.",
        "",
        *_markdown_table(header, rows),
        "",
    ]


def _certified_lines(group: _Group, ranks: Sequence[int]) -> list[str]:
    """Per method and rank: runs proven optimal, and the mean proven gap to optimal (methods
    whose records carry lower bounds, or that have any proof)."""
    lines = []
    for method in group.methods:
        entries = [(r, group.measured(method, r)) for r in ranks]
        present = [(r, e) for r, e in entries if e is not None]
        has_gap = any(e.get("gap") is not None for _, e in present)
        if has_gap or any(e["certified"] for _, e in present):
            columns = "; ".join(
                f"r = {r}: {e['certified']}/{e['count']}"
                + ("" if e.get("gap") is None else f" (gap {100 * e['gap']:.1f}%)")
                for r, e in present
            )
            lines.append(f"Proven optimal (mean proven gap), {method} runs: {columns}.")
    return ["", *lines] if lines else []


def _same_instance_lines(group: _Group, ranks: Sequence[int]) -> list[str]:
    """Comparisons that do not depend on which random instances were drawn.

    Our methods all ran on the same instances, so their means compare directly; and the gap
    ``bmfdsl - baseline`` on our instances compares with the paper's ``DA+ALS - Baseline`` on
    its own (the baseline is deterministic, so it measures how hard each instance set is).
    """
    methods = group.methods
    if "bmfdsl" not in methods or all(m.startswith("bmfdsl") for m in methods):
        return []
    ours = {r: entry["mean"] for r in ranks if (entry := group.measured("bmfdsl", r)) is not None}
    others = [m for m in methods if not m.startswith("bmfdsl")]
    wins = sum(mean <= _best(group.measured_means(others, r)) + 1e-12 for r, mean in ours.items())
    lines = [
        "",
        f"Same instances: bmfdsl at or below every non-bmfdsl method run here in {wins}/"
        f"{len(ours)} columns.",
    ]
    gaps = []
    for rank, mean in ours.items():
        baseline = group.measured("baseline", rank)
        da_als = group.published("DA+ALS", rank)
        base = group.published("Baseline", rank)
        if baseline is None or da_als is None or base is None:
            continue
        gap = mean - baseline["mean"]
        gaps.append(f"r = {rank}: {gap:+.4f} vs {da_als - base:+.4f}")
    if gaps:
        lines.append(
            "Gap to the baseline on the same instances, bmfdsl − baseline (ours) vs "
            "DA+ALS − Baseline (paper): " + "; ".join(gaps) + "."
        )
    return lines


def _render_ari(
    table: int,
    group: str,
    summary: Mapping[tuple[int, str, str, int], dict],
    methods: Sequence[str],
) -> list[str]:
    keys = [k for k in summary if k[0] == table and k[1] == group and summary[k]["ari"]]
    if not keys:
        return []
    ranks = sorted({k[3] for k in keys})
    labelings = sorted({name for k in keys for name in summary[k]["ari"]})
    lines = []
    for labeling in labelings:
        lines += [
            "",
            f"Adjusted Rand index of the clusters read off V against {labeling} "
            "(mean ± std; 1 = the known classes exactly):",
            "",
            "| Method | " + " | ".join(f"r = {r}" for r in ranks) + " |",
            "|" + "---|" * (len(ranks) + 1),
        ]
        for method in methods:
            cells = []
            for rank in ranks:
                entry = summary.get((table, group, method, rank))
                value = entry["ari"].get(labeling) if entry else None
                cells.append("—" if value is None else f"{value[0]:.3f} ± {value[1]:.3f}")
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _figure_lines(directory: Path, experiment: str) -> list[str]:
    """A link to the table's error-vs-rank figure, when ``bmfdsl figures`` has drawn it."""
    figure = directory / "figures" / f"{experiment}_error_vs_rank.png"
    if not figure.is_file():
        return []
    return ["", f"![{experiment}: error vs rank](figures/{figure.name})"]


def _load_meta(directory: Path, experiment: str) -> dict[str, Any] | None:
    # an empty or damaged meta.json (a start on a full disk) reads as absent
    return read_json_object(directory / f"{experiment}.meta.json")


def _meta_lines(meta: Mapping[str, Any] | None) -> list[str]:
    if meta is None:
        return []
    versions_found = meta.get("versions")
    versions_map = versions_found if isinstance(versions_found, dict) else {}
    versions = ", ".join(f"{k} {v}" for k, v in sorted(versions_map.items()))
    machine_found = meta.get("machine")
    machine = machine_found if isinstance(machine_found, dict) else {}
    wall = _wall_seconds(meta)
    took = ""
    if wall is not None:
        took = f"; wall time {wall / 60:.1f} min for {meta.get('runs_this_call', '?')} runs"
    return [
        f"Command: `{meta.get('command', '?')}`  ",
        f"Date: {meta.get('date', '?')}{took}; {machine.get('cpu_count', '?')} CPUs; {versions}",
        "",
    ]


def _wall_seconds(meta: Mapping[str, Any] | None) -> float | None:
    wall = (meta or {}).get("wall_seconds")
    if isinstance(wall, int | float) and not isinstance(wall, bool):
        return float(wall)
    return None


def results_files(results_dir: str | os.PathLike[str]) -> list[Path]:
    """The ``<table>.jsonl`` files of a results folder; an error when there are none.

    Raises:
        InvalidParameterError: the folder does not exist, or holds no results file.
    """
    directory = Path(results_dir)
    if not directory.is_dir():
        raise InvalidParameterError(
            f"no results folder {str(directory)!r}; give the --out folder of `bmfdsl experiment`"
        )
    files = [directory / f"{name}.jsonl" for name in EXPERIMENTS]
    found = [path for path in files if path.is_file()]
    if not found:
        raise InvalidParameterError(
            f"no results in {str(directory)!r} (expected files like table1.jsonl, written by "
            "`bmfdsl experiment ... --out DIR`)"
        )
    return found


def render_report(results_dir: str | os.PathLike[str]) -> str:
    """Markdown for every ``<table>.jsonl`` in ``results_dir``, paper values alongside."""
    directory = Path(results_dir)
    paper = load_paper_tables()
    parts = [
        "# Reproduction of Malik et al. (2021), Tables 1-6",
        "",
        "Each cell of ours: mean ± std of the relative error ||A - UVᵀ||²/||A||² over the runs / "
        "the paper's value of the row named under *compared with* (our mean − paper). **Bold**: "
        "the best of our methods in the column. Rows *(paper)* are the published values; "
        "_italics_: the paper's best (underlined in the paper). time: mean seconds per run.",
    ]
    found = False
    metas = {name: _load_meta(directory, name) for name in EXPERIMENTS}
    for name, experiment in EXPERIMENTS.items():
        path = directory / f"{name}.jsonl"
        stored = read_records(path)
        records = stored.records
        if stored.skipped:
            print(stored.skipped_summary(path), file=sys.stderr)
        conflicts = stored.conflicts_summary(path.name)
        if conflicts:
            print(f"warning: {conflicts}", file=sys.stderr)
        if not records and not stored.skipped:
            continue
        found = True
        # One record per run: the last successful one (two overlapping runs may both write).
        ok = list({r["run_id"]: r for r in records if r.get("status") == "ok"}.values())
        failed = {r["run_id"] for r in records if r.get("status") != "ok"}
        failed -= {r["run_id"] for r in ok}
        summary = summarize(ok)
        methods = order_methods(r["method"] for r in ok)
        parts += ["", f"## Table {experiment.number}: {experiment.title}", ""]
        parts += _meta_lines(metas[name])
        counts = sorted({e["count"] for e in summary.values()})
        parts.append(f"Runs: {len(ok)} ok, {len(failed)} failed; runs per cell: {counts}.")
        if stored.skipped:
            parts += ["", f"**Skipped** {stored.skipped_summary(path.name)}."]
        if conflicts:
            parts += ["", f"**Conflicting records** {conflicts}."]
        parts += _figure_lines(directory, name)
        for group in group_order(r["group"] for r in ok):
            parts += ["", f"### {_group_title(group)}", ""]
            view = _Group(experiment.number, group, summary, paper, methods)
            parts += _lead_view(view)
            parts += _render_group(view)
            parts += _render_ari(experiment.number, group, summary, methods)
    if not found:
        parts += ["", f"No results found in {directory} (expected files like table1.jsonl)."]
    walls = [_wall_seconds(meta) for meta in metas.values()]
    if found and all(wall is not None for wall in walls):
        total = sum(wall for wall in walls if wall is not None)
        parts[1:1] = ["", f"Total wall time of the last call of each table: {total / 60:.1f} min."]
    return "\n".join(parts) + "\n"


def write_report(
    results_dir: str | os.PathLike[str], output: str | os.PathLike[str] | None = None
) -> Path:
    """Render the report and write it to ``output`` (default ``results_dir/report.md``).

    Raises:
        InvalidParameterError: ``results_dir`` does not exist, or the output's folder.
    """
    if not Path(results_dir).is_dir():
        results_files(results_dir)  # the error that names the missing folder
    path = Path(output) if output is not None else Path(results_dir) / "report.md"
    if not path.parent.is_dir():
        raise InvalidParameterError(
            f"cannot write the report to {str(path)!r}: no folder {str(path.parent)!r}"
        )
    write_text_atomic(path, render_report(results_dir))
    return path
