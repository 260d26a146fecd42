"""Backends at equal wall time on Formulation 1 BQMs (lam = 1).

Instances: a 30x30 rank-3 planted matrix (the paper's S1 Algorithm 3, exact rank 3, so the
optimum error is 0) and a 30x38 Bernoulli(0.5) matrix at rank 5. For each backend and time
budget it records the best energy, the decoded error of the lowest-energy sample (and
whether it is feasible), the best feasible error, and attempted spin flips per second
(reads x sweeps x variables [x Trotter slices] / wall time; not reported for tabu, whose
iterations are not exposed). Sweep-based backends (neal, openjij-*) run one anneal per
budget with ``num_sweeps`` calibrated to fit it; ``da`` restarts anneals until
``time_limit`` is spent; tabu splits ``time_limit`` over its reads (its setup is extra).
Writes ``bench/results/backends.json`` and ``backends.md``.

    python bench/bench_backends.py                      # 2 s and 10 s budgets
    python bench/bench_backends.py --times 1 --backends neal tabu
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl import StructuredSampler, solve
from bmfdsl.apps import make_bernoulli, make_exact_rank
from bmfdsl.modeling import compile_model
from bmfdsl.solvers import get_backend

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_BACKENDS = ["neal", "tabu", "openjij-sa", "openjij-sqa", "da", "native"]
OPTIONAL_MODULES = {"da": "bmfdsl.backends.da", "native": "bmfdsl.backends.native"}
# sweep-based backends get one long anneal per budget: num_sweeps calibrated to the time
CALIBRATED = ("neal", "openjij-sa", "openjij-sqa")


def instances(seed: int) -> dict[str, tuple[np.ndarray, int]]:
    return {
        "planted-30x30-r3": (make_exact_rank(30, 30, 3, random_state=seed), 3),
        "bernoulli-30x38-r5": (make_bernoulli(30, 38, 0.5, random_state=seed), 5),
    }


def attempted_flips(info: dict[str, Any], reads: int, num_variables: int) -> float | None:
    """reads x anneals x sweeps x N (x Trotter slices): every sweep tries every variable once
    (``da`` restarts anneals within a time limit; others run one anneal per read)."""
    if "attempted_flips" in info:  # backends that count their own trials
        return float(info["attempted_flips"])
    if "num_sweeps" not in info:
        return None
    sweeps = float(info["num_sweeps"]) * float(info.get("num_anneals_per_read", 1))
    return reads * sweeps * num_variables * int(info.get("trotter", 1))


def sweep_cost(sampler: Any, bqm: Any) -> tuple[float, float]:
    """(seconds per sweep, fixed seconds per call) from two short single-read runs.

    Timer noise can make the longer run look no slower than the shorter one; the per-sweep
    time then falls back to the longer run's average, since a near-zero estimate would ask
    for billions of sweeps (seen with openjij-sa: the run never ended)."""
    few, many = 5, 100
    sampler.sample(bqm, num_reads=1, num_sweeps=few, seed=1)  # warm-up: first-call costs
    times = []
    for sweeps in (few, many):
        start = time.perf_counter()
        sampler.sample(bqm, num_reads=1, num_sweeps=sweeps, seed=1)
        times.append(time.perf_counter() - start)
    difference = times[1] - times[0]
    per_sweep = difference / (many - few) if difference > 0 else times[1] / many
    return per_sweep, max(0.0, times[0] - few * per_sweep)


def run_one(
    name: str,
    sampler: Any,
    compiled: Any,
    bqm: Any,
    budget: float,
    seed: int,
    cost: tuple[float, float] | None,
) -> dict:
    params: dict[str, Any] = {"time_limit": budget, "num_reads": 1, "seed": seed}
    if cost is not None:
        per_sweep, fixed = cost
        params["num_sweeps"] = max(10, int((0.9 * budget - fixed) / per_sweep))
    start = time.perf_counter()
    sampleset = sampler.sample(bqm, **params)
    wall = time.perf_counter() - start
    decoded = compiled.decode(sampleset)
    lowest = min(decoded, key=lambda s: s.energy)
    feasible_errors = [s.error for s in decoded if s.feasible]
    reads = int(sampleset.info.get("total_reads", len(sampleset)))
    flips = attempted_flips(dict(sampleset.info), reads, bqm.num_variables)
    return {
        "backend": name,
        "time_limit_s": budget,
        "wall_s": wall,
        "best_energy": float(lowest.energy),
        "error_at_best_energy": int(lowest.error),
        "feasible_at_best_energy": bool(lowest.feasible),
        "broken_at_best_energy": dict(lowest.broken),
        "best_feasible_error": min(feasible_errors) if feasible_errors else None,
        "num_sweeps": sampleset.info.get("num_sweeps"),
        "total_reads": reads,
        "attempted_flips_per_s": None if flips is None else flips / wall,
    }


def run_structure(name: str, sampler: Any, compiled: Any, budget: float, seed: int) -> dict:
    """A structure-aware backend solves the BMF itself; its answers are always feasible and
    their Formulation 1 energy equals their error."""
    start = time.perf_counter()
    decoded = solve(compiled, sampler, time_limit=budget, seed=seed)
    info = decoded.info["backend_info"]
    wall = time.perf_counter() - start
    best = decoded[0]
    return {
        "backend": f"{name} (structure)",
        "time_limit_s": budget,
        "wall_s": wall,
        "best_energy": float(best.energy),
        "error_at_best_energy": int(best.error),
        "feasible_at_best_energy": True,
        "broken_at_best_energy": {},
        "best_feasible_error": int(best.error),
        "num_sweeps": None,
        "total_reads": int(info.get("num_reads", info.get("restarts", 1)) or 1),
        "attempted_flips_per_s": None,
        "certificate": info.get("certificate"),
    }


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def markdown(report: dict) -> str:
    lines = [
        "# Backends at equal wall time (Formulation 1, lam = 1)",
        "",
        f"Machine: {report['machine']} (2 shared cores: timings are noisy); seed "
        f"{report['seed']}. Errors are ||A - UVᵀ||²_F of the "
        "decoded lowest-energy sample; 'feasible' means no broken W = U·V constraint.",
        "",
    ]
    for instance, meta in report["instances"].items():
        lines += [
            f"## {instance} (N = {meta['num_variables']} variables, ||A||² = {meta['ones']})",
            "",
            "| backend | budget s | wall s | best energy | error | feasible | best feasible "
            "error | reads | sweeps | flips/s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in report["runs"]:
            if row["instance"] != instance:
                continue
            flips = row["attempted_flips_per_s"]
            lines.append(
                f"| {row['backend']} | {row['time_limit_s']:g} | {row['wall_s']:.2f} | "
                f"{row['best_energy']:g} | {row['error_at_best_energy']} | "
                f"{'yes' if row['feasible_at_best_energy'] else 'no'} | "
                f"{_cell(row['best_feasible_error'])} | {row['total_reads']} | "
                f"{_cell(row['num_sweeps'])} | "
                f"{'n/a' if flips is None else f'{flips:.3g}'} |"
            )
        lines.append("")
    if report["skipped"]:
        lines += ["Skipped: " + "; ".join(report["skipped"]), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--times", type=float, nargs="+", default=[2.0, 10.0])
    parser.add_argument("--backends", nargs="+", default=DEFAULT_BACKENDS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    samplers, skipped = {}, []
    for name in args.backends:
        module = OPTIONAL_MODULES.get(name)
        if module and importlib.util.find_spec(module) is None:
            skipped.append(f"{name} ({module} not present)")
            continue
        sampler = get_backend(name)
        if not {"time_limit", "num_reads", "seed"} <= set(sampler.parameters):
            skipped.append(f"{name} (no time_limit/num_reads/seed parameters)")
            continue
        samplers[name] = sampler

    report: dict[str, Any] = {
        "machine": " ".join(
            part
            for part in (
                platform.machine(),
                platform.processor(),
                "python",
                platform.python_version(),
            )
            if part
        ),
        "seed": args.seed,
        "times_s": args.times,
        "instances": {},
        "runs": [],
        "skipped": skipped,
    }
    for instance, (A, rank) in instances(args.seed).items():
        compiled = compile_model("formulation1", A, rank)
        bqm = compiled.to_bqm(lam=1.0)
        report["instances"][instance] = {
            "shape": list(A.shape),
            "rank": rank,
            "num_variables": bqm.num_variables,
            "ones": int(A.sum()),
        }
        for name, sampler in samplers.items():
            if isinstance(sampler, StructuredSampler):
                solve(compiled, sampler, time_limit=0.05, seed=1)  # warm up
                for budget in args.times:
                    row = run_structure(name, sampler, compiled, budget, args.seed)
                    row["instance"] = instance
                    report["runs"].append(row)
                    print(json.dumps(row, default=str), flush=True)
                continue
            sampler.sample(bqm, time_limit=0.01, num_reads=1, seed=1)  # warm up JIT / imports
            cost = sweep_cost(sampler, bqm) if name in CALIBRATED else None
            for budget in args.times:
                row = run_one(name, sampler, compiled, bqm, budget, args.seed, cost)
                row["instance"] = instance
                report["runs"].append(row)
                print(json.dumps(row), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "backends.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (args.out / "backends.md").write_text(markdown(report))
    return report


if __name__ == "__main__":
    main()
