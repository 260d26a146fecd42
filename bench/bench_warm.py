"""Warm per-call seconds of the default ``factorize`` against ``method="thresholded"`` on sampled
data (issue 26's "time <= thresholded's").

One process; per instance a first call of each method pays imports and compilation, then
``--repeats`` calls of each, alternating, and the fastest of each is reported with our stage
split and the process CPU seconds of our fastest call (the seeds and the bound run in threads
beside the caller: CPU above wall is overlap, CPU near wall means the threads waited for a
core). Every call is ``factorize(A, r, method=M, sample_rows="auto", random_state=0)``; the
answer's digest (``U``, ``V``, error, bound) shows that the answers did not change between runs.

    .venv/bin/python bench/bench_warm.py                  # writes bench/results/warm.{json,md}
    .venv/bin/python bench/bench_warm.py --only blocks_1m --repeats 5 --name warm_1m
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path
from typing import Any

from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"
STAGES = ("sampling", "solve", "seeds", "bls", "als", "bounds")
# name: (generator, m, n, rank, density of make_planted_blocks)
INSTANCES = {
    "sparse_100k": ("sparse", 100_000, 1000, 5, None),
    "blocks_100k": ("blocks", 100_000, 2000, 10, 0.02),
    "blocks_1m": ("blocks", 1_000_000, 500, 10, 0.01),
}


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(INSTANCES), metavar="NAME")
    parser.add_argument("--repeats", type=int, default=3, help="warm calls per method")
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="warm", help="results file stem (default warm)")
    return parser.parse_args()


def _matrix(spec: tuple[Any, ...]) -> Any:
    from bmfdsl import make_planted_blocks, make_sparse_planted

    kind, m, n, rank, density = spec
    if kind == "sparse":
        return make_sparse_planted(m, n, rank, random_state=0)
    return make_planted_blocks(m, n, rank, density=density, random_state=0)[0]


def _digest(result: Any) -> str:
    hasher = hashlib.sha256(result.U.tobytes() + result.V.tobytes())
    hasher.update(f"{result.error} {result.lower_bound}".encode())
    return hasher.hexdigest()[:16]


def _measure(name: str, repeats: int) -> dict[str, Any]:
    from bmfdsl import factorize

    spec = INSTANCES[name]
    A, rank = _matrix(spec), spec[3]
    calls: dict[str, list[tuple[float, float, Any]]] = {"qubo": [], "thresholded": []}
    for method in calls:  # imports and compilation
        factorize(A, rank, method=method, sample_rows="auto", random_state=0)
    for _ in range(repeats):
        for method, timed in calls.items():
            cpu, wall = time.process_time(), time.perf_counter()
            result = factorize(A, rank, method=method, sample_rows="auto", random_state=0)
            timed.append((time.perf_counter() - wall, time.process_time() - cpu, result))
    ours_seconds, ours_cpu, ours = min(calls["qubo"], key=lambda call: call[0])
    thresholded_seconds, _, thresholded = min(calls["thresholded"], key=lambda call: call[0])
    timings = ours.info["timings"]
    return {
        "instance": name,
        "shape": [spec[1], spec[2]],
        "rank": rank,
        "seconds": ours_seconds,
        "cpu_seconds": ours_cpu,
        "thresholded_seconds": thresholded_seconds,
        "ratio": ours_seconds / thresholded_seconds,
        "stages": {stage: timings.get(stage) for stage in STAGES},
        "error": ours.error,
        "thresholded_error": thresholded.error,
        "chosen": (ours.info.get("portfolio") or {}).get("chosen"),
        "digest": _digest(ours),
    }


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    lines = [
        "# Warm seconds of the default `factorize` against `thresholded` (sampled data)",
        "",
        f"`.venv/bin/python bench/bench_warm.py`; {environment['date']}; "
        f"{environment['cpu_count']} CPUs (load average {environment['load_average'][0]:.1f}: "
        f"timings are under load), BLAS threads {environment['blas_threads']}; fastest of "
        f"{payload['repeats']} warm calls each.",
        "",
        "| instance | shape | r | ours s | CPU s | thr. s | ÷ thr. | "
        + " | ".join(STAGES)
        + " | error | thr. error | chosen | digest |",
        "|---|---|---:|---:|---:|---:|---:|" + "---:|" * len(STAGES) + "---:|---:|---|---|",
    ]
    for row in payload["rows"]:
        stages = " | ".join(
            "" if row["stages"][stage] is None else f"{row['stages'][stage]:.3f}"
            for stage in STAGES
        )
        lines.append(
            f"| {row['instance']} | {row['shape'][0]:,} x {row['shape'][1]:,} | {row['rank']} "
            f"| {row['seconds']:.3f} | {row['cpu_seconds']:.3f} "
            f"| {row['thresholded_seconds']:.3f} | {row['ratio']:.2f} | {stages} "
            f"| {row['error']:,} | {row['thresholded_error']:,} | {row['chosen']} "
            f"| `{row['digest']}` |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)
    from bmfdsl.solvers.native import compile_kernels

    compile_kernels()
    rows = [_measure(name, args.repeats) for name in args.only or INSTANCES]
    payload = {"environment": machine(args.blas_threads), "repeats": args.repeats, "rows": rows}
    write_results(args.out, args.name, payload, _markdown(payload))


if __name__ == "__main__":
    main()
