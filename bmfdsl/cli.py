"""The ``bmfdsl`` command line.

    bmfdsl factorize FILE --rank R [--method M] [--model M] [--backend B] [--lam L]
                     [--one-hot V] [--sample-rows S] [--seed N] [--binarize T]
                     [--certify SECONDS] --out DIR
    bmfdsl backends
    bmfdsl models
    bmfdsl experiment NAME ... --out DIR      (see `bmfdsl experiment --help`)
    bmfdsl report DIR

Errors print one line and exit with status 2; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["build_parser", "main"]


def _sample_rows(value: str) -> int | str:
    return value if value == "auto" else int(value)


def _factorize(args: argparse.Namespace) -> int:
    from bmfdsl._factorize import factorize
    from bmfdsl.io import read_matrix

    A = read_matrix(args.file, binarize=args.binarize)
    weights: dict[str, float] | None = None
    if args.lam is not None or args.lam_onehot is not None:
        weights = {"lam": 1.0 if args.lam is None else args.lam}
        if args.lam_onehot is not None:
            weights["lam_onehot"] = args.lam_onehot
    params: dict[str, Any] = {}
    if args.time_limit is not None:
        params["time_limit"] = args.time_limit
    if args.num_reads is not None:
        params["num_reads"] = args.num_reads
    result = factorize(
        A,
        args.rank,
        method=args.method,
        model=args.model,
        backend=args.backend,
        one_hot=args.one_hot,
        weights=weights,
        sample_rows=args.sample_rows,
        als=not args.no_als,
        random_state=args.seed,
        certify=args.certify,
        **params,
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savetxt(out / "U.csv", result.U, fmt="%d", delimiter=",")
    np.savetxt(out / "V.csv", result.V, fmt="%d", delimiter=",")
    report = {
        "input": str(args.file),
        "shape": list(np.shape(A)),
        "rank": args.rank,
        "seed": args.seed,
        "error": result.error,
        "relative_error": result.relative_error,
        "broken_constraints": result.broken_constraints,
        "lower_bound": result.lower_bound,
        "gap": result.gap,
        "certified_optimal": result.certified_optimal,
        "info": result.info,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    quality = (
        "proven optimal"
        if result.certified_optimal
        else f"proven lower bound {result.lower_bound} (gap {100 * result.gap:.1f}%)"
    )
    print(
        f"rank {args.rank}: error {result.error} "
        f"(relative {result.relative_error:.4f}) in {result.info['total_time']:.2f} s, "
        f"{quality}; wrote {out / 'U.csv'}, {out / 'V.csv'}, {out / 'report.json'}"
    )
    return 0


def _backends(args: argparse.Namespace) -> int:
    from bmfdsl.backends.registry import list_backends

    for info in list_backends():
        status = "available" if info.available else f"unavailable: {info.reason}"
        print(f"{info.name:14} {status:12}  {info.description}")
    return 0


def _models(args: argparse.Namespace) -> int:
    from bmfdsl.compile import list_models

    for info in list_models():
        print(f"{info.name:22} {info.description}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``bmfdsl`` command."""
    parser = argparse.ArgumentParser(
        prog="bmfdsl", description="Binary matrix factorization through QUBO models."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("factorize", help="factorize a 0/1 matrix file")
    run.add_argument("file", help="CSV, TSV, NPY, NPZ or Matrix Market (.mtx) file")
    run.add_argument("--rank", "-r", type=int, required=True)
    run.add_argument("--method", default="qubo", help="qubo, baseline, thresholded, penalized")
    run.add_argument("--model", default="formulation1", help="registered model or script path")
    run.add_argument("--backend", default=None, help="solver name (default: native)")
    run.add_argument("--lam", type=float, default=None, help="penalty weight lam (default 1)")
    run.add_argument("--lam-onehot", type=float, default=None, help="one-hot weight")
    run.add_argument("--one-hot", choices=["U", "V"], default=None)
    run.add_argument("--sample-rows", type=_sample_rows, default=None, help="S or 'auto'")
    run.add_argument("--time-limit", type=float, default=None, help="solver budget (s)")
    run.add_argument("--num-reads", type=int, default=None)
    run.add_argument("--no-als", action="store_true", help="skip the ALS polish")
    run.add_argument("--seed", type=int, default=None)
    run.add_argument("--binarize", type=float, default=None, help="1 where value >= T")
    run.add_argument(
        "--certify",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run the exact engine (CP-SAT, bmfdsl[exact]) to prove optimality or raise the "
        "lower bound",
    )
    run.add_argument("--out", required=True, help="output folder")
    run.set_defaults(func=_factorize)

    commands.add_parser("backends", help="list solver backends").set_defaults(func=_backends)
    commands.add_parser("models", help="list registered models").set_defaults(func=_models)

    from bmfdsl.experiments.cli import add_subcommands

    add_subcommands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("bmfdsl: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line instead of a traceback
        if args.debug:
            raise
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        if "only 0 and 1" in message and getattr(args, "binarize", "absent") is None:
            message += " Or pass --binarize T to map values >= T to 1."
        print(f"bmfdsl: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
