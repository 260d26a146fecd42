"""The side stages of ``factorize`` on large sparse matrices: leverage-score sampling and the
lower bound, as a share of the whole call (issue 26.2: at most 5% each).

Each case runs ``factorize(A, r, sample_rows="auto", random_state=0)`` on
``make_sparse_planted(m, n, r, random_state=0)`` in a fresh process and records the stage
split, the lower bound and the counted work of the two side stages: the pairs of ones the
exact Gram matrix sums (``Σ nnz_i²``, once, shared by both stages now), and the dense
``n x n`` factorizations they need (now one Cholesky each, ``n³/3``; before, the sampling
took all eigenpairs, about ``9 n³``, and the bound either all eigenvalues of the Gram matrix or,
over its budget, a sum over row blocks).

    .venv/bin/python bench/bench_bounds.py                     # the default cases
    .venv/bin/python bench/bench_bounds.py --cases 100000x1000x5
    .venv/bin/python bench/bench_bounds.py --baseline /tmp/old # also run an older checkout

``--baseline PATH`` runs the same cases with the package found at ``PATH`` (e.g. an older
commit exported by ``git archive``), for a before/after table from the same session.
Timings are wall seconds on whatever machine runs it; the counts do not depend on it. BLAS
runs single-threaded by default (``--blas-threads``): on a shared machine two BLAS threads
made the dense ``n x n`` steps several times slower.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CASES = "100000x1000x5,100000x2000x10,1000000x1000x5"


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="MxNxR,... (default: %(default)s)")
    parser.add_argument("--baseline", type=Path, help="an older package root to compare with")
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--name", default="bounds", help="results file stem (default bounds)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    return parser.parse_args()


def child(case: str) -> None:
    """One case in this (fresh) process; prints one JSON line."""
    import numpy as np

    from bmfdsl import factorize, make_sparse_planted

    m, n, rank = (int(part) for part in case.split("x"))
    A = make_sparse_planted(m, n, rank, random_state=0)
    factorize(A[:3000], rank, sample_rows="auto", random_state=0)  # numba kernels loaded
    started = time.perf_counter()
    result = factorize(A, rank, sample_rows="auto", random_state=0)
    seconds = time.perf_counter() - started
    timings = result.info["timings"]
    row_counts = np.diff(A.indptr).astype(np.float64)
    row = {
        "m": m,
        "n": n,
        "rank": rank,
        "nnz": int(A.nnz),
        "seconds": seconds,
        "stages": timings,
        "error": int(result.error),
        "lower_bound": int(result.lower_bound),
        "gram_pairs": float(row_counts @ row_counts),
        "cholesky_flops": n**3 / 3,
        "eigh_flops": 9 * n**3,
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(row))


def _run(case: str, root: Path | None, blas_threads: str) -> dict[str, Any]:
    environment = dict(os.environ)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        environment[name] = blas_threads
    if root is not None:
        environment["PYTHONPATH"] = str(root)
    output = subprocess.run(
        [sys.executable, __file__, "--child", case],
        check=True,
        capture_output=True,
        text=True,
        env=environment,
        cwd=root or Path(__file__).resolve().parent.parent,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def _share(row: dict[str, Any], stage: str) -> float:
    return 100 * row["stages"].get(stage, 0.0) / row["stages"]["total"]


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    lines = [
        "# Sampling and lower bound: their share of `factorize` on large sparse matrices",
        "",
        f"`.venv/bin/python bench/bench_bounds.py`; {environment['date']}; "
        f"{environment['platform']}; {environment['cpu_count']} CPUs (shared with other "
        f"jobs: load average {environment['load_average'][0]:.1f}), BLAS threads "
        f"{environment['blas_threads']}; seconds are rough, the shares and counts are what "
        "to read. `baseline`: the code before (commit 772eac5, `--baseline`).",
        "",
        "`factorize(A, r, sample_rows='auto', random_state=0)` on "
        "`make_sparse_planted(m, n, r, random_state=0)`, each case in a fresh process after a "
        "warm-up call. Gram pairs: `Σ nnz_i²`, the work of the exact `AᵀA`, computed once "
        "for both stages: its own column `gram` now (inside `sampling` before). Sampling now: "
        "rank-r leverage scores from the top Lanczos pairs of the Gram matrix (which the "
        "bound reuses) and one sparse `A`-times-`n x r` product; before, a Cholesky inverse "
        "(`n³/3` flops) and `Σ nnz_i²` quadratic-form terms.",
        "",
        "| code | m x n, r | nnz | total s | gram s (%) | sampling s (%) | bounds s (%) "
        "| lower bound | error | Gram pairs | peak RSS MiB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, rows in payload["runs"].items():
        for row in rows:
            stages = row["stages"]
            lines.append(
                f"| {label} | {row['m']:,} x {row['n']:,}, {row['rank']} | {row['nnz']:,} "
                f"| {stages['total']:.1f} | {stages.get('gram', 0):.2f} "
                f"({_share(row, 'gram'):.0f}%) | {stages.get('sampling', 0):.2f} "
                f"({_share(row, 'sampling'):.0f}%) | {stages.get('bounds', 0):.2f} "
                f"({_share(row, 'bounds'):.0f}%) | {row['lower_bound']:,} | {row['error']:,} "
                f"| {row['gram_pairs']:.2e} | {row['rss_peak_mib']:.0f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    if args.child:
        child(args.child)
        return
    cases = [case.strip() for case in args.cases.split(",") if case.strip()]
    threads = args.blas_threads
    runs: dict[str, list[dict[str, Any]]] = {"this": [_run(c, None, threads) for c in cases]}
    if args.baseline is not None:
        runs["baseline"] = [_run(case, args.baseline, threads) for case in cases]
    payload = {"environment": machine(threads), "cases": cases, "runs": runs}
    write_results(args.out, args.name, payload, _markdown(payload))


if __name__ == "__main__":
    main()
