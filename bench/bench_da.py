"""Formulation-1 energies of the ``da`` sampler vs neal and openjij-sa at equal wall time.

Instances: 30x30 exact-rank matrices (S1 Algorithm 3) at r = 1..5 and a 30x38 Bernoulli(0.5)
matrix at r = 5 (6,040 variables), Formulation 1 with lam = 1 (the paper's setting). Every
sampler gets the same ``time_limit`` and ``num_reads``; neal and openjij-sa repeat rounds of
reads until the time is spent (the registry's adapters), ``da`` follows the clock. All run in
one process after a warm-up, one after another.

    .venv/bin/python bench/bench_da.py --time-limits 1 5

Writes ``bench/results/da.json`` and ``bench/results/da.md``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bmfdsl.backends.da import DASampler
from bmfdsl.backends.neal import NealBackend
from bmfdsl.compile import compile_model
from bmfdsl.datasets import make_bernoulli, make_exact_rank


def samplers() -> dict:
    found = {"da": DASampler(), "neal": NealBackend()}
    try:
        from bmfdsl.backends.openjij import OpenJijSABackend

        found["openjij-sa"] = OpenJijSABackend()
    except ImportError:  # the openjij extra is optional
        pass
    return found


def instances(seed: int) -> list[tuple[str, object, int]]:
    cases = [
        (f"exact 30x30 r={r}", make_exact_rank(30, 30, r, random_state=seed + r), r)
        for r in range(1, 6)
    ]
    cases.append(("bernoulli0.5 30x38 r=5", make_bernoulli(30, 38, 0.5, random_state=seed), 5))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limits", type=float, nargs="+", default=[1.0])
    parser.add_argument("--num-reads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = parser.parse_args()

    pool = samplers()
    rows = []
    for name, A, rank in instances(args.seed):
        compiled = compile_model("formulation1", A, rank)
        bqm = compiled.to_bqm(lam=1.0)
        for sampler in pool.values():  # warm-up: JIT compile and library start-up
            sampler.sample(bqm, num_reads=1, seed=0, time_limit=0.05)
        for limit in args.time_limits:
            for label, sampler in pool.items():
                started = time.perf_counter()
                sampleset = sampler.sample(
                    bqm, num_reads=args.num_reads, seed=args.seed, time_limit=limit
                )
                wall = time.perf_counter() - started
                best = compiled.decode(sampleset)[0]
                row = {
                    "instance": name,
                    "variables": bqm.num_variables,
                    "norm_A": int(A.sum()),
                    "time_limit_s": limit,
                    "sampler": label,
                    "best_energy": float(sampleset.first.energy),
                    "decoded_error": int(best.error),
                    "decoded_broken": {k: int(v) for k, v in best.broken.items()},
                    "wall_s": wall,
                }
                rows.append(row)
                print(
                    f"{name:>24} {limit:>4}s {label:>11} energy {row['best_energy']:>8.1f} "
                    f"decoded error {row['decoded_error']:>4} wall {wall:.2f}s",
                    flush=True,
                )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": f"bench/bench_da.py --time-limits {' '.join(map(str, args.time_limits))} "
        f"--num-reads {args.num_reads} --seed {args.seed}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "lam": 1.0,
    }
    (out / "da.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# DA algorithm vs neal vs openjij-sa on Formulation 1 (lam = 1), equal wall time",
        "",
        f"Command: `{meta['command']}`; {meta['date']}; shared 2-core machine (noisy). "
        "Lowest energy over the reads; `error` is ||A-UVᵀ||² of the decoded best sample "
        "(U, V read from the sample; product constraints may be broken at lam = 1).",
        "",
        "| instance | N | time (s) | " + " | ".join(f"{s} energy / error" for s in pool) + " |",
        "|---|---|---|" + "---|" * len(pool),
    ]
    for name, _, _ in instances(args.seed):
        for limit in args.time_limits:
            cells = {
                r["sampler"]: r
                for r in rows
                if r["instance"] == name and r["time_limit_s"] == limit
            }
            best = min(c["best_energy"] for c in cells.values())
            parts = []
            for label in pool:
                c = cells[label]
                mark = "**" if c["best_energy"] == best else ""
                parts.append(f"{mark}{c['best_energy']:.0f}{mark} / {c['decoded_error']}")
            variables = next(iter(cells.values()))["variables"]
            lines.append(f"| {name} | {variables} | {limit} | " + " | ".join(parts) + " |")
    (out / "da.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
