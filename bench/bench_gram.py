"""The exact Gram matrix ``AᵀA`` and the rank-``r`` leverage scores' ``A P``: before and after
(issue 26.2, side stages).

* Sparse: ``make_sparse_planted(m, 1000, 5)`` (10⁶ rows by default; ``--rows`` for more).
  ``pattern_gram`` of this tree with 1 and 2 threads, against the kernel of ``--before``
  (a commit: its ``bmfdsl/linalg/_kernels.py`` is loaded from git, so that no old copy
  lives in the tree); ``A P`` (``P``: 1000 x 5 floats) by ``pattern_cross`` with 1 and 2
  threads against scipy's ``A @ P``.
* Dense: ``make_planted_blocks(60_000, 400, 5, density=0.3)``: ``dense_gram`` (float32
  chunks, BLAS ``sgemm``) against the same chunks through ``ssyrk`` (upper triangle only).

Each variant runs ``--repeats`` times; the table gives the least wall and CPU seconds (CPU:
``time.process_time``, all threads: the work, which other jobs' load changes less than the
wall time) and whether the result equals the reference bit for bit.

    .venv/bin/python bench/bench_gram.py                 # writes bench/results/gram.{json,md}
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _machine import machine, write_results

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parent.parent


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--before", default="da62969", help="commit of the old kernel")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="gram")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args()


def _old_kernels(commit: str) -> Any:
    """The ``_kernels`` module of ``commit``, imported from a temporary file."""
    source = subprocess.run(
        ["git", "show", f"{commit}:bmfdsl/linalg/_kernels.py"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "old_kernels.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _timed(function: Any, repeats: int) -> tuple[Any, float, float]:
    function()  # compile or load outside the timing
    walls, cpus = [], []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return result, min(walls), min(cpus)


def _rows_of(variants: dict[str, Any], repeats: int, instance: str) -> list[dict[str, Any]]:
    rows, reference = [], None
    for name, function in variants.items():
        result, wall, cpu = _timed(function, repeats)
        if reference is None:
            reference = result
        rows.append(
            {"instance": instance, "variant": name, "wall_s": wall, "cpu_s": cpu,
             "equal": bool(np.array_equal(result, reference))}
        )  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _sparse_rows(A: Any, old: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    from bmfdsl.linalg import _kernels as kernels

    ptr, ind, n = A.indptr, A.indices, A.shape[1]
    instance = f"sparse {A.shape[0]:,} x {n:,}, {A.nnz:,} ones"
    rows = _rows_of(
        {
            f"before ({args.before}), 1 thread": lambda: old.pattern_gram(ptr, ind, n, threads=1),
            "after, 1 thread": lambda: kernels.pattern_gram(ptr, ind, n, threads=1),
            "after, 2 threads": lambda: kernels.pattern_gram(ptr, ind, n, threads=2),
        },
        args.repeats,
        f"AᵀA, {instance}",
    )
    P = np.random.default_rng(0).standard_normal((n, 5))
    return rows + _rows_of(
        {
            "scipy A @ P": lambda: A @ P,
            "pattern_cross, 1 thread": lambda: kernels.pattern_cross(ptr, ind, P, threads=1),
            "pattern_cross, 2 threads": lambda: kernels.pattern_cross(ptr, ind, P, threads=2),
        },
        args.repeats,
        f"A P (P: {n} x 5), {instance}",
    )


def main() -> None:
    args = _parse()
    from scipy.linalg.blas import ssyrk

    from bmfdsl import make_planted_blocks, make_sparse_planted
    from bmfdsl.linalg import dense_gram

    old = _old_kernels(args.before)
    rows: list[dict[str, Any]] = []
    for m in args.rows:
        rows += _sparse_rows(make_sparse_planted(m, 1000, 5, random_state=0), old, args)
    dense = make_planted_blocks(60_000, 400, 5, density=0.3, random_state=0)[0].toarray()
    step = 4 * 2**20 // dense.shape[1]

    def syrk_gram() -> np.ndarray:
        upper = np.zeros((dense.shape[1], dense.shape[1]))
        for start in range(0, dense.shape[0], step):
            upper += ssyrk(1.0, dense[start : start + step].astype(np.float32), trans=1)
        upper = np.triu(upper)
        return upper + np.triu(upper, 1).T

    rows += _rows_of(
        {"dense_gram (bit counts)": lambda: dense_gram(dense), "ssyrk chunks": syrk_gram},
        args.repeats,
        "AᵀA, dense 60,000 x 400 (30% ones)",
    )
    payload = {
        "environment": machine(os.environ["OPENBLAS_NUM_THREADS"]),
        "command": " ".join(["bench/bench_gram.py", *sys.argv[1:]]),
        "rows": rows,
    }
    write_results(args.out, args.name, payload, _markdown(payload))


def _markdown(payload: dict[str, Any]) -> str:
    environment = payload["environment"]
    lines = [
        "# The exact Gram matrix and A·P of the leverage scores, before and after",
        "",
        f"`.venv/bin/python {payload['command']}`; {environment['date']}; "
        f"{environment['cpu_count']} CPUs shared with other jobs (load average "
        f"{environment['load_average'][0]:.1f}: wall times are under load; CPU seconds count "
        "the work of all threads), BLAS threads 1. Least of the repeats; `equal`: the same "
        "numbers as the first variant of the block, bit for bit.",
        "",
        "| computation | variant | wall s | CPU s | equal |",
        "|---|---|---:|---:|---|",
    ]
    for row in payload["rows"]:
        lines.append(
            f"| {row['instance']} | {row['variant']} | {row['wall_s']:.3f} | {row['cpu_s']:.3f} "
            f"| {'yes' if row['equal'] else 'NO'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
