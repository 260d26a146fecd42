"""Command-line subcommands ``experiment``, ``report`` and ``figures``.

:func:`add_subcommands` adds them to the ``bmfdsl`` command's argparse subparsers; each
subparser sets ``func``, called as ``args.func(args)`` and returning the exit status.
:func:`main` runs them on their own (``python -m bmfdsl.apps.experiments._cli``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from bmfdsl.apps.experiments._tables import DEFAULT_METHODS, EXPERIMENTS
from bmfdsl.credentials import scrub
from bmfdsl.errors import BmfdslError


def _experiment(args: argparse.Namespace) -> int:
    from bmfdsl.apps.experiments._report import write_report
    from bmfdsl.apps.experiments._runner import results_path
    from bmfdsl.apps.experiments._scheduling import check_experiment_data, run_experiment

    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    if args.sizes and len(names) > 1:
        raise BmfdslError("--sizes applies to one table at a time; name the table")
    for name in names if args.scheduler is None else []:  # a cluster's data is its own
        check_experiment_data(name, sizes=args.sizes, data_dir=args.data_dir)
    failed = 0
    for name in names:
        records = run_experiment(
            name,
            args.out,
            sizes=args.sizes,
            ranks=args.ranks,
            trials=args.trials,
            methods=args.methods,
            workers=args.workers,
            scheduler=args.scheduler,
            data_dir=args.data_dir,
            seed=args.seed,
            progress=not (args.no_progress or getattr(args, "quiet", False)),
            command=_command_line(args),
        )
        failed += records.failed
        failures = f", {records.failed} failed" if records.failed else ""
        print(
            f"{name}: {len(records)} of {records.planned} runs finished{failures} "
            f"in {results_path(args.out, name)}"
        )
    print(f"report: {write_report(args.out)}")
    if failed:
        print(
            f"bmfdsl: error: {failed} run(s) failed; their messages are in the JSONL records "
            "and the report; re-running the same command retries them",
            file=sys.stderr,
        )
        return 1
    return 0


def _command_line(args: argparse.Namespace) -> str:
    """The ``bmfdsl experiment`` command that reproduces ``args``."""
    words = ["bmfdsl", "experiment", args.name]
    for option in ("sizes", "ranks", "trials", "methods", "workers", "scheduler", "data_dir"):
        value = getattr(args, option)
        if value is not None:
            values = value if isinstance(value, list) else [value]
            words += [f"--{option.replace('_', '-')}", *map(str, values)]
    if args.seed:
        words += ["--seed", str(args.seed)]
    words += ["--out", str(args.out)]
    return shlex.join(words)


def _report(args: argparse.Namespace) -> int:
    from bmfdsl.apps.experiments._report import render_report, results_files, write_report

    results_files(args.dir)  # a missing folder, or one without results, is an error
    if args.output == "-":
        sys.stdout.write(render_report(args.dir))
    else:
        print(f"report: {write_report(args.dir, args.output)}")
    return 0


def _figures(args: argparse.Namespace) -> int:
    from bmfdsl.apps.experiments._figures import make_figures

    for path in make_figures(
        args.dir, data_dir=args.data_dir, method=args.method, formats=args.formats
    ):
        print(path)
    return 0


def add_subcommands(subparsers: Any) -> None:
    """Add ``experiment``, ``report`` and ``figures`` to an argparse subparsers object.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="bmfdsl")
    >>> add_subcommands(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["report", "runs/", "-o", "-"])
    >>> args.command, args.dir, args.output
    ('report', 'runs/', '-')
    """
    # the order of these calls is the order of the commands in `bmfdsl --help`
    _add_experiment_command(subparsers)
    _add_report_command(subparsers)
    _add_figures_command(subparsers)


def _add_experiment_command(subparsers: Any) -> None:
    """``bmfdsl experiment NAME ... --out DIR``."""
    experiment = subparsers.add_parser(
        "experiment",
        help="run one of the paper's experiments (resumable)",
        description=(
            "Run one of the paper's tables with its settings as defaults. Results are appended "
            "to OUT/<name>.jsonl as runs finish; re-running skips finished runs.\n\n"
            "example: bmfdsl experiment table2 --sizes 30 --ranks 1 2 --trials 2 --out runs/"
        ),
    )
    experiment.add_argument("name", choices=[*EXPERIMENTS, "all"], help="table1 ... table6, all")
    experiment.add_argument(
        "--sizes",
        nargs="+",
        help="row counts m (tables 1-4, default 30 2000 50000), images per digit (table5, "
        "default 10) or data sets (table6, default leukemia melanoma), e.g. 30 2000",
    )
    experiment.add_argument(
        "--ranks", nargs="+", type=int, help="target ranks, e.g. 1 2 (default 1-5)"
    )
    experiment.add_argument(
        "--trials", type=int, help="trials per instance and rank, e.g. 2 (default 10; table5: 1)"
    )
    experiment.add_argument(
        "--methods",
        nargs="+",
        help=f"default {' '.join(DEFAULT_METHODS)} (table6 adds bmfdsl-no-onehot); also "
        "qubo:<backend> and qubo:<backend>+als, e.g. bmfdsl qubo:neal",
    )
    where = experiment.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, help="local worker processes, e.g. 4 (default: CPUs; 1 = serial)"
    )
    where.add_argument(
        "--scheduler",
        help="Dask scheduler address, e.g. tcp://host:8786 (default: local processes); "
        "the scheduler is trusted: Dask exchanges pickled code with it, so use only your own",
    )
    experiment.add_argument(
        "--data-dir",
        help="folder with mnist/, leukemia/, melanoma/, e.g. data/ (default $BMFDSL_DATA_DIR)",
    )
    experiment.add_argument("--seed", type=int, default=0, help="base seed, e.g. 7 (default 0)")
    experiment.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress bar, as --quiet (default: a bar on a terminal)",
    )
    experiment.add_argument("--out", required=True, help="results folder (required), e.g. runs/t1")
    experiment.set_defaults(func=_experiment)


def _add_report_command(subparsers: Any) -> None:
    """``bmfdsl report DIR [-o FILE]``."""
    report = subparsers.add_parser(
        "report", help="markdown tables of results beside the paper's values"
    )
    report.add_argument("dir", help="results folder of `bmfdsl experiment`, e.g. runs/t1")
    report.add_argument(
        "--output",
        "-o",
        help="file to write, e.g. report.md (default DIR/report.md; '-' for stdout)",
    )
    report.set_defaults(func=_report)


def _add_figures_command(subparsers: Any) -> None:
    """``bmfdsl figures DIR [--data-dir DIR]``."""
    figures = subparsers.add_parser(
        "figures", help="the paper's figures and error-vs-rank plots (needs matplotlib)"
    )
    figures.add_argument("dir", help="results folder, e.g. runs/; figures go to DIR/figures")
    figures.add_argument(
        "--data-dir",
        help="data folder for Fig. 1 (MNIST) and Fig. 2 (leukemia), e.g. data/ "
        "(default $BMFDSL_DATA_DIR; without one both are skipped)",
    )
    figures.add_argument(
        "--method", default="bmfdsl", help="method of Fig. 1, e.g. baseline (default bmfdsl)"
    )
    figures.add_argument(
        "--formats",
        nargs="+",
        default=["png", "svg"],
        help="file formats, e.g. pdf (default png svg)",
    )
    figures.set_defaults(func=_figures)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the subcommands on their own; an error prints one line and exits with status 1."""
    parser = argparse.ArgumentParser(prog="bmfdsl", description="bmfdsl experiments")
    add_subcommands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (BmfdslError, FileNotFoundError) as exc:
        print(f"error: {scrub(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"interrupted: {exc}" if str(exc) else "interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
