"""The ``bmfdsl`` command line (also ``python -m bmfdsl``).

    bmfdsl factorize FILE|- --rank R [options] [--out DIR]
    bmfdsl backends | models
    bmfdsl datasets check DIR
    bmfdsl experiment NAME ... --out DIR      (see `bmfdsl experiment --help`)
    bmfdsl report DIR

Exit status: 0 success, 1 a data or solver error (one line on stderr; ``--debug`` anywhere
on the line shows the traceback), 2 a usage error, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import sys
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.credentials import scrub
from bmfdsl.linalg import DEVICES
from bmfdsl.modeling import SUFFICIENT

EXIT_DATA_ERROR = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

EPILOG = """\
exit status: 0 success; 1 data or solver error (one line on stderr); 2 usage error;
130 interrupted (Ctrl-C). --debug (anywhere on the line) shows tracebacks; --quiet
(anywhere) hides progress, which is shown on stderr only when it is a terminal.
"""

#: Options accepted anywhere on the command line, before or after the subcommand.
GLOBAL_FLAGS = ("--debug", "--quiet")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keep the examples' line breaks; show each option's default unless its help says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            text += " (default: %(default)s)"
        return text


def _weight(text: str) -> tuple[str, float | str]:
    """``NAME=VALUE`` of ``--weight``: a number or ``sufficient``."""
    name, sep, value = text.partition("=")
    try:
        if not sep or not name.strip():
            raise ValueError
        if value.strip() == SUFFICIENT:
            return name.strip(), SUFFICIENT
        return name.strip(), float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE with a number or '{SUFFICIENT}', e.g. lam=2; got {text!r}"
        ) from None


def _sample_rows(value: str) -> int | str:
    if value == "auto":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer or 'auto', got {value!r}") from None


def _number(value: str) -> float:
    """A finite number, also as a fraction: ``0.5``, ``1/7``, ``1e-3``."""
    text = value.strip()
    try:
        if "/" in text:  # a fraction a/b of two plain numbers
            top, _, bottom = text.partition("/")
            number = float(Fraction(float(top)) / Fraction(float(bottom)))
        else:
            number = float(text)
    except (ValueError, ZeroDivisionError, OverflowError):
        number = math.nan
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(
            f"expected a finite number such as 0.5 or 1/7, got {value!r}"
        )
    return number


def _threshold(value: str) -> float | tuple[float, float]:
    """``--binarize``: ``T`` (one-sided) or ``LOW:HIGH`` (the paper's two-sided rule)."""
    if ":" not in value:
        return _number(value)
    low, _, high = value.partition(":")
    bounds = (_number(low), _number(high))
    if not 0 <= bounds[0] < bounds[1]:
        raise argparse.ArgumentTypeError(
            f"LOW:HIGH needs 0 <= LOW < HIGH, e.g. 1/7:5; got {value!r}"
        )
    return bounds


def _image_shape(value: str) -> tuple[int, int]:
    height, sep, width = value.lower().partition("x")
    try:
        shape = (int(height), int(width))
    except ValueError:
        shape = (0, 0)
    if not sep or min(shape) < 1:
        raise argparse.ArgumentTypeError(f"expected HEIGHTxWIDTH, e.g. 28x28; got {value!r}")
    return shape


def _seed(value: str) -> int:
    """``--seed``: numpy seeds are non-negative integers."""
    try:
        seed = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {value!r}") from None
    if seed < 0:
        raise argparse.ArgumentTypeError(f"a seed is a non-negative integer, got {value!r}")
    return seed


def _index_col(value: str) -> int | str | None:
    if value in ("auto", "none"):
        return None if value == "none" else "auto"
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected auto, none or a column number, got {value!r}"
        ) from None


def read_input(args: argparse.Namespace) -> tuple[Any, Any]:
    """The matrix ``bmfdsl factorize`` factorizes, as its reading options say: read, labelled
    from label files, binarized, without empty rows/columns; and what was dropped (or None).
    """
    from dataclasses import replace

    from bmfdsl.apps._io import (
        TwoSidedThreshold,
        binarize_values,
        drop_empty,
        read_data,
        read_labels,
    )
    from bmfdsl.errors import InvalidParameterError

    rule: Any = args.binarize
    if isinstance(rule, tuple):
        rule = TwoSidedThreshold(
            rule[0],
            rule[1],
            shift_nonnegative=args.shift_nonnegative,
            normalize_columns=args.normalize_columns,
        )
    elif args.shift_nonnegative or args.normalize_columns:
        raise InvalidParameterError(
            "--shift-nonnegative and --normalize-columns belong to the two-sided rule; "
            "give --binarize LOW:HIGH, e.g. --binarize 0.96:1.04"
        )
    data = read_data(
        args.file,
        header=args.header,
        index_col=args.index_col,
        delimiter=args.delimiter,
        header_rows=args.header_rows,
    )
    if args.row_labels is not None:
        data = replace(data, row_labels=read_labels(args.row_labels, data.shape[0], what="row"))
    if args.column_labels is not None:
        labels = read_labels(args.column_labels, data.shape[1], what="column")
        data = replace(data, column_labels=labels)
    if rule is not None:
        data = binarize_values(data, rule)
    if args.drop_empty is None:
        return data, None
    return drop_empty(
        data,
        rows=args.drop_empty in ("rows", "both"),
        columns=args.drop_empty in ("columns", "both"),
    )


def _factorize(args: argparse.Namespace) -> int:
    from bmfdsl.apps._io import check_out_dir
    from bmfdsl.pipeline import factorize
    from bmfdsl.progress import activity

    if args.out is not None:  # before the solve: a bad folder must not cost one
        check_out_dir(args.out)
    data, dropped = read_input(args)
    if args.plot is not None:  # refuse a picture too large to draw before solving, not after
        from bmfdsl.apps._plots import check_drawable

        check_drawable(data.shape)
        check_out_dir(Path(args.plot).parent)  # and a folder it cannot be written to
    extra: dict[str, Any] = {}
    if data.mask is not None:  # missing cells: only the observed entries count
        extra["mask"] = data.mask
    A = np.nan_to_num(data.values) if data.mask is not None else data.values
    weights = dict(args.weight) or None
    if args.time_limit is not None:
        extra["time_limit"] = args.time_limit
    if args.num_reads is not None:
        extra["num_reads"] = args.num_reads
    with activity("factorize", enabled=None if not args.quiet else False):
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
            device=args.device,
            **extra,
        )
    quality = (
        "proven optimal"
        if result.certified_optimal
        else f"proven lower bound {result.lower_bound} (gap {100 * result.gap:.1f}%)"
    )
    summary = (
        f"{data.shape[0]}x{data.shape[1]}, rank {args.rank}: error {result.error} "
        f"(relative {result.relative_error:.4f}) in {result.info['timings']['total']:.2f} s, "
        f"{quality}{_summary_notes(data, result)}"
    )
    if dropped is not None:
        summary += f"; {dropped.describe()}"
    pictures = _write_plots(args, data, result) if args.plot is not None else []
    if args.out is None:
        written_text = "nothing written (give --out DIR to write U.csv, V.csv, report.json)"
        if pictures:
            written_text = f"wrote {', '.join(str(path) for path in pictures)}"
        print(f"{summary}; {written_text}")
        return 0
    written = _write_outputs(Path(args.out), args, data, result, dropped)
    print(f"{summary}; wrote {', '.join(str(path) for path in [*written, *pictures])}")
    return 0


def _write_plots(args: argparse.Namespace, data: Any, result: Any) -> list[Path]:
    """``--plot FILE``: the factorization's picture; with ``--image-shape`` also the factors."""
    from bmfdsl.apps._plots import plot_factorization, plot_factors

    path = Path(args.plot)
    path.parent.mkdir(parents=True, exist_ok=True)
    A = data.values
    if data.mask is not None:
        A = np.where(data.mask, np.nan_to_num(np.asarray(A, dtype=np.float64)), np.nan)
    _save_figure(plot_factorization(result, A), path)
    written = [path]
    if args.image_shape is not None:
        factors = path.with_name(f"{path.stem}-factors{path.suffix}")
        _save_figure(plot_factors(result, args.image_shape), factors)
        written.append(factors)
    return written


def _save_figure(figure: Any, path: Path) -> None:
    """``figure`` saved to ``path`` as its suffix says (png by default), atomically: never
    half a file, never through a symlink (as ``--out`` writes)."""
    import io

    from bmfdsl.apps._io import write_bytes_atomic

    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip(".").lower() or "png", dpi=120)
    write_bytes_atomic(path, buffer.getvalue())


def _summary_notes(data: Any, result: Any) -> str:
    """What the summary line must not leave out: ignored cells, a certificate not tried."""
    notes = []
    if data.missing:
        notes.append(f"{data.missing} missing cell{'s' if data.missing != 1 else ''} ignored")
    certify = _certify_note(result.info.get("certify"))
    if certify:
        notes.append(certify)
    return "".join(f", {note}" for note in notes)


def _certify_note(certify: dict[str, Any] | None) -> str:
    """What ``--certify`` added, for the summary (empty without it)."""
    if not certify:
        return ""
    if certify.get("status") == "skipped":
        return f"certify skipped: {certify.get('reason', 'no reason given')}"
    outcome = certify.get("outcome")
    if outcome == "already proven":
        return "certify not run: the cheap bounds proved it"
    if outcome == "nothing new":
        return f"certify found nothing new in {certify['wall_time']:.1f} s: give it more seconds"
    return f"certify {outcome}, from bound {certify['cheap_bound']}"


def _write_outputs(
    out: Path, args: argparse.Namespace, data: Any, result: Any, dropped: Any
) -> list[Path]:
    from bmfdsl.apps._clusters import clusters_from_factor
    from bmfdsl.apps._io import write_labelled, write_text_atomic

    out.mkdir(parents=True, exist_ok=True)
    escape = args.escape_formulas
    components = [f"k{k}" for k in range(result.U.shape[1])]
    labelled = data.row_labels is not None or data.column_labels is not None
    header = components if labelled else None
    rows = data.row_labels
    columns = data.column_labels
    written = [
        write_labelled(
            out / "U.csv",
            result.U,
            row_labels=rows,
            column_labels=header,
            index_name="row",
            escape_formulas=escape,
        ),
        write_labelled(
            out / "V.csv",
            result.V,
            row_labels=columns,
            column_labels=header,
            index_name="column",
            escape_formulas=escape,
        ),
    ]
    if args.one_hot is not None:
        factor, labels, kind = (
            (result.V, columns, "column") if args.one_hot == "V" else (result.U, rows, "row")
        )
        names = labels if labels is not None else [str(i) for i in range(factor.shape[0])]
        clusters = np.array(clusters_from_factor(factor), dtype=object)[:, None]
        written.append(
            write_labelled(
                out / "clusters.csv",
                clusters,
                row_labels=names,
                column_labels=["cluster"],
                index_name=kind,
                escape_formulas=escape,
            )
        )
    report = {
        "input": str(args.file),
        "shape": list(data.shape),
        "rank": args.rank,
        "seed": args.seed,
        "missing_cells": data.missing,
        "dropped": None
        if dropped is None
        else {"rows": dropped.row_names, "columns": dropped.column_names},
        "error": result.error,
        "relative_error": result.relative_error,
        "broken_constraints": result.broken_constraints,
        "lower_bound": result.lower_bound,
        "gap": result.gap,
        "certified_optimal": result.certified_optimal,
        "info": result.info,
    }
    write_text_atomic(out / "report.json", json.dumps(report, indent=2, default=str))
    return [*written, out / "report.json"]


def _backends(args: argparse.Namespace) -> int:
    from bmfdsl.solvers import list_backends

    infos = list_backends()
    width = max(len(info.status) for info in infos if info.available)
    for info in infos:
        print(f"{info.name:14} {info.status:{width}}  {info.description}")
    return 0


def _models(args: argparse.Namespace) -> int:
    from bmfdsl.modeling import list_models

    for info in list_models():
        print(f"{info.name:22} {info.description}")
    return 0


def _datasets_check(args: argparse.Namespace) -> int:
    from bmfdsl.apps._datafiles import check_data_dir

    problems = 0
    for check in check_data_dir(args.dir):
        problems += not check.ok
        verdict = "ok     " if check.ok else "PROBLEM"
        print(f"{verdict}  {check.dataset:9} {check.file}  {check.detail}")
    if problems:
        print(
            f"{problems} problem(s); see docs/data.md for where each file comes from",
            file=sys.stderr,
        )
        return EXIT_DATA_ERROR
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``bmfdsl`` command: global options, then one subcommand each.

    >>> args = build_parser().parse_args(["factorize", "data.csv", "--rank", "3"])
    >>> args.command, args.file, args.rank, args.method
    ('factorize', 'data.csv', 3, 'qubo')
    """
    parser = argparse.ArgumentParser(
        prog="bmfdsl",
        description="Binary matrix factorization through QUBO models.",
        epilog=EPILOG,
        formatter_class=_HelpFormatter,
    )
    version = importlib.metadata.version("bmfdsl")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the order of these calls is the order of COMMAND in `bmfdsl --help`
    _add_factorize_command(commands)
    _add_listing_commands(commands)
    _add_datasets_command(commands)

    from bmfdsl.apps.experiments import add_subcommands

    add_subcommands(commands)
    return parser


def _add_factorize_command(commands: Any) -> None:
    """``bmfdsl factorize FILE --rank R ...``; its options in the order ``--help`` lists them."""
    run = commands.add_parser(
        "factorize",
        help="factorize a 0/1 matrix file",
        description="Factorize a 0/1 matrix A ≈ U Vᵀ with binary U and V.",
        epilog="examples:\n"
        "  bmfdsl factorize data.csv --rank 3 --out result/\n"
        "  bmfdsl factorize expr.tsv -r 2 --binarize 0.5 --one-hot V --out clusters/\n"
        "  bmfdsl factorize ALL_AML_data.txt -r 2 --binarize 1/7:5 --drop-empty rows \\\n"
        "      --row-labels ALL_AML_genes.txt --column-labels ALL_AML_samples.txt\n"
        "  bmfdsl factorize data.csv -r 3 --plot result.png\n"
        "  cat data.csv | bmfdsl factorize - -r 2\n\n" + EPILOG,
        formatter_class=_HelpFormatter,
    )
    run.add_argument(
        "file",
        help="CSV/TSV/TXT (delimiter sniffed; optional header row and label column), NPY, "
        "NPZ (dense or scipy sparse) or Matrix Market .mtx; '-' reads stdin (sparse files "
        "stay sparse with --sample-rows). e.g. data.csv",
    )
    _add_model_options(run)
    _add_solver_options(run)
    _add_reading_options(run)
    run.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        help="write U.csv, V.csv (labelled when the input is), report.json and with --one-hot "
        "clusters.csv here, e.g. result/ (default: print a summary, write nothing); labels "
        "are written verbatim",
    )
    run.add_argument(
        "--escape-formulas",
        action="store_true",
        help="prefix labels starting with = + - @ with ' in the CSV files, so that a "
        "spreadsheet opens them as text, e.g. =SUM(A1) is written as '=SUM(A1) "
        "(default: labels verbatim)",
    )
    run.add_argument(
        "--plot",
        default=None,
        metavar="FILE",
        help="draw A, U Vᵀ and the residual, ordered by the factors, to FILE (.png, .svg, "
        ".pdf; needs bmfdsl[plot]), e.g. result.png (default: no picture)",
    )
    run.add_argument(
        "--image-shape",
        type=_image_shape,
        default=None,
        metavar="HxW",
        help="with --plot, also draw each column of V as an H x W image to FILE-factors, "
        "e.g. 28x28 for MNIST digits in rows (default: no such picture)",
    )
    run.set_defaults(func=_factorize)


def _add_model_options(run: argparse.ArgumentParser) -> None:
    """What to factorize into: the rank, the method, the model, its weights and constraints."""
    run.add_argument(
        "--rank", "-r", type=int, required=True, help="target rank r (required), e.g. 3"
    )
    run.add_argument(
        "--method",
        default="qubo",
        choices=["qubo", "baseline", "thresholded", "penalized"],
        help="qubo (the QUBO pipeline) or one of the paper's comparison methods, e.g. baseline",
    )
    run.add_argument(
        "--model", default="formulation1", help="registered model or script path, e.g. formulation2"
    )
    run.add_argument(
        "--backend", default=None, help="solver name, e.g. neal (default: native, the best local)"
    )
    run.add_argument(
        "--weight",
        type=_weight,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a penalty weight the model declares, repeatable, e.g. --weight lam=2 "
        "--weight lam_onehot=4, or NAME=sufficient: large enough that every minimum is "
        "feasible (default: the model's own, e.g. the paper's lam = 1)",
    )
    run.add_argument(
        "--one-hot",
        choices=["U", "V"],
        default=None,
        help="put every column (V) or row (U) of A in exactly one cluster and write "
        "clusters.csv, e.g. V (default: no constraint)",
    )


def _add_solver_options(run: argparse.ArgumentParser) -> None:
    """How to solve: row sampling, the solver's budget, the ALS polish, the seed, a certificate."""
    run.add_argument(
        "--sample-rows",
        type=_sample_rows,
        default=None,
        help="leverage-score sample of S rows, or 'auto', e.g. 30 (default: all rows)",
    )
    run.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="opt-in wall-clock limit of the solver in seconds, e.g. 2; answers then depend "
        "on machine load (default: a work budget, the same answer for the same --seed)",
    )
    run.add_argument(
        "--num-reads", type=int, default=None, help="solver reads, e.g. 8 (default: the backend's)"
    )
    run.add_argument("--no-als", action="store_true", help="skip the ALS polish (default: polish)")
    run.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where the full-data BLS and ALS score codes, e.g. gpu (CuPy and a CUDA GPU: "
        "bmfdsl[gpu]); the same answer on every device",
    )
    run.add_argument(
        "--seed",
        type=_seed,
        default=None,
        help="seed for every random choice, e.g. 0 (default: fresh entropy)",
    )
    run.add_argument(
        "--certify",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run the exact engine (CP-SAT, bmfdsl[exact]) to prove optimality or raise the "
        "lower bound, e.g. 10 (default: cheap bounds only)",
    )


def _add_reading_options(run: argparse.ArgumentParser) -> None:
    """How to read the file: binarization, header rows, labels, delimiter, empty lines."""
    run.add_argument(
        "--binarize",
        type=_threshold,
        default=None,
        metavar="T|LOW:HIGH",
        help="T: 1 where a value is >= T, else 0, e.g. 0.5. LOW:HIGH: the paper's two-sided "
        "rule for expression data, 1 where a value is <= LOW*kappa or >= HIGH*kappa (kappa: "
        "the mean value), e.g. 1/7:5 (leukemia). Missing cells stay missing "
        "(default: values must be 0/1)",
    )
    run.add_argument(
        "--shift-nonnegative",
        action="store_true",
        help="with LOW:HIGH, first add -min to every value, e.g. for log ratios with negative "
        "values (default: values must be >= 0)",
    )
    run.add_argument(
        "--normalize-columns",
        action="store_true",
        help="with LOW:HIGH, first scale each column to unit norm, e.g. melanoma: --binarize "
        "0.96:1.04 --shift-nonnegative --normalize-columns (default: no scaling)",
    )
    run.add_argument(
        "--drop-empty",
        nargs="?",
        const="both",
        default=None,
        choices=["rows", "columns", "both"],
        help="drop all-zero rows and/or columns after binarizing (both when given alone), "
        "e.g. rows; the summary and report.json say which (default: keep them)",
    )
    run.add_argument(
        "--row-labels",
        default=None,
        metavar="FILE",
        help="row labels, one per line (first field; a header line is allowed), e.g. "
        "genes.txt (default: the file's label column, if any)",
    )
    run.add_argument(
        "--column-labels",
        default=None,
        metavar="FILE",
        help="column labels, one per line, e.g. samples.txt (default: the file's header)",
    )
    run.add_argument(
        "--header-rows",
        type=int,
        default=1,
        metavar="N",
        help="lines the header spans: the first names the columns, the others (e.g. a row of "
        "class labels) are skipped, e.g. 2",
    )
    header = run.add_mutually_exclusive_group()
    header.add_argument(
        "--header",
        dest="header",
        action="store_const",
        const=True,
        default=None,
        help="the first row is a header (default: detected; a header has no numeric cell)",
    )
    header.add_argument(
        "--no-header",
        dest="header",
        action="store_const",
        const=False,
        help="the first row is data (default: detected)",
    )
    run.add_argument(
        "--index-col",
        type=_index_col,
        default="auto",
        metavar="{auto,none,N}",
        help="column of row labels: auto (the first column when it is not numeric), none, "
        "or its position, e.g. 0",
    )
    run.add_argument(
        "--delimiter", default=None, help="field separator, e.g. ';' (default: sniffed)"
    )


def _add_listing_commands(commands: Any) -> None:
    """``bmfdsl backends`` and ``bmfdsl models``: what is installed and registered."""
    commands.add_parser("backends", help="list solver backends").set_defaults(func=_backends)
    commands.add_parser("models", help="list registered models").set_defaults(func=_models)


def _add_datasets_command(commands: Any) -> None:
    """``bmfdsl datasets check DIR``: the reference data files and their checksums."""
    datasets = commands.add_parser("datasets", help="check the reference data files")
    datasets_commands = datasets.add_subparsers(dest="datasets_command", required=True)
    check = datasets_commands.add_parser(
        "check",
        help="check a data folder: every file present with the documented sha256",
        epilog="example:\n  bmfdsl datasets check ../shared/data",
        formatter_class=_HelpFormatter,
    )
    check.add_argument("dir", help="folder with mnist/, leukemia/, melanoma/, e.g. data/")
    check.set_defaults(func=_datasets_check)


def _split_global_flags(argv: Sequence[str]) -> tuple[list[str], set[str]]:
    """Take ``--debug``/``--quiet`` out of ``argv`` wherever they are (before ``--``)."""
    rest: list[str] = []
    found: set[str] = set()
    for position, word in enumerate(argv):
        if word == "--":
            rest.extend(argv[position:])
            break
        if word in GLOBAL_FLAGS or word == "-q":
            found.add("--quiet" if word == "-q" else word)
        else:
            rest.append(word)
    return rest, found


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (see the module docstring)."""
    words, flags = _split_global_flags(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(words)
    except SystemExit as exc:  # --help, --version and usage errors (status 2)
        return int(exc.code or 0)
    args.debug = args.debug or "--debug" in flags
    args.quiet = args.quiet or "--quiet" in flags
    try:
        return int(args.func(args))
    except KeyboardInterrupt as exc:  # one line; what was finished is said by the raiser
        detail = f": {exc}" if str(exc) else ""
        print(f"bmfdsl: interrupted{detail}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # one clear line instead of a traceback
        if args.debug:
            raise
        message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        if "only 0 and 1" in message and getattr(args, "binarize", "absent") is None:
            message += (
                " Or pass --binarize T to map values >= T to 1, or --binarize LOW:HIGH for the "
                "paper's two-sided rule for expression data (e.g. 1/7:5)."
            )
        print(f"bmfdsl: error: {scrub(message)}", file=sys.stderr)
        return EXIT_DATA_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
