"""Compile + to_bqm time and peak memory: PyQUBO vs the numpy fast path.

Each measurement runs in a fresh subprocess so its peak resident memory (ru_maxrss) is its
own. Writes ``bench/results/compile.json`` and ``bench/results/compile.md``.

    python bench/bench_compile.py                 # 30x38 and 100x100, r = 5
    python bench/bench_compile.py --pyqubo-timeout 120
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"

CHILD = r"""
import json, resource, sys, time
import numpy as np
from bmfdsl.compile import compile_model
model, (m, n, r) = sys.argv[1], map(int, sys.argv[2:5])
fast, repeats = sys.argv[5] == "1", int(sys.argv[6])
A = (np.random.default_rng(0).random((m, n)) < 0.5).astype(np.int8)
if fast:  # warm the per-rank metadata probe and the imports: measure steady state
    compile_model(model, np.ones((r, r)), r).to_bqm(lam=1.0)
times = []
for _ in range(repeats):
    start = time.perf_counter()
    compiled = compile_model(model, A, r, fast=fast)
    compiled_at = time.perf_counter()
    bqm = compiled.to_bqm(lam=1.0)
    done = time.perf_counter()
    times.append((compiled_at - start, done - compiled_at, done - start))
start = time.perf_counter()
bqm = compiled.to_bqm(lam=2.0)
reweight = time.perf_counter() - start
best = min(times, key=lambda t: t[2])
print(json.dumps({
    "variables": bqm.num_variables, "interactions": bqm.num_interactions,
    "compile_s": best[0], "to_bqm_s": best[1], "total_s": best[2], "reweight_s": reweight,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def measure(model: str, m: int, n: int, r: int, fast: bool, timeout: float) -> dict:
    repeats = 5 if fast else 1
    args = [sys.executable, "-c", CHILD, model, str(m), str(n), str(r), str(int(fast))]
    args.append(str(repeats))
    row = {"model": model, "shape": f"{m}x{n}", "rank": r, "path": "fast" if fast else "pyqubo"}
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return row | {"status": f"timeout after {timeout:.0f} s"}
    except subprocess.CalledProcessError as exc:
        return row | {"status": "error: " + exc.stderr.strip().splitlines()[-1]}
    return row | {"status": "ok"} | json.loads(out.stdout)


def to_markdown(rows: list[dict]) -> str:
    lines = [
        "| model | A | r | path | variables | compile (s) | to_bqm (s) | total (s) "
        "| re-weight (s) | peak RSS (MB) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        if row["status"] != "ok":
            lines.append(
                f"| {row['model']} | {row['shape']} | {row['rank']} | {row['path']} | "
                f"| {row['status']} | | | | |"
            )
            continue
        lines.append(
            f"| {row['model']} | {row['shape']} | {row['rank']} | {row['path']} | "
            f"{row['variables']:,} | {row['compile_s']:.3f} | {row['to_bqm_s']:.3f} | "
            f"{row['total_s']:.3f} | {row['reweight_s']:.3f} | {row['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyqubo-timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = []
    for model in ("formulation1", "formulation2"):
        for m, n, r in ((30, 38, 5), (100, 100, 5)):
            for fast in (True, False):
                row = measure(model, m, n, r, fast, args.pyqubo_timeout if not fast else 120.0)
                print(json.dumps(row), flush=True)
                rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    meta = {
        "command": "python bench/bench_compile.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "targets": {"fast 30x38 r=5 total_s": 0.05, "fast 100x100 r=5 total_s": 2.0},
    }
    (args.out / "compile.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    md = "# Compile + to_bqm: PyQUBO vs the numpy fast path\n\n"
    md += f"`{meta['command']}` on {meta['date']}, Python {meta['python']}.\n"
    md += (
        "Fast-path times are the best of 5 after a warm-up; PyQUBO is a single cold run. "
        "The fast path is lazy: its 'compile' only validates and reads the model's metadata, "
        "and its 'to_bqm' includes building the numpy vectors. 're-weight' is a second "
        "to_bqm with another lam on the same compiled model (no recompilation).\n\n"
    )
    md += to_markdown(rows)
    (args.out / "compile.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
