"""Pictures of one factorization (matplotlib, the optional extra ``plot``).

:func:`plot_factorization` (also ``Factorization.plot``) draws ``A``, ``U Vᵀ`` and the residual
side by side, rows and columns ordered by their factor codes so that the blocks show, with
``U`` and ``Vᵀ`` as coloured strips beside them; :func:`plot_factors` draws each factor as an
image (e.g. the columns of ``V`` as 28 x 28 digits). Figures are built on
``matplotlib.figure.Figure`` with the Agg canvas: no pyplot, no screen, no global state.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.result import Factorization

#: Cells of ``A`` drawn at most (a dense copy is made): larger inputs ask for a row sample.
MAX_PLOT_CELLS = 25_000_000
# The residual's colours: a 1 of A left uncovered, a cell covered once too often, a missing one.
_MISSED_COLOR = "#d62728"
_EXTRA_COLOR = "#1f77b4"
_MISSING_COLOR = "#c8c8c8"


def new_figure(**options: Any) -> Any:
    """A ``matplotlib.figure.Figure`` on the Agg canvas, or a typed error naming the extra.

    >>> new_figure(figsize=(2, 1)).canvas.get_default_filetype()
    'png'
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BackendUnavailableError(
            "pictures need matplotlib: pip install 'bmfdsl[plot]'"
        ) from exc
    figure = Figure(**options)
    FigureCanvasAgg(figure)
    return figure


def factor_order(F: np.ndarray) -> np.ndarray:
    """The order of ``F``'s rows by their codes, component 0 first and most significant;
    equal codes keep their order (a stable sort).

    >>> factor_order(np.array([[0, 1], [1, 0], [1, 1], [0, 1]])).tolist()
    [2, 1, 0, 3]
    """
    F = np.asarray(F)
    if F.shape[1] == 0:
        return np.arange(F.shape[0])
    # lexsort's last key is its primary one; descending codes put rows using component 0 first
    return np.lexsort(-F[:, ::-1].T.astype(np.int64))


def plot_factorization(
    result: Factorization,
    A: Any = None,
    *,
    order: bool = True,
    title: str | None = None,
    figsize: tuple[float, float] | None = None,
) -> Any:
    """A figure of ``A``, ``U Vᵀ`` and ``A − U Vᵀ`` side by side, with ``U`` and ``Vᵀ`` as strips.

    Args:
        result: a :class:`~bmfdsl.result.Factorization`.
        A: the factorized matrix (dense, scipy sparse, or with NaN or a numpy mask where cells
            are missing; drawn grey). ``None`` draws ``U Vᵀ`` and the factors only.
        order: sort rows by their code in ``U`` and columns by their code in ``V`` so that
            each component's block is contiguous; ``False`` keeps the input order.
        title: the figure's title (default: the error, relative error and proven gap).
        figsize: inches; default from the number of panels.

    Returns:
        A ``matplotlib.figure.Figure``; save it with ``figure.savefig("out.png")``. Its axes
        are titled ``"Vᵀ"``, ``"U"``, ``"A"``, ``"U Vᵀ"`` and ``"A − U Vᵀ"`` (without ``A``:
        ``"Vᵀ"``, ``"U"`` and ``"U Vᵀ"``). Black is 1 (in ``U Vᵀ``: covered at least once); in
        the residual red marks a 1 of ``A`` left uncovered and blue a cell covered although
        ``A`` is 0 there (or covered by several components). Matrices of more than 400 rows or
        columns are drawn with each pixel's cells averaged, so that density shows.

    >>> from bmfdsl import factorize
    >>> A = np.array([[1, 1, 0], [0, 0, 1], [1, 1, 0]])
    >>> figure = plot_factorization(factorize(A, 2, random_state=0), A)
    >>> [axis.get_title() for axis in figure.axes]
    ['Vᵀ', 'U', 'A', 'U Vᵀ', 'A − U Vᵀ']
    """
    figure = new_figure(layout="constrained")  # first: a missing matplotlib names the extra
    from matplotlib.colors import ListedColormap

    U = np.asarray(result.U, dtype=np.int64)
    V = np.asarray(result.V, dtype=np.int64)
    product = U @ V.T
    observed = None if A is None else _masked_matrix(A, product.shape)
    rows = factor_order(U) if order else np.arange(U.shape[0])
    columns = factor_order(V) if order else np.arange(V.shape[0])

    panels: list[tuple[str, np.ndarray, Any]] = []
    binary = ListedColormap(["white", "black"]).with_extremes(bad=_MISSING_COLOR)
    if observed is not None:
        panels.append(("A", observed[rows][:, columns], binary))
    panels.append(("U Vᵀ", np.minimum(product, 1)[rows][:, columns], binary))
    if observed is not None:
        residual = np.ma.clip(observed - product, -1, 1)
        residual_map = ListedColormap([_EXTRA_COLOR, "white", _MISSED_COLOR]).with_extremes(
            bad=_MISSING_COLOR
        )
        panels.append(("A − U Vᵀ", residual[rows][:, columns], residual_map))

    m, n = product.shape
    r = U.shape[1]
    panel_width = 2.4
    panel_height = float(np.clip(panel_width * m / max(n, 1), 1.6, 4.0))
    strip = float(np.clip(0.12 * r, 0.15, 0.9))
    if figsize is None:
        figsize = (strip + panel_width * len(panels) + 0.6, strip + panel_height + 0.9)
    figure.set_size_inches(figsize)
    grid = figure.add_gridspec(
        2,
        1 + len(panels),
        width_ratios=[strip] + [panel_width] * len(panels),
        height_ratios=[strip, panel_height],
    )
    colors = _component_colors(r)
    top = figure.add_subplot(grid[0, 1])
    smooth = _interpolation(product.shape)
    top.imshow(_colored(V[columns], colors).transpose(1, 0, 2), aspect="auto", **smooth)
    _label(top, "Vᵀ", ylabel="k")
    left = figure.add_subplot(grid[1, 0])
    left.imshow(_colored(U[rows], colors), aspect="auto", **smooth)
    _label(left, "U", xlabel="k")
    for position, (name, values, cmap) in enumerate(panels, start=1):
        axis = figure.add_subplot(grid[1, position], sharey=left)
        axis.imshow(
            values,
            cmap=cmap,
            vmin=-1 if "−" in name else 0,
            vmax=1,
            aspect="auto",
            **smooth,
        )
        columns_label = f"{n} columns" + (" (by V)" if order else "")
        if "−" in name:
            columns_label = "red: a 1 left out · blue: a 0 covered"
        _label(axis, name, xlabel=columns_label)
    left.set_ylabel(f"{m} rows" + (" (by U)" if order else ""), fontsize=7)
    if title is None:
        title = f"rank {r}: error {result.error} (relative {result.relative_error:.3f}), " + (
            "proven optimal" if result.certified_optimal else f"proven gap {result.gap:.0%}"
        )
    figure.suptitle(title, fontsize=9)
    return figure


def plot_factors(
    result: Factorization,
    image_shape: tuple[int, int] = (28, 28),
    *,
    factor: str = "V",
    columns: int = 8,
    figsize: tuple[float, float] | None = None,
) -> Any:
    """Each component of a factor as an image, e.g. the columns of ``V`` as 28 x 28 digits.

    Args:
        result: a :class:`~bmfdsl.result.Factorization`.
        image_shape: ``(height, width)``; their product must be the factor's length (``n``
            for ``V``, ``m`` for ``U``).
        factor: ``"V"`` (components over the columns of ``A``, e.g. pixels of images in
            rows) or ``"U"``.
        columns: images per row of the grid.
        figsize: inches; default from the grid.

    Returns:
        A ``matplotlib.figure.Figure`` with one axis per component, titled ``"k"`` and how
        many rows (or columns) of ``A`` use it.

    >>> V = np.zeros((4, 2), dtype=int); V[:2, 0] = V[2:, 1] = 1
    >>> result = Factorization(np.ones((3, 2), dtype=int), V, 0, 0.0)
    >>> [axis.get_title() for axis in plot_factors(result, (2, 2)).axes]
    ['0 (3 rows)', '1 (3 rows)']
    """
    key = str(factor).upper()
    if key not in ("U", "V"):
        raise InvalidParameterError(f"factor must be 'U' or 'V'; got {factor!r}")
    F, other = (result.V, result.U) if key == "V" else (result.U, result.V)
    F, other = np.asarray(F), np.asarray(other)
    height, width = _image_shape(image_shape, F.shape[0], key)
    if isinstance(columns, bool) or not isinstance(columns, int) or columns < 1:
        raise InvalidParameterError(f"columns must be a positive integer; got {columns!r}")
    r = F.shape[1]
    grid_columns = max(1, min(columns, r))
    grid_rows = -(-r // grid_columns)
    if figsize is None:  # about 1.2 inches on an image's long side, plus its title
        inches = 1.2 / max(height, width)
        figsize = (grid_columns * (inches * width + 0.15), grid_rows * (inches * height + 0.35))
    figure = new_figure(figsize=figsize, layout="constrained")
    users = "rows" if key == "V" else "columns"
    for k in range(r):
        axis = figure.add_subplot(grid_rows, grid_columns, k + 1)
        axis.imshow(
            F[:, k].reshape(height, width), cmap="gray_r", vmin=0, vmax=1, interpolation="nearest"
        )
        axis.set_title(f"{k} ({int(other[:, k].sum())} {users})", fontsize=7)
        axis.set_xticks([])
        axis.set_yticks([])
    return figure


def check_drawable(shape: tuple[int, int]) -> None:
    """Refuse a matrix of more than :data:`MAX_PLOT_CELLS` cells (the picture densifies it).

    >>> check_drawable((100, 100))
    """
    if shape[0] * shape[1] > MAX_PLOT_CELLS:
        raise InvalidParameterError(
            f"A has {shape[0]} x {shape[1]} cells, more than {MAX_PLOT_CELLS:,} to draw; "
            "factorize and plot a row sample instead"
        )


def _masked_matrix(A: Any, shape: tuple[int, int]) -> Any:
    """``A`` as a dense integer masked array: NaN and masked cells are missing."""
    check_drawable(shape)
    missing = np.ma.getmaskarray(A) if np.ma.isMaskedArray(A) else np.zeros(shape, dtype=bool)
    values = np.ma.getdata(A)
    if hasattr(values, "toarray"):
        values = values.toarray()
    values = np.asarray(values, dtype=np.float64)
    if values.shape != shape:
        raise InvalidParameterError(
            f"A has shape {values.shape}, but the factorization is of a {shape[0]} x {shape[1]} "
            "matrix; pass the matrix that was factorized"
        )
    missing = missing | np.isnan(values)
    return np.ma.masked_array(np.where(missing, 0, values).astype(np.int64), mask=missing)


#: Rows or columns beyond which a panel has fewer pixels than cells: cells are then averaged.
_SHARP_CELLS = 400


def _interpolation(shape: tuple[int, int]) -> dict[str, str]:
    """Sharp cells for a small matrix; for a large one, colours averaged over the cells of a
    pixel (matplotlib's antialiasing), so that density shows instead of every k-th row."""
    if max(shape) <= _SHARP_CELLS:
        return {"interpolation": "nearest"}
    return {"interpolation": "antialiased", "interpolation_stage": "rgba"}


def _image_shape(image_shape: Any, length: int, factor: str) -> tuple[int, int]:
    try:
        height, width = (int(side) for side in image_shape)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"image_shape must be (height, width); got {image_shape!r}"
        ) from None
    if height < 1 or width < 1 or height * width != length:
        raise InvalidParameterError(
            f"image_shape {image_shape!r} holds {height * width} pixels, but each component of "
            f"{factor} has {length}; give (height, width) with height * width = {length}"
        )
    return height, width


def _component_colors(rank: int) -> np.ndarray:
    """One RGB colour per component (matplotlib's tab10, then tab20, then repeated)."""
    from matplotlib import colormaps

    size = 10 if rank <= 10 else 20
    palette = np.asarray(colormaps[f"tab{size}"](np.arange(size)))[:, :3]
    return palette[np.arange(rank) % size].astype(np.float64)


def _colored(F: np.ndarray, colors: np.ndarray) -> np.ndarray:
    """An RGB image of a 0/1 factor: component ``k``'s colour where it is 1, white elsewhere."""
    ones = np.asarray(F, dtype=np.float64)[:, :, None]
    return ones * colors[None, :, :] + (1 - ones)


def _label(axis: Any, title: str, *, xlabel: str = "", ylabel: str = "") -> None:
    axis.set_title(title, fontsize=8)
    axis.set_xticks([])
    axis.set_yticks([])
    axis.set_xlabel(xlabel, fontsize=7)
    axis.set_ylabel(ylabel, fontsize=7)
