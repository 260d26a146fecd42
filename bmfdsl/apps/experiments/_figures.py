"""Figures (matplotlib, the optional extra ``plot``): the paper's Fig. 1 and 2, error vs rank.

Figures are drawn on ``matplotlib.figure.Figure`` objects directly (no pyplot, no global
backend state) and saved in every requested format.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.apps._plots import new_figure
from bmfdsl.apps.experiments._report import (
    PAPER_METHODS,
    group_order,
    load_paper_tables,
    order_methods,
    summarize,
)
from bmfdsl.apps.experiments._runner import Method, load_records, resolve_methods
from bmfdsl.apps.experiments._tables import EXPERIMENTS, MethodSettings, paper_method_for
from bmfdsl.errors import InvalidParameterError


def _save(figure: Any, stem: Path, formats: Sequence[str]) -> list[Path]:
    paths = []
    for extension in formats:
        path = stem.with_suffix(f".{extension}")
        figure.savefig(path, bbox_inches="tight", dpi=150)
        paths.append(path)
    return paths


def mnist_reconstruction_figure(
    image: np.ndarray,
    method: Method,
    ranks: Sequence[int] = (1, 2, 3, 4, 5),
    random_state: int = 0,
) -> Any:
    """Fig. 1: a binary digit and its rank-r reconstructions ``U Vᵀ`` (black = 1).

    Args:
        image: a 0/1 image, e.g. from :func:`bmfdsl.apps.load_mnist`.
        method: ``(A, rank, settings) -> Factorization``.
        ranks: ranks to show.
        random_state: seed of the method.
    """
    figure = new_figure(figsize=(1.6 * (len(ranks) + 1), 2.0))
    axes = figure.subplots(1, len(ranks) + 1)
    panels = [("binary digit", image)]
    for rank in ranks:
        result = method(np.asarray(image), rank, MethodSettings(None, None, random_state))
        panels.append(
            (f"rank {rank}\nrel. error {result.relative_error:.3f}", result.reconstruct())
        )
    for axis, (title, picture) in zip(axes, panels, strict=True):
        axis.imshow(picture, cmap="gray_r", vmin=0, vmax=1, interpolation="nearest")
        axis.set_title(title, fontsize=8)
        axis.set_xticks([])
        axis.set_yticks([])
    return figure


def leukemia_figure(matrix: np.ndarray) -> Any:
    """Fig. 2: the thresholded leukemia matrix (genes x samples; black = 1)."""
    figure = new_figure(figsize=(4.0, 6.0))
    axis = figure.subplots()
    axis.imshow(matrix, cmap="gray_r", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    axis.set_xlabel("sample")
    axis.set_ylabel("gene")
    axis.set_title(f"thresholded leukemia data ({matrix.shape[0]} x {matrix.shape[1]})")
    return figure


def error_vs_rank_figure(records: Sequence[dict[str, Any]], experiment: str) -> Any:
    """Relative error vs rank per block of a table: ours solid (± std), the paper's dashed."""
    table = EXPERIMENTS[experiment].number
    summary = summarize(records)
    paper = load_paper_tables()
    groups = group_order(k[1] for k in summary if k[0] == table)
    figure = new_figure(figsize=(4.2 * max(len(groups), 1), 3.4))
    axes = np.atleast_1d(figure.subplots(1, max(len(groups), 1)))
    # A method of ours and the paper's row it is compared with share a colour.
    paper_colors = {method: f"C{index}" for index, method in enumerate(PAPER_METHODS)}
    ours = order_methods(k[2] for k in summary if k[0] == table)
    spare = iter(f"C{index}" for index in range(len(PAPER_METHODS), 10))
    colors, taken = {}, set()
    for method in ours:
        reference = paper_method_for(method)
        if reference in paper_colors and reference not in taken:
            colors[method] = paper_colors[reference]
            taken.add(reference)
        else:
            colors[method] = next(spare, "black")
    for axis, group in zip(axes, groups, strict=False):
        for method in ours:
            ranks = sorted(k[3] for k in summary if k[:3] == (table, group, method))
            if not ranks:
                continue
            means = np.array([summary[(table, group, method, r)]["mean"] for r in ranks])
            stds = np.array([summary[(table, group, method, r)]["std"] for r in ranks])
            color = colors[method]
            axis.plot(ranks, means, marker="o", color=color, label=method)
            axis.fill_between(ranks, means - stds, means + stds, color=color, alpha=0.15)
        for method in PAPER_METHODS:
            ranks = sorted(k[3] for k in paper if k[:3] == (table, group, method))
            if ranks:
                values = [paper[(table, group, method, r)] for r in ranks]
                axis.plot(
                    ranks,
                    values,
                    linestyle="--",
                    marker="x",
                    color=paper_colors[method],
                    label=f"{method} (paper)",
                )
        axis.set_title(f"Table {table}: {group.replace('m=', 'm = ')}", fontsize=9)
        axis.set_xlabel("rank r")
        axis.set_ylabel("relative error")
        axis.grid(alpha=0.3)
    if groups:
        axes[0].legend(fontsize=6)
    return figure


def make_figures(
    results_dir: str | os.PathLike[str],
    *,
    out_dir: str | os.PathLike[str] | None = None,
    data_dir: str | os.PathLike[str] | None = None,
    method: str | Method = "bmfdsl",
    formats: Sequence[str] = ("png", "svg"),
) -> list[Path]:
    """Write every figure that the results and data allow; return the written files.

    Error-vs-rank plots come from ``results_dir/<table>.jsonl``. Fig. 1 (the first binary
    digit 3, as in the paper) and Fig. 2 need the data folder (``data_dir`` or
    ``$BMFDSL_DATA_DIR``); without it they are skipped with a note on stderr.
    """
    if not Path(results_dir).is_dir():  # a typo must not create a folder and succeed
        raise InvalidParameterError(
            f"no results folder {str(results_dir)!r}; give the --out folder of `bmfdsl experiment`"
        )
    out = Path(out_dir) if out_dir is not None else Path(results_dir) / "figures"
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name in EXPERIMENTS:
        records = [
            r for r in load_records(Path(results_dir) / f"{name}.jsonl") if r.get("status") == "ok"
        ]
        if records:
            figure = error_vs_rank_figure(records, name)
            written += _save(figure, out / f"{name}_error_vs_rank", formats)
    run: Callable[..., Any]
    run = method if callable(method) else resolve_methods([method])[method]
    from bmfdsl.apps._datafiles import load_leukemia, load_mnist

    try:
        images, labels = load_mnist(data_dir, per_digit=1)
    except (FileNotFoundError, ValueError) as exc:
        print(f"skipping Fig. 1 (MNIST): {exc}", file=sys.stderr)
    else:
        three = images[int(np.flatnonzero(labels == 3)[0])]
        written += _save(mnist_reconstruction_figure(three, run), out / "fig1_mnist", formats)
    try:
        leukemia = load_leukemia(data_dir)
    except (FileNotFoundError, ValueError) as exc:
        print(f"skipping Fig. 2 (leukemia): {exc}", file=sys.stderr)
    else:
        written += _save(leukemia_figure(leukemia.matrix), out / "fig2_leukemia", formats)
    return written
