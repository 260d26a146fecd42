"""The data layer: one 0/1 matrix, held in memory or as a ``dask.array``.

Every pass of the pipeline over ``A`` (leverage scores, BLS, ALS, errors) goes through the
:class:`BinaryMatrix` protocol, which three classes implement; :func:`as_matrix` picks the class
once, at the entrance, and the numeric code calls methods instead of asking which kind it holds:

* :class:`InMemoryMatrix`: a validated ``int8`` numpy array.
* :class:`SparseMatrix`: a validated scipy sparse matrix, held as CSR (its pattern: every
  stored value is 1) and never densified whole. Products with a factor (``A F``, ``Aᵀ F``)
  are ``O(nnz r)`` compiled loops, the Gram matrix ``AᵀA`` a sparse product, and only
  gathered rows (the sampled core) or bounded row blocks are ever made dense.
* :class:`DaskMatrix`: a validated ``dask.array`` whose row blocks each span all columns, so
  that per-row work maps over the blocks and column statistics are sums over them. Only small
  results (``O(m r)`` codes, ``n x n`` sums) are ever gathered.

``dask`` is optional: it is imported only when a dask array is given.
"""

from __future__ import annotations

import functools
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError, ModelTooLargeError
from bmfdsl.linalg._device import (
    exact_float32_products,
    fits_on_device,
    get_array_module,
    to_host,
)
from bmfdsl.validation import check_binary_matrix, check_sparse_binary_matrix, is_sparse

# Rows of A converted to float at a time when accumulating Aᵀ U (bounded memory); a GPU takes
# larger chunks (fewer transfers and launches; the sums are the same).
_CHUNK_ELEMENTS = 4 * 2**20
_DEVICE_CHUNK_ELEMENTS = 64 * 2**20
# Entries of A handled per chunk by the dense (and weighted) squared error: temporaries stay small.
_ERROR_CHUNK_ENTRIES = 2**20
_FLOAT64_EXACT = 2**53  # integers below this are exact in float64
# Rows per chunk of a dense Gram product (bit-packed: n x 1,024 words of 8 bytes per chunk).
_BIT_GRAM_CHUNK_ROWS = 2**16
# A tall dask matrix of at most this many columns sums its Gram matrix (bit counts: n²/64 word
# operations a row, a few times the check's n reads) in the pass that checks it, when asked to
# (``with_gram``: the pipeline's sampling and bound read it, full-rank leverage scores up to
# 256 columns), since a pass over the blocks of a cluster costs a round trip of its own.
_GRAM_WITH_CHECK_MAX_COLUMNS = 256
# DaskMatrix.take_rows sends at most this many scattered row numbers in its own tasks.
_TAKE_MAX_SCATTERED_ROWS = 2**12

#: The most a sparse input may take once densified whole (one byte per entry), for the
#: routes that need all of it dense.
DENSIFY_LIMIT_BYTES = 2 * 2**30
#: A sparse input with at least this share of ones is held dense by the pipeline (within
#: :data:`DENSIFY_LIMIT_BYTES`; see :meth:`SparseMatrix.dense_pays`).
DENSE_INPUT_DENSITY = 0.15
#: A dense input with less than this share of ones is held as a CSR pattern by the pipeline
#: when it samples (see :meth:`InMemoryMatrix.sparse_pays`); in between, each stays as given.
SPARSE_INPUT_DENSITY = 0.03


def is_dask_array(A: Any) -> bool:
    """True for a ``dask.array`` (plain arrays never import dask).

    >>> is_dask_array(np.ones((2, 2)))
    False
    """
    if type(A).__module__.split(".")[0] != "dask":
        return False
    import dask

    return bool(dask.is_dask_collection(A)) and hasattr(A, "map_blocks")


class BinaryMatrix(Protocol):
    """A validated 0/1 matrix, whatever holds it: what every pass of the pipeline needs.

    Products and errors are exact integers; a dense copy is made only of gathered rows
    (:meth:`take_rows`) or, on request, of the whole (:meth:`dense`).
    """

    #: ``(m, n)``.
    shape: tuple[int, int]
    #: ``False`` for a matrix that is never loaded whole (a ``dask.array``).
    in_memory: bool

    @property
    def total(self) -> int:
        """``||A||²_F``: the number of ones."""

    @property
    def column_norms(self) -> np.ndarray:
        """``||A_:j||²`` per column (int64)."""

    @property
    def T(self) -> BinaryMatrix:
        """``Aᵀ``, of the same kind."""

    @property
    def gram(self) -> np.ndarray:
        """``AᵀA`` (``n x n``) as exact integers in float64, computed once and kept."""

    def layout(self) -> dict[str, Any]:
        """What a result reports about how the matrix is held: ``storage`` (``"dense"``,
        ``"sparse"`` or ``"dask"``) and, for dask, ``dask_blocks``."""

    def take_rows(self, indices: Any) -> np.ndarray:
        """Rows ``indices`` (repeats allowed, any order) as a dense contiguous ``int8`` array."""

    def dense(self) -> np.ndarray:
        """All of ``A`` as a dense ``int8`` array (for the routes that need it whole)."""

    def transposed_cross(self, U: np.ndarray, device: str = "cpu") -> np.ndarray:
        """``Aᵀ U`` as exact int64 (``U`` has one row per row of ``A``); ``device`` (see
        :data:`~bmfdsl.linalg.DEVICES`) is where a dense ``A``'s product runs (a sparse or
        dask one's runs where its data is)."""

    def squared_error(self, U: np.ndarray, V: np.ndarray) -> int:
        """``||A - U Vᵀ||²_F``, exact, without an ``m x n`` temporary."""


def as_matrix(A: Any, chunk_rows: int | None = None, *, with_gram: bool = False) -> BinaryMatrix:
    """Wrap ``A`` (validated once); an already wrapped matrix is returned as it is.

    ``with_gram``: a ``dask.array`` ``A`` also sums ``AᵀA`` in the pass that checks it, for
    a caller that reads ``gram`` (see :class:`DaskMatrix`); other inputs ignore it.

    >>> as_matrix([[1, 0], [1, 1]]).total
    3
    >>> import scipy.sparse
    >>> type(as_matrix(scipy.sparse.eye(3, format="csr"))).__name__
    'SparseMatrix'
    """
    if isinstance(A, InMemoryMatrix | SparseMatrix | DaskMatrix):
        return A
    if is_dask_array(A):
        return DaskMatrix(A, with_gram=with_gram)
    if is_sparse(A):
        return SparseMatrix(A, chunk_rows)
    return InMemoryMatrix(A, chunk_rows)


def exact_gram(
    csr: Any,
    *,
    rows: bool = False,
    threads: int | None = None,
    between_chunks: Callable[[], object] | None = None,
) -> np.ndarray:
    """``AᵀA`` (or ``A Aᵀ`` with ``rows``) of a 0/1 CSR matrix as exact integers in float64.

    Counts of pairs of ones, summed from the pattern (no dense copy of ``A``): the same
    numbers as the dense route's bit counts. Rows with many ones are cheaper as bits: when
    ``Σ nnz_i²`` is above :func:`bit_gram_work`, row chunks are made dense and their bits
    counted (:func:`~bmfdsl.linalg._kernels.chunked_bit_gram`, as :func:`dense_gram`). A CSR
    holding duplicate entries is canonicalized first (on a copy), so that each stored
    position counts once. ``threads``: those of either kernel (default: every CPU; the counts
    do not depend on it). ``between_chunks`` (optional) is called before each chunk of rows
    (see :func:`~bmfdsl.linalg._kernels.pattern_gram`): raise from it to stop a background
    sum.

    >>> import scipy.sparse
    >>> exact_gram(scipy.sparse.csr_array([[1, 1], [0, 1]])).tolist()
    [[1.0, 1.0], [1.0, 2.0]]
    >>> exact_gram(scipy.sparse.csr_array([[1, 1], [0, 1]]), rows=True).tolist()
    [[2.0, 1.0], [1.0, 1.0]]
    """
    from bmfdsl.linalg._kernels import chunked_bit_gram, default_threads, pattern_gram

    if rows:
        csr = csr.T.tocsr()
    if not csr.has_canonical_format:
        csr = csr.copy()  # sum_duplicates works in place: never on the caller's matrix
        csr.sum_duplicates()
    counts = np.diff(csr.indptr).astype(np.float64)
    if float(np.dot(counts, counts)) > bit_gram_work(*csr.shape):  # dense rows: count bits
        return chunked_bit_gram(
            csr.shape,
            lambda start, stop: csr[start:stop].toarray(),
            _BIT_GRAM_CHUNK_ROWS,
            threads=threads or default_threads(),
            between_chunks=between_chunks,
        )
    return pattern_gram(
        csr.indptr,
        csr.indices,
        int(csr.shape[1]),
        threads=threads,
        between_chunks=between_chunks,
    )


def bit_gram_work(rows: int, columns: int) -> float:
    """The work of a dense ``AᵀA`` by bit counts, in the units of the pattern kernel's pairs
    of ones: ``rows · columns² / 64`` (one AND and popcount per pair of columns and 64 rows,
    about the time of one pair of ones, counted twice for room).

    >>> bit_gram_work(64, 10)
    100.0
    """
    return float(rows) * columns * columns / 64


def _checked_factor(factor: Any, rows: int, name: str) -> np.ndarray:
    """``factor`` as a 2-d array with ``rows`` rows, or a clear error."""
    array = np.asarray(factor)
    if array.ndim != 2 or array.shape[0] != rows:
        raise InvalidParameterError(
            f"{name} must be 2-d with {rows} rows (one per line of A it multiplies); got "
            f"shape {array.shape}"
        )
    return array


def _is_binary(array: np.ndarray) -> bool:
    """Whether every entry is 0 or 1 (an integer, bool or float array; integers by their
    range, two reductions: ALS asks it of an ``m x kr`` factor every half-step)."""
    if array.dtype == bool or array.size == 0:
        return True
    if np.issubdtype(array.dtype, np.integer):
        return bool(array.min() >= 0 and array.max() <= 1)
    return bool(np.isin(array, (0, 1)).all())


class DistinctColumns(NamedTuple):
    """A column-wise product of a factor computed on its distinct columns only
    (:func:`distinct_column_product`): ``values`` holds one column per distinct column, and
    ``inverse`` maps each column of the factor to its column there."""

    values: np.ndarray
    inverse: np.ndarray

    def columns(self, which: slice | np.ndarray) -> np.ndarray:
        """The product's columns ``which`` (of the whole factor), gathered into one contiguous
        array: a batch's starts each read their own ``r`` columns this way, with no copy of
        the whole product spread back first (a 50,000-row product of 13 rank-12 starts: 62 MB
        written and read again per pass).

        >>> F = np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8)
        >>> done = distinct_column_product(lambda G: G * 2, F)
        >>> done.columns(slice(1, 3)).tolist(), done.columns(slice(None)).tolist()
        ([[0, 2], [2, 0]], [[2, 0, 2], [0, 2, 0]])
        """
        picked = self.inverse[which]
        if np.array_equal(picked, np.arange(self.values.shape[1])):
            return self.values  # all of it, in order (a single start's product)
        return np.take(self.values, picked, axis=1)


def distinct_column_product(
    product: Callable[[np.ndarray], np.ndarray], factor: np.ndarray
) -> DistinctColumns:
    """``product(factor)`` for a column-wise ``product`` (``A F``, ``Aᵀ F``: each column of
    the result depends on that column of ``F`` alone), computed on ``factor``'s distinct
    columns only. The starts of a batch share most columns (the repair's swaps share all but
    one), and exact integer products make the result the same.

    >>> F = np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8)
    >>> seen = []
    >>> done = distinct_column_product(lambda G: seen.append(G.shape) or G * 2, F)
    >>> done.values.tolist(), done.inverse.tolist(), seen
    ([[2, 0], [0, 2]], [0, 1, 0], [(2, 2)])
    """
    columns = np.ascontiguousarray(np.asarray(factor).T)
    first: dict[bytes, int] = {}
    inverse = np.array(
        [first.setdefault(column.tobytes(), len(first)) for column in columns], dtype=np.int64
    )
    if len(first) == len(columns):
        return DistinctColumns(product(factor), inverse)
    kept = np.unique(inverse, return_index=True)[1]  # each distinct column's first position
    return DistinctColumns(product(np.ascontiguousarray(columns[kept].T)), inverse)


def dense_gram(
    block: Any, between_chunks: Callable[[], object] | None = None, threads: int = 1
) -> np.ndarray:
    """``blockᵀ block`` of a dense 0/1 array as exact integers in float64.

    Counted by :func:`~bmfdsl.linalg._kernels.bit_gram` (columns as 64-bit words, ANDs and
    popcounts; 60,000 x 400: 0.018 s against BLAS ssyrk chunks 0.11 s, bench/results/gram.md),
    over row chunks (the packed copy stays small), split over up to ``threads`` threads: the
    same numbers as :func:`exact_gram`, with no BLAS call, so the same bits in any thread and
    at any thread count. ``between_chunks`` is called before each chunk (a background job
    checks there whether it was cancelled).

    >>> dense_gram(np.array([[1, 1], [0, 1]])).tolist()
    [[1.0, 1.0], [1.0, 2.0]]
    """
    from bmfdsl.linalg._kernels import chunked_bit_gram

    block = np.asarray(block)
    return chunked_bit_gram(
        block.shape,
        lambda start, stop: block[start:stop],
        _BIT_GRAM_CHUNK_ROWS,
        threads=threads,
        between_chunks=between_chunks,
    )


def _pattern_of(block: np.ndarray) -> SparseMatrix:
    """The :class:`SparseMatrix` of an already validated 0/1 ``int8`` array, read from its
    nonzero bytes (:func:`~bmfdsl.linalg.dense_pattern`)."""
    import scipy.sparse

    from bmfdsl.linalg._kernels import dense_pattern

    indptr, indices = dense_pattern(block)
    ones = np.ones(indices.size, dtype=np.int8)
    return SparseMatrix(scipy.sparse.csr_array((ones, indices, indptr), shape=block.shape))


class InMemoryMatrix:
    """A validated in-memory ``A`` (``int8``) with the statistics the solvers need.

    >>> data = InMemoryMatrix([[1, 0, 1], [0, 1, 1]])
    >>> data.total, data.T.shape, data.squared_error(np.ones((2, 1)), np.ones((3, 1)))
    (4, (3, 2), 2)
    """

    in_memory = True

    def __init__(self, A: Any, chunk_rows: int | None = None) -> None:
        self.A = check_binary_matrix(A)
        self.shape: tuple[int, int] = (int(self.A.shape[0]), int(self.A.shape[1]))
        self.chunk_rows = chunk_rows
        self._on_device: dict[str, Any] = {}  # array module name -> A there (or on the host)
        self._bits: dict[str, np.ndarray] = {}  # "rows" / "columns" -> A packed (see cross)
        self._packing = threading.Lock()

    @property
    def array(self) -> np.ndarray:
        """The validated ``int8`` array."""
        return self.A

    @functools.cached_property
    def T(self) -> InMemoryMatrix:
        """``Aᵀ`` (a contiguous copy)."""
        return InMemoryMatrix(self.A.T)

    def layout(self) -> dict[str, Any]:
        """A dense array, held whole."""
        return {"storage": "dense"}

    def dense(self) -> np.ndarray:
        """The array itself (no copy)."""
        return self.A

    def sparse_pays(self) -> bool:
        """Whether a sampled run is faster on ``A``'s CSR pattern: under
        :data:`SPARSE_INPUT_DENSITY` ones (the pattern then takes under 15% of the array's
        bytes). Measured on planted matrices (``sample_rows='auto'``, the same answers
        either way): at 1% ones 200,000 x 1,000, r = 5, took 0.90 s dense and 0.24 s sparse;
        at 2%, 100,000 x 2,000, r = 10, 2.00 s and 1.01 s; at 3.8%, 200,000 x 1,000, 1.01 s
        and 0.81 s, which the conversion (0.2 s there) evens out.

        >>> InMemoryMatrix(np.eye(100, dtype=np.int8)).sparse_pays()  # 1% ones
        True
        >>> InMemoryMatrix(np.eye(10, dtype=np.int8)).sparse_pays()
        False
        """
        m, n = self.shape
        return self.total < SPARSE_INPUT_DENSITY * m * n

    def pattern(self) -> SparseMatrix:
        """``A``'s CSR pattern (see :meth:`sparse_pays`), read from the validated array
        without checking it again.

        >>> InMemoryMatrix(np.eye(3, dtype=np.int8)).pattern().csr.nnz
        3
        """
        return _pattern_of(self.A)

    def on_device(self, device: str) -> Any:
        """``A`` where ``device`` computes (see :data:`~bmfdsl.linalg.DEVICES`): the array
        itself on the CPU; on a GPU a copy made on first use and kept with this wrapper (so an
        ALS run sends ``A`` once, not once per half-step) while it takes at most a quarter of
        the free device memory, else the host array, sent chunk by chunk."""
        xp = get_array_module(device)
        if xp is np:
            return self.A
        if xp.__name__ not in self._on_device:
            fits = fits_on_device(xp, self.A.nbytes)
            self._on_device[xp.__name__] = xp.asarray(self.A) if fits else self.A
        return self._on_device[xp.__name__]

    def squared_error(self, U: np.ndarray, V: np.ndarray) -> int:
        """``||A - U Vᵀ||²_F`` in row chunks (see :func:`dense_squared_error`)."""
        return dense_squared_error(self.A, U, V)

    @functools.cached_property
    def column_norms(self) -> np.ndarray:
        """``||A_:j||²`` per column (int64)."""
        return self.A.sum(axis=0, dtype=np.int64)  # 0/1: the count, with no m x n temporary

    @functools.cached_property
    def gram(self) -> np.ndarray:
        """``AᵀA`` as exact float64 (see :func:`dense_gram`), computed once."""
        return dense_gram(self.A)

    @functools.cached_property
    def total(self) -> int:
        """``||A||²_F``: the number of ones, counted once."""
        return int(np.count_nonzero(self.A))

    def take_rows(self, indices: Any) -> np.ndarray:
        """Rows ``indices`` (repeats allowed, any order) as a contiguous ``int8`` array."""
        return np.ascontiguousarray(self.A[np.asarray(indices, dtype=np.int64)])

    def cross(self, factor: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
        """``A[rows] F`` (``F`` has one row per column of ``A``), as
        :meth:`SparseMatrix.cross` gives it: exact int64 for an integer ``F``, float64 for a
        float one. A 0/1 ``F`` is multiplied on ``A``'s rows packed into 64-bit words once
        (kept with the wrapper: ``m ceil(n / 64)`` words), a word AND and a popcount per 64
        entries (:func:`bit_products`; 10-30x faster than a float copy of ``A`` and BLAS).

        >>> data = InMemoryMatrix([[1, 0, 1], [0, 1, 1]])
        >>> data.cross(np.array([[1], [1], [0]])).tolist(), data.cross(np.full((3, 1), 0.5))
        ([[1], [1]], array([[1.],
               [1.]]))
        """
        from bmfdsl.linalg._kernels import bit_products, row_bits

        factor = _checked_factor(factor, self.shape[1], "F")
        if _is_binary(factor):
            return bit_products(self._packed("rows")[rows], row_bits(factor.T))
        floating = np.issubdtype(factor.dtype, np.floating)
        return self.A[rows].astype(np.float64 if floating else np.int64) @ factor

    def _packed(self, side: str) -> np.ndarray:
        """``A``'s rows (``side="rows"``) or columns as bits, packed on first use, once: the
        side-by-side ALS batches ask from several threads at a time."""
        from bmfdsl.linalg._kernels import column_bits, row_bits

        with self._packing:
            if side not in self._bits:
                self._bits[side] = row_bits(self.A) if side == "rows" else column_bits(self.A)
            return self._bits[side]

    def transposed_cross(self, U: np.ndarray, device: str = "cpu") -> np.ndarray:
        """``Aᵀ U`` as exact int64 for a 0/1 ``U``: on the CPU from ``A``'s columns packed as
        bits (see :meth:`cross`); on the array module of ``device`` (see
        :data:`~bmfdsl.linalg.DEVICES`) over row chunks (the float copy of ``A`` stays
        small), ``A`` as :meth:`on_device` holds it."""
        U = _checked_factor(U, self.shape[0], "U")
        if not _is_binary(U):
            raise InvalidParameterError("U must hold only 0 and 1 (a binary factor)")
        if device == "cpu":
            from bmfdsl.linalg._kernels import bit_products, column_bits

            return bit_products(self._packed("columns"), column_bits(U))
        xp = get_array_module(device)
        source = self.on_device(device)
        m, n = self.shape
        exact32 = m < 2**24 and exact_float32_products(xp)  # exact integer sums
        dtype = np.float32 if exact32 else np.float64
        elements = _CHUNK_ELEMENTS if xp is np else _DEVICE_CHUNK_ELEMENTS
        step = self.chunk_rows or max(1, elements // max(n, 1))
        total = xp.zeros((n, U.shape[1]), dtype=np.float64)
        for start in range(0, m, step):
            block = xp.asarray(source[start : start + step]).astype(dtype)
            total += block.T @ xp.asarray(U[start : start + step]).astype(dtype)
        return to_host(xp.rint(total)).astype(np.int64)


class SparseMatrix:
    """A validated scipy sparse ``A`` held as a CSR pattern, with what the solvers need.

    Nothing here makes ``A`` dense: row gathers and row blocks are the only dense copies.

    >>> import scipy.sparse
    >>> data = SparseMatrix(scipy.sparse.csr_array([[1, 0, 1], [0, 1, 1]]))
    >>> data.total, data.column_norms.tolist(), data.cross(np.eye(3, 2, dtype=np.int8)).tolist()
    (4, [1, 1, 2], [[1, 0], [0, 1]])
    """

    in_memory = True

    def __init__(self, A: Any, chunk_rows: int | None = None) -> None:
        self.csr = check_sparse_binary_matrix(A)
        self.shape: tuple[int, int] = (int(self.csr.shape[0]), int(self.csr.shape[1]))
        self.chunk_rows = chunk_rows

    @classmethod
    def from_dense(cls, block: Any) -> SparseMatrix:
        """The pattern of a dense 0/1 ``block`` (validated as any input), read from its
        nonzero bytes (:func:`~bmfdsl.linalg.dense_pattern`: a 2,000 x 2,000 sample at 0.5%
        ones in 2 ms, where ``scipy.sparse.csr_array(block)`` took 22 ms).

        >>> SparseMatrix.from_dense(np.array([[0, 1], [1, 1]], dtype=np.int8)).total
        3
        """
        return _pattern_of(check_binary_matrix(block))

    @functools.cached_property
    def column_norms(self) -> np.ndarray:
        """``||A_:j||²`` per column (int64)."""
        from bmfdsl.linalg._kernels import pattern_column_counts  # numba loads on first use

        return pattern_column_counts(self.csr.indices, self.shape[1])

    @functools.cached_property
    def row_norms(self) -> np.ndarray:
        """``||A_i:||²`` per row (int64), computed once (every BLS of ``U`` reads it)."""
        return np.diff(self.csr.indptr).astype(np.int64)

    @functools.cached_property
    def gram(self) -> np.ndarray:
        """``AᵀA`` as exact float64 from the pattern (see :func:`exact_gram`), computed once."""
        return exact_gram(self.csr)

    @property
    def total(self) -> int:
        """``||A||²_F``: the number of ones."""
        return int(self.csr.nnz)

    @functools.cached_property
    def T(self) -> SparseMatrix:
        """``Aᵀ`` as CSR, built once; its own ``T`` is this matrix (one copy each way)."""
        flipped = SparseMatrix(self.csr.T.tocsr(), self.chunk_rows)
        flipped.__dict__["T"] = self  # what cached_property would store
        return flipped

    def layout(self) -> dict[str, Any]:
        """A CSR pattern, held whole."""
        return {"storage": "sparse"}

    def take_rows(self, indices: Any) -> np.ndarray:
        """Rows ``indices`` (repeats allowed, any order) as a dense contiguous ``int8`` array."""
        rows = self.csr[np.asarray(indices, dtype=np.int64)]
        return np.ascontiguousarray(rows.toarray(), dtype=np.int8)

    def dense_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` as a dense ``int8`` block (callers keep blocks bounded)."""
        whole = start <= 0 and stop >= self.shape[0]
        rows = self.csr if whole else self.csr[start:stop]  # slicing would copy
        return np.ascontiguousarray(rows.toarray(), dtype=np.int8)

    def dense(self, limit: int = DENSIFY_LIMIT_BYTES) -> np.ndarray:
        """All of ``A`` as a dense ``int8`` array; refused when it would pass ``limit`` bytes.

        >>> import scipy.sparse
        >>> SparseMatrix(scipy.sparse.eye(2, format="csr")).dense()
        array([[1, 0],
               [0, 1]], dtype=int8)
        """
        m, n = self.shape
        if m * n > limit:
            raise ModelTooLargeError(
                f"this sparse {m}x{n} matrix would take {m * n / 2**30:.1f} GiB dense, over "
                f"{limit / 2**30:.1f} GiB; pass sample_rows='auto' (leverage-score row "
                "sampling keeps it sparse) or densify it yourself (A.toarray()) if you mean to"
            )
        return self.dense_rows(0, m)

    def dense_pays(self) -> bool:
        """Whether the whole pipeline runs faster on a dense copy of ``A``: at least
        :data:`DENSE_INPUT_DENSITY` ones, and within :data:`DENSIFY_LIMIT_BYTES`. The copy
        takes one byte an entry, at most 1.4x the CSR's five a one. Measured on planted
        matrices (``sample_rows='auto'``, the same answers either way): at 23% ones
        200,000 x 1,000, r = 5, took 8.6 s from the CSR and 2.0 s dense; at 14%, 100,000 x 300,
        r = 10, 0.84 s and 0.60 s; at 11%, 200,000 x 1,000, 1.40 s and 1.52 s.

        >>> import scipy.sparse
        >>> SparseMatrix(scipy.sparse.eye(4, format="csr")).dense_pays()  # 25% ones
        True
        >>> SparseMatrix(scipy.sparse.eye(10, format="csr")).dense_pays()
        False
        """
        m, n = self.shape
        return self.total >= DENSE_INPUT_DENSITY * m * n and m * n <= DENSIFY_LIMIT_BYTES

    def cross(self, factor: np.ndarray) -> np.ndarray:
        """``A F`` (``F`` has one row per column of ``A``): exact int64 for an integer ``F``,
        float64 for a float one (the sums scipy's ``A @ F`` gives, bit for bit).

        >>> import scipy.sparse
        >>> data = SparseMatrix(scipy.sparse.csr_array([[1, 0, 1], [0, 1, 1]]))
        >>> data.cross(np.array([[0.5], [0.25], [1.0]])).tolist()
        [[1.5], [1.25]]
        """
        from bmfdsl.linalg._kernels import pattern_cross  # numba loads on first use only

        floating = np.issubdtype(np.asarray(factor).dtype, np.floating)
        wide = np.ascontiguousarray(factor, dtype=np.float64 if floating else np.int64)
        return pattern_cross(self.csr.indptr, self.csr.indices, wide)

    def transposed_cross(self, U: np.ndarray, device: str = "cpu") -> np.ndarray:
        """``Aᵀ U`` as exact int64 (``U`` has one row per row of ``A``): an ``O(nnz r)``
        pass over the pattern on the CPU, whatever the ``device``."""
        from bmfdsl.linalg._kernels import pattern_transposed_cross

        # int8 factors as they are (the sums are int64): an m x r int64 copy cost as much as a
        # thread's share of the pass (5·10⁶ rows)
        U = np.asarray(U)
        factor = np.ascontiguousarray(U if U.dtype in (np.int8, np.int64) else U.astype(np.int64))
        return pattern_transposed_cross(self.csr.indptr, self.csr.indices, factor, self.shape[1])

    def squared_error(self, U: np.ndarray, V: np.ndarray) -> int:
        """``||A - U Vᵀ||²_F = ||A||² - 2 Σ(A ∘ U Vᵀ) + Σ((UᵀU) ∘ (VᵀV))``, exact.

        ``Σ(A ∘ U Vᵀ)`` is ``(U Vᵀ)`` summed over the ones of ``A``, i.e. ``Σ U ∘ (A V)``: the
        ``m x n`` product is never formed.
        """
        U = np.asarray(U, dtype=np.int64)
        V = np.asarray(V, dtype=np.int64)
        hits = int(np.einsum("ik,ik->", U, self.cross(V)))
        product_norm = int(np.einsum("kl,kl->", U.T @ U, V.T @ V))
        return self.total - 2 * hits + product_norm


class DaskMatrix:
    """A validated ``dask.array`` ``A`` whose row blocks each span all columns.

    One pass over the blocks checks ``A`` (0/1 only) and counts its column norms. With
    ``with_gram``, a tall ``A`` of at most 256 columns also sums ``AᵀA`` in that pass (one
    round trip less for a caller that reads :attr:`gram`, as the pipeline's sampling and
    bound do; its transpose :attr:`T` gets the same setting); otherwise :attr:`gram` is summed
    by a pass of its own on first use, so that a caller that only scores an answer
    (:meth:`squared_error`) never pays for it.
    """

    in_memory = False

    def __init__(self, A: Any, *, with_gram: bool = False) -> None:
        if A.ndim != 2 or 0 in A.shape:
            raise InvalidMatrixError(f"A must be a non-empty 2-D array; got shape {A.shape}")
        self.array = A.rechunk({1: -1})
        self.shape: tuple[int, int] = (int(self.array.shape[0]), int(self.array.shape[1]))
        self._with_gram = with_gram
        m, n = self.shape
        # each block gives one flat vector that dask sums as it goes (a tree reduction), so
        # the client holds one n x n Gram, not one per block
        with_gram = with_gram and n <= _GRAM_WITH_CHECK_MAX_COLUMNS and m >= n
        size = 1 + n + (n * n if with_gram else 0)
        sums = self.sum_blocks(_checked_block_sums, with_gram, shape=(size,), dtype=np.float64)
        non_binary = int(sums[0])  # counts in float64: exact below 2^53
        if non_binary:
            raise InvalidMatrixError(
                f"A must contain only 0 and 1; found {non_binary} other value(s). "
                "Binarize it first (e.g. (A >= threshold).astype(int))."
            )
        self.column_norms = sums[1 : 1 + n].astype(np.int64)
        self.total = int(self.column_norms.sum())
        if with_gram:  # what the cached property would store (exact integer sums)
            self.__dict__["gram"] = sums[1 + n :].reshape(n, n)
        if self.array.dtype != np.int8:
            # checked 0/1: the numba kernels of later passes get int8 blocks (one
            # specialization each; float16 has none)
            self.array = self.array.astype(np.int8)

    @property
    def num_blocks(self) -> int:
        """The number of row blocks."""
        return len(self.array.chunks[0])

    @functools.cached_property
    def T(self) -> DaskMatrix:
        """``Aᵀ`` (lazy; its row blocks are widened in turn)."""
        return DaskMatrix(self.array.T, with_gram=self._with_gram)

    @functools.cached_property
    def gram(self) -> np.ndarray:
        """``AᵀA`` summed over the row blocks (only ``n x n`` numbers travel), computed once."""
        n = self.shape[1]
        return self.sum_blocks(dense_gram, shape=(n, n), dtype=np.float64)

    def layout(self) -> dict[str, Any]:
        """A dask array, and the number of row blocks the passes map over."""
        return {"storage": "dask", "dask_blocks": self.num_blocks}

    def dense(self) -> np.ndarray:
        """All rows gathered (only for a matrix known to be small)."""
        return self.take_rows(np.arange(self.shape[0]))

    @staticmethod
    def compute(*collections: Any) -> tuple[Any, ...]:
        """Evaluate dask collections together (one pass over shared inputs)."""
        import dask

        return tuple(dask.compute(*collections))

    def take_rows(self, indices: Any) -> np.ndarray:
        """Rows ``indices`` (repeats allowed, any order) gathered as an ``int8`` numpy array:
        one task per row block that holds any, given a slice of it or a few row numbers
        (dask's fancy indexing ran 3x slower for the 100 rows of a core); many scattered
        rows take dask's fancy indexing (their numbers would make a large graph)."""
        import dask

        unique, inverse = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        if unique.size == 0:
            return np.zeros((0, self.shape[1]), dtype=np.int8)
        edges = np.cumsum((0, *self.array.chunks[0]))
        block_of = np.searchsorted(edges, unique, side="right") - 1
        picks: list[tuple[int, slice | np.ndarray]] = []
        scattered = 0
        for block in np.unique(block_of):
            rows = unique[block_of == block] - edges[block]
            if rows[-1] - rows[0] + 1 == rows.size:  # consecutive: a slice
                picks.append((int(block), slice(int(rows[0]), int(rows[-1]) + 1)))
            else:
                picks.append((int(block), rows))
                scattered += rows.size
        if scattered > _TAKE_MAX_SCATTERED_ROWS or not 0 <= unique[0] <= unique[-1] < edges[-1]:
            gathered = np.asarray(self.array[unique].compute())
        else:
            blocks = self.array.to_delayed().ravel()
            tasks = [dask.delayed(_take_block_rows)(blocks[block], rows) for block, rows in picks]
            gathered = np.concatenate([np.asarray(part) for part in dask.compute(*tasks)])
        return np.ascontiguousarray(check_binary_matrix(gathered)[np.ravel(inverse)])

    def row_aligned(self, factor: np.ndarray) -> Any:
        """``factor`` (one row per row of ``A``) as a dask array chunked like ``A``'s rows.

        On a distributed cluster each block is scattered to the workers once (the graph
        holds only its key); elsewhere the blocks are views of ``factor``.
        """
        import dask.array as da

        client = _distributed_client()
        if client is None:
            return da.from_array(factor, chunks=(self.array.chunks[0], factor.shape[1]))
        edges = np.cumsum((0, *self.array.chunks[0]))
        parts = [factor[start:stop] for start, stop in itertools.pairwise(edges)]
        futures = client.scatter(parts, hash=False)
        blocks = [
            da.from_delayed(future, shape=part.shape, dtype=factor.dtype)
            for future, part in zip(futures, parts, strict=True)
        ]
        return da.concatenate(blocks, axis=0)

    def map_rows(
        self, func: Callable[..., np.ndarray], *args: Any, columns: int | None, dtype: Any
    ) -> Any:
        """A lazy dask array of ``func(block, *args)`` per row block.

        Each call returns one row per row of its block: ``columns`` values each, or one value
        (``columns=None``, a 1-D result). Dask arguments chunked like the rows of ``A`` (see
        :meth:`row_aligned`) arrive block by block; numpy arguments are broadcast to the
        workers once on a distributed cluster (see :func:`_broadcast`).
        """
        args = _broadcast(args)
        # meta given: dask would otherwise call func on an empty array of its own layout to
        # learn it (a numba kernel compiled a new specialization for it: 0.25 s per process)
        if columns is None:
            return self.array.map_blocks(
                func,
                *args,
                dtype=dtype,
                drop_axis=1,
                chunks=(self.array.chunks[0],),
                meta=np.empty((0,), dtype=dtype),
            )
        return self.array.map_blocks(
            func,
            *args,
            dtype=dtype,
            chunks=(self.array.chunks[0], (columns,)),
            meta=np.empty((0, 0), dtype=dtype),
        )

    def per_block(self, func: Callable[..., Any], *args: Any) -> list[Any]:
        """``func(block, *args)`` for every row block, in block order, computed together (one
        pass over ``A``; numpy arguments broadcast as in :meth:`map_rows`). For results of
        more than one kind per block, e.g. rows and a sum."""
        import dask

        args = _broadcast(args)
        tasks = [dask.delayed(func)(block, *args) for block in self.array.to_delayed().ravel()]
        return list(dask.compute(*tasks))

    def sum_blocks(
        self, func: Callable[..., Any], *args: Any, shape: tuple[int, ...], dtype: Any
    ) -> np.ndarray:
        """``Σ_blocks func(block, *args)``, each term an array of ``shape``, computed."""
        args = _broadcast(args)
        size = int(np.prod(shape))
        parts = self.array.map_blocks(
            functools.partial(_flattened, func, size),
            *args,
            dtype=dtype,
            chunks=((1,) * self.num_blocks, (size,)),
            meta=np.empty((0, 0), dtype=dtype),  # no trial call on an empty block
        )
        return np.asarray(parts.sum(axis=0).compute(), dtype=dtype).reshape(shape)

    def transposed_cross(self, U: np.ndarray, device: str = "cpu") -> np.ndarray:
        """``Aᵀ U`` as exact int64, summed over the row blocks (by the workers, whatever the
        ``device``)."""
        return self.sum_blocks(
            _block_transposed_cross,
            self.row_aligned(U.astype(np.int64)),
            shape=(self.shape[1], U.shape[1]),
            dtype=np.int64,
        )

    def squared_error(self, U: np.ndarray, V: np.ndarray) -> int:
        """``||A - U Vᵀ||²_F`` summed block by block (only one number per block travels)."""
        per_block = self.sum_blocks(
            _block_squared_error,
            self.row_aligned(np.asarray(U)),
            np.asarray(V),
            shape=(1,),
            dtype=np.int64,
        )
        return int(per_block[0])


def dense_squared_error(A: np.ndarray, U: Any, V: Any) -> int:
    """``||A - U Vᵀ||²_F`` of a dense array in row chunks (no ``m x n`` integer copy).

    Exact in float64 (BLAS speed) while every chunk's sum of squares stays below 2^53, in
    int64 beyond.

    >>> dense_squared_error(np.array([[1, 1], [0, 1]]), np.array([[1], [1]]), np.array([[1], [0]]))
    3
    """
    U = np.asarray(U)
    V = np.asarray(V)
    m, n = A.shape
    step = max(1, _ERROR_CHUNK_ENTRIES // max(n, 1))
    largest = float(np.abs(A).max(initial=0)) + U.shape[1] * float(
        np.abs(U).max(initial=0)
    ) * float(np.abs(V).max(initial=0))
    dtype = np.float64 if largest**2 * min(m, step) * n < _FLOAT64_EXACT else np.int64
    V_t = V.astype(dtype).T
    total = 0
    for start in range(0, m, step):
        residual = (
            A[start : start + step].astype(dtype) - U[start : start + step].astype(dtype) @ V_t
        )
        total += int(np.rint(np.einsum("ij,ij->", residual, residual)))
    return total


def weighted_squared_error(A: Any, U: np.ndarray, V: np.ndarray, weights: np.ndarray) -> float:
    """``Σ_ij w_ij (a_ij - (U Vᵀ)_ij)²``: the error of masked (``w`` 0/1, 0 = missing) and
    weighted BMF, for an in-memory ``A`` and ``weights`` of its shape.

    Summed in float64 over row chunks of about a million entries, so no ``m x n`` temporary
    is made (exact for 0/1 and other integer weights).

    >>> A = np.array([[1, 1], [0, 1]])
    >>> weighted_squared_error(A, [[1], [1]], [[1], [0]], np.array([[1.0, 0.5], [0.0, 2.0]]))
    2.5
    """
    A = np.asarray(A)
    weights = np.asarray(weights)
    U = np.asarray(U)
    step = max(1, _ERROR_CHUNK_ENTRIES // max(A.shape[1], 1))
    V_t = np.asarray(V).astype(np.float64).T
    total = 0.0
    for start in range(0, A.shape[0], step):
        rows = slice(start, start + step)
        residual = A[rows].astype(np.float64) - U[rows].astype(np.float64) @ V_t
        total += float((weights[rows] * residual * residual).sum())
    return total


def _distributed_client() -> Any:
    """The ``distributed`` client that computes dask collections now, or ``None`` (a local
    scheduler, or ``distributed`` not installed)."""
    import dask.base

    scheduler = dask.base.get_scheduler()
    client = getattr(scheduler, "__self__", None)  # a client's scheduler is its bound .get
    if client is None or type(client).__module__.split(".")[0] != "distributed":
        return None
    return client


def _broadcast(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``args`` with every numpy array sent to all workers once (``client.scatter``) when a
    distributed cluster computes: task graphs then carry keys, not data (a factor or a
    projector inside a graph travels with every graph, and ``distributed`` warns about any
    graph over 10 MB). Unchanged on a local scheduler."""
    client = _distributed_client()
    if client is None:
        return args
    return tuple(
        client.scatter(arg, broadcast=True, hash=False) if isinstance(arg, np.ndarray) else arg
        for arg in args
    )


def _take_block_rows(block: Any, rows: slice | np.ndarray) -> np.ndarray:
    return np.asarray(block)[rows]


def _checked_block_sums(block: Any, with_gram: bool) -> np.ndarray:
    """A dask block's count of entries other than 0 and 1, its column counts of ones and,
    ``with_gram``, its ``blockᵀ block`` (:func:`dense_gram`; zeros when the block is not
    0/1), as one flat float64 vector (exact integers) that sums over the blocks.

    >>> _checked_block_sums(np.array([[1.0, 2.0], [0.0, 1.0]], dtype=np.float16), False).tolist()
    [1.0, 1.0, 2.0]
    """
    block = np.asarray(block)
    if block.dtype.kind in "biu" and block.dtype.itemsize == 1:  # int8, uint8, bool: bytes
        non_binary = int(np.count_nonzero(block.view(np.uint8) > 1))
        column_norms = np.add.reduce(block, axis=0, dtype=np.int64)
    else:
        non_binary = int(np.count_nonzero((block != 0) & (block != 1)))
        column_norms = np.count_nonzero(block, axis=0).astype(np.int64)
    n = block.shape[1]
    sums = np.zeros(1 + n + (n * n if with_gram else 0), dtype=np.float64)
    sums[0] = non_binary
    sums[1 : 1 + n] = column_norms
    if with_gram and not non_binary:  # 0/1 checked: int8 is exact, and numba's kernels take it
        sums[1 + n :] = dense_gram(block.astype(np.int8, copy=False)).ravel()
    return sums


def _block_squared_error(block: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.ndarray:
    return np.array([dense_squared_error(np.asarray(block), U, V)], dtype=np.int64)


def _flattened(func: Callable[..., Any], size: int, block: Any, *args: Any) -> np.ndarray:
    return np.asarray(func(block, *args)).reshape(1, size)


def _block_transposed_cross(block: np.ndarray, U: np.ndarray) -> np.ndarray:
    return np.asarray(block, dtype=np.int64).T @ U


@dataclass(frozen=True)
class Orientation:
    """Whether a problem is solved on ``Aᵀ`` instead of ``A``: one place for the swap.

    Solving ``Aᵀ ≈ V Uᵀ`` swaps the factors and the one-hot side; :meth:`factors` maps a pair
    either way (the swap is its own inverse).

    >>> flipped = Orientation(transposed=True)
    >>> flipped.matrix(np.ones((2, 3))).shape, flipped.side("V"), flipped.factors("u", "v")
    ((3, 2), 'U', ('v', 'u'))
    """

    transposed: bool

    def matrix(self, A: Any) -> Any:
        """``A`` as the solver sees it."""
        return A.T if self.transposed else A

    def side(self, one_hot: str | None) -> str | None:
        """The one-hot side as the solver sees it (``None`` stays ``None``)."""
        if not self.transposed or one_hot is None:
            return one_hot
        return {"U": "V", "V": "U"}[one_hot]

    def factors(self, U: Any, V: Any) -> tuple[Any, Any]:
        """``(U, V)`` mapped between the two orientations."""
        return (V, U) if self.transposed else (U, V)
