"""Read data matrices from files: CSV/TSV, NPY, NPZ (dense or scipy sparse), Matrix Market."""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidMatrixError

__all__ = ["SUPPORTED_SUFFIXES", "read_matrix"]

SUPPORTED_SUFFIXES = (".csv", ".tsv", ".txt", ".npy", ".npz", ".mtx", ".mm")


def read_matrix(path: str | os.PathLike[str], *, binarize: float | None = None) -> np.ndarray:
    """Read a matrix file; with ``binarize=t`` entries ``>= t`` become 1 and the rest 0.

    Without ``binarize`` the values are returned as they are (check them with
    :func:`bmfdsl.validation.check_binary_matrix`). Delimited text may start with one header
    row; every row must have the same number of values.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.csv"
    >>> _ = path.write_text("c1,c2\\n0.2,3\\n5,0\\n")
    >>> read_matrix(path, binarize=1).tolist()
    [[0, 1], [1, 0]]
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise InvalidMatrixError(
            f"cannot read {path.name!r}: unsupported file type {suffix!r}; "
            f"use one of {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if suffix in (".csv", ".tsv", ".txt"):
        matrix = _read_delimited(path, "," if suffix == ".csv" else None)
    elif suffix == ".npy":
        matrix = np.load(path, allow_pickle=False)
    elif suffix == ".npz":
        matrix = _read_npz(path)
    else:
        import scipy.io

        matrix = scipy.io.mmread(str(path))
    if hasattr(matrix, "toarray"):
        matrix = matrix.toarray()
    matrix = np.asarray(matrix)
    if binarize is not None:
        if not np.issubdtype(matrix.dtype, np.number):
            raise InvalidMatrixError(f"{path.name!r} holds non-numeric values")
        matrix = (matrix >= binarize).astype(np.int8)
    return matrix


def _read_delimited(path: Path, delimiter: str | None) -> np.ndarray:
    with path.open(newline="") as handle:
        sample = handle.read(4096)
        handle.seek(0)
        if delimiter is None:
            delimiter = "\t" if "\t" in sample else ","
        rows = [row for row in csv.reader(handle, delimiter=delimiter) if row]
    if not rows:
        raise InvalidMatrixError(f"{path.name!r} is empty")
    values: list[list[float]] = []
    for number, row in enumerate(rows, start=1):
        try:
            values.append([float(cell) for cell in row])
        except ValueError as exc:
            if number == 1:  # a header row
                continue
            raise InvalidMatrixError(f"{path.name!r} line {number}: {exc}") from exc
    if not values:
        raise InvalidMatrixError(f"{path.name!r} has a header but no data rows")
    width = len(values[0])
    for number, parsed in enumerate(values, start=1):
        if len(parsed) != width:
            raise InvalidMatrixError(
                f"{path.name!r} is ragged: data row {number} has {len(parsed)} values, "
                f"the first has {width}"
            )
    return np.array(values)


def _read_npz(path: Path) -> Any:
    with np.load(path, allow_pickle=False) as archive:
        keys = set(archive.files)
        if {"data", "indices", "indptr", "shape", "format"} <= keys or {"row", "col"} <= keys:
            import scipy.sparse

            return scipy.sparse.load_npz(path)
        if "A" in keys:
            return archive["A"]
        if len(keys) == 1:
            return archive[next(iter(keys))]
    raise InvalidMatrixError(
        f"{path.name!r} holds several arrays {sorted(keys)}; name the data matrix 'A'"
    )
