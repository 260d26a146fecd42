"""Time and peak memory of ``bmfdsl.factorize`` on a large sparse matrix: dense vs sparse input.

The matrix is recommender-like: 100,000 x 2,000 at about 1% density (rank-5 planted blocks
plus 0.1% noise), built as CSR without a dense copy. The same matrix is factorized once as
the scipy CSR matrix and once as a dense ``int8`` array (its ``toarray()``), each in a fresh
process: ``factorize(A, 5, sample_rows="auto", random_state=0)`` on the default (native)
solver. Reported per input: wall seconds per stage (untraced run), the ``tracemalloc`` peak
during the call beyond the input (a second, traced run), the process's peak RSS, the input's
size, and whether both inputs gave the same U, V, error and lower bound.

    .venv/bin/python bench/bench_sparse.py                  # writes bench/results/sparse.{json,md}
    .venv/bin/python bench/bench_sparse.py --m 20000 --n 500   # a quick look
    .venv/bin/python bench/bench_sparse.py --m 200000 --n 5000 --inputs sparse --name sparse_large

BLAS runs single-threaded by default (``--blas-threads``): the machine's 2 cores are shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"
STAGES = ("sampling", "compile", "solve", "bls", "als", "bounds", "total")


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=100_000, help="rows (default 100,000)")
    parser.add_argument("--n", type=int, default=2_000, help="columns (default 2,000)")
    parser.add_argument("--rank", type=int, default=5, help="rank (default 5)")
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument(
        "--inputs", default="sparse,dense", help="input kinds to run (default sparse,dense)"
    )
    parser.add_argument("--name", default="sparse", help="results file stem (default sparse)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=("sparse", "dense"), help=argparse.SUPPRESS)
    parser.add_argument("--factors", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def child(args: argparse.Namespace) -> None:
    """One input kind in this (fresh) process; prints one JSON line."""
    import tracemalloc

    import numpy as np

    from bmfdsl import factorize, make_sparse_planted

    A = make_sparse_planted(args.m, args.n, args.rank, random_state=0)
    nnz = int(A.nnz)
    csr_bytes = A.data.nbytes + A.indices.nbytes + A.indptr.nbytes
    # numba loads outside the timings
    warm = make_sparse_planted(3000, 60, args.rank, random_state=1)
    factorize(warm if args.child == "sparse" else warm.toarray(), args.rank, sample_rows="auto")
    if args.child == "dense":
        A = A.toarray()
        input_bytes = A.nbytes
    else:
        input_bytes = csr_bytes
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    start = time.perf_counter()
    result = factorize(A, args.rank, sample_rows="auto", random_state=0)
    seconds = time.perf_counter() - start
    rss_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tracemalloc.start()
    try:
        traced = factorize(A, args.rank, sample_rows="auto", random_state=0)
        traced_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert traced.error == result.error
    np.savez(args.factors, U=result.U, V=result.V)
    timings = result.info["timings"]
    print(
        json.dumps(
            {
                "input": args.child,
                "m": args.m,
                "n": args.n,
                "rank": args.rank,
                "nnz": nnz,
                "density": nnz / (args.m * args.n),
                "input_mib": input_bytes / 2**20,
                "seconds": seconds,
                "stages": {stage: timings.get(stage) for stage in STAGES},
                "tracemalloc_peak_mib": traced_peak / 2**20,
                "rss_peak_mib": rss_peak / 2**20,
                "rss_before_call_mib": rss_before / 2**20,
                "error": result.error,
                "relative_error": result.relative_error,
                "lower_bound": result.lower_bound,
                "backend": result.info.get("backend"),
                "sampled_rows": result.info.get("sampled_rows"),
            }
        )
    )


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)
    if args.child:
        child(args)
        return

    import numpy as np

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.inputs.split(","):
            factors = Path(folder) / f"{kind}.npz"
            command = [sys.executable, __file__, "--child", kind, "--factors", str(factors)]
            command += ["--m", str(args.m), "--n", str(args.n), "--rank", str(args.rank)]
            command += ["--blas-threads", str(args.blas_threads)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{kind} run failed:\n{done.stderr}")
            row = json.loads(done.stdout.strip().splitlines()[-1])
            print(json.dumps(row), flush=True)
            rows.append(row)
        same: bool | None = None  # compared only when both inputs ran
        if len(rows) == 2:
            with (
                np.load(Path(folder) / f"{rows[0]['input']}.npz") as first,
                np.load(Path(folder) / f"{rows[1]['input']}.npz") as second,
            ):
                same = bool(
                    np.array_equal(first["U"], second["U"])
                    and np.array_equal(first["V"], second["V"])
                )
            same = same and all(
                rows[0][key] == rows[1][key] for key in ("error", "lower_bound", "relative_error")
            )
    environment = machine(args.blas_threads)
    payload = {"environment": environment, "identical_results": same, "rows": rows}
    write_results(args.out, args.name, payload, _markdown(payload))


def _same(identical: bool | None) -> str:
    return "not compared (one input)" if identical is None else "yes" if identical else "NO"


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    first = payload["rows"][0]
    lines = [
        "# Sparse vs dense input: time and peak memory of `factorize`",
        "",
        f"`.venv/bin/python bench/bench_sparse.py`; {environment['date']}; "
        f"{environment['platform']}; {environment['cpu_count']} CPUs (shared), BLAS threads "
        f"{environment['blas_threads']}, load average {environment['load_average'][0]:.1f}.",
        "",
        f"A: {first['m']:,} x {first['n']:,}, {first['nnz']:,} ones (density "
        f"{100 * first['density']:.2f}%), planted rank-{first['rank']} blocks plus noise. "
        f"`factorize(A, {first['rank']}, sample_rows='auto', random_state=0)` on the default "
        f"backend (`{first['backend']}`), s = {first['sampled_rows']} sampled rows; each input "
        "in a fresh process. Peak (traced): `tracemalloc` peak during the call, beyond the "
        "input. Peak RSS: the process's maximum resident size, input and interpreter "
        "included. Same U, V, error and lower bound from both inputs: "
        f"**{_same(payload['identical_results'])}**.",
        "",
        "| input | input MiB | total s | sampling | solve | BLS | ALS | bounds "
        "| peak traced MiB | peak RSS MiB | rel. error |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in payload["rows"]:
        stage = row["stages"]

        def seconds(name: str, stage: dict[str, Any] = stage) -> str:
            value = stage.get(name)
            return "" if value is None else f"{value:.2f}"

        lines.append(
            f"| {row['input']} | {row['input_mib']:.1f} | {row['seconds']:.2f} "
            f"| {seconds('sampling')} | {seconds('solve')} | {seconds('bls')} "
            f"| {seconds('als')} | {seconds('bounds')} | {row['tracemalloc_peak_mib']:.1f} "
            f"| {row['rss_peak_mib']:.0f} | {row['relative_error']:.4f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
