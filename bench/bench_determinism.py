"""Work budgets vs the old wall-clock budget of the ``native`` solver (issue 13).

For each cell (the paper's Tables 1-4 at the given sizes, n = 30, and Table 5 on MNIST) it
solves every trial with the solver as it was before work budgets (its time-budgeted
``portfolio.py``, read from git at ``--before``) and with the current one at fractions of the
default work budget. It reports mean relative error and mean time per setting, and the time
to reach the old default quality: the smallest budget fraction whose mean error is at or below
the old mean (at the paper's four decimals). With ``--wide`` it also solves a 20,000 x 2,000
Bernoulli(0.5) matrix at rank 10 with the defaults and compares with the baseline.

    .venv/bin/python bench/bench_determinism.py --trials 5 --data-dir ../shared/data

Writes ``bench/results/determinism.json`` and ``bench/results/determinism.md``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np

from bmfdsl.apps import load_mnist, make_bernoulli, make_exact_rank
from bmfdsl.linalg import relative_error, squared_error
from bmfdsl.solvers.methods import baseline
from bmfdsl.solvers.native import NativeSettings, auto_work_limit, compile_kernels, solve_bmf

TABLES = {1: "exact", 2: "bernoulli0.2", 3: "bernoulli0.5", 4: "bernoulli0.8"}
ROOT = Path(__file__).resolve().parent.parent


def load_before(commit: str) -> ModuleType:
    """The old solver module, read from git (it imports the same numba kernels)."""
    source = subprocess.run(
        ["git", "show", f"{commit}:bmfdsl/native/portfolio.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "portfolio_before.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("portfolio_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["portfolio_before"] = module
    spec.loader.exec_module(module)
    return module


def instances(args: argparse.Namespace) -> list[tuple[str, int, int, list[np.ndarray]]]:
    """``(dataset, m, rank, matrices)`` per cell."""
    cells = []
    for table in args.tables:
        dataset = TABLES[table]
        for m in args.sizes:
            for rank in args.ranks:
                if dataset == "exact":
                    matrices = [
                        make_exact_rank(m, 30, rank, random_state=s) for s in range(args.trials)
                    ]
                else:
                    p = float(dataset.removeprefix("bernoulli"))
                    matrices = [
                        make_bernoulli(m, 30, p, random_state=s) for s in range(args.trials)
                    ]
                cells.append((dataset, m, rank, matrices))
    if args.data_dir:
        images, _ = load_mnist(args.data_dir)
        chosen = list(images[:: max(1, len(images) // args.mnist_images)][: args.mnist_images])
        for rank in args.ranks:
            cells.append(("mnist", 28, rank, chosen))
    return cells


def timed(solve, A: np.ndarray, rank: int, seed: int, **settings) -> tuple[float, float]:
    """Relative error and seconds of one solve."""
    started = time.perf_counter()
    error = solve(A, rank, seed=seed, **settings).solutions[0][2]
    return relative_error(error, A), time.perf_counter() - started


def label(variant: dict) -> str:
    """A column name for a settings variant, e.g. ``patience=12``."""
    return ", ".join(f"{key}={value}" for key, value in variant.items())


def run(args: argparse.Namespace) -> dict:
    before = load_before(args.before)
    before.compile_kernels()
    compile_kernels()
    cells = []
    for dataset, m, rank, matrices in instances(args):
        settings: dict[str, list[tuple[float, float]]] = {"before": []}
        for fraction in args.fractions:
            settings[f"work x{fraction:g}"] = []
        for seed, A in enumerate(matrices):
            settings["before"].append(timed(before.solve_bmf, A, rank, seed))
            for fraction in args.fractions:
                config = NativeSettings(work_limit=fraction * auto_work_limit(A.shape))
                settings[f"work x{fraction:g}"].append(
                    timed(solve_bmf, A, rank, seed, settings=config)
                )
            for variant in args.variants:
                settings.setdefault(label(variant), []).append(
                    timed(solve_bmf, A, rank, seed, settings=NativeSettings(**variant))
                )
        summary = {
            name: {
                "mean": float(np.mean([r for r, _ in runs])),
                "time_mean_s": float(np.mean([t for _, t in runs])),
            }
            for name, runs in settings.items()
        }
        target = round(summary["before"]["mean"], 4)
        reached = [
            name
            for name in summary
            if name != "before" and round(summary[name]["mean"], 4) <= target
        ]
        first = min(reached, key=lambda name: summary[name]["time_mean_s"]) if reached else None
        cell = {
            "dataset": dataset,
            "m": m,
            "rank": rank,
            "trials": len(matrices),
            "settings": summary,
            "reaches_before": first,
            "time_ratio": (
                summary[first]["time_mean_s"] / summary["before"]["time_mean_s"] if first else None
            ),
        }
        cells.append(cell)
        print(json.dumps({k: v for k, v in cell.items() if k != "settings"}), flush=True)
    result: dict = {"cells": cells}
    if args.wide:
        result["wide"] = wide()
        print(json.dumps(result["wide"]), flush=True)
    return result


def wide() -> dict:
    A = make_bernoulli(20_000, 2_000, 0.5, random_state=0)
    started = time.perf_counter()
    U, V = baseline(A, 10)
    baseline_time = time.perf_counter() - started
    started = time.perf_counter()
    native = solve_bmf(A, 10, seed=0)
    native_time = time.perf_counter() - started
    return {
        "shape": [20_000, 2_000],
        "rank": 10,
        "baseline_error": int(squared_error(A, U, V)),
        "baseline_time_s": baseline_time,
        "native_error": int(native.solutions[0][2]),
        "native_time_s": native_time,
        "native_work": native.info["work"],
    }


def render(meta: dict, result: dict, fractions: list[float], variants: list[dict]) -> str:
    names = ["before"] + [f"work x{f:g}" for f in fractions] + [label(v) for v in variants]
    lines = [
        "# Work budgets vs the old time budget (native solver)",
        "",
        f"Command: `{meta['command']}`; {meta['date']}; {meta['machine']} (timings are noisy: "
        "other jobs shared the cores; the errors are not). `before`: the time-budgeted solver "
        f"of commit {meta['before']}; `work xF`: the current solver at F times the default "
        "work budget; `key=value`: the current solver with that setting (default budget). "
        "Cells: mean relative error / mean seconds. `reach`: the cheapest setting at or "
        "below `before`'s mean error (four decimals) and its time over `before`'s.",
        "",
        "| data | m | r | " + " | ".join(names) + " | reach |",
        "|---|---|---|" + "---|" * len(names) + "---|",
    ]
    for cell in result["cells"]:
        values = " | ".join(
            f"{cell['settings'][n]['mean']:.4f} / {cell['settings'][n]['time_mean_s']:.2f}"
            for n in names
        )
        reach = (
            f"{cell['reaches_before']} ({cell['time_ratio']:.2f}x)"
            if cell["reaches_before"]
            else "no"
        )
        lines.append(f"| {cell['dataset']} | {cell['m']} | {cell['rank']} | {values} | {reach} |")
    if "wide" in result:
        w = result["wide"]
        lines += [
            "",
            f"Wide input {w['shape'][0]} x {w['shape'][1]}, rank {w['rank']}, default budget: "
            f"native error {w['native_error']} in {w['native_time_s']:.1f} s "
            f"(work {w['native_work']}); baseline {w['baseline_error']} in "
            f"{w['baseline_time_s']:.2f} s.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[30])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--tables", type=int, nargs="*", default=[1, 2, 3, 4])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.5, 1.0])
    parser.add_argument(
        "--variants",
        type=json.loads,
        default=[],
        help="JSON list of NativeSettings keyword dicts, e.g. '[{\"patience\": 12}]'",
    )
    parser.add_argument("--data-dir", default=None, help="folder with mnist/ for Table 5")
    parser.add_argument("--mnist-images", type=int, default=20)
    parser.add_argument("--before", default="aa9511b", help="git commit of the old solver")
    parser.add_argument("--wide", action="store_true", help="also the 20,000 x 2,000 case")
    parser.add_argument("--name", default="determinism", help="output file stem")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()
    result = run(args)
    meta = {
        "command": "bench/bench_determinism.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}; shared 2 cores",
        "before": args.before,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps({"meta": meta, **result}, indent=1))
    (out / f"{args.name}.md").write_text(render(meta, result, args.fractions, args.variants))


if __name__ == "__main__":
    main()
