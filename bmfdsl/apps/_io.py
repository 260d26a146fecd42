"""Read data matrices, with their row and column labels, and write labelled results.

Formats: delimited text (``.csv``, ``.tsv``, ``.txt``, ``.dat``; the delimiter is sniffed:
tab, comma, semicolon, pipe or runs of spaces), ``.npy``, ``.npz`` (dense, or scipy sparse
kept sparse) and Matrix Market ``.mtx``. ``"-"`` reads standard input (text, or ``.npy`` /
``.npz`` bytes, told apart by their magic numbers).

Delimited text is parsed by pandas' C parser. The first row is a header when none of its
non-empty cells is a number, data when all are; anything else is ambiguous and an error that
asks for ``header=True/False`` (``--header/--no-header``). The first column holds row labels
when its cells below the first row are not numbers (``index_col="auto"``). Empty cells (and
``NA``/``NaN``) are missing: they come back as NaN with a missing-data ``mask``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import numbers
import os
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError

SUPPORTED_SUFFIXES = (".csv", ".tsv", ".txt", ".dat", ".npy", ".npz", ".mtx", ".mm")
TEXT_SUFFIXES = (".csv", ".tsv", ".txt", ".dat")
#: Bytes inspected for binary junk (a NUL byte) before any parsing starts.
_SNIFF_BYTES = 64 * 1024
_DELIMITERS = ("\t", ",", ";", "|")
#: The most memory a binary file (``.npy``, ``.npz``, ``.mtx``) may expand to, from what its
#: header says (shape x item size, or stored entries), checked before anything is allocated:
#: a few compressed megabytes can claim gigabytes. Raise it with ``read_data(max_bytes=...)``
#: or, for the command line, the environment variable :data:`MAX_READ_BYTES_ENV`.
MAX_READ_BYTES = 2 * 2**30
MAX_READ_BYTES_ENV = "BMFDSL_MAX_READ_BYTES"
#: Integers are exact in float64 below this; text cells above it stay floats.
_FLOAT64_EXACT = 2**53


@dataclass(frozen=True)
class TwoSidedThreshold:
    """The paper's two-sided binarization of expression data (Zhang et al. 2010).

    With ``kappa`` the mean of the (optionally shifted and column-normalised) values, a value
    becomes 1 when it is ``<= kappa * low`` or ``>= kappa * high``, else 0. The leukemia data
    take ``TwoSidedThreshold(1/7, 5)``, the melanoma data ``TwoSidedThreshold(0.96, 1.04,
    shift_nonnegative=True, normalize_columns=True)`` (see
    the loaders :func:`load_leukemia` and :func:`load_melanoma`). On the command line:
    ``--binarize LOW:HIGH [--shift-nonnegative] [--normalize-columns]``.

    Attributes:
        low, high: the factors ``0 <= low < high`` of ``kappa``.
        shift_nonnegative: add ``-min`` to every value first (data with negative values).
        normalize_columns: scale each column to unit Euclidean norm before thresholding.
    """

    low: float
    high: float
    shift_nonnegative: bool = False
    normalize_columns: bool = False

    def __post_init__(self) -> None:
        finite = all(
            isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)
            for x in (self.low, self.high)
        )
        if not (finite and 0 <= self.low < self.high):
            raise InvalidParameterError(
                f"a two-sided threshold needs finite 0 <= low < high, e.g. 1/7:5; got "
                f"low={self.low!r}, high={self.high!r}"
            )


@dataclass(frozen=True, repr=False)
class MatrixData:
    """A matrix read from a file, with what the file said about it.

    Attributes:
        values: a 2-D numpy array (NaN where a cell is missing), or a scipy sparse matrix
            when the file was sparse (``.npz``/``.mtx``) and stayed sparse.
        row_labels: one label per row, or ``None`` when the file has none.
        column_labels: one label per column (the header), or ``None``.
        mask: ``True`` where a cell is observed, ``False`` where it is missing; ``None``
            when no cell is missing.
    """

    values: Any
    row_labels: list[str] | None = None
    column_labels: list[str] | None = None
    mask: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, columns)``."""
        return (int(self.values.shape[0]), int(self.values.shape[1]))

    @property
    def missing(self) -> int:
        """The number of missing cells."""
        return 0 if self.mask is None else int(self.mask.size - self.mask.sum())

    def __repr__(self) -> str:
        """A one-line summary: labels and values of a large file do not flood a REPL.

        >>> MatrixData(np.eye(2), row_labels=["a", "b"])
        MatrixData(2x2 ndarray, row labels: 2, column labels: none, missing cells: 0)
        """

        def count(labels: list[str] | None) -> str:
            return "none" if labels is None else str(len(labels))

        rows, columns = self.shape
        return (
            f"{type(self).__name__}({rows}x{columns} {type(self.values).__name__}, "
            f"row labels: {count(self.row_labels)}, column labels: "
            f"{count(self.column_labels)}, missing cells: {self.missing})"
        )


def read_matrix(path: str | os.PathLike[str], *, binarize: float | None = None) -> np.ndarray:
    """Read a matrix file as a dense array; with ``binarize=t`` entries ``>= t`` become 1.

    Without ``binarize`` the values are returned as they are (check them with
    :func:`bmfdsl.validation.check_binary_matrix`). Labels are dropped (see
    :func:`read_data` to keep them); a missing cell is an error.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.csv"
    >>> _ = path.write_text("c1,c2\\n0.2,3\\n5,0\\n")
    >>> read_matrix(path, binarize=1).tolist()
    [[0, 1], [1, 0]]
    """
    data = read_data(path, binarize=binarize)
    if data.mask is not None:
        raise InvalidMatrixError(
            f"{_name(path)!r} has {data.missing} missing cell(s); fill them, or use "
            "read_data() to get the missing-data mask"
        )
    values = data.values
    return np.asarray(values.toarray() if hasattr(values, "toarray") else values)


def read_data(
    path: str | os.PathLike[str],
    *,
    binarize: float | TwoSidedThreshold | None = None,
    header: bool | None = None,
    index_col: int | str | None = "auto",
    delimiter: str | None = None,
    header_rows: int = 1,
    max_bytes: int | None = None,
) -> MatrixData:
    """Read a matrix with its labels and missing-data mask (see the module docstring).

    Args:
        path: a file, or ``"-"`` for standard input.
        binarize: ``None`` to keep the values, a finite threshold ``t`` (entries ``>= t``
            become 1, the others 0) or a :class:`TwoSidedThreshold`; missing cells stay
            missing.
        header: ``None`` detects a header row; ``True``/``False`` say there is (not) one.
        header_rows: lines the header spans (delimited text): the first names the columns,
            the others (e.g. a row of class labels under the sample names) are skipped.
            More than 1 implies ``header=True``.
        index_col: ``"auto"`` (labels in the first column when it is not numeric), ``None``
            (no row labels) or the position of the label column.
        delimiter: the field separator of delimited text; ``None`` sniffs it.
        max_bytes: the most memory a binary file may expand to, judged from its header
            before reading (``None``: :data:`MAX_READ_BYTES`, or the environment variable
            ``BMFDSL_MAX_READ_BYTES`` when set).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.csv"
    >>> _ = path.write_text("gene;s1;s2\\ng1;1;0\\ng2;;1\\n")
    >>> data = read_data(path)
    >>> data.row_labels, data.column_labels, data.mask.tolist()
    (['g1', 'g2'], ['s1', 's2'], [[True, True], [False, True]])
    """
    real = isinstance(binarize, numbers.Real) and not isinstance(binarize, bool)
    if not (binarize is None or isinstance(binarize, TwoSidedThreshold)) and not (
        real and math.isfinite(binarize)  # type: ignore[arg-type]
    ):
        raise InvalidParameterError(
            f"binarize must be a finite number or a TwoSidedThreshold; got {binarize!r}"
        )
    if isinstance(header_rows, bool) or not isinstance(header_rows, int) or header_rows < 1:
        raise InvalidParameterError(f"header_rows must be an integer >= 1; got {header_rows!r}")
    if header_rows > 1:
        if header is False:
            raise InvalidParameterError("header_rows > 1 says there is a header; drop header=False")
        header = True
    if not isinstance(path, str | os.PathLike):
        raise InvalidParameterError(
            f"path must be a file path (str or os.PathLike) or '-' for standard input; "
            f"got {type(path).__name__} {path!r:.40}"
        )
    if header is not None and not isinstance(header, bool | np.bool_):
        raise InvalidParameterError(
            f"header must be None (detect it), True or False; got {header!r:.40}"
        )
    limit = _read_limit(max_bytes)
    name = _name(path)
    if str(path) == "-":
        raw = sys.stdin.buffer.read()
        suffix = ".npy" if raw.startswith(b"\x93NUMPY") else ".npz" if raw[:2] == b"PK" else ""
        source: Any = io.BytesIO(raw)
    else:
        file = Path(path)
        if file.is_dir():
            raise InvalidParameterError(
                f"{str(file)!r} is a folder; give one matrix file in it "
                f"({', '.join(SUPPORTED_SUFFIXES)})"
            )
        if not file.is_file():
            raise FileNotFoundError(f"no such file: {str(file)!r}")
        suffix = file.suffix.lower()
        if suffix not in SUPPORTED_SUFFIXES:
            raise InvalidMatrixError(
                f"cannot read {name!r}: unsupported file type {suffix!r}; "
                f"use one of {', '.join(SUPPORTED_SUFFIXES)}"
            )
        source = file
    if suffix in ("", *TEXT_SUFFIXES):
        head = source.read(_SNIFF_BYTES) if isinstance(source, io.BytesIO) else _head(source)
        if b"\x00" in head:
            raise InvalidMatrixError(
                f"{name!r} is not a text table (it holds NUL bytes); give a CSV/TSV text file, "
                ".npy, .npz or .mtx"
            )
        raw = source.getvalue() if isinstance(source, io.BytesIO) else source.read_bytes()
        data = _read_delimited(
            raw, name, header=header, index_col=index_col, sep=delimiter, header_rows=header_rows
        )
    else:
        data = MatrixData(_read_binary(source, suffix, name, limit))
    return data if binarize is None else binarize_values(data, binarize)


def binarize_values(data: MatrixData, threshold: float | TwoSidedThreshold) -> MatrixData:
    """``data`` with entries ``>= threshold`` set to 1 and the rest to 0 (missing stay NaN),
    or binarized by a :class:`TwoSidedThreshold`.

    Sparse values stay sparse when ``threshold > 0`` (zeros stay zeros).

    >>> binarize_values(MatrixData(np.array([[0.2, np.nan], [3.0, 1.0]])), 1).values.tolist()
    [[0.0, nan], [1.0, 1.0]]
    >>> rule = TwoSidedThreshold(0.5, 2.0)
    >>> binarize_values(MatrixData(np.array([[1.0, np.nan], [4.0, 12.0]])), rule).values.tolist()
    [[1.0, nan], [0.0, 1.0]]
    """
    values = data.values
    if isinstance(threshold, TwoSidedThreshold):
        return _binarize_two_sided(data, threshold)
    if hasattr(values, "toarray"):
        if threshold > 0:
            import scipy.sparse

            binary = scipy.sparse.csr_matrix(values >= threshold, dtype=np.int8)
            return MatrixData(binary, data.row_labels, data.column_labels, data.mask)
        values = values.toarray()
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.number):
        raise InvalidMatrixError("cannot binarize non-numeric values")
    mask = data.mask
    if mask is None and np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
        mask = ~np.isnan(values)  # NaN is missing, never a 0
    if mask is None:
        binary = (values >= threshold).astype(np.int8)
    else:  # missing cells stay missing: the mask says which, the value is NaN
        binary = np.where(mask, values >= threshold, np.nan)
    return MatrixData(binary, data.row_labels, data.column_labels, mask)


def _binarize_two_sided(data: MatrixData, rule: TwoSidedThreshold) -> MatrixData:
    from bmfdsl.apps._datafiles import expression_ones

    values = data.values
    values = np.asarray(values.toarray() if hasattr(values, "toarray") else values)
    if not np.issubdtype(values.dtype, np.number):
        raise InvalidMatrixError("cannot binarize non-numeric values")
    values = values.astype(np.float64)
    mask = data.mask
    if mask is None and np.isnan(values).any():
        mask = ~np.isnan(values)
    ones = expression_ones(
        values if mask is None else np.where(mask, values, np.nan),
        rule.low,
        rule.high,
        normalize_columns=rule.normalize_columns,
        shift_nonnegative=rule.shift_nonnegative,
    )
    binary = ones.astype(np.int8) if mask is None else np.where(mask, ones, np.nan)
    return MatrixData(binary, data.row_labels, data.column_labels, mask)


@dataclass(frozen=True)
class DroppedLines:
    """What :func:`drop_empty` removed: positions (in the matrix as read) of the rows and
    columns without a single non-zero observed value, and their labels (positions as text
    when the file had none)."""

    rows: list[int]
    columns: list[int]
    row_names: list[str]
    column_names: list[str]

    def describe(self) -> str:
        """``"dropped all-zero 2 rows (g3, g7) and 0 columns"``, naming the first few.

        >>> DroppedLines([2], [], ["g3"], []).describe()
        'dropped all-zero 1 row (g3) and 0 columns'
        """
        parts = []
        for kind, names in (("row", self.row_names), ("column", self.column_names)):
            text = f"{len(names)} {kind}{'' if len(names) == 1 else 's'}"
            if names:
                text += f" ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            parts.append(text)
        return f"dropped all-zero {parts[0]} and {parts[1]}"


def drop_empty(
    data: MatrixData, *, rows: bool = True, columns: bool = True
) -> tuple[MatrixData, DroppedLines]:
    """``data`` without its all-zero rows and/or columns (missing cells count as zero), and
    what was dropped; labels and mask follow. They carry no information for BMF: their
    factor rows are 0 in every optimum.

    >>> data, dropped = drop_empty(MatrixData(np.array([[0, 0, 0], [1, 0, 1]])))
    >>> data.values.tolist(), dropped.rows, dropped.columns
    ([[1, 1]], [0], [1])
    """
    values = data.values
    if hasattr(values, "toarray"):
        nonzero = values.tocsr().copy()
        nonzero.eliminate_zeros()
        row_count = np.diff(nonzero.indptr)
        column_count = np.bincount(nonzero.indices, minlength=values.shape[1])
    else:
        present = np.nan_to_num(np.asarray(values, dtype=np.float64)) != 0
        row_count, column_count = present.sum(axis=1), present.sum(axis=0)
    keep_rows = row_count > 0 if rows else np.ones(values.shape[0], dtype=bool)
    keep_columns = column_count > 0 if columns else np.ones(values.shape[1], dtype=bool)
    if not (keep_rows.any() and keep_columns.any()):
        raise InvalidMatrixError(
            "every row or every column is all zero; there is nothing to factorize"
        )
    kept = values[keep_rows][:, keep_columns]
    if hasattr(kept, "tocsr"):
        kept = kept.tocsr()
    gone_rows = np.flatnonzero(~keep_rows).tolist()
    gone_columns = np.flatnonzero(~keep_columns).tolist()
    dropped = DroppedLines(
        gone_rows,
        gone_columns,
        [data.row_labels[i] if data.row_labels else str(i) for i in gone_rows],
        [data.column_labels[j] if data.column_labels else str(j) for j in gone_columns],
    )
    result = MatrixData(
        np.ascontiguousarray(kept) if isinstance(kept, np.ndarray) else kept,
        row_labels=_pick(data.row_labels, keep_rows),
        column_labels=_pick(data.column_labels, keep_columns),
        mask=None if data.mask is None else data.mask[keep_rows][:, keep_columns],
    )
    return result, dropped


def _pick(labels: list[str] | None, keep: np.ndarray) -> list[str] | None:
    return None if labels is None else [label for label, k in zip(labels, keep, strict=True) if k]


def read_labels(path: str | os.PathLike[str], count: int, *, what: str = "row") -> list[str]:
    """``count`` labels from a file: one per line, the first field of a tab- (or, without
    tabs, comma-) separated line. When the file has one line more than ``count``, the first
    is a header and skipped; blank lines and trailing NUL padding are ignored.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "genes.txt"
    >>> _ = path.write_text("Name\\tDescription\\ng1\\tfirst gene\\ng2\\tsecond\\n")
    >>> read_labels(path, 2)
    ['g1', 'g2']
    """
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"no such {what} label file: {str(file)!r}")
    text = _decode_utf8(file.read_bytes().rstrip(b"\x00"), file.name)
    lines = [line for line in text.splitlines() if line.strip()]
    separator = "\t" if any("\t" in line for line in lines) else ","
    labels = [line.split(separator)[0].strip().strip('"') for line in lines]
    if len(labels) == count + 1:
        labels = labels[1:]
    if len(labels) != count:
        raise InvalidMatrixError(
            f"{file.name!r} holds {len(labels)} {what} labels, but the matrix has {count} "
            f"{what}s; give one label per line (a header line is allowed)"
        )
    return labels


def write_labelled(
    path: str | os.PathLike[str],
    values: np.ndarray,
    *,
    row_labels: Sequence[str] | None = None,
    column_labels: Sequence[str] | None = None,
    index_name: str = "",
    escape_formulas: bool = False,
) -> Path:
    """Write a 2-D integer array as CSV, with a header and a label column when given.

    Labels are written verbatim (quoted as CSV needs). A spreadsheet runs a cell that starts
    with ``=``, ``+``, ``-`` or ``@`` as a formula: ``escape_formulas=True`` prefixes such
    labels with ``'`` so that they open as text. The file is written atomically
    (:func:`write_text_atomic`: never half a file, never through a symlink).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "U.csv"
    >>> _ = write_labelled(path, np.eye(2, dtype=int), row_labels=["a", "=b"],
    ...                    column_labels=["k0", "k1"], index_name="row", escape_formulas=True)
    >>> path.read_text().splitlines()
    ['row,k0,k1', 'a,1,0', "'=b,0,1"]
    """
    import pandas as pd

    if escape_formulas:
        row_labels = None if row_labels is None else [escape_formula(x) for x in row_labels]
        column_labels = (
            None if column_labels is None else [escape_formula(x) for x in column_labels]
        )
        index_name = escape_formula(index_name)
    path = Path(path)
    frame = pd.DataFrame(np.asarray(values), index=row_labels, columns=column_labels)
    frame.index.name = index_name or None
    text = frame.to_csv(header=column_labels is not None, index=row_labels is not None)
    write_text_atomic(path, text)
    return path


#: First characters that make a spreadsheet read a cell as a formula.
FORMULA_STARTS = ("=", "+", "-", "@")


def escape_formula(label: Any) -> str:
    """``label`` as text, with ``'`` in front when a spreadsheet would run it as a formula.

    >>> escape_formula("=HYPERLINK(1)"), escape_formula("gene-1"), escape_formula(3)
    ("'=HYPERLINK(1)", 'gene-1', '3')
    """
    text = str(label)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _umask() -> int:
    """The process's file-creation mask (read without changing it where Linux allows)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)  # elsewhere: set and restore (no file is created in between)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: see :func:`write_bytes_atomic`.

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> write_text_atomic(path, "x"); path.read_text()
    'x'
    """
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike[str], content: bytes) -> None:
    """Write ``content`` to ``path`` through a temporary file in the same folder and a rename.

    A crash leaves the old file or the new one, never half of one; a symlink at ``path`` is
    replaced, never followed. The file gets the permissions any new file gets (the umask).
    """
    path = Path(path)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as stream:
            os.fchmod(stream.fileno(), 0o666 & ~_umask())  # mkstemp makes it 0600
            stream.write(content)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)  # replaces a symlink itself, never its target
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def check_out_dir(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder that can be written to (created later, by the writer).

    Checked before long work starts, so that a typo does not cost a solve: ``path`` must be
    a folder or not exist yet, and the nearest existing folder on its way must be writable.

    >>> import tempfile, pathlib
    >>> check_out_dir(pathlib.Path(tempfile.mkdtemp()) / "new" / "dir").name
    'dir'
    """
    out = Path(path)
    existing = out
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():  # a dangling link: mkdir would fail later
            break
        existing = existing.parent
    if not existing.is_dir():
        raise InvalidParameterError(
            f"cannot write results to {str(out)!r}: {str(existing)!r} is not a folder; "
            "choose another output folder"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InvalidParameterError(
            f"cannot write results to {str(out)!r}: the folder {str(existing)!r} is not "
            "writable; choose another output folder"
        )
    return out


# --------------------------------------------------------------------------------------
# Binary formats
# --------------------------------------------------------------------------------------


def _name(path: str | os.PathLike[str]) -> str:
    return "<stdin>" if str(path) == "-" else Path(path).name


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(_SNIFF_BYTES)


def _read_limit(max_bytes: Any) -> int:
    """``max_bytes``, or the environment's :data:`MAX_READ_BYTES_ENV`, or the default."""
    where = "max_bytes"
    if max_bytes is None:
        max_bytes = os.environ.get(MAX_READ_BYTES_ENV) or MAX_READ_BYTES
        where = MAX_READ_BYTES_ENV
        if isinstance(max_bytes, str) and max_bytes.strip().isdigit():
            max_bytes = int(max_bytes)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, numbers.Integral) or max_bytes < 1:
        raise InvalidParameterError(
            f"{where} must be a positive number of bytes; got {max_bytes!r}"
        )
    return int(max_bytes)


def _check_expansion(size: int, name: str, limit: int, what: str) -> None:
    if size > limit:
        raise InvalidMatrixError(
            f"{name!r} would expand to {size / 2**30:.2f} GiB ({what}), over the limit of "
            f"{limit / 2**30:.2f} GiB; if you mean it, raise the limit with "
            f"read_data(max_bytes=...) or the environment variable {MAX_READ_BYTES_ENV}"
        )


_MAGIC = {".npy": b"\x93NUMPY", ".npz": b"PK"}


def _read_binary(source: Any, suffix: str, name: str, limit: int = MAX_READ_BYTES) -> Any:
    """``.npy``, ``.npz`` or ``.mtx``; sparse matrices stay sparse (CSR), checked.

    The size a file claims (its header) is checked against ``limit`` before it is read, and a
    sparse matrix's index arrays before any scipy kernel reads them.
    """
    from bmfdsl.validation import check_sparse_structure, is_sparse

    magic = _MAGIC.get(suffix)
    if magic is not None and _peek(source, len(magic)) != magic:
        raise InvalidMatrixError(
            f"cannot read {name!r} as {suffix}: it is not a NumPy {suffix} file (its first "
            "bytes are not the format's signature); give a file saved by numpy.save / "
            "numpy.savez / scipy.sparse.save_npz, or a CSV/.mtx file with its own suffix"
        )
    try:
        if suffix == ".npy":
            _check_npy_header(source, name, limit)
            matrix = np.load(source, allow_pickle=False)
        elif suffix == ".npz":
            matrix = _read_npz(source, name, limit)
        else:
            matrix = _read_mtx(source, name, limit)
    except InvalidMatrixError:
        raise
    except (OSError, ValueError, OverflowError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        reason = str(exc)
        if "allow_pickle" in reason:  # numpy's advice to unpickle is not ours to give
            reason = (
                "it holds Python objects (pickled data), which bmfdsl never loads; save the "
                "matrix as a numeric array"
            )
        raise InvalidMatrixError(
            f"cannot read {name!r} as {suffix}: the file is damaged or not in that format "
            f"({reason})"
        ) from exc
    if is_sparse(matrix):
        check_sparse_structure(matrix, name=repr(name))
        matrix = matrix.tocsr()
    if matrix.ndim != 2:
        raise InvalidMatrixError(f"{name!r} holds a {matrix.ndim}-D array; a matrix is 2-D")
    return matrix


def _peek(source: Any, size: int) -> bytes:
    if isinstance(source, io.BytesIO):
        start = source.tell()
        head = source.read(size)
        source.seek(start)
        return head
    with Path(source).open("rb") as handle:
        return handle.read(size)


def _npy_bytes(handle: Any) -> int:
    """The bytes the array behind a ``.npy`` header takes (shape x item size)."""
    version = np.lib.format.read_magic(handle)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
    else:
        shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
    return math.prod(int(size) for size in shape) * max(int(dtype.itemsize), 1)


def _check_npy_header(source: Any, name: str, limit: int) -> None:
    if isinstance(source, io.BytesIO):
        size = _npy_bytes(source)
        source.seek(0)
    else:
        with Path(source).open("rb") as handle:
            size = _npy_bytes(handle)
    _check_expansion(size, name, limit, "the shape and dtype in its header")


def _read_mtx(source: Any, name: str, limit: int) -> Any:
    import scipy.io

    rows, columns, entries, layout, _, symmetry = scipy.io.mminfo(source)
    if hasattr(source, "seek"):
        source.seek(0)
    if layout == "array":  # dense: every cell, as float64
        size, what = rows * columns * 8, f"a dense {rows}x{columns} array"
    else:  # coordinates: row, column and value of every entry, and the CSR copy
        mirrored = 1 if symmetry == "general" else 2  # a symmetric file stores one triangle
        size, what = entries * 40 * mirrored, f"{entries} stored entries"
    _check_expansion(size, name, limit, what)
    return scipy.io.mmread(source)


def _read_npz(source: Any, name: str, limit: int = MAX_READ_BYTES) -> Any:
    with np.load(source, allow_pickle=False) as archive:
        keys = set(archive.files)
        expanded = 0
        for member in archive.zip.namelist():
            with archive.zip.open(member) as handle:
                expanded += _npy_bytes(handle)
        _check_expansion(expanded, name, limit, "the shapes and dtypes of its arrays")
        if {"data", "indices", "indptr", "shape", "format"} <= keys or {"row", "col"} <= keys:
            import scipy.sparse

            if hasattr(source, "seek"):
                source.seek(0)
            return scipy.sparse.load_npz(source)
        if "A" in keys:
            return archive["A"]
        if len(keys) == 1:
            return archive[next(iter(keys))]
    raise InvalidMatrixError(
        f"{name!r} holds several arrays {sorted(keys)}; name the data matrix 'A'"
    )


# --------------------------------------------------------------------------------------
# Delimited text
# --------------------------------------------------------------------------------------


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _sniff_delimiter(first_line: str) -> str | None:
    """The first of tab, comma, semicolon and pipe that the first line holds.

    ``None`` means runs of whitespace (or a single column when the line has none).

    >>> _sniff_delimiter("a;b;c"), _sniff_delimiter("1 0  1"), _sniff_delimiter("x|y,z")
    (';', None, ',')
    """
    for delimiter in _DELIMITERS:
        if delimiter in first_line:
            return delimiter
    return None


def _split(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    if '"' not in line:
        return line.split(delimiter)
    try:  # quoted cells: the csv module (it caps a field at 128 KiB)
        return next(csv.reader([line], delimiter=delimiter))
    except csv.Error as exc:
        raise InvalidMatrixError(f"cannot parse the first lines: {exc}") from exc


def _read_delimited(
    raw: bytes,
    name: str,
    *,
    header: bool | None,
    index_col: int | str | None,
    sep: str | None,
    header_rows: int = 1,
) -> MatrixData:
    text = _decode_utf8(raw, name)
    if "\r" in text:  # Windows (CR LF) and classic Mac (CR only) line endings
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if header_rows > 1:
        text = _without_extra_header_rows(text, header_rows, name)
    lines = [line.rstrip("\r") for line in text.split("\n", 40)[:40] if line.strip()][:20]
    if not lines:
        raise InvalidMatrixError(f"{name!r} is empty")
    delimiter = sep if sep is not None else _sniff_delimiter(lines[0])
    first = [cell.strip() for cell in _split(lines[0], delimiter)]
    index = _label_column(index_col, lines, delimiter)
    if index is not None and index >= len(first):
        raise InvalidParameterError(
            f"index_col={index} is past the last column of {name!r} (it has {len(first)} "
            f"columns: 0..{len(first) - 1}); give a column position, None or 'auto'"
        )
    if header is None:
        header = _detect_header(first, index, name)

    if delimiter is not None:
        _check_rectangular(text, delimiter, name)
    frame = _parse_numbers(text, name, delimiter=delimiter, header=header, index=index)
    values = frame.to_numpy(dtype=np.float64)
    observed = ~np.isnan(values)
    if observed.all():
        values = _narrow(values)
    return MatrixData(
        values,
        row_labels=[str(label) for label in frame.index] if index is not None else None,
        column_labels=[str(label) for label in frame.columns] if header else None,
        mask=None if observed.all() else observed,
    )


def _without_extra_header_rows(text: str, header_rows: int, name: str) -> str:
    """``text`` without non-blank lines 2 to ``header_rows`` (the first names the columns).

    >>> _without_extra_header_rows("a,b\\nML1,ML2\\n1,0\\n", 2, "x.csv")
    'a,b\\n1,0\\n'
    """
    lines = text.split("\n")
    non_blank = [number for number, line in enumerate(lines) if line.strip()]
    if len(non_blank) <= header_rows:
        raise InvalidMatrixError(
            f"{name!r} has {len(non_blank)} non-blank lines; with {header_rows} header rows "
            "no data is left"
        )
    extra = set(non_blank[1:header_rows])
    return "\n".join(line for number, line in enumerate(lines) if number not in extra)


def _decode_utf8(raw: bytes, name: str) -> str:
    """The text of a file's bytes; a byte-order mark is not part of the first cell.

    >>> _decode_utf8(b"\\xef\\xbb\\xbf1,0", "a.csv")
    '1,0'
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidMatrixError(
            f"{name!r} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from exc


def _label_column(
    index_col: int | str | None, lines: list[str], delimiter: str | None
) -> int | None:
    """The column of row labels: ``"auto"`` takes the first when no cell below row 1 is a number.

    >>> _label_column("auto", ["g,a,b", "x,1,0", "y,0,1"], ","), _label_column(None, [], ",")
    (0, None)
    """
    if index_col == "auto":
        labels_below = [_split(line, delimiter)[0].strip() for line in lines[1:]]
        is_label = [bool(label) and not _is_number(label) for label in labels_below]
        return 0 if is_label and all(is_label) else None
    if index_col is None:
        return None
    flag = isinstance(index_col, bool | np.bool_)  # True is an int to Python, not a column
    if isinstance(index_col, numbers.Integral) and not flag and int(index_col) >= 0:
        return int(index_col)
    raise InvalidParameterError(
        f"index_col must be 'auto', None or a column position (0, 1, ...); got {index_col!r}"
    )


def _parse_numbers(
    text: str, name: str, *, delimiter: str | None, header: bool, index: int | None
) -> Any:
    """The pandas frame of ``text``; every cell outside the labels must be a number (or empty)."""
    import pandas as pd

    try:
        frame = pd.read_csv(
            io.StringIO(text),
            sep=r"\s+" if delimiter is None else delimiter,
            header=0 if header else None,
            index_col=index,
            skip_blank_lines=True,
            skipinitialspace=True,
            engine="c",
        )
    except (pd.errors.ParserError, ValueError, IndexError) as exc:
        raise InvalidMatrixError(f"cannot parse {name!r}: {exc}") from exc
    except pd.errors.EmptyDataError as exc:
        raise InvalidMatrixError(f"{name!r} has a header but no data rows") from exc
    if frame.shape[0] == 0 or frame.shape[1] == 0:
        raise InvalidMatrixError(f"{name!r} has a header but no data rows")
    for position, column in enumerate(frame.columns):
        if not pd.api.types.is_numeric_dtype(frame[column].dtype):
            numbers = pd.to_numeric(frame[column], errors="coerce")
            bad = frame[column].notna() & numbers.isna()
            if not bad.any():  # numbers pandas kept as text, e.g. beyond 64-bit integers
                frame[column] = numbers.astype(np.float64)
                continue
            row = int(np.flatnonzero(bad.to_numpy())[0])
            line = row + 1 + int(bool(header))
            raise InvalidMatrixError(
                f"{name!r} line {line}, column {position + 1 + int(index is not None)}: "
                f"{str(frame[column].iloc[row])[:40]!r} is not a number. Row labels belong in "
                "the first column (index_col / --index-col); a header only in the first row"
            )
    return frame


def _detect_header(first: list[str], index: int | None, name: str) -> bool:
    """Is the first row a header? Only when none of its non-empty cells is a number."""
    if index is not None and index < len(first) and not first[index]:
        return True  # an empty corner above the row labels: pandas' and R's header layout
    cells = [cell for position, cell in enumerate(first) if position != index and cell]
    numeric = [_is_number(cell) for cell in cells]
    if not any(numeric):
        return True
    if all(numeric):
        # pandas writes default column names 0..n-1 as a header: ambiguous from 3 columns
        # on (a 0/1 data row is never 0,1,2,...; "0,1" is a common data row, read as data)
        if len(cells) >= 3 and cells == [str(k) for k in range(len(cells))]:
            raise InvalidMatrixError(
                f"{name!r}: the first row {','.join(cells)} looks like pandas' default column "
                "names; say whether it is a header (header=True / --header) or data "
                "(header=False / --no-header)"
            )
        return False
    words = [cell for cell, is_number in zip(cells, numeric, strict=True) if not is_number]
    text = ", ".join(map(repr, words[:3]))
    raise InvalidMatrixError(
        f"{name!r}: the first row mixes numbers and text ({text}); say whether it is a header "
        "(header=True / --header) or data (header=False / --no-header)"
    )


def _check_rectangular(text: str, delimiter: str, name: str) -> None:
    """Every non-blank line has as many fields as the first (pandas pads short lines).

    Quoted cells may hold the delimiter: then the csv module counts the fields.

    >>> _check_rectangular('"1",0,1\\n0,1\\n', ",", "a.csv")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidMatrixError: 'a.csv' is ragged: non-blank line 2 has 2 fields, ...
    """
    if '"' in text:
        try:
            rows = csv.reader(io.StringIO(text), delimiter=delimiter)
            counts = [len(row) - 1 for row in rows if any(cell.strip() for cell in row)]
        except csv.Error as exc:
            raise InvalidMatrixError(f"cannot parse {name!r}: {exc}") from exc
    else:
        counts = [line.count(delimiter) for line in text.splitlines() if line.strip()]
    width = counts[0]
    for number, count in enumerate(counts, start=1):
        if count != width:
            raise InvalidMatrixError(
                f"{name!r} is ragged: non-blank line {number} has {count + 1} fields, "
                f"the first has {width + 1}"
            )


def _narrow(values: np.ndarray) -> np.ndarray:
    """Whole-number values as int64 (so 0/1 text reads as integers), the rest as float."""
    whole = np.isfinite(values).all() and (values == np.round(values)).all()
    if whole and (np.abs(values) < _FLOAT64_EXACT).all():  # int64 holds them exactly
        return values.astype(np.int64)
    return values
