"""Timing of the classical algorithms: baseline, thresholded, penalized, sampling, BLS, ALS.

Run from the repository root::

    .venv/bin/python bench/bench_methods.py            # writes bench/results/methods.{json,md}
    .venv/bin/python bench/bench_methods.py --quick    # m = 2,000 only, no 1,000,000 BLS

Instances have n = 30 columns and rank r = 5, as in the paper. ``bernoulli`` is Bernoulli(0.5)
data; ``planted`` has an exact rank-5 factorization (U ~ Bernoulli(0.7), every row of V has one
1, so U Vᵀ is 0/1). The methods run on the full matrix (no row sampling). "pipeline" is the
paper's sampled pipeline with a classical core solver: leverage-score sampling of s = 30 rows,
thresholded BMF of the 30 x 30 core, BLS for the full U, ALS (<= 20 solves, patience 2).

BLAS runs single-threaded by default (``--blas-threads``): the development machine has 2 cores
shared by several jobs, where multi-threaded BLAS is both slower and noisier.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from pathlib import Path
from typing import Any

from _machine import machine, write_results

PAPER_SECONDS = {  # Malik et al. 2021, section "Discussion", m = 50,000, r = 5, means
    "penalized": 39.0,
    "thresholded": 289.0,
    "als": 66.0,
}


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="m = 2,000 only")
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args()


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)

    import numpy as np  # after the thread settings

    from bmfdsl.linalg import relative_error
    from bmfdsl.pipeline import sample_rows
    from bmfdsl.pipeline._sampling import choose_sample_size
    from bmfdsl.solvers import als, solve_bls_with_error
    from bmfdsl.solvers.methods import baseline, penalized, thresholded

    def planted(m: int, rng: np.random.Generator) -> np.ndarray:
        U = (rng.random((m, 5)) < 0.7).astype(np.int8)
        V = np.eye(5, dtype=np.int8)[rng.integers(0, 5, 30)]
        return np.ascontiguousarray(U @ V.T)

    def bernoulli(m: int, rng: np.random.Generator) -> np.ndarray:
        return (rng.random((m, 30)) < 0.5).astype(np.int8)

    def timed(function: Any, *arguments: Any, **keywords: Any) -> tuple[Any, float]:
        start = time.perf_counter()
        value = function(*arguments, **keywords)
        return value, time.perf_counter() - start

    def error_of(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
        residual = A.astype(np.int64) - U.astype(np.int64) @ V.T.astype(np.int64)
        return int(np.einsum("ij,ij->", residual, residual))

    # Warm-up: numba compilation (cached on disk) stays out of the timings.
    warm = bernoulli(40, np.random.default_rng(0))
    warm_U, warm_V = thresholded(warm, 2, random_state=0)
    solve_bls_with_error(warm, warm_V)
    als(warm, warm_U, warm_V)

    rows: list[dict[str, Any]] = []
    sizes = [2000] if args.quick else [2000, 50_000]
    for m in sizes:
        for dataset, generate in (("bernoulli", bernoulli), ("planted", planted)):
            A = generate(m, np.random.default_rng(m))
            record = {"m": m, "n": 30, "rank": 5, "dataset": dataset}
            for name, method in (
                ("baseline", baseline),
                ("thresholded", thresholded),
                ("penalized", penalized),
            ):
                (U, V), seconds = timed(method, A, 5, random_state=0)
                rows.append(
                    {
                        **record,
                        "stage": name,
                        "seconds": seconds,
                        "relative_error": relative_error(error_of(A, U, V), A),
                    }
                )
                print(rows[-1], flush=True)
            # The paper's sampled pipeline with a thresholded core.
            s = choose_sample_size(m, 30, 5)
            (indices, _), t_sample = timed(sample_rows, A, s, random_state=0)
            (_, V_core), t_core = timed(thresholded, A[indices], 5, random_state=0)
            (U_full, bls_error), t_bls = timed(solve_bls_with_error, A, V_core)
            polished, t_als = timed(als, A, U_full, V_core)
            for stage, seconds, error in (
                ("sample_rows", t_sample, None),
                ("core_thresholded", t_core, None),
                ("solve_bls", t_bls, bls_error),
                ("als", t_als, polished.error),
                ("pipeline_total", t_sample + t_core + t_bls + t_als, polished.error),
            ):
                rows.append(
                    {
                        **record,
                        "stage": stage,
                        "seconds": seconds,
                        "relative_error": None if error is None else relative_error(error, A),
                        **({"als_solves": polished.solves} if stage == "als" else {}),
                    }
                )
                print(rows[-1], flush=True)

    if not args.quick:  # BLS on a million rows: time and peak memory beyond A itself
        m = 1_000_000
        A = bernoulli(m, np.random.default_rng(1))
        V = (np.random.default_rng(2).random((30, 5)) < 0.5).astype(np.int8)
        tracemalloc.start()
        (_, bls_error), seconds = timed(solve_bls_with_error, A, V)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        U0 = (np.random.default_rng(3).random((m, 5)) < 0.5).astype(np.int8)
        tracemalloc.start()
        polished, als_seconds = timed(als, A, U0, V)
        _, als_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        base = {"m": m, "n": 30, "rank": 5, "dataset": "bernoulli"}
        rows.append(
            {
                **base,
                "stage": "solve_bls",
                "seconds": seconds,
                "peak_mib": peak / 2**20,
                "input_mib": A.nbytes / 2**20,
                "relative_error": relative_error(bls_error, A),
            }
        )
        rows.append(
            {
                **base,
                "stage": "als",
                "seconds": als_seconds,
                "peak_mib": als_peak / 2**20,
                "input_mib": A.nbytes / 2**20,
                "relative_error": relative_error(polished.error, A),
                "als_solves": polished.solves,
            }
        )
        print(rows[-2], rows[-1], sep="\n", flush=True)

    environment = machine(args.blas_threads)
    payload = {"environment": environment, "paper_seconds_m50000_r5": PAPER_SECONDS, "rows": rows}
    write_results(args.out, "methods", payload, _markdown(payload))


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    lines = [
        "# Classical methods: timings (n = 30, r = 5)",
        "",
        f"Command: `.venv/bin/python bench/bench_methods.py`; {environment['date']}; "
        f"{environment['platform']}; {environment['cpu_count']} CPUs, BLAS threads "
        f"{environment['blas_threads']}, load average {environment['load_average'][0]:.1f}.",
        "Methods run on the full matrix; `pipeline_*` stages are the paper's sampled pipeline "
        "(s = 30 leverage-sampled rows, thresholded core, BLS, ALS).",
        "",
        "| m | data | stage | seconds | paper (m = 50,000) | rel. error | peak MiB |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for row in payload["rows"]:
        paper = PAPER_SECONDS.get(row["stage"]) if row["m"] == 50_000 else None
        error = row.get("relative_error")
        cells = [
            f"{row['m']:,}",
            row["dataset"],
            row["stage"],
            f"{row['seconds']:.3f}",
            "" if paper is None else f"<= {paper:.0f}",
            "" if error is None else f"{error:.4f}",
            f"{row['peak_mib']:.1f}" if "peak_mib" in row else "",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
