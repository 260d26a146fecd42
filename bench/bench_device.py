"""Full-data BLS and ALS on each device: the CPU path against the array path (numpy here; CuPy
where a CUDA GPU and ``bmfdsl[gpu]`` exist), with equal answers required.

Instances: dense planted 0/1 matrices ``min(1, U₀V₀ᵀ)`` with 1% of the entries flipped (U₀ and
V₀ Bernoulli(0.15), built in row chunks so no int64 ``m x n`` temporary exists), at
1,000,000 x 500 and 100,000 x 500 (r = 10) and 500 x 500 (r = 8: small enough for the
CPU path's compiled kernels). The start is the planted ``V₀`` with 10% of its bits flipped:
BLS solves ``U`` for it on all rows (timed as ``bls``), then ALS polishes from that pair
(timed as ``als``: at most 20 solves, stop after 2 without gain). Every device must give the
CPU's ``U``, ``V``, error and ALS history; the script stops with an error otherwise.
``--factorize ROWS`` also times the whole default ``factorize(A, r, sample_rows="auto",
random_state=0, device=D)`` on the ``ROWS x 500`` instance, whose full-data stages run on D.

    .venv/bin/python bench/bench_device.py
    python bench/bench_device.py --rows 1000000 100000 500 --factorize 1000000  # with a GPU

Writes ``bench/results/device.json`` and ``bench/results/device.md`` (``--name`` changes it).
Timings are wall seconds of one run each, taken on whatever else the machine is running.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

# one BLAS thread: the machine is shared, and both CPU devices get the same
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
from _machine import machine, write_results

from bmfdsl import factorize
from bmfdsl.errors import BackendUnavailableError
from bmfdsl.linalg import get_array_module
from bmfdsl.solvers import als, solve_bls_with_error

OUT = Path(__file__).resolve().parent / "results"


def planted(m: int, n: int, rank: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``A`` (``int8``) and the planted ``V₀``."""
    rng = np.random.default_rng(seed)
    U0 = (rng.random((m, rank)) < 0.15).astype(np.float32)
    V0 = (rng.random((n, rank)) < 0.15).astype(np.int8)
    A = np.empty((m, n), dtype=np.int8)
    step = 50_000
    for start in range(0, m, step):
        block = (U0[start : start + step] @ V0.T.astype(np.float32)) > 0
        block ^= rng.random(block.shape, dtype=np.float32) < 0.01
        A[start : start + step] = block
    return A, V0


def devices() -> list[str]:
    found = ["cpu", "numpy"]
    try:
        get_array_module("gpu")
        found.append("gpu")
    except BackendUnavailableError as exc:
        print(f"no GPU row: {exc}", flush=True)
    return found


def gpu_name() -> str:
    cupy = get_array_module("gpu")
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return f"{name.decode() if isinstance(name, bytes) else name} (CuPy {cupy.__version__})"


def synchronize(device: str) -> None:
    if device == "gpu":
        get_array_module("gpu").cuda.Device().synchronize()


def run(A: np.ndarray, V_start: np.ndarray, device: str) -> dict[str, Any]:
    synchronize(device)
    started = time.perf_counter()
    U, bls_error = solve_bls_with_error(A, V_start, device=device)
    synchronize(device)
    bls_seconds = time.perf_counter() - started
    started = time.perf_counter()
    polished = als(A, U, V_start, device=device)
    synchronize(device)
    return {
        "bls_seconds": round(bls_seconds, 3),
        "als_seconds": round(time.perf_counter() - started, 3),
        "bls_error": bls_error,
        "als_error": polished.error,
        "als_solves": polished.solves,
        "history": polished.history,
        "U": polished.U,
        "V": polished.V,
        "bls_U": U,
    }


def run_factorize(A: np.ndarray, rank: int, device: str) -> dict[str, Any]:
    synchronize(device)
    started = time.perf_counter()
    result = factorize(A, rank, sample_rows="auto", random_state=0, device=device)
    synchronize(device)
    timings = result.info["timings"]
    return {
        "seconds": round(time.perf_counter() - started, 3),
        "error": result.error,
        "stages": {k: round(v, 3) for k, v in timings.items() if isinstance(v, float)},
        "U": result.U,
        "V": result.V,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 100_000, 500])
    parser.add_argument("--columns", type=int, default=500)
    parser.add_argument("--factorize", type=int, nargs="*", default=[], metavar="ROWS")
    parser.add_argument("--name", default="device")
    args = parser.parse_args()
    found = devices()
    rows_out = []
    factorize_rows: list[dict[str, Any]] = []
    for m in args.rows:
        rank = 8 if m * args.columns <= 2**18 else 10
        A, V0 = planted(m, args.columns, rank, seed=m)
        flips = np.random.default_rng(1).random(V0.shape) < 0.10
        V_start = (V0 ^ flips).astype(np.int8)
        for device in found:  # numba and CuPy compile at first use: not part of the timing
            run(A[:1000], V_start, device)
        reference: dict[str, Any] | None = None
        for device in found:
            print(f"{m} x {args.columns}, r = {rank}: {device}", flush=True)
            result = run(A, V_start, device)
            if reference is None:
                reference = result
            same = (
                np.array_equal(result["bls_U"], reference["bls_U"])
                and np.array_equal(result["U"], reference["U"])
                and np.array_equal(result["V"], reference["V"])
                and result["history"] == reference["history"]
            )
            if not same:
                raise SystemExit(f"device {device!r} differs from the CPU on {m} rows")
            rows_out.append(
                {
                    "rows": m,
                    "columns": args.columns,
                    "rank": rank,
                    "ones": int(np.count_nonzero(A)),
                    "device": device,
                    "equal_to_cpu": same,
                    **{k: v for k, v in result.items() if k not in ("U", "V", "bls_U")},
                }
            )
        if m in args.factorize:
            factorize_rows += factorize_on_devices(A, rank, found)
        del A
    payload = {
        "command": "python " + " ".join(sys.argv),
        "devices": found,
        "environment": machine(os.environ["OPENBLAS_NUM_THREADS"], gpu="gpu" in found),
        "gpu_name": gpu_name() if "gpu" in found else None,
        "rows": rows_out,
        "factorize": factorize_rows,
    }
    write_results(OUT, args.name, payload, report(payload), indent=1)


def factorize_on_devices(A: np.ndarray, rank: int, found: list[str]) -> list[dict[str, Any]]:
    """The whole default run on each device; every device must give the CPU's answer."""
    for device in found:  # compile and transfer code paths once, outside the timing
        run_factorize(A[:20_000], rank, device)
    rows: list[dict[str, Any]] = []
    reference: dict[str, Any] | None = None
    for device in found:
        print(f"factorize {A.shape[0]} x {A.shape[1]}, r = {rank}: {device}", flush=True)
        result = run_factorize(A, rank, device)
        reference = reference or result
        same = np.array_equal(result["U"], reference["U"]) and np.array_equal(
            result["V"], reference["V"]
        )
        if not same:
            raise SystemExit(f"factorize on {device!r} differs from the CPU")
        rows.append(
            {
                "rows": A.shape[0],
                "columns": A.shape[1],
                "rank": rank,
                "device": device,
                "equal_to_cpu": same,
                **{k: v for k, v in result.items() if k not in ("U", "V")},
            }
        )
    return rows


def report(payload: dict[str, Any]) -> str:
    env = payload["environment"]
    gpu_note = (
        f"A CUDA GPU was available, {payload.get('gpu_name')}: the `gpu` rows ran on it."
        if env["gpu"]
        else "**No GPU was available for this run**: the `gpu` device has no rows; `numpy` is "
        "the array path the GPU runs (the same code with CuPy as the array module)."
    )
    lines = [
        "# Full-data BLS and ALS per device",
        "",
        f"Command: `{payload['command']}`; {env['date']}; {env['platform']}, "
        f"{env['cpu_count']} CPUs ({env['blas_threads']} BLAS thread), load average "
        f"{env['load_average'][0]:.2f} at the end "
        "(the machine was shared: wall times are indicative). One run per cell.",
        "",
        gpu_note,
        "",
        "Start: the planted V₀ with 10% of its bits flipped; `bls` solves U on all rows, `als`"
        " polishes from there. Every row's answer (U after BLS, U and V after ALS, the ALS "
        "history) is identical to the `cpu` row's.",
        "",
        "| rows x columns | r | ones | device | BLS s | ALS s | ALS solves | BLS error | "
        "ALS error | equal to cpu |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in payload["rows"]:
        lines.append(
            f"| {row['rows']:,} x {row['columns']} | {row['rank']} | {row['ones']:,} | "
            f"{row['device']} | {row['bls_seconds']:.3f} | {row['als_seconds']:.3f} | "
            f"{row['als_solves']} | {row['bls_error']:,} | {row['als_error']:,} | "
            f"{'yes' if row['equal_to_cpu'] else 'NO'} |"
        )
    lines += [
        "",
        "On the CPU, `cpu` and `numpy` run the same chunked products beyond the compiled "
        "kernels' size (m n > 2^18 or r > 8), so their times differ by noise there; the small "
        "row shows the compiled kernels against the array path. On a GPU, A goes to the device "
        "once (as int8, kept there for the BLS and every ALS solve while it takes at most a "
        "quarter of the free device memory, else sent chunk by chunk) and only codes and "
        "errors come back.",
        "",
    ]
    if payload["factorize"]:
        lines += [
            "## The whole default run",
            "",
            '`factorize(A, r, sample_rows="auto", random_state=0, device=D)`: the core solve '
            "and its seeds run on the CPU whatever D is; the full-data BLS and ALS of every "
            "candidate run on D. Seconds: wall, and the stages that D changes.",
            "",
            "| rows x columns | r | device | seconds | BLS s | ALS s | error | equal to cpu |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in payload["factorize"]:
            stages = row["stages"]
            lines.append(
                f"| {row['rows']:,} x {row['columns']} | {row['rank']} | {row['device']} | "
                f"{row['seconds']:.2f} | {stages.get('bls', 0.0):.2f} | "
                f"{stages.get('als', 0.0):.2f} | {row['error']:,} | "
                f"{'yes' if row['equal_to_cpu'] else 'NO'} |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
