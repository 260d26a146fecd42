"""Ranks users try: ``factorize`` on MNIST 1,000 x 784 at ranks 12 to 32 (issue 26, item 4).

The first 100 test images of each digit (pixels >= 50), flattened: a 1,000 x 784 matrix.
``factorize(A, r, random_state=0)`` with the defaults at each rank: error, wall and CPU seconds,
the stages, and for ranks beyond 12 the native solver's route (rank-12 portfolio, greedy
extension, local-search ALS). Wall times depend on machine load; the answers do not.

Run from the repository root::

    .venv/bin/python bench/bench_ranks.py                # writes bench/results/ranks.*
    .venv/bin/python bench/bench_ranks.py --ranks 12 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[12, 16, 20, 24, 32, 40])
    parser.add_argument("--per-digit", type=int, default=100, help="MNIST images per digit")
    parser.add_argument("--data-dir", default=None, help="MNIST folder")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args()


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(variable, "1")

    import numpy as np

    from bmfdsl import factorize
    from bmfdsl.apps._datafiles import load_mnist
    from bmfdsl.solvers.native import compile_kernels

    data_dir = args.data_dir or os.environ.get("BMFDSL_DATA_DIR")
    if data_dir is None and (Path(__file__).resolve().parents[2] / "shared" / "data").is_dir():
        data_dir = str(Path(__file__).resolve().parents[2] / "shared" / "data")
    images, _ = load_mnist(data_dir, per_digit=args.per_digit)
    A = images.reshape(len(images), -1).astype(np.int8)
    compile_kernels()
    records: list[dict[str, Any]] = []
    for rank in args.ranks:
        wall, cpu = time.perf_counter(), time.process_time()
        result = factorize(A, rank, random_state=0)
        backend_info = result.info.get("backend_info", {})
        records.append(
            {
                "rank": rank,
                "error": result.error,
                "relative_error": result.relative_error,
                "wall_seconds": time.perf_counter() - wall,
                "cpu_seconds": time.process_time() - cpu,
                "timings": result.info["timings"],
                "beyond_enumeration": backend_info.get("beyond_enumeration"),
                "work": backend_info.get("work"),
            }
        )
        print(json.dumps(records[-1], default=str), file=sys.stderr, flush=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = [
        "# Ranks users try: MNIST 1,000 x 784",
        "",
        f"`python bench/bench_ranks.py {' '.join(sys.argv[1:])}` on {platform.node()} "
        f"({os.cpu_count()} CPUs shared with other jobs, load average {load:.1f} at the "
        f"end), {time.strftime('%Y-%m-%d')}. `factorize(A, r, random_state=0)`, defaults; "
        "wall seconds depend on the load, the answers do not. `route`: the native solver's "
        "core solve (beyond rank 12: the rank-12 answer, extended, then ALS with local-search "
        "row solves); every seed is then finished on all of `A` by ALS whose row solves are "
        "exact (beyond rank 12 by branch and bound, `bmfdsl.linalg.solve_rows_bounded`).",
        "",
        "| r | error | relative | wall (s) | CPU (s) | route |",
        "|---|---|---|---|---|---|",
    ]
    for record in records:
        beyond = record["beyond_enumeration"]
        route = (
            "exact codes"
            if beyond is None
            else f"rank {beyond['sub_rank']} ({beyond['sub_rank_error']}) + local-search ALS"
        )
        lines.append(
            f"| {record['rank']} | {record['error']} | {record['relative_error']:.4f} "
            f"| {record['wall_seconds']:.1f} | {record['cpu_seconds']:.1f} | {route} |"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"args": {k: str(v) for k, v in vars(args).items()}, "records": records}
    (args.out / "ranks.json").write_text(json.dumps(payload, indent=2, default=str))
    (args.out / "ranks.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
