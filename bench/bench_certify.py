"""How good are bmfdsl's answers? Certified counts and mean proven gaps, Tables 1-5 at m = 30.

For each table (1: exact rank; 2-4: Bernoulli 0.2 / 0.5 / 0.8; 5: MNIST digits, the first
``--images-per-digit`` test images of each digit), rank and instance (the experiment runner's
own instances and seeds, ``bmfdsl`` method), run ``factorize`` with its defaults and then with
``certify=SECONDS`` (the CP-SAT exact engine, ``--search``), and report per cell: runs proven
optimal and the mean proven gap ``(error - bound) / error`` with the cheap bounds only and with
certify, how often certify found a better answer, and the time it took. CP-SAT's budget is
deterministic time (work), so the bounds and answers do not depend on machine load; the wall
times do.

Run from the repository root::

    .venv/bin/python bench/bench_certify.py                 # writes bench/results/certify.*
    .venv/bin/python bench/bench_certify.py --instances 1 --certify 2 --tables 1 3
    # shards (e.g. one per core), then one report from their records:
    .venv/bin/python bench/bench_certify.py --tables 5 --ranks 2 --digits 0 1 2 3 4 --name a
    .venv/bin/python bench/bench_certify.py --tables 5 --ranks 2 --digits 5 6 7 8 9 --name b
    .venv/bin/python bench/bench_certify.py --render bench/results/a.json bench/results/b.json

BLAS runs single-threaded (``--blas-threads``): the development machine has 2 shared cores.
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
    parser.add_argument("--tables", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--instances", type=int, default=2, help="instances per cell (1-4)")
    parser.add_argument("--images-per-digit", type=int, default=10, help="Table 5 (MNIST)")
    parser.add_argument("--digits", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--certify", type=float, default=10.0, help="seconds for CP-SAT")
    parser.add_argument("--name", default="certify", help="output name (NAME.json, NAME.md)")
    parser.add_argument(
        "--render", type=Path, nargs="+", default=None, help="report these records' JSON files"
    )
    parser.add_argument("--blas-threads", default="1", help="BLAS threads (default 1)")
    parser.add_argument("--data-dir", default=None, help="MNIST folder (Table 5)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return parser.parse_args()


def _cell_runs(args: argparse.Namespace, table: int, data_dir: str | None) -> list[Any]:
    from bmfdsl.apps.experiments._runner import plan_runs
    from bmfdsl.apps.experiments._tables import get_experiment

    experiment = get_experiment(f"table{table}")
    mnist = experiment.kind == "mnist"
    tasks = plan_runs(
        experiment,
        sizes=[args.images_per_digit] if mnist else [30],
        ranks=args.ranks,
        trials=1 if mnist else args.instances,
        methods=["bmfdsl"],
        data_dir=data_dir,
    )
    if mnist:  # the first images of the digits asked for
        tasks = [task for task in tasks if task.instance.params["digit"] in args.digits]
    return tasks


def _run(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Factorize every run with the cheap bounds and with certify; one record per run."""
    from bmfdsl import factorize
    from bmfdsl.apps.experiments._runner import build_matrix
    from bmfdsl.apps.experiments._tables import get_experiment, method_settings
    from bmfdsl.solvers.native import compile_kernels

    data_dir = args.data_dir or os.environ.get("BMFDSL_DATA_DIR")
    if data_dir is None and (Path(__file__).resolve().parents[2] / "shared" / "data").is_dir():
        data_dir = str(Path(__file__).resolve().parents[2] / "shared" / "data")
    compile_kernels()
    records = []
    for table in args.tables:
        experiment = get_experiment(f"table{table}")
        for task in _cell_runs(args, table, data_dir):
            A, _ = build_matrix(experiment, task)
            settings = method_settings(experiment, "bmfdsl", A.shape[0], task.seed)
            options = {"one_hot": settings.one_hot, "random_state": settings.random_state}
            cheap = factorize(A, task.rank, **options)
            started = time.perf_counter()
            certified = factorize(A, task.rank, **options, certify=args.certify)
            elapsed = time.perf_counter() - started
            certify_info = certified.info.get("certify", {})
            record = {
                "table": table,
                "instance": task.instance.key,
                "trial": task.trial,
                "rank": task.rank,
                "shape": list(A.shape),
                "error": cheap.error,
                "bound": cheap.lower_bound,
                "bound_source": cheap.info["lower_bound"]["source"],
                "certified": cheap.certified_optimal,
                "gap": cheap.gap,
                "certify_error": certified.error,
                "certify_bound": certified.lower_bound,
                "certify_certified": certified.certified_optimal,
                "certify_gap": certified.gap,
                "certify_outcome": certify_info.get("outcome"),
                "certify_search": certify_info.get("search"),
                "certify_status": certify_info.get("status", "not run: already proven"),
                # native is run twice: compare certify with the answer it started from
                "certify_improved": bool(certify_info.get("improved", False)),
                "certify_seconds": elapsed,
                "cpsat_wall_time": certify_info.get("wall_time", 0.0),
                "cpsat_cpu_time": certify_info.get("cpu_time", 0.0),
                "cpsat_deterministic_time": certify_info.get("deterministic_time", 0.0),
                "bounds_seconds": cheap.info["timings"]["bounds"],
                "total_seconds": cheap.info["timings"]["total"],
            }
            records.append(record)
            print(json.dumps(record), file=sys.stderr, flush=True)
    return records


def _render(records: list[dict[str, Any]], command: str, certify: str) -> list[str]:
    """The markdown report of ``records``."""
    import numpy as np

    cells: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for record in records:
        cells.setdefault((record["table"], record["rank"]), []).append(record)
    searches = sorted({str(r.get("certify_search")) for r in records} - {"None"})
    lines = [
        "# Certified answers: Tables 1-5 at m = 30",
        "",
        f"`{command}` on {platform.node()} ({os.cpu_count()} CPUs shared with other jobs: "
        f"load average 5-10 during the runs), {time.strftime('%Y-%m-%d')}. `certify={certify}`, "
        f"CP-SAT search: {', '.join(searches) or '-'}. Method `bmfdsl` (factorize defaults) "
        "on the experiment runner's instances (Table 5: the first MNIST test images of each "
        "digit). Per cell: runs proven optimal and mean proven gap, cheap bounds only / with "
        "`certify`; `better`: runs where CP-SAT found a lower error than native; CP-SAT's "
        "deterministic time (work units: the same on any machine under any load, so the bounds "
        "and answers are too), its CPU seconds, and the mean wall seconds of the whole certify "
        "run (the wall time depends on the load).",
        "",
        "| Table | r | runs | proven (cheap) | gap (cheap) | proven (certify) | gap (certify) "
        "| better | CP-SAT det. time | CP-SAT CPU (s) | certify run wall (s) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (table, rank), items in sorted(cells.items()):
        lines.append(
            f"| {table} | {rank} | {len(items)} "
            f"| {sum(r['certified'] for r in items)} "
            f"| {100 * np.mean([r['gap'] for r in items]):.1f}% "
            f"| {sum(r['certify_certified'] for r in items)} "
            f"| {100 * np.mean([r['certify_gap'] for r in items]):.1f}% "
            f"| {sum(r['certify_improved'] for r in items)} "
            f"| {np.mean([r.get('cpsat_deterministic_time', 0.0) for r in items]):.2f} "
            f"| {np.mean([r.get('cpsat_cpu_time', 0.0) for r in items]):.1f} "
            f"| {np.mean([r['certify_seconds'] for r in items]):.1f} |"
        )
    totals = _totals(records)
    lines += [
        "",
        f"All: {totals['proven_cheap']}/{totals['runs']} proven with the cheap bounds, "
        f"{totals['proven_certify']}/{totals['runs']} with certify; CP-SAT found a better "
        f"answer in {totals['better']} runs; certify found nothing new in "
        f"{totals['nothing_new']} runs.",
    ]
    return lines


def _totals(records: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "runs": len(records),
        "proven_cheap": sum(r["certified"] for r in records),
        "proven_certify": sum(r["certify_certified"] for r in records),
        "better": sum(r["certify_improved"] for r in records),
        "nothing_new": sum(r.get("certify_outcome") == "nothing new" for r in records),
    }


def main() -> None:
    args = _parse()
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[variable] = str(args.blas_threads)
    command = f"python bench/bench_certify.py {' '.join(sys.argv[1:])}"
    if args.render:
        payloads = [json.loads(path.read_text()) for path in args.render]
        records = [record for payload in payloads for record in payload["records"]]
        commands = [payload.get("command", "") for payload in payloads]
        command = "` and `".join([*commands, command])
        certify = payloads[0]["args"]["certify"]
    else:
        records = _run(args)
        certify = str(args.certify)
    lines = _render(records, command, certify)
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "command": command,
        "totals": _totals(records),
        "records": records,
    }
    (args.out / f"{args.name}.json").write_text(json.dumps(payload, indent=2))
    (args.out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
