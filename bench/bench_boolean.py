"""Benchmark the BMF family in ``native``: Boolean BMF on real data against published errors.

1. ``factorize(A, k, model="boolean-bmf", random_state=0)`` (default backend ``native``,
   default budget) on zoo, heart, lymp and apb (``../shared/data/uci-binary``) at k = 2, 5, 10,
   against every published method of ``../shared/reference/boolean_bmf_real_data.csv``
   (column generation with CPLEX, ASSO, ASSO++, k-greedy, NMF, ...): wins, ties and losses
   against the best published error of each cell.
2. The same with 5% of the entries hidden at random (``mask=``, seed 0): our masked objective
   (observed entries only), and the error of that answer on every entry. The published errors
   are for the full matrix, so they are shown for reference only.
3. ``xor-bmf``, ``sparse-bmf`` and ``symmetric-bmf`` (when installed): ``native`` against
   brute force on small random cases, and against ``neal`` on the same BQM at equal time
   (neal's ``num_reads`` grown until it takes at least native's time), scored by the model's
   own objective.

    .venv/bin/python bench/bench_boolean.py
    .venv/bin/python bench/bench_boolean.py --data-dir ../shared/data/uci-binary --skip-family

Writes ``bench/results/boolean.json`` and ``bench/results/boolean.md``. Times are wall
seconds on this machine (shared with other jobs unless stated); the errors are counted.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import platform
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from bmfdsl import compile_model, factorize
from bmfdsl.pipeline import solve

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ("zoo", "heart", "lymp", "apb")
RANKS = (2, 5, 10)


def published(reference: Path) -> dict[tuple[str, int], dict[str, int]]:
    """``(dataset, k) -> {method: Boolean error}`` from the reference CSV."""
    table: dict[tuple[str, int], dict[str, int]] = defaultdict(dict)
    with reference.open() as handle:
        for row in csv.DictReader(handle):
            table[(row["dataset"], int(row["k"]))][row["method"]] = int(row["boolean_error"])
    return table


def boolean_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    product = (U.astype(np.int64) @ V.T.astype(np.int64)) > 0
    return int((product != A.astype(bool)).sum())


def run_cell(A: np.ndarray, k: int, mask: np.ndarray | None) -> dict:
    started = time.perf_counter()
    result = factorize(A, k, model="boolean-bmf", mask=mask, random_state=0)
    seconds = time.perf_counter() - started
    backend_info = result.info.get("backend_info", {})
    return {
        "error": int(result.error),
        "error_all_entries": boolean_error(A, result.U, result.V),
        "seconds": round(seconds, 2),
        "backend": result.info.get("backend"),
        "polish": result.info.get("polish"),
        "work": backend_info.get("work"),
    }


def boolean_section(data_dir: Path, reference: Path) -> list[dict]:
    table = published(reference)
    rows = []
    for name in DATASETS:
        path = data_dir / f"{name}.txt"
        if not path.exists():
            print(f"skip {name}: {path} not found")
            continue
        A = np.loadtxt(path, dtype=np.int8)
        rng = np.random.default_rng(0)
        mask = (rng.random(A.shape) >= 0.05).astype(np.int8)  # 5% hidden
        for k in RANKS:
            methods = table.get((name, k), {})
            best = min(methods.values()) if methods else None
            full = run_cell(A, k, None)
            masked = run_cell(A, k, mask)
            outcome = (
                None
                if best is None
                else "win"
                if full["error"] < best
                else "tie"
                if full["error"] == best
                else "loss"
            )
            row = {
                "dataset": name,
                "shape": list(A.shape),
                "k": k,
                "ours": full,
                "masked": {**masked, "hidden": int((mask == 0).sum())},
                "published": methods,
                "best_published": best,
                "outcome": outcome,
            }
            rows.append(row)
            print(
                f"{name:6s} k={k:2d} ours {full['error']:5d} best {best} ({outcome}) "
                f"{full['seconds']:.1f}s | masked {masked['error']} "
                f"(all entries {masked['error_all_entries']}) {masked['seconds']:.1f}s",
                flush=True,
            )
    return rows


def brute_force(compiled, weights: dict[str, float]) -> float:
    """The smallest objective over every feasible (U, V) (tiny instances only)."""
    structure = compiled.structure.resolved(compiled.resolve_weights(**weights))
    (m, n), r = structure.shape, structure.rank
    rows = np.array(list(itertools.product((0, 1), repeat=r)), dtype=np.int8)
    best = np.inf
    for u_codes in itertools.product(range(len(rows)), repeat=m):
        U = rows[list(u_codes)]
        if structure.symmetric:  # one factor: V is U
            best = min(best, structure.objective(U, U))
            continue
        for v_codes in itertools.product(range(len(rows)), repeat=n):
            V = rows[list(v_codes)]
            if structure.feasible(U, V):
                best = min(best, structure.objective(U, V))
    return float(best)


def family_section() -> list[dict]:
    from bmfdsl.modeling import list_models

    known = {info.name for info in list_models()}
    names = [name for name in ("xor-bmf", "sparse-bmf", "symmetric-bmf") if name in known]
    rows = []
    rng = np.random.default_rng(0)
    for name in names:
        weights = {"mu": 0.5} if name == "sparse-bmf" else {}
        # brute force: tiny cases
        for trial in range(3):
            A = (rng.random((3, 4)) < 0.5).astype(np.int8)
            if name == "symmetric-bmf":  # one factor: A square
                A = (rng.random((4, 4)) < 0.5).astype(np.int8)
            compiled = compile_model(name, A, 2)
            found = solve(compiled, "native", seed=trial, **weights)[0]
            exact = brute_force(compiled, weights)
            rows.append(
                {
                    "model": name,
                    "case": f"brute force {A.shape[0]}x{A.shape[1]} r=2 #{trial}",
                    "native": found.energy,
                    "optimum": exact,
                    "native_optimal": bool(abs(found.energy - exact) < 1e-9),
                }
            )
        # equal time against neal on the same BQM
        for shape, rank in (((12, 10), 2), ((20, 15), 3)):
            if name == "symmetric-bmf":
                shape = (shape[1], shape[1])
            A = (rng.random(shape) < 0.4).astype(np.int8)
            compiled = compile_model(name, A, rank)
            started = time.perf_counter()
            native = solve(compiled, "native", seed=0, **weights)[0]
            native_seconds = time.perf_counter() - started
            reads, neal_seconds = 1, 0.0
            while True:
                started = time.perf_counter()
                neal = solve(compiled, "neal", seed=0, num_reads=reads, **weights)[0]
                neal_seconds = time.perf_counter() - started
                if neal_seconds >= native_seconds or reads >= 4096:
                    break
                reads *= 4
            rows.append(
                {
                    "model": name,
                    "case": f"{shape[0]}x{shape[1]} r={rank}, {compiled.num_variables} vars",
                    "native": native.energy,
                    "native_seconds": round(native_seconds, 2),
                    "neal": neal.energy,
                    "neal_broken": int(sum(neal.broken.values())),
                    "neal_reads": reads,
                    "neal_seconds": round(neal_seconds, 2),
                }
            )
            print(rows[-1], flush=True)
    return rows


def markdown(rows: list[dict], family: list[dict], header: dict) -> str:
    counts = defaultdict(int)
    for row in rows:
        counts[row["outcome"]] += 1
    lines = [
        "# Boolean BMF on real data: `native` (boolean-bmf) against published errors",
        "",
        f"Machine: {header['machine']}; {header['note']}",
        "",
        "Command: `.venv/bin/python bench/bench_boolean.py` (random_state=0, default budget).",
        "",
        f"Against the best published error per cell: **{counts['win']} wins, "
        f"{counts['tie']} ties, {counts['loss']} losses** of {len(rows)}.",
        "",
        "| data | k | ours | best published | outcome | s | masked (5% hidden): ours on "
        "observed | its error on all entries | s | methods |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        methods = ", ".join(f"{m} {e}" for m, e in sorted(row["published"].items()))
        lines.append(
            f"| {row['dataset']} | {row['k']} | {row['ours']['error']} | "
            f"{row['best_published']} | {row['outcome']} | {row['ours']['seconds']} | "
            f"{row['masked']['error']} | {row['masked']['error_all_entries']} | "
            f"{row['masked']['seconds']} | {methods} |"
        )
    if family:
        lines += ["", "## xor-bmf, sparse-bmf (mu = 0.5), symmetric-bmf: objective (energy)", ""]
        lines += ["| model | case | native | reference |", "|---|---|---|---|"]
        for row in family:
            if "optimum" in row:
                reference = f"brute-force optimum {row['optimum']:g}"
            else:
                reference = (
                    f"neal {row['neal']:g} ({row['neal_broken']} broken, {row['neal_reads']} "
                    f"reads, {row['neal_seconds']} s vs native {row['native_seconds']} s)"
                )
            lines.append(f"| {row['model']} | {row['case']} | {row['native']:g} | {reference} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared/data/uci-binary")
    parser.add_argument(
        "--reference",
        type=Path,
        default=ROOT.parent / "shared/reference/boolean_bmf_real_data.csv",
    )
    parser.add_argument("--skip-family", action="store_true", help="only the Boolean part")
    parser.add_argument("--note", default="shared 2-core machine under load from other jobs")
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results")
    args = parser.parse_args()
    rows = boolean_section(args.data_dir, args.reference)
    family = [] if args.skip_family else family_section()
    header = {"machine": f"{platform.machine()} {platform.python_version()}", "note": args.note}
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {"header": header, "boolean": rows, "family": family}
    (args.out / "boolean.json").write_text(json.dumps(payload, indent=1) + "\n")
    (args.out / "boolean.md").write_text(markdown(rows, family, header))


if __name__ == "__main__":
    main()
