"""Strong scaling of ``factorize`` on a ``dask.array`` on a local ``distributed`` cluster:
the same matrix with 1 and 2 worker processes (issue 26.3).

The matrix is made and persisted on the cluster (``da.random``: no numpy data travels in a
graph), then ``factorize(A, r, random_state=0)`` runs on it (sampled, as a dask input always
is: leverage scores, core solve, blockwise BLS and ALS). Recorded per worker count: wall
seconds per stage, the speed-up over one worker, the largest task graph sent (and whether
``distributed`` warned about a large one), and that every run gives the same answer.

    .venv/bin/python bench/bench_dask.py                       # writes bench/results/dask.{json,md}
    .venv/bin/python bench/bench_dask.py --m 200000 --workers 1,2,4

Each worker has one thread; BLAS in the workers runs single-threaded.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=1_000_000, help="rows (default 1,000,000)")
    parser.add_argument("--n", type=int, default=40, help="columns (default 40)")
    parser.add_argument("--rank", type=int, default=5, help="rank (default 5)")
    parser.add_argument("--blocks", type=int, default=16, help="row blocks (default 16)")
    parser.add_argument("--workers", default="1,2", help="worker counts (default 1,2)")
    parser.add_argument("--name", default="dask", help="results file stem (default dask)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args()


def _run(args: argparse.Namespace, workers: int) -> dict[str, Any]:
    import dask.array as da
    import distributed
    import numpy as np

    from bmfdsl import factorize

    with (
        distributed.LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        chunk = -(-args.m // args.blocks)
        A = (
            da.random.RandomState(0).random_sample((args.m, args.n), chunks=(chunk, args.n)) < 0.3
        ).astype(np.int8)
        A = A.persist()
        distributed.wait(A)
        client.run(lambda: __import__("bmfdsl").factorize(np.eye(8, 4), 2, random_state=0))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            started = time.perf_counter()
            result = factorize(A, args.rank, random_state=0)
            seconds = time.perf_counter() - started
        large = [str(w.message).splitlines()[0] for w in caught if "large graph" in str(w.message)]
        return {
            "workers": workers,
            "seconds": seconds,
            "stages": result.info["timings"],
            "error": int(result.error),
            "lower_bound": int(result.lower_bound),
            "relative_error": result.relative_error,
            "large_graph_warnings": large,
            "U_digest": int(np.asarray(result.U, dtype=np.int64).sum()),
        }


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    first = payload["rows"][0]
    lines = [
        "# Strong scaling of `factorize` on a dask array (local distributed cluster)",
        "",
        f"`.venv/bin/python bench/bench_dask.py`; {environment['date']}; "
        f"{environment['platform']}; {environment['cpu_count']} CPUs shared with other jobs "
        f"(load average {environment['load_average'][0]:.1f}): seconds are rough.",
        "",
        f"A: {payload['m']:,} x {payload['n']} Bernoulli(0.3), {payload['blocks']} row blocks, "
        "made and persisted on the cluster; "
        f"`factorize(A, {payload['rank']}, random_state=0)` (sampled: leverage scores, "
        "core solve, blockwise BLS and ALS). One thread per worker process. Same answer on "
        f"every worker count: **{'yes' if payload['identical'] else 'NO'}**; large-graph "
        f"warnings: **{sum(len(r['large_graph_warnings']) for r in payload['rows'])}**.",
        "",
        "| workers | total s | speed-up | sampling | solve | BLS | ALS | bounds | rel. error |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in payload["rows"]:
        stages = row["stages"]
        lines.append(
            f"| {row['workers']} | {row['seconds']:.1f} "
            f"| {first['seconds'] / row['seconds']:.2f} | {stages.get('sampling', 0):.1f} "
            f"| {stages.get('solve', 0):.1f} | {stages.get('bls', 0):.1f} "
            f"| {stages.get('als', 0):.1f} | {stages.get('bounds', 0):.2f} "
            f"| {row['relative_error']:.4f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    counts = [int(part) for part in args.workers.split(",")]
    rows = [_run(args, workers) for workers in counts]
    keys = ("error", "lower_bound", "U_digest")
    identical = all(all(row[key] == rows[0][key] for key in keys) for row in rows)
    payload = {
        "environment": machine("1 per worker"),
        "m": args.m,
        "n": args.n,
        "rank": args.rank,
        "blocks": args.blocks,
        "identical": identical,
        "rows": rows,
    }
    write_results(args.out, args.name, payload, _markdown(payload))


if __name__ == "__main__":
    main()
