"""The portfolio's core solve with and without its work patience: counted work, same answers.

The default ``factorize`` stops its core solve's restarts once they stall for a third of the
default budget (``work_patience``, :func:`bmfdsl.solvers.native.portfolio_work_patience`);
``work_patience=None`` turns that off, which is the run before the rule. Each unsampled
instance (the four UCI sets at r = 2, 5, 10; the whole-matrix families of
``bench_families.py``) is factorized both ways with ``random_state`` fixed: the error (must be
equal), the core solve's work units and restarts (counted: the same on any machine) and the
call's CPU seconds (``time.process_time``, threads included; under load from other jobs).
Sampled runs are left out: their core runs no restart (``num_reads=0``), so the patience
has nothing to stop.

Run from the repository root::

    .venv/bin/python bench/bench_core_work.py      # writes bench/results/core_work.*
    .venv/bin/python bench/bench_core_work.py --uci-only --out /tmp/core_work
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from _machine import machine, write_results

UCI_SETS = ("zoo", "heart", "lymp", "apb")
UCI_RANKS = (2, 5, 10)
#: Whole-matrix families of bench_families.py at most this many entries (the rest sample).
MAX_FAMILY_CELLS = 4_000_000


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    parser.add_argument("--data", default=str(root.parent / "shared" / "data" / "uci-binary"))
    parser.add_argument("--uci-only", action="store_true", help="skip the planted families")
    parser.add_argument("--out", type=Path, default=root / "bench" / "results")
    parser.add_argument("--name", default="core_work")
    return parser.parse_args()


def _instances(args: argparse.Namespace) -> list[tuple[str, Any, int, int]]:
    """``(label, A, rank, seed)`` of every instance (UCI sets missing on disk are skipped)."""
    import numpy as np

    found = []
    for name in UCI_SETS:
        path = Path(args.data) / f"{name}.txt"
        if path.is_file():
            A = np.loadtxt(path, dtype=np.int8)
            found += [(name, A, rank, 0) for rank in UCI_RANKS]
    if not args.uci_only:
        from bench_families import FAMILIES, planted

        for name, m, n, rank, rows, columns, noise, seeds in FAMILIES:
            if m * n <= MAX_FAMILY_CELLS:
                A, _, _ = planted(m, n, rank, rows, columns, noise, seeds[0])
                found.append((f"{name} {m:,} x {n:,}", A, rank, seeds[0]))
    return found


def _run(A: Any, rank: int, seed: int, **params: Any) -> dict[str, Any]:
    from bmfdsl import factorize

    started = time.process_time()
    result = factorize(A, rank, random_state=seed, **params)
    backend = result.info["backend_info"]
    return {
        "error": int(result.error),
        "units": backend["work"]["units"],
        "restarts": backend["restarts"],
        "stopped_by": backend["stopped_by"],
        "cpu_seconds": time.process_time() - started,
    }


def main() -> None:
    args = _parse()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from bmfdsl.solvers.native import compile_kernels

    compile_kernels()
    rows = []
    for label, A, rank, seed in _instances(args):
        before = _run(A, rank, seed, work_patience=None)
        after = _run(A, rank, seed)
        rows.append(
            {"instance": label, "rank": rank, "seed": seed, "before": before, "after": after}
        )
    lines = [
        "# The portfolio's core solve with and without its work patience",
        "",
        f"`.venv/bin/python bench/bench_core_work.py`; {machine('1')['date']}; "
        f"{os.cpu_count()} CPUs shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f}: CPU seconds are under load; work units are counted).",
        "",
        "`factorize(A, r, random_state=seed)` without (`work_patience=None`) and with the "
        "default work patience. Errors must be equal. "
        f"Equal: **{sum(r['before']['error'] == r['after']['error'] for r in rows)} of "
        f"{len(rows)}**.",
        "",
        "| instance | r | error before / after | core units (10⁹) | restarts | stopped by "
        "| CPU s |",
        "|---|---:|---|---|---|---|---|",
    ]
    for row in rows:
        b, a = row["before"], row["after"]
        lines.append(
            f"| {row['instance']} | {row['rank']} | {b['error']:,} / {a['error']:,} "
            f"| {b['units'] / 1e9:.2f} → {a['units'] / 1e9:.2f} | {b['restarts']} → "
            f"{a['restarts']} | {b['stopped_by']} → {a['stopped_by']} "
            f"| {b['cpu_seconds']:.2f} → {a['cpu_seconds']:.2f} |"
        )
    payload = {"environment": machine("1"), "rows": rows}
    write_results(args.out, args.name, payload, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
