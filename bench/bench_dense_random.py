"""The default ``factorize`` against the paper's comparison methods on dense random data.

A Bernoulli(``p``) matrix has no structure to find: every method's answer is a few percent
below the empty factorization, and they differ by fractions of a percent. There the
comparison methods see the whole matrix (``sample_rows=None``), where the portfolio runs
them on a row sample of it; this sweep checks that the default is never worse than any of
them on the same input and seed, and not slower than ``thresholded``.

    .venv/bin/python bench/bench_dense_random.py            # writes bench/results/dense_random.*
    .venv/bin/python bench/bench_dense_random.py --quick    # the two smallest instances
    .venv/bin/python bench/bench_dense_random.py --sample-rows auto --name dense_random_auto

Every call runs in this one process (numba compiled once, outside the timings); seconds are
wall time on a machine shared with other jobs, so they are indicative only.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"
METHODS = ("qubo", "baseline", "thresholded", "penalized")

# m, n, r, p
INSTANCES: tuple[tuple[int, int, int, float], ...] = (
    (5_000, 1_000, 5, 0.3),
    (5_000, 1_000, 10, 0.5),
    (10_000, 500, 5, 0.5),
    (10_000, 500, 10, 0.3),
    (5_000, 1_000, 10, 0.2),
    (10_000, 500, 10, 0.6),
)


def run(m: int, n: int, rank: int, p: float, sample_rows: Any, seed: int) -> dict[str, Any]:
    from bmfdsl import factorize, make_bernoulli

    A = make_bernoulli(m, n, p, random_state=seed)
    row: dict[str, Any] = {"m": m, "n": n, "rank": rank, "p": p, "ones": int(A.sum())}
    for method in METHODS:
        started = time.perf_counter()
        result = factorize(A, rank, method=method, sample_rows=sample_rows, random_state=seed)
        row[method] = {"error": result.error, "seconds": time.perf_counter() - started}
        if method == "qubo":
            row[method]["portfolio"] = result.info.get("portfolio", {}).get("errors")
    best = min(row[method]["error"] for method in METHODS[1:])
    row["loss"] = row["qubo"]["error"] > best
    row["ratio_best"] = row["qubo"]["error"] / best
    return row


def markdown(payload: dict[str, Any]) -> str:
    lines = [
        "# Dense random Bernoulli(p) data: the default against the comparison methods",
        "",
        f"`sample_rows={payload['sample_rows']!r}`, seed {payload['seed']}; "
        f"{payload['environment']['date']}, {payload['environment']['cpu_count']} CPUs shared "
        f"with other jobs (load {payload['environment']['load_average'][0]:.1f}: seconds are "
        "under load). Errors are ||A - UVᵀ||²; ours ÷ best: the default over the best method.",
        "",
        "| m x n | r | p | ours | baseline | thresholded | penalized | ours ÷ best "
        "| s ours | s thr | s base | s pen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in payload["rows"]:
        lines.append(
            f"| {row['m']:,} x {row['n']:,} | {row['rank']} | {row['p']} "
            f"| {row['qubo']['error']:,} | {row['baseline']['error']:,} "
            f"| {row['thresholded']['error']:,} | {row['penalized']['error']:,} "
            f"| {row['ratio_best']:.5f}{' **loss**' if row['loss'] else ''} "
            f"| {row['qubo']['seconds']:.2f} | {row['thresholded']['seconds']:.2f} "
            f"| {row['baseline']['seconds']:.2f} | {row['penalized']['seconds']:.2f} |"
        )
    losses = sum(row["loss"] for row in payload["rows"])
    lines += ["", f"{losses} losses of {len(payload['rows'])}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the two smallest instances")
    parser.add_argument("--sample-rows", default=None, help="None (default), 'auto' or an int")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--name", default="dense_random", help="results file stem")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)
    sample_rows: Any = args.sample_rows
    if sample_rows == "None":
        sample_rows = None
    elif sample_rows not in (None, "auto"):
        sample_rows = int(sample_rows)
    import numpy as np

    from bmfdsl import factorize

    factorize(np.eye(4, dtype=np.int8), 2, random_state=0)  # numba's start, outside timings
    instances = INSTANCES[:2] if args.quick else INSTANCES
    started = time.perf_counter()
    rows = []
    for m, n, rank, p in instances:
        rows.append(run(m, n, rank, p, sample_rows, args.seed))
        print(rows[-1], flush=True)
    payload = {
        "environment": machine(args.blas_threads),
        "sample_rows": sample_rows,
        "seed": args.seed,
        "seconds": time.perf_counter() - started,
        "rows": rows,
    }
    write_results(args.out, args.name, payload, markdown(payload))


if __name__ == "__main__":
    main()
