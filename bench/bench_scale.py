"""The default ``factorize`` against the paper's comparison methods at every size and rank.

Instances (each ``(instance, method)`` in a fresh process, so that peak RSS is its own):

* the four UCI binary sets (``--data``, default ``../shared/data/uci-binary``; skipped when
  absent) at k = 2, 5, 10 (integer product), against ``baseline``, ``thresholded`` and
  ``penalized``;
* ``make_sparse_planted`` and ``make_planted_blocks`` (blocks of varying size, overlaps, ones
  removed and added) at 10⁵ rows (500-2,000 columns, r = 5 and 10: all four pairs), 10⁶
  rows (one instance of each generator) and 5·10⁶ rows (``make_sparse_planted`` x 1,000 at
  r = 5, 53 M ones: 2,000 columns would double the four calls' time on this shared 2-core
  machine; ``--large`` adds 5·10⁶ x 2,000 at r = 5 and 10 for a bigger host), sampled
  with ``sample_rows="auto"``; both return their planted factors, so the
  planted error is known;
* dense numpy arrays (``make_planted_blocks`` at 30% density, ``toarray()``): 60,000 x 400 at
  r = 5, and 30,000 x 300 at r = 12 (up to 4,096 codes a dense row in every exact BLS);
* a ``dask.array`` of ``make_sparse_planted`` 10⁶ x 200 at r = 5 (dense ``int8``, 8 row
  blocks, persisted) on a ``distributed.LocalCluster`` of 2 one-thread workers in this
  process (``processes=False``: worker processes would each need their own copy of the
  200 MB and their own numba compilation on 2 shared cores); every method gets the dask
  array (``bench/bench_dask.py`` measures worker processes and strong scaling).

Columns: our error ÷ the planted error, ÷ thresholded's, ÷ baseline's and ÷ the best
classical method's; wall seconds (ours and thresholded's) and our stage split; peak RSS.
Every call is ``factorize(A, r, method=..., sample_rows=..., random_state=0)``, timed after one
warm-up call like it on a smaller matrix of its kind in the same process (its time is reported
too: a process's first call loads the modules and kernels its route needs, which no later call
pays).

    .venv/bin/python bench/bench_scale.py                 # writes bench/results/scale.{json,md}
    .venv/bin/python bench/bench_scale.py --quick         # 10⁵ rows only, no UCI
    .venv/bin/python bench/bench_scale.py --only sparse_planted --rows 5000000 --name scale_5m
    python bench/bench_scale.py --large --rows 5000000 --columns 2000 --name scale_5m_device

BLAS runs single-threaded by default (``--blas-threads``): the machine's 2 cores are shared,
and multi-threaded BLAS under that load made a 250 x 1,000 NMF 25x slower.
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
DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "uci-binary"
METHODS = ("qubo", "thresholded", "baseline", "penalized")
CLASSICAL = METHODS[1:]
STAGES = ("gram", "sampling", "compile", "solve", "seeds", "bls", "als", "bounds")
UCI_SETS = ("zoo", "heart", "lymp", "apb")

# (name, generator, m, n, rank, density of make_planted_blocks)
PLANTED = (
    ("sparse_planted", "sparse", 100_000, 1000, 5, None),
    ("sparse_planted", "sparse", 100_000, 2000, 10, None),
    ("planted_blocks", "blocks", 100_000, 500, 5, 0.02),
    ("planted_blocks", "blocks", 100_000, 2000, 10, 0.02),
    ("sparse_planted", "sparse", 1_000_000, 1000, 5, None),
    ("planted_blocks", "blocks", 1_000_000, 500, 10, 0.01),
    ("dense_blocks", "dense", 60_000, 400, 5, 0.3),
    ("dense_blocks", "dense", 30_000, 300, 12, 0.3),  # high rank: 4,096 codes a dense row
    ("sparse_planted", "sparse", 5_000_000, 1000, 5, None),
    ("dask_planted", "dask", 1_000_000, 200, 5, None),
)
# the issue's own largest case, 106 M ones: opt-in (``--large``), for a host with the memory
# and cores (about 5 GB a call; four calls take minutes on a shared 2-core machine)
LARGE = (
    ("sparse_planted", "sparse", 5_000_000, 2000, 5, None),
    ("sparse_planted", "sparse", 5_000_000, 2000, 10, None),
)
INSTANCES = (*UCI_SETS, *sorted({name for name, *_ in PLANTED}))
DASK_WORKERS = 2
WARM_UP_ROWS = 40_000
DASK_BLOCKS = 8


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of the UCI sets")
    parser.add_argument("--quick", action="store_true", help="10⁵ rows only, no UCI sets")
    parser.add_argument(
        "--only", nargs="+", choices=INSTANCES, metavar="NAME",
        help=f"run only these instances (any of: {', '.join(INSTANCES)})",
    )  # fmt: skip
    parser.add_argument(
        "--rows", nargs="+", type=int, metavar="M",
        help="run only the planted instances with these row counts (e.g. 1000000 5000000)",
    )  # fmt: skip
    parser.add_argument(
        "--columns", nargs="+", type=int, metavar="N",
        help="run only the planted instances with these column counts",
    )  # fmt: skip
    parser.add_argument(
        "--large", action="store_true",
        help="add the 5,000,000 x 2,000 instances (r = 5 and 10; about 5 GB a call)",
    )  # fmt: skip
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--name", default="scale", help="results file stem (default scale)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # a JSON instance spec
    return parser.parse_args()


def _instance(spec: dict[str, Any]) -> tuple[Any, int | None]:
    """The matrix of ``spec`` and its planted error (``None`` for real data)."""
    import numpy as np

    from bmfdsl import make_planted_blocks, make_sparse_planted
    from bmfdsl.linalg import as_matrix

    kind = spec["kind"]
    if kind == "uci":
        return np.loadtxt(Path(spec["path"]), dtype=np.int8), None
    m, n, rank = spec["m"], spec["n"], spec["rank"]
    seed = spec.get("seed", 0)
    if kind in ("sparse", "dask"):
        A, U, V = make_sparse_planted(m, n, rank, random_state=seed, return_factors=True)
    else:
        A, U, V = make_planted_blocks(m, n, rank, density=spec["density"], random_state=seed)
    planted = as_matrix(A).squared_error(U, V)
    return (A.toarray() if kind in ("dense", "dask") else A), int(planted)


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One factorize call of ``spec`` in this (fresh) process."""
    from bmfdsl.solvers.native import compile_kernels

    A, planted = _instance(spec)
    compile_kernels()  # numba loads outside the timings
    small = _warm_up_matrix(spec)
    if spec["kind"] == "dask":
        (_, warm_up), (result, seconds) = _on_cluster([small, A], spec)
    else:
        warm_up = _timed_factorize(small, spec)[1]
        result, seconds = _timed_factorize(A, spec)
    timings = result.info["timings"]
    portfolio = result.info.get("portfolio") or {}
    return {
        **spec,
        "planted_error": planted,
        "error": result.error,
        "relative_error": result.relative_error,
        "seconds": seconds,
        "warm_up_seconds": warm_up,
        "stages": {stage: timings.get(stage) for stage in STAGES},
        "rss_peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "sampled_rows": result.info.get("sampled_rows"),
        "portfolio_chosen": portfolio.get("chosen"),
    }


def _warm_up_matrix(spec: dict[str, Any]) -> Any:
    """A matrix of ``spec``'s kind for one call before the timed one: the same generator,
    columns and rank on at most :data:`WARM_UP_ROWS` rows (past 2¹⁵ where the instance is, so
    the same sampling route; dask's on the same cluster, so the same route there too), or a
    60 x 30 slice of the UCI set. The process's first call loads the modules and numba
    kernels its route needs (for the default: dimod, networkx, the sampling kernels:
    0.2-0.4 s; on a machine whose numba cache is empty, their compilation: 1-3 s), once per
    process, not per call, so that stays out of the timed call and is reported beside it."""
    import numpy as np

    if spec["kind"] == "uci":
        return np.loadtxt(Path(spec["path"]), dtype=np.int8)[:60, :30]
    return _instance({**spec, "m": min(spec["m"], WARM_UP_ROWS), "seed": 1})[0]


def _timed_factorize(A: Any, spec: dict[str, Any]) -> tuple[Any, float]:
    from bmfdsl import factorize

    start = time.perf_counter()
    result = factorize(
        A, spec["rank"], method=spec["method"], sample_rows=spec["sample_rows"], random_state=0
    )
    return result, time.perf_counter() - start


def _on_cluster(matrices: list[Any], spec: dict[str, Any]) -> list[tuple[Any, float]]:
    """``factorize`` of each matrix in turn as a persisted ``dask.array`` on one in-process
    LocalCluster."""
    import dask.array as da
    import distributed

    timed = []
    with (
        distributed.LocalCluster(
            n_workers=DASK_WORKERS, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster),
    ):
        for A in matrices:
            chunk = -(-A.shape[0] // DASK_BLOCKS)
            array = da.from_array(A, chunks=(chunk, A.shape[1])).persist()
            distributed.wait(array)
            timed.append(_timed_factorize(array, spec))
            del array
    return timed


def _specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    specs = []
    if not args.quick and args.rows is None and args.columns is None and args.data.is_dir():
        for name in UCI_SETS:
            if args.only and name not in args.only:
                continue
            for rank in (2, 5, 10):
                specs.append(
                    {"instance": name, "kind": "uci", "path": str(args.data / f"{name}.txt"),
                     "m": None, "n": None, "rank": rank, "density": None, "sample_rows": None}
                )  # fmt: skip
    for name, kind, m, n, rank, density in PLANTED + (LARGE if args.large else ()):
        if args.quick and m > 100_000:
            continue
        if (args.only and name not in args.only) or (args.rows and m not in args.rows):
            continue
        if args.columns and n not in args.columns:
            continue
        specs.append(
            {"instance": name, "kind": kind, "m": m, "n": n, "rank": rank,
             "density": density, "sample_rows": "auto"}
        )  # fmt: skip
    return specs


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    rows = []
    started = time.perf_counter()
    for spec in _specs(args):
        cell = {}
        for method in METHODS:
            command = [sys.executable, __file__, "--child", json.dumps({**spec, "method": method})]
            command += ["--blas-threads", str(args.blas_threads)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode:
                raise SystemExit(f"{spec} {method} failed:\n{done.stderr}")
            cell[method] = json.loads(done.stdout.strip().splitlines()[-1])
        row = _row(cell)
        print(json.dumps(row), flush=True)
        rows.append(row)
    payload = {
        "environment": machine(args.blas_threads),
        "command": " ".join(["bench/bench_scale.py", *sys.argv[1:]]),
        "seconds": time.perf_counter() - started,
        "rows": rows,
    }
    write_results(args.out, args.name, payload, _markdown(payload))


def _row(cell: dict[str, dict[str, Any]]) -> dict[str, Any]:
    ours = cell["qubo"]
    best = min(cell[method]["error"] for method in CLASSICAL)
    return {
        "instance": ours["instance"],
        "shape": None if ours["m"] is None else [ours["m"], ours["n"]],
        "rank": ours["rank"],
        "sampled_rows": ours["sampled_rows"],
        "planted_error": ours["planted_error"],
        "errors": {method: cell[method]["error"] for method in METHODS},
        "relative_error": ours["relative_error"],
        "vs_planted": _ratio(ours["error"], ours["planted_error"]),
        "vs_thresholded": _ratio(ours["error"], cell["thresholded"]["error"]),
        "vs_baseline": _ratio(ours["error"], cell["baseline"]["error"]),
        "vs_best_classical": _ratio(ours["error"], best),
        "seconds": {method: cell[method]["seconds"] for method in METHODS},
        "warm_up_seconds": {method: cell[method]["warm_up_seconds"] for method in METHODS},
        "stages": ours["stages"],
        "rss_peak_mib": {method: cell[method]["rss_peak_mib"] for method in METHODS},
        "portfolio_chosen": ours["portfolio_chosen"],
    }


def _ratio(value: int, reference: int | None) -> float | None:
    if reference is None:
        return None
    return float("inf") if reference == 0 and value else value / max(reference, 1)


def _number(value: float | None, digits: int = 3) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    rows = payload["rows"]
    losses = sum(1 for row in rows if row["vs_best_classical"] > 1)
    lines = [
        "# The default `factorize` against the comparison methods at every size and rank",
        "",
        f"`.venv/bin/python {payload.get('command', 'bench/bench_scale.py')}`; "
        f"{environment['date']}; "
        f"{environment['platform']}; {environment['cpu_count']} CPUs shared with other jobs "
        f"(load average {environment['load_average'][0]:.1f}: timings are under load), BLAS "
        f"threads {environment['blas_threads']}; {payload['seconds']:.0f} s in all.",
        "",
        "`factorize(A, r, method=M, sample_rows=S, random_state=0)`, M = the default (`qubo`, "
        "native backend, with the seed portfolio) or a comparison method; S = `None` for the "
        "UCI sets, `'auto'` otherwise. Every call in a fresh process, after one warm-up call "
        "like it on a matrix of its kind (the same generator, columns and rank on at most "
        f"{WARM_UP_ROWS:,} rows, dask's as a dask array on the same cluster; a 60 x 30 slice "
        "of the UCI set): a process's first call loads the modules and kernels its route "
        "needs, once per process (`warm-up s`, ours / thresholded's, is that call's whole "
        "time). Error ratios: ours ÷ the planted factors' error, ÷ thresholded's, ÷ baseline's, "
        "÷ the best of baseline, thresholded and penalized (> 1: a loss). Seconds: wall, ours "
        "and thresholded's; our stages (`gram`: AᵀA, shared by the rank-r leverage scores and "
        "the bound). Peak RSS: ours, in MiB. Losses to the best classical method: "
        f"**{losses}** "
        f"of {len(rows)}. `dask_planted`: every method gets a persisted `dask.array` on an "
        f"in-process LocalCluster of {DASK_WORKERS} one-thread workers ({DASK_BLOCKS} row "
        "blocks); its Gram matrix (200 columns: full-rank scores) is summed in the pass that "
        "checks the input, before any stage, and `sampling` is the scores pass, the draw and "
        "the gather of the core's rows.",
        "",
        "| instance | shape | r | s | error | ÷ planted | ÷ thr. | ÷ base. | ÷ best | "
        "ours s | thr. s | warm-up s | gram | sampling | solve | seeds | BLS | ALS | bounds | "
        "RSS MiB | chosen |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        "---:|---:|---:|---|",
    ]
    for row in rows:
        stage = row["stages"]
        shape = "" if row["shape"] is None else f"{row['shape'][0]:,} x {row['shape'][1]:,}"
        warm_up = row["warm_up_seconds"]
        lines.append(
            f"| {row['instance']} | {shape} | {row['rank']} | {row['sampled_rows'] or ''} "
            f"| {row['errors']['qubo']:,} | {_number(row['vs_planted'])} "
            f"| {_number(row['vs_thresholded'])} | {_number(row['vs_baseline'])} "
            f"| {_number(row['vs_best_classical'])} | {row['seconds']['qubo']:.2f} "
            f"| {row['seconds']['thresholded']:.2f} "
            f"| {warm_up['qubo']:.2f} / {warm_up['thresholded']:.2f} | "
            + " | ".join(
                _number(stage.get(name), 2)
                for name in ("gram", "sampling", "solve", "seeds", "bls", "als", "bounds")
            )
            + f" | {row['rss_peak_mib']['qubo']:.0f} | {row['portfolio_chosen'] or ''} |"
        )
    lines += [
        "",
        "Errors of every method (ours, thresholded, baseline, penalized):",
        "",
    ]
    for row in rows:
        errors = ", ".join(f"{method} {row['errors'][method]:,}" for method in METHODS)
        planted = "" if row["planted_error"] is None else f"; planted {row['planted_error']:,}"
        lines.append(f"- {row['instance']} r={row['rank']}: {errors}{planted}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
