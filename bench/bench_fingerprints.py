"""Bit-level fingerprints of bmfdsl's answers, for refactors that must not change behaviour.

Runs a fixed set of seeded calls through the public top-level API only (so the same script
runs before and after modules move) and records a sha256 of every answer's ``U``, ``V``,
error and lower bound, and of every registered model's BQM. Two runs of different code give
the same fingerprints exactly when their answers are bit-identical.

    .venv/bin/python bench/bench_fingerprints.py --out bench/results
    .venv/bin/python bench/bench_fingerprints.py --compare bench/results/fingerprints.json

Writes ``fingerprints.json`` and ``fingerprints.md`` to ``--out``; ``--compare FILE`` exits
1 and names the cases that differ from an earlier run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

import bmfdsl


def _digest(*parts: Any) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        if isinstance(part, np.ndarray):
            array = np.ascontiguousarray(part)
            hasher.update(str((array.dtype.str, array.shape)).encode())
            hasher.update(array.tobytes())
        else:
            hasher.update(repr(part).encode())
    return hasher.hexdigest()[:16]


def _significant(values: Any, digits: int) -> list[str]:
    """``values`` written to ``digits`` significant digits."""
    return [f"{value:.{digits}g}" for value in np.asarray(values, dtype=np.float64).ravel()]


def _answer(result: Any) -> str:
    return _digest(
        np.asarray(result.U), np.asarray(result.V), int(result.error), result.lower_bound
    )


def _bqm(bqm: Any) -> str:
    linear = sorted((str(v), float(b)) for v, b in bqm.linear.items())
    quadratic = sorted(
        (tuple(sorted((str(u), str(v)))), float(b)) for (u, v), b in bqm.quadratic.items()
    )
    return _digest(linear, quadratic, float(bqm.offset), [str(v) for v in bqm.variables])


def cases() -> dict[str, Callable[[], str]]:
    exact = bmfdsl.make_exact_rank(30, 30, 3, random_state=0)
    dense = bmfdsl.make_bernoulli(30, 30, 0.5, random_state=1)
    tall = bmfdsl.make_bernoulli(2000, 30, 0.5, random_state=2)
    sparse = sp.random(5000, 200, density=0.02, random_state=3, format="csr")
    sparse.data[:] = 1
    mask = (np.random.default_rng(4).random(dense.shape) < 0.8).astype(np.int8)
    small = bmfdsl.make_exact_rank(6, 5, 2, random_state=5)

    def factorize(A: Any, rank: int, **options: Any) -> Callable[[], str]:
        return lambda: _answer(bmfdsl.factorize(A, rank, random_state=0, **options))

    found: dict[str, Callable[[], str]] = {
        "native exact r3": factorize(exact, 3),
        "native bernoulli r5": factorize(dense, 5),
        "native bernoulli r1": factorize(dense, 1),
        "native tall r4": factorize(tall, 4),
        "native tall sampled r3": factorize(tall, 3, sample_rows="auto"),
        "native one-hot V r3": factorize(dense, 3, one_hot="V"),
        "native one-hot U r2": factorize(dense, 2, one_hot="U"),
        "native masked r2": factorize(dense, 2, mask=mask),
        "native sparse sampled r3": factorize(sparse, 3, sample_rows="auto"),
        "native no als r3": factorize(dense, 3, als=False),
        "baseline r3": factorize(dense, 3, method="baseline"),
        "thresholded r3": factorize(dense, 3, method="thresholded"),
        "penalized r3": factorize(dense, 3, method="penalized"),
        "da backend r2": factorize(small, 2, backend="da", num_reads=4),
        "neal backend r2": factorize(small, 2, backend="neal", num_reads=4),
        "neal sampled r2": factorize(tall, 2, backend="neal", sample_rows=30, num_reads=2),
        "certify r2": factorize(small, 2, certify=1),
    }

    def solve(backend: str, **params: Any) -> Callable[[], str]:
        def run() -> str:
            compiled = bmfdsl.compile_model("formulation1", small, rank=2)
            samples = bmfdsl.solve(compiled, backend=backend, lam=1.0, seed=0, **params)
            return _digest(
                [(s.U.tolist(), s.V.tolist(), s.error, s.energy, s.broken) for s in samples]
            )

        return run

    found["solve neal"] = solve("neal", num_reads=8)
    found["solve da"] = solve("da", num_reads=8)
    found["solve tabu"] = solve("tabu", num_reads=2)

    def sweep() -> str:
        compiled = bmfdsl.compile_model("formulation1", small, rank=2)
        swept = bmfdsl.sweep_weights(compiled, "neal", lam=[0.5, 2.0], seed=0, num_reads=4)
        best = swept.best
        return _digest(best.weights, best.energy, best.error, best.broken, best.feasible)

    found["sweep neal"] = sweep

    def estimator() -> str:
        model = bmfdsl.BinaryMatrixFactorization(n_components=3, random_state=0)
        W = model.fit_transform(dense)
        return _digest(np.asarray(W), np.asarray(model.components_), model.score(dense))

    found["estimator"] = estimator
    found["solve_bls"] = lambda: _digest(bmfdsl.solve_bls(dense, np.eye(30, 3, dtype=np.int8)))
    found["als"] = lambda: _digest(
        repr(bmfdsl.als(dense, np.eye(30, 3, dtype=np.int8), np.eye(30, 3, dtype=np.int8)))
    )
    # float scores: BLAS kernels differ in the last bits between machines (this digest changed
    # on a new machine with no change to its code), so they count to 12 significant digits
    found["leverage"] = lambda: _digest(_significant(bmfdsl.leverage_scores(tall), 12))
    for name in (info.name for info in bmfdsl.list_models()):
        data: dict[str, Any] = {}
        if name == "masked-bmf":
            data = {"mask": mask[:6, :5]}
        if name == "weighted-bmf":
            data = {"weights": (mask[:6, :5] + 1).astype(float)}
        matrix = small[:5, :5] if name == "symmetric-bmf" else small  # one factor: square A
        found[f"bqm {name}"] = lambda name=name, data=data, matrix=matrix: _bqm(
            bmfdsl.compile_model(name, matrix, rank=2, data=data).to_bqm()
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for fingerprints.json/.md")
    parser.add_argument("--compare", default=None, help="an earlier fingerprints.json")
    args = parser.parse_args(argv)
    results: dict[str, str] = {}
    seconds: dict[str, float] = {}
    for name, case in cases().items():
        start = time.perf_counter()
        try:
            results[name] = case()
        except Exception as error:  # a failing case is a fingerprint too
            results[name] = f"error: {type(error).__name__}: {error}"
        seconds[name] = time.perf_counter() - start
        print(f"{name:28s} {results[name]}  ({seconds[name]:.2f} s)", flush=True)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "fingerprints.json").write_text(json.dumps(results, indent=1) + "\n")
        lines = ["| case | fingerprint | seconds |", "|---|---|---:|"]
        lines += [f"| {k} | `{v}` | {seconds[k]:.2f} |" for k, v in results.items()]
        (out / "fingerprints.md").write_text("\n".join(lines) + "\n")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        differing = [
            k for k in sorted(set(before) | set(results)) if before.get(k) != results.get(k)
        ]
        for name in differing:
            print(f"DIFFERS: {name}: {before.get(name)} -> {results.get(name)}")
        print(f"{len(results) - len(differing)} of {len(results)} cases identical")
        return 1 if differing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
