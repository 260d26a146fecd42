"""The compiled kernels of exact binary least squares (BLS) and ALS: one of each, shared.

:func:`~bmfdsl.solvers.solve_bls` and :func:`~bmfdsl.solvers.als` run them on small in-memory
problems (no per-solve Python overhead), and the native solver polishes every restart with
their row solves (``bls_step`` in ``solvers/native/_anneal.py``, one solve a call, so that it
counts each against its budget). The native solver passes its own rules as
arguments: it solves ``U`` first and keeps a row's current code on ties (``keep_ties``), where
the pipeline solves ``V`` first and breaks ties towards the lowest code index, as the chunked
BLAS route of :func:`~bmfdsl.solvers.solve_bls` does.

The kernels are ``numba.njit(cache=True, nogil=True)`` (``_next``, which only starts numba's
runtime, aside): compiled (or loaded from numba's disk
cache) once per process, on first use, and they release the GIL, so that the pipeline's
full-data passes run beside the portfolio's seed threads. Errors are exact integers.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import numba
import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError


@numba.njit(cache=True)
def _next(value: int) -> int:
    return value + 1


_runtime_started = False


def start_kernels() -> float:
    """Start numba's runtime, which the first compiled call of a process pays for (about
    0.3 s here, whichever kernel it is): the seconds it took, 0.0 once started, so that a
    caller can report it apart from its stages.

    >>> start_kernels() >= 0.0, start_kernels()
    (True, 0.0)
    """
    global _runtime_started
    if _runtime_started:
        return 0.0
    started = time.perf_counter()
    _next(0)
    _runtime_started = True
    return time.perf_counter() - started


#: The orders :func:`code_table` lists codes in (see there).
CodeOrder = Literal["index", "gray", "lexicographic"]


@functools.lru_cache(maxsize=64)
def code_table(rank: int, exactly_one: bool, order: CodeOrder = "index") -> np.ndarray:
    """All candidate rows of a 0/1 factor, built once per argument triple.

    With ``exactly_one`` the codes are the ``rank`` rows of the identity (a one-hot factor), in
    every order. Otherwise all ``2**rank`` codes, where code ``c`` has bit ``k``
    (``(c >> k) & 1``) in column ``k``, listed in one of three orders; an exact solver takes the
    first of equally good codes, so the order is how it breaks ties:

    * ``"index"``: row ``c`` is code ``c`` (the BLS/ALS kernels: ties go to the lowest code);
    * ``"gray"``: row ``t`` is code ``t ^ (t >> 1)``, the reflected Gray code: consecutive rows
      differ in one bit, which the annealing kernels score incrementally;
    * ``"lexicographic"``: rows sorted by column 0, then column 1, ... (as
      ``itertools.product((0, 1), repeat=rank)``): row ``t`` is code ``t`` with its ``rank``
      bits reversed (the weighted BLS).

    The table is read-only (it is shared).

    >>> code_table(2, False).tolist(), code_table(2, True).tolist()
    ([[0, 0], [1, 0], [0, 1], [1, 1]], [[1, 0], [0, 1]])
    >>> code_table(2, False, "gray").tolist(), code_table(2, False, "lexicographic").tolist()
    ([[0, 0], [1, 0], [1, 1], [0, 1]], [[0, 0], [0, 1], [1, 0], [1, 1]])
    """
    if order not in ("index", "gray", "lexicographic"):
        raise InvalidParameterError(
            f"order must be 'index', 'gray' or 'lexicographic'; got {order!r}"
        )
    if exactly_one:
        codes = np.eye(rank, dtype=np.int8)
    else:
        rows = np.arange(2**rank, dtype=np.int64)
        if order == "gray":
            rows ^= rows >> 1
        bits = np.arange(rank)[::-1] if order == "lexicographic" else np.arange(rank)
        codes = ((rows[:, None] >> bits) & 1).astype(np.int8)
    codes.flags.writeable = False
    return codes


def random_factor(
    rng: np.random.Generator, shape: tuple[int, ...], exactly_one: bool
) -> np.ndarray:
    """Uniformly random 0/1 rows of ``shape`` (one 1 per row, uniformly placed, with
    ``exactly_one``).

    >>> random_factor(np.random.default_rng(0), (3, 2), exactly_one=True).sum(axis=1).tolist()
    [1, 1, 1]
    """
    if not exactly_one:
        return (rng.random(shape) < 0.5).astype(np.int8)
    out = np.zeros(shape, dtype=np.int8)
    picks = rng.integers(shape[-1], size=shape[:-1])
    np.put_along_axis(out, picks[..., None], 1, axis=-1)
    return out


@numba.njit(cache=True, nogil=True)
def gram(factor: np.ndarray) -> np.ndarray:
    """``FᵀF`` as int64 for a 0/1 ``F``. A tall ``F`` of rank at most 16 counts its rows'
    codes first and sums the table (each row read once, no inner loop over its ones:
    5·10⁶ x 5, 72 -> 13 ms)."""
    n, rank = factor.shape
    gram = np.zeros((rank, rank), dtype=np.int64)
    if rank <= 16 and (1 << rank) * 4 <= n:
        counts = np.zeros(1 << rank, dtype=np.int64)
        for j in range(n):
            code = 0
            for k in range(rank):
                if factor[j, k]:
                    code |= 1 << k
            counts[code] += 1
        for code in range(1 << rank):
            if counts[code]:
                for k in range(rank):
                    if (code >> k) & 1:
                        for l in range(rank):
                            if (code >> l) & 1:
                                gram[k, l] += counts[code]
        return gram
    for j in range(n):
        for k in range(rank):
            if factor[j, k]:
                for l in range(rank):
                    gram[k, l] += factor[j, l]
    return gram


@numba.njit(cache=True, nogil=True)
def dense_cross(A: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``A F`` as int64 for a dense 0/1 ``A`` (int8): the rows of ``F`` at each row's ones."""
    rows, columns = A.shape
    rank = factor.shape[1]
    out = np.zeros((rows, rank), dtype=np.int64)
    for i in range(rows):
        for j in range(columns):
            if A[i, j]:
                for k in range(rank):
                    out[i, k] += factor[j, k]
    return out


def uncovered_ones(
    A: np.ndarray, U: np.ndarray, V: np.ndarray, column: int = -1
) -> tuple[np.ndarray, int]:
    """The ones of a dense 0/1 ``A`` that ``U Vᵀ`` leaves uncovered (``A_ij = 1`` where
    ``U_i · V_j = 0``), counted per column; with ``column >= 0`` only over the rows where
    ``column`` has such a one. Returns the counts (int64, one per column) and how many rows
    were counted (``m`` without ``column``). One pass over ``A`` without ``m x n``
    temporaries: each row's and column's factor bits packed into 64-bit words, so that a
    cover test is a few word ANDs.

    >>> A = np.array([[1, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=np.int8)
    >>> U, V = np.array([[1], [0], [0]], np.int8), np.array([[1], [1], [0]], np.int8)
    >>> counts, rows = uncovered_ones(A, U, V)
    >>> counts.tolist(), rows
    ([1, 1, 2], 3)
    >>> counts, rows = uncovered_ones(A, U, V, column=2)
    >>> counts.tolist(), rows
    ([1, 1, 2], 2)
    """
    A, U, V = (np.asarray(array) for array in (A, U, V))
    if A.ndim != 2 or U.ndim != 2 or V.ndim != 2:
        raise InvalidParameterError("A, U and V must be 2-d arrays")
    m, n = A.shape
    if U.shape[0] != m or V.shape[0] != n or U.shape[1] != V.shape[1]:
        raise InvalidParameterError(
            f"U must be {m} x r and V {n} x r for a {m} x {n} A; got {U.shape} and {V.shape}"
        )
    if not -1 <= column < n:
        raise InvalidParameterError(f"column must be -1 (none) or in [0, {n}); got {column}")
    # int8, C order: one compiled specialization for every caller (numba compiles one per
    # dtype and layout, about a second each on first use)
    return _uncovered_ones(
        np.ascontiguousarray(A, dtype=np.int8),
        row_bits(U),
        row_bits(V),
        int(column),
    )


@numba.njit(cache=True, nogil=True)
def _uncovered_ones(
    A: np.ndarray, row_bits: np.ndarray, column_bits: np.ndarray, column: int
) -> tuple[np.ndarray, int]:
    m, n = A.shape
    words = row_bits.shape[1]
    counts = np.zeros(n, dtype=np.int64)
    rows = 0
    for i in range(m):
        if column >= 0:
            if not A[i, column]:
                continue
            covered = False
            for t in range(words):
                covered = covered or (row_bits[i, t] & column_bits[column, t]) != 0
            if covered:
                continue
        rows += 1
        if words == 1:  # ranks up to 64: one AND a one
            bits = row_bits[i, 0]
            for j in range(n):
                if A[i, j] and (bits & column_bits[j, 0]) == 0:
                    counts[j] += 1
            continue
        for j in range(n):
            if A[i, j]:
                covered = False
                for t in range(words):
                    covered = covered or (row_bits[i, t] & column_bits[j, t]) != 0
                if not covered:
                    counts[j] += 1
    return counts, rows


# The pattern kernels split their rows over threads (nogil numba kernels, one thread per row
# range, the first in the caller's: no OpenMP runtime, so the process stays safe to fork)
# above this much work; below it the threads cost more than they save.
PARALLEL_MIN_WORK = 2**22


def default_threads() -> int:
    """The threads a pattern kernel uses by default: the CPUs this process may run on, or
    fewer inside :func:`kernel_threads`.

    >>> default_threads() >= 1
    True
    """
    cpus = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    share = getattr(_thread_share, "threads", None)
    return cpus if share is None else max(1, min(share, cpus))


_thread_share = threading.local()  # the kernel_threads in force in each thread


@contextlib.contextmanager
def kernel_threads(threads: int) -> Iterator[None]:
    """Within it, :func:`default_threads` in the calling thread (only: a thread it starts
    has no cap) is at most ``threads``: for a worker among several side by side, so that their
    pattern kernels share the CPUs instead of each taking them all. The thread count never
    changes a kernel's result.

    >>> with kernel_threads(1):
    ...     default_threads()
    1
    """
    before = getattr(_thread_share, "threads", None)
    _thread_share.threads = threads
    try:
        yield
    finally:
        _thread_share.threads = before


def _row_ranges(cumulative_work: np.ndarray, workers: int) -> list[tuple[int, int]]:
    """``workers`` consecutive row ranges of about equal work, given the work of rows
    ``0..i`` at ``i`` (nondecreasing)."""
    rows = int(cumulative_work.shape[0])
    if workers == 1 or rows == 0:
        return [(0, rows)]
    # targets of the array's own dtype (float ones made searchsorted convert all of it),
    # computed in Python's integers (no overflow)
    total = int(cumulative_work[-1])
    targets = np.array(
        [total * index // workers for index in range(1, workers)], dtype=cumulative_work.dtype
    )
    cuts = [0, *np.searchsorted(cumulative_work, targets).tolist(), rows]
    return [(int(a), int(b)) for a, b in itertools.pairwise(cuts)]


def _even_ranges(rows: int, workers: int) -> list[tuple[int, int]]:
    """At most ``workers`` consecutive ranges of ``rows`` rows, of equal size up to one.

    >>> _even_ranges(5, 2), _even_ranges(1, 4)
    ([(0, 2), (2, 5)], [(0, 1)])
    """
    count = max(1, min(workers, rows))
    cuts = [rows * index // count for index in range(count + 1)]
    return list(itertools.pairwise(cuts))


def _in_threads(function: Callable[[int, int], Any], ranges: list[tuple[int, int]]) -> list[Any]:
    """``function(first, stop)`` of every row range, one thread each (the caller's thread
    takes the first range: one thread fewer to start per pass), results in range order; a
    range's error is raised here.

    >>> _in_threads(lambda first, stop: stop - first, [(0, 2), (2, 5), (5, 6)])
    [2, 3, 1]
    """
    if len(ranges) == 1:
        return [function(*ranges[0])]
    results: list[Any] = [None] * len(ranges)
    errors: list[BaseException | None] = [None] * len(ranges)

    def run(index: int) -> None:
        try:
            results[index] = function(*ranges[index])
        except BaseException as error:  # re-raised in the caller's thread
            errors[index] = error

    started: list[threading.Thread] = []
    try:  # no helper outlives the call, even when starting one fails
        for index in range(1, len(ranges)):
            helper = threading.Thread(target=run, args=(index,))
            helper.start()
            started.append(helper)
        run(0)
    finally:
        for helper in started:
            helper.join()
    first_error = next((error for error in errors if error is not None), None)
    if first_error is not None:  # the first range's, whichever thread failed first
        raise first_error
    return results


def pattern_cross(
    indptr: np.ndarray, indices: np.ndarray, factor: np.ndarray, *, threads: int | None = None
) -> np.ndarray:
    """``A F`` in ``F``'s dtype (int64: exact counts) for a 0/1 CSR ``A`` given by its pattern
    (``indptr``, ``indices``).

    Row ``i`` is the sum of the rows of ``F`` at the columns of ``A``'s ones in row ``i``, in
    index order (for float64 ``F`` the sums scipy's ``A @ F`` gives, bit for bit):
    ``O(nnz r)`` work and no copy of ``A`` (scipy would upcast its values first). Above
    :data:`PARALLEL_MIN_WORK` the rows are split over ``threads`` (default
    :func:`default_threads`); each row is summed by one thread, so the result does not
    depend on the thread count.

    >>> pattern_cross(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([[1], [2]])).tolist()
    [[3], [2]]
    """
    rows = int(indptr.shape[0]) - 1
    out = np.zeros((rows, factor.shape[1]), dtype=factor.dtype)
    work = float(indices.shape[0]) * max(factor.shape[1], 1)
    if work < PARALLEL_MIN_WORK:  # one range: called directly (NMF's loops make thousands)
        _pattern_cross_rows(indptr, indices, factor, 0, out)
        return out
    workers = threads or default_threads()
    _in_threads(
        lambda first, stop: _pattern_cross_rows(indptr, indices, factor, first, out[first:stop]),
        _row_ranges(indptr[1:], max(1, min(workers, rows))),  # a row's work: its ones
    )
    return out


@numba.njit(cache=True, nogil=True)
def pattern_cross_into(
    indptr: np.ndarray, indices: np.ndarray, factor: np.ndarray, out: np.ndarray
) -> None:
    """``out = A F`` for a 0/1 CSR ``A`` given by its pattern, in ``out``'s dtype: the sums
    :func:`pattern_cross` gives, on one thread, callable from other compiled loops. Shapes that
    do not fit (``out`` not ``rows x r``, a column index beyond ``F``'s rows) raise
    ``ValueError`` before any read.

    >>> out = np.empty((2, 1))
    >>> pattern_cross_into(np.array([0, 2, 3]), np.array([0, 1, 1]), np.array([[1.0], [2.0]]), out)
    >>> out.tolist()
    [[3.0], [2.0]]
    """
    if out.shape[0] != indptr.shape[0] - 1 or out.shape[1] != factor.shape[1]:
        raise ValueError("pattern_cross_into: out must be rows x r")
    if indptr[-1] > indices.shape[0]:
        raise ValueError("pattern_cross_into: indptr points past the indices")
    for p in range(indptr[-1]):
        if indices[p] < 0 or indices[p] >= factor.shape[0]:
            raise ValueError("pattern_cross_into: a column index beyond the factor's rows")
    out[:, :] = 0
    _pattern_cross_rows(indptr, indices, factor, 0, out)


@numba.njit(cache=True, nogil=True)
def _pattern_cross_rows(
    indptr: np.ndarray, indices: np.ndarray, factor: np.ndarray, first: int, out: np.ndarray
) -> None:
    """Rows ``first, first + 1, ...`` of ``A F`` added into ``out`` (one row each)."""
    rank = factor.shape[1]
    for row in range(out.shape[0]):
        i = first + row
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for k in range(rank):
                out[row, k] += factor[j, k]


def pattern_column_counts(indices: np.ndarray, columns: int) -> np.ndarray:
    """Ones per column of a 0/1 CSR pattern (``Aᵀ 1``, int64) from its ``indices``: exact
    counts over ranges of them split across threads and summed, so the same numbers at any
    thread count (``np.bincount`` read 5·10⁷ indices in 0.09 s on one thread).

    >>> pattern_column_counts(np.array([0, 2, 2, 1]), 4).tolist()
    [1, 1, 2, 0]
    """
    indices = np.ascontiguousarray(indices)
    workers = default_threads() if indices.size >= PARALLEL_MIN_WORK else 1
    parts = _in_threads(
        lambda first, stop: _column_counts(indices[first:stop], columns),
        _even_ranges(indices.size, workers),
    )
    counts: np.ndarray = parts[0]
    for part in parts[1:]:
        counts = counts + part
    return counts


@numba.njit(cache=True, nogil=True)
def _column_counts(indices: np.ndarray, columns: int) -> np.ndarray:
    counts = np.zeros(columns, dtype=np.int64)
    for p in range(indices.shape[0]):
        counts[indices[p]] += 1
    return counts


def pattern_transposed_cross(
    indptr: np.ndarray,
    indices: np.ndarray,
    factor: np.ndarray,
    columns: int,
    *,
    threads: int | None = None,
) -> np.ndarray:
    """``Aᵀ F`` as int64 (``columns x r``) for a 0/1 CSR ``A`` given by its pattern (``F``
    integer, one row per row of ``A``). Above :data:`PARALLEL_MIN_WORK` the rows are split
    over ``threads`` (default :func:`default_threads`), each summing its own ``columns x r``
    part; integer sums, so the result does not depend on the thread count.

    >>> pattern_transposed_cross(np.array([0, 2, 3]), np.array([0, 1, 1]),
    ...                          np.array([[1], [2]]), 2).tolist()
    [[1], [3]]
    """
    rows = int(indptr.shape[0]) - 1
    rank = factor.shape[1]
    work = float(indices.shape[0]) * max(rank, 1)
    workers = 1 if work < PARALLEL_MIN_WORK else threads or default_threads()

    def part(first: int, stop: int) -> np.ndarray:
        out = np.zeros((columns, rank), dtype=np.int64)
        _pattern_transposed_cross_rows(indptr, indices, factor, first, stop, out)
        return out

    parts = _in_threads(part, _row_ranges(indptr[1:], max(1, min(workers, rows))))
    return parts[0] if len(parts) == 1 else np.sum(parts, axis=0)


@numba.njit(cache=True, nogil=True)
def _pattern_transposed_cross_rows(
    indptr: np.ndarray,
    indices: np.ndarray,
    factor: np.ndarray,
    first: int,
    stop: int,
    out: np.ndarray,
) -> None:
    """Rows ``first .. stop - 1`` of ``A`` times those of ``F``, added into ``out`` (``Aᵀ F``
    over those rows)."""
    rank = factor.shape[1]
    row = np.empty(rank, dtype=np.int64)
    for i in range(first, stop):
        nonzero = False
        for k in range(rank):  # the row once, widened (not once per one of A)
            row[k] = factor[i, k]
            nonzero = nonzero or row[k] != 0
        if not nonzero:  # a zero row of F adds nothing
            continue
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for k in range(rank):
                out[j, k] += row[k]


# The partial Grams of all threads together (10 n² bytes each: float64 sums, uint16 counts)
# stay below this; fewer threads are used where they would not (2,000 columns: 26 threads;
# at 2**28 there were 6, and 5·10⁶ x 2,000's background bound on 16 CPUs waited 0.24 s more).
_PARALLEL_GRAM_BYTES = 2**30
# A thread's share of the pairs is at least this many times its n² partial Gram (which it
# allocates, flushes and adds): more threads would spend their time on those.
_PAIRS_PER_GRAM_ENTRY = 4
# Rows counted into uint16 before they are added to the float64 result: an entry counts at
# most one per row, so it cannot overflow.
_UINT16_ROWS = 2**16 - 1
# Wider patterns count their pairs tile by tile (a tile pair of uint16 counts at this width:
# 2 MB, against 8 MB for all of a 2,000-column count matrix): one pass over the rows per tile
# pair, whose increments then stay in the core's cache (planted blocks 10⁵ x 2,000 at 2% ones:
# 0.30 -> 0.23 s, best of 6; 10⁶ x 500: unchanged). Each of the tiles² / 2 passes reads every
# row's tile edges, so at much wider patterns those reads grow (3 passes at 2,000 columns).
_GRAM_TILE = 1024


def pattern_gram(
    indptr: np.ndarray,
    indices: np.ndarray,
    columns: int,
    *,
    threads: int | None = None,
    between_chunks: Callable[[], object] | None = None,
) -> np.ndarray:
    """``AᵀA`` (``columns x columns``, float64, exact counts) of a 0/1 CSR pattern whose rows
    hold no duplicate column (canonical CSR; sorted indices are faster, not needed).

    Every row adds 1 at each pair ``p <= q`` of its ones, into the upper triangle only
    (``Σ_i nnz_i (nnz_i + 1) / 2`` increments), counted in uint16 (a quarter of float64's
    memory traffic) and added to the float64 result every 65,535 rows, before a count could
    overflow; the lower triangle is mirrored at the end. Wider than ``_GRAM_TILE`` columns,
    sorted rows are counted one pair of column tiles at a time, in cache. Rows that repeat a
    pattern on the frequent columns count its pairs once per pattern and row count instead (see
    ``_upper_gram``: 3.6x less CPU at 5·10⁶ x 1,000 of ``make_sparse_planted``; where the
    patterns do not repeat, the lookups stop after a probe of 4,096 rows). Above
    :data:`PARALLEL_MIN_WORK` pairs the rows are split over ``threads`` (default
    :func:`default_threads`), each with its own partial Gram: integer sums are exact, so the
    result does not depend on the thread count. ``between_chunks`` (optional) is called
    before each chunk of rows (in the thread that sums it): a background caller raises from
    it to stop early. The chunks are read in place, so they cost no copy of ``A``.

    >>> indptr, indices = np.array([0, 2, 3, 3]), np.array([0, 1, 1])  # rows {0, 1}, {1}, {}
    >>> pattern_gram(indptr, indices, 2).tolist()
    [[1.0, 1.0], [1.0, 2.0]]
    """
    rows = int(indptr.shape[0]) - 1
    counts = np.diff(indptr).astype(np.float64)
    pairs = np.cumsum(counts * counts)  # a row's work: its pairs of ones
    workers = 1
    if rows and pairs[-1] >= PARALLEL_MIN_WORK:
        entries = max(columns, 1) ** 2
        affordable = min(
            _PARALLEL_GRAM_BYTES // (10 * entries), pairs[-1] // (_PAIRS_PER_GRAM_ENTRY * entries)
        )
        workers = max(1, min(threads or default_threads(), rows, int(affordable)))
    parts = _in_threads(
        lambda first, stop: _upper_gram(indptr, indices, first, stop, columns, between_chunks),
        _row_ranges(pairs, workers),
    )
    upper = parts[0]
    for part in parts[1:]:
        upper += part  # exact: integer counts below 2**53
    return _mirror_upper(upper)


def _upper_gram(
    indptr: np.ndarray,
    indices: np.ndarray,
    first: int,
    stop: int,
    columns: int,
    between_chunks: Callable[[], object] | None = None,
) -> np.ndarray:
    """The upper triangle (``j <= k``) of the Gram matrix of rows ``first..stop-1``, counted
    in chunks of :data:`_UINT16_ROWS` rows.

    Rows often repeat a pattern on their frequent ("hot") columns (planted blocks,
    baskets): with ``a = h + c`` (its hot and cold ones), ``a aᵀ = h hᵀ + h cᵀ + c hᵀ + c cᵀ``,
    and ``Σ h hᵀ`` is ``Σ_P count_P · P Pᵀ`` over the distinct hot patterns ``P``. Each such
    row then costs a hash lookup of ``h`` and its ``|h| |c| + |c|²/2`` other pairs instead
    of ``|a|²/2``: at 10⁶ x 1,000 of ``make_sparse_planted`` 44 M operations instead of
    237 M pairs. Every term is an integer count, so the Gram is the same exact matrix.
    """
    upper = np.zeros((columns, columns), dtype=np.float64)
    counts = np.zeros((columns, columns), dtype=np.uint16)
    hot = _hot_columns(indptr, indices, first, stop, columns)
    table = _PatternTable.empty() if hot.any() else None
    split = table is not None
    start = first
    while start < stop:
        if between_chunks is not None:
            between_chunks()
        # a short first chunk where lookups run: rows that do not repeat stop them early
        end = min(stop, start + (_PROBE_ROWS if split and start == first else _UINT16_ROWS))
        if table is not None and split:
            _add_split_pairs(indptr, indices, start, end, counts, upper, hot, *table.arrays())
            split = table.pays(_PROBE_MIN_HIT_RATE if start == first else _MIN_HIT_RATE)
        else:
            _add_upper_pairs(indptr, indices, start, end, counts, upper, _GRAM_TILE)
        start = end
    if table is not None:
        _add_pattern_pairs(table.starts, table.ones, table.weights, table.used, table.hashes, upper)
    return upper


# Rows whose column counts pick the hot columns (the first of the range; the choice only
# changes the speed, never the counts).
_HOT_PILOT_ROWS = 2**16
# A column is hot when its count in the pilot is above this many times the mean.
_HOT_FACTOR = 2.0
# Hot parts with fewer ones are counted directly (a lookup would cost more than their pairs).
_MIN_PATTERN_ONES = 4
# The table's limits: distinct patterns and their ones in all; rows with a new pattern beyond
# them are counted directly.
_MAX_PATTERNS = 2**16
_MAX_PATTERN_ONES = 2**20  # int32: 4 MB (5·10⁶ x 1,000 planted: 9,296 patterns, 0.4 M ones)
# After a chunk, the rest of the rows are counted without lookups when fewer than this share
# of the lookups so far found their pattern (rows with hot columns but no repeated pattern,
# e.g. power-law columns: there the lookups doubled the time).
_MIN_HIT_RATE = 0.5
# The lookups' first chunk is this many rows, and they go on past it when at least this share
# found their pattern: first sightings miss, so a short probe sees fewer hits than a chunk
# (1,000,000 rows, share in the first 4,096 / 65,535: power-law columns 0.03 / 0.14, planted
# blocks 0.46 / 0.66, sparse planted 0.86 / 0.94); rows that do not repeat (power-law) then
# cost 4,096 lookups instead of 65,535, and every other family decides as before.
_PROBE_ROWS = 4096
_PROBE_MIN_HIT_RATE = 0.2


def _hot_columns(
    indptr: np.ndarray, indices: np.ndarray, first: int, stop: int, columns: int
) -> np.ndarray:
    """The columns whose count of ones in the pilot rows is above twice the mean."""
    pilot = indices[indptr[first] : indptr[min(stop, first + _HOT_PILOT_ROWS)]]
    if pilot.size == 0:
        return np.zeros(columns, dtype=np.bool_)
    column_counts = np.bincount(pilot, minlength=columns)[:columns]
    return column_counts > _HOT_FACTOR * pilot.size / max(columns, 1)


@dataclass
class _PatternTable:
    """The distinct hot patterns seen so far: an open-addressing hash table of pattern ids,
    each pattern's hash, ones (``starts`` into ``ones``) and count; ``used`` holds the number
    of patterns, of stored ones, of lookups and of lookups that found their pattern."""

    slots: np.ndarray
    hashes: np.ndarray
    starts: np.ndarray
    ones: np.ndarray
    weights: np.ndarray
    used: np.ndarray

    @classmethod
    def empty(cls) -> _PatternTable:
        return cls(
            slots=np.full(2 * _MAX_PATTERNS, -1, dtype=np.int64),
            hashes=np.zeros(_MAX_PATTERNS, dtype=np.uint64),
            starts=np.zeros(_MAX_PATTERNS + 1, dtype=np.int64),
            ones=np.zeros(_MAX_PATTERN_ONES, dtype=np.int32),
            weights=np.zeros(_MAX_PATTERNS, dtype=np.int64),
            used=np.zeros(4, dtype=np.int64),
        )

    def pays(self, min_hit_rate: float = _MIN_HIT_RATE) -> bool:
        """Whether the lookups found their pattern often enough to go on with them."""
        lookups, hits = int(self.used[2]), int(self.used[3])
        return hits >= min_hit_rate * lookups

    def arrays(self) -> tuple[np.ndarray, ...]:
        return self.slots, self.starts, self.ones, self.weights, self.used, self.hashes


@numba.njit(cache=True, nogil=True)
def _add_split_pairs(
    indptr: np.ndarray,
    indices: np.ndarray,
    first: int,
    stop: int,
    counts: np.ndarray,
    upper: np.ndarray,
    hot: np.ndarray,
    slots: np.ndarray,
    starts: np.ndarray,
    ones: np.ndarray,
    weights: np.ndarray,
    used: np.ndarray,
    hashes: np.ndarray,
) -> None:
    """:func:`_add_upper_pairs` with each row's hot part looked up in the pattern table
    (counted there once per row) and only its other pairs counted into ``counts``."""
    columns = upper.shape[0]
    hot_ones = np.empty(columns, dtype=np.int64)
    cold_ones = np.empty(columns, dtype=np.int64)
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(first, stop):
        if indptr[i + 1] - indptr[i] > columns:  # repeated columns: more ones than buffer
            _add_row_pairs(indices, indptr[i], indptr[i + 1], counts)
            continue
        nh = 0
        nc = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if hot[j]:
                hot_ones[nh] = j
                nh += 1
            else:
                cold_ones[nc] = j
                nc += 1
        counted = False
        if nh >= _MIN_PATTERN_ONES:
            key = np.uint64(14695981039346656037)  # FNV-1a over the hot columns
            for p in range(nh):
                key = (key ^ np.uint64(hot_ones[p])) * np.uint64(1099511628211)
            slot = key & mask
            used[2] += 1
            while slots[slot] >= 0:
                pattern = slots[slot]
                if hashes[pattern] == key and starts[pattern + 1] - starts[pattern] == nh:
                    same = True
                    base = starts[pattern]
                    for p in range(nh):
                        if ones[base + p] != hot_ones[p]:
                            same = False
                            break
                    if same:
                        weights[pattern] += 1
                        used[3] += 1
                        counted = True
                        break
                slot = (slot + np.uint64(1)) & mask
            if not counted and used[0] < weights.shape[0] and used[1] + nh <= ones.shape[0]:
                pattern = used[0]
                slots[slot] = pattern
                hashes[pattern] = key
                base = used[1]
                for p in range(nh):
                    ones[base + p] = hot_ones[p]
                starts[pattern + 1] = base + nh
                weights[pattern] = 1
                used[0] += 1
                used[1] += nh
                counted = True
        if not counted:  # the hot part's own pairs, directly
            _add_row_pairs(hot_ones, 0, nh, counts)
        for p in range(nc):  # cold pairs and hot x cold pairs
            j = cold_ones[p]
            for q in range(p, nc):
                _add_pair(counts, j, cold_ones[q], 1)
            for q in range(nh):
                _add_pair(counts, j, hot_ones[q], 1)
    _flush_counts(counts, upper)


@numba.njit(cache=True, nogil=True)
def _add_pattern_pairs(
    starts: np.ndarray,
    ones: np.ndarray,
    weights: np.ndarray,
    used: np.ndarray,
    hashes: np.ndarray,
    upper: np.ndarray,
) -> None:
    """``count_P`` added at every pair of ones of each stored pattern ``P``."""
    for pattern in range(used[0]):
        weight = weights[pattern]
        for p in range(starts[pattern], starts[pattern + 1]):
            j = ones[p]
            for q in range(p, starts[pattern + 1]):
                _add_pair(upper, j, ones[q], weight)


@numba.njit(cache=True, nogil=True, inline="always")
def _add_pair(counts: np.ndarray, j: int, k: int, amount: Any) -> None:
    """``amount`` added at the pair of columns ``j, k`` in the upper triangle."""
    if j <= k:  # always, for sorted indices (a well-predicted branch)
        counts[j, k] += amount
    else:
        counts[k, j] += amount


@numba.njit(cache=True, nogil=True)
def _add_row_pairs(indices: np.ndarray, start: int, end: int, counts: np.ndarray) -> None:
    """1 added at each pair ``p <= q`` of the ones ``indices[start:end]`` of a row."""
    for p in range(start, end):
        j = indices[p]
        for q in range(p, end):
            _add_pair(counts, j, indices[q], 1)


@numba.njit(cache=True, nogil=True)
def _add_upper_pairs(
    indptr: np.ndarray,
    indices: np.ndarray,
    first: int,
    stop: int,
    counts: np.ndarray,
    upper: np.ndarray,
    tile: int,
) -> None:
    """The pairs of ones of rows ``first..stop-1`` (at most 65,535) counted into the zeroed
    uint16 ``counts`` (upper triangle), then added to ``upper`` and ``counts`` zeroed again;
    wider than ``tile`` columns and with sorted rows, tile pair by tile pair."""
    if upper.shape[0] > tile and _rows_sorted(indptr, indices, first, stop):
        _add_tiled_pairs(indptr, indices, first, stop, counts, tile)
    else:
        for i in range(first, stop):
            _add_row_pairs(indices, indptr[i], indptr[i + 1], counts)
    _flush_counts(counts, upper)


@numba.njit(cache=True, nogil=True)
def _rows_sorted(indptr: np.ndarray, indices: np.ndarray, first: int, stop: int) -> bool:
    """Whether each of rows ``first..stop-1`` lists its columns in increasing order."""
    for i in range(first, stop):
        for p in range(indptr[i] + 1, indptr[i + 1]):
            if indices[p] <= indices[p - 1]:
                return False
    return True


@numba.njit(cache=True, nogil=True)
def _add_tiled_pairs(
    indptr: np.ndarray, indices: np.ndarray, first: int, stop: int, counts: np.ndarray, tile: int
) -> None:
    """:func:`_add_row_pairs` of rows ``first..stop-1`` (sorted) for the column tiles
    ``J <= K`` in turn: the pairs ``p <= q`` with ``p``'s column in tile ``J`` and ``q``'s in
    tile ``K``, which are all pairs, each once (sorted rows: ``p <= q`` puts ``J <= K``)."""
    tiles = (counts.shape[0] + tile - 1) // tile
    rows = stop - first
    edges = np.empty((rows, tiles + 1), dtype=np.int64)  # a row's first one in each tile
    for r in range(rows):
        p = indptr[first + r]
        end = indptr[first + r + 1]
        edges[r, 0] = p
        for t in range(1, tiles + 1):
            limit = t * tile
            while p < end and indices[p] < limit:
                p += 1
            edges[r, t] = p
    for J in range(tiles):
        for K in range(J, tiles):
            for r in range(rows):
                start, end = edges[r, J], edges[r, J + 1]
                if start == end:
                    continue
                if J == K:
                    _add_row_pairs(indices, start, end, counts)
                    continue
                other_start, other_end = edges[r, K], edges[r, K + 1]
                for p in range(start, end):
                    j = indices[p]
                    for q in range(other_start, other_end):
                        counts[j, indices[q]] += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _flush_counts(counts: np.ndarray, upper: np.ndarray) -> None:
    """The uint16 ``counts`` (upper triangle) added to ``upper`` and zeroed again."""
    for j in range(upper.shape[0]):
        for k in range(j, upper.shape[0]):
            upper[j, k] += counts[j, k]
            counts[j, k] = 0


@numba.njit(cache=True, nogil=True)
def _mirror_upper(upper: np.ndarray) -> np.ndarray:
    """``upper`` made symmetric in place (its lower triangle copied from the upper one), so
    that no second ``n x n`` array is needed."""
    n = upper.shape[0]
    for j in range(n):
        for k in range(j + 1, n):
            upper[k, j] = upper[j, k]
    return upper


def pattern_quadratic_forms(indptr: np.ndarray, indices: np.ndarray, M: np.ndarray) -> np.ndarray:
    """``a_i M a_iᵀ`` for every row ``a_i`` of a 0/1 CSR pattern (``M`` symmetric, ``n x n``
    for ``n`` columns: a column index beyond ``M`` is refused, not read out of bounds).

    The sum of ``M`` over the pairs of ones in the row: ``Σ_i nnz_i²`` reads, against
    ``nnz · k`` for forming ``A P`` (``M = P Pᵀ``) first.

    >>> pattern_quadratic_forms(np.array([0, 2, 3]), np.array([0, 1, 1]), np.eye(2)).tolist()
    [2.0, 1.0]
    """
    M = _square_forms_matrix(M)
    if indptr.ndim != 1 or indptr.size == 0 or int(indptr[0]) != 0:
        raise InvalidParameterError("indptr must be a CSR row pointer: 1-D, starting at 0")
    out, valid = _pattern_quadratic_forms(indptr, indices, M)
    if valid:
        return out
    # the kernel checks each row as it reads it (no pass of its own); say what was wrong
    if int(indptr[-1]) > indices.size or np.any(np.diff(indptr) < 0):
        raise InvalidParameterError(
            f"indptr must be nondecreasing and end within the {indices.size} indices; "
            f"it ends at {int(indptr[-1])}"
        )
    raise InvalidParameterError(
        f"the pattern's column indices must lie in 0..{M.shape[0] - 1} (M is "
        f"{M.shape[0]} x {M.shape[0]}); got {int(indices.min())}..{int(indices.max())}"
    )


@numba.njit(cache=True, nogil=True)
def _pattern_quadratic_forms(
    indptr: np.ndarray, indices: np.ndarray, M: np.ndarray
) -> tuple[np.ndarray, bool]:
    """The forms of every row, and whether every row's pointers and column indices lay
    within ``indices`` and ``M`` (the first row that does not ends the pass)."""
    rows = indptr.shape[0] - 1
    columns = M.shape[0]
    out = np.zeros(rows)
    for i in range(rows):
        start, stop = indptr[i], indptr[i + 1]
        if start > stop or stop > indices.shape[0]:
            return out, False
        for q in range(start, stop):
            if indices[q] < 0 or indices[q] >= columns:
                return out, False
        out[i] = _pairs_quadratic(M, indices, start, stop)
    return out, True


@numba.njit(cache=True, nogil=True)
def _pairs_quadratic(M: np.ndarray, ones: np.ndarray, start: int, stop: int) -> float:
    """``a M aᵀ`` for a 0/1 row ``a`` whose ones are ``ones[start:stop]``: the diagonal terms
    and twice each pair's, in one fixed order (the sparse and dense kernels share it).

    The pair sums of the ones ``p`` and ``p+1 .. p+3`` are independent chains of additions;
    they run side by side, four at a time, each in its own order (bit for bit the sums of
    one chain after another, which waited on the adder's latency: 125,000 x 200 rows at 30%
    ones, 0.165 -> 0.085 s).
    """
    total = 0.0
    p = start
    while p + 4 <= stop:
        j0, j1, j2, j3 = ones[p], ones[p + 1], ones[p + 2], ones[p + 3]
        pairs0 = 0.0
        pairs0 += M[j0, j1]
        pairs0 += M[j0, j2]
        pairs0 += M[j0, j3]
        pairs1 = 0.0
        pairs1 += M[j1, j2]
        pairs1 += M[j1, j3]
        pairs2 = 0.0
        pairs2 += M[j2, j3]
        pairs3 = 0.0
        for q in range(p + 4, stop):
            column = ones[q]
            pairs0 += M[j0, column]
            pairs1 += M[j1, column]
            pairs2 += M[j2, column]
            pairs3 += M[j3, column]
        total += M[j0, j0]
        total += 2.0 * pairs0
        total += M[j1, j1]
        total += 2.0 * pairs1
        total += M[j2, j2]
        total += 2.0 * pairs2
        total += M[j3, j3]
        total += 2.0 * pairs3
        p += 4
    for rest in range(p, stop):
        j = ones[rest]
        total += M[j, j]
        pairs = 0.0
        for q in range(rest + 1, stop):
            pairs += M[j, ones[q]]
        total += 2.0 * pairs
    return total


@numba.njit(cache=True, nogil=True)
def _code_quadratics(codes: np.ndarray, gram: np.ndarray) -> np.ndarray:
    """``cᵀ G c`` for every code ``c``."""
    rank = gram.shape[0]
    quad = np.zeros(codes.shape[0], dtype=np.int64)
    for c in range(codes.shape[0]):
        for k in range(rank):
            if codes[c, k]:
                for l in range(rank):
                    if codes[c, l]:
                        quad[c] += gram[k, l]
    return quad


def best_codes_from_stats(cross: np.ndarray, gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact BLS from the statistics ``cross = A M`` (``rows x r`` int64) and ``gram = MᵀM``
    (``r x r`` int64 with no negative entry, as for a 0/1 ``M``): per row the index of the
    best code (in :func:`code_table`'s ``"index"`` order, the lowest index on ties) and its
    score ``cᵀGc - 2 x·c``, as int64 arrays.

    A bit ``k`` with ``G_kk - 2 x_k >= 0`` never helps: switching it on adds that plus
    ``Σ (G_kl + G_lk) >= 0`` over the code's other bits and raises the index, so only the subsets of
    the other ``K`` bits are scored, exactly, in integers. With ``K`` at most
    :data:`GRAY_WALK_BITS` (sparse or block rows: planted blocks, 100,000 x 2,000, r = 10, BLS
    of 100,000 rows 0.09 s -> 0.002 s) they are walked in Gray-code order, each in ``O(1)``
    from the codes' table of ``cᵀGc``; with more, by branch and bound, where the same rule
    holds at every node (a bit whose gain ``G_kk - 2 x_k + Σ_{l in c} (G_kl + G_lk)`` is not
    negative given the bits ``c`` already on is left off in that whole branch, since
    ``G >= 0`` only raises it), and a branch ends once its gains' sum cannot reach the best
    score (or ties it with no lower index): dense rows at r = 10-12 take 6-13x less time.
    Same codes and scores as scoring all ``2^r``.

    >>> index, score = best_codes_from_stats(np.array([[2, 0], [1, 1]]), np.array([[2, 1], [1, 2]]))
    >>> index.tolist(), score.tolist()
    ([1, 0], [-2, 0])
    """
    cross, gram = integer_statistics("cross", cross), integer_statistics("gram", gram)
    rank = int(gram.shape[0])
    if gram.shape != (rank, rank) or cross.ndim != 2 or cross.shape[1] != rank:
        raise InvalidParameterError(
            f"cross must be rows x r and gram r x r; got {cross.shape} and {gram.shape}"
        )
    if rank > MAX_STATS_RANK:
        raise InvalidParameterError(
            f"best_codes_from_stats tabulates all 2^r codes' cᵀGc: r must be at most "
            f"{MAX_STATS_RANK}; got r = {rank} (beyond rank 12 bmfdsl.solvers.solve_bls uses "
            "a local search)"
        )
    if int(gram.min(initial=0)) < 0:
        raise InvalidParameterError("gram must have no negative entry (the Gram of a 0/1 M)")
    quad = _index_code_quadratics(gram)
    rows = cross.shape[0]
    best = np.empty(rows, dtype=np.int64)
    scores = np.empty(rows, dtype=np.int64)
    # each row is solved alone, so rows split over threads give the same codes (5·10⁶ x 5:
    # 35 -> 22 ms on 2 cores)
    workers = default_threads() if rows * rank >= PARALLEL_MIN_WORK else 1
    _in_threads(
        lambda first, stop: _best_codes_rows(
            cross[first:stop], gram, quad, best[first:stop], scores[first:stop]
        ),
        _even_ranges(rows, workers),
    )
    return best, scores


#: Largest rank :func:`best_codes_from_stats` takes: its table of ``cᵀGc`` holds ``2^r`` int64.
MAX_STATS_RANK = 24


def integer_statistics(name: str, values: Any) -> np.ndarray:
    """``values`` as a contiguous int64 array, refused with a clear error unless every entry is
    an integer (exact BLS scores integers; a cast would truncate ``0.9`` to ``0``).

    >>> integer_statistics("gram", np.array([[2.0, 1.0], [1.0, 2.0]])).dtype
    dtype('int64')
    >>> integer_statistics("gram", np.array([[1, 0.9]]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: gram must hold integers ...; got ... such as 0.9
    """
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise InvalidParameterError(f"{name} must be an integer array; got dtype {array.dtype}")
    if array.dtype.kind == "f":
        fractional = array[array != np.round(array)]  # NaN and inf included
        if fractional.size:
            raise InvalidParameterError(
                f"{name} must hold integers (counts of a 0/1 product); got non-integer values "
                f"such as {fractional.flat[0]:g}"
            )
    # counts of a 0/1 product stay far below 2^53; beyond it a float is not an exact count,
    # and beyond 2^63 an int64 cast wraps around. Signed integers are taken as counts as they
    # are: the pipeline passes its own int64 products here on every BLS, where two more passes
    # cost 5% of a 5·10⁶-row run (scores of r <= 24 bits wrap only for counts near 2^60)
    if array.size and array.dtype.kind in "uf" and float(np.abs(array).max()) > 2.0**53:
        raise InvalidParameterError(
            f"{name} must hold counts below 2^53; got {float(np.abs(array).max()):g}"
        )
    return np.ascontiguousarray(array, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def _index_code_quadratics(gram: np.ndarray) -> np.ndarray:
    """``cᵀ G c`` for every code in :func:`code_table`'s ``"index"`` order: code ``c`` is code
    ``c & (c - 1)`` (its lowest bit ``k`` cleared) plus ``G_kk`` and ``G_kl + G_lk`` for each
    other bit ``l``, so ``O(2^r r)`` where :func:`_code_quadratics` takes ``O(2^r r²)``."""
    rank = gram.shape[0]
    quad = np.zeros(1 << rank, dtype=np.int64)
    for c in range(1, 1 << rank):
        k = 0
        while not (c >> k) & 1:
            k += 1
        rest = c & (c - 1)
        value = quad[rest] + gram[k, k]
        for l in range(k + 1, rank):
            if (rest >> l) & 1:
                value += gram[k, l] + gram[l, k]
        quad[c] = value
    return quad


#: :func:`_branch_and_bound` without a node limit (more codes than any rank it takes has).
UNBOUNDED_NODES = 1 << 62

#: Most helpful bits of a row whose subsets the exact BLS kernels all walk through (Gray-code
#: order, ``O(1)`` each); a row with more goes by :func:`_branch_and_bound`, whose ``O(r)``
#: per node pays off beyond about 16 subsets.
GRAY_WALK_BITS = 4


@numba.njit(cache=True, nogil=True, inline="always")
def _lowering_bits(cross: np.ndarray, gram: np.ndarray, helpful: np.ndarray) -> int:
    """The bits ``k`` that lower a row's score alone (``G_kk - 2 x_k < 0``) into ``helpful``,
    in index order; returns their count. Only their subsets can beat the zero code when
    ``G`` has no negative entry."""
    count = 0
    for k in range(cross.shape[0]):
        if gram[k, k] - 2 * cross[k] < 0:
            helpful[count] = k
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _best_codes_rows(
    cross: np.ndarray, gram: np.ndarray, quad: np.ndarray, best: np.ndarray, scores: np.ndarray
) -> None:
    """:func:`best_codes_from_stats`' loop, ties broken by the code index explicitly. The Gray
    walk is :func:`_best_table_code`'s in index order, kept apart for speed: calling that per
    row (a row view, a position lookup per tie) made a full-data BLS of 10⁶ x 500 at r = 10
    1.7x slower."""
    rows, rank = cross.shape
    helpful = np.empty(rank, dtype=np.int64)
    stack = _branch_stack(rank)
    in_index_order = np.empty(0, dtype=np.int64)
    for i in range(rows):
        count = _lowering_bits(cross[i], gram, helpful)
        if count > GRAY_WALK_BITS:
            best[i], scores[i], _ = _branch_and_bound(
                cross[i], gram, helpful[:count], in_index_order, stack
            )
            continue
        best_index = 0
        best_score = 0  # the zero code
        index = 0
        linear = 0
        for step in range(1, 1 << count):
            flipped = 0  # the Gray code flips the step's lowest set bit
            while not (step >> flipped) & 1:
                flipped += 1
            k = helpful[flipped]
            if (index >> k) & 1:
                index ^= 1 << k
                linear -= cross[i, k]
            else:
                index |= 1 << k
                linear += cross[i, k]
            score = quad[index] - 2 * linear
            if score < best_score or (score == best_score and index < best_index):
                best_score = score
                best_index = index
        best[i] = best_index
        scores[i] = best_score


@numba.njit(cache=True, nogil=True)
def _branch_stack(rank: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_branch_and_bound`'s work arrays, allocated once per kernel call: per depth the
    gains of the bits still open, those bits, and the count and next one of them; the code
    and its score."""
    gains = np.empty((rank + 1, rank), dtype=np.int64)
    open_bits = np.empty((rank + 1, rank), dtype=np.int64)
    counters = np.empty((rank + 1, 2), dtype=np.int64)
    codes = np.empty((rank + 1, 2), dtype=np.int64)
    return gains, open_bits, counters, codes


@numba.njit(cache=True, nogil=True)
def _branch_and_bound(
    cross: np.ndarray,
    gram: np.ndarray,
    helpful: np.ndarray,
    position: np.ndarray,
    stack: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    max_codes: int = UNBOUNDED_NODES,
) -> tuple[int, int, bool]:
    """The code (as its index ``Σ c_k 2^k``) of the least ``cᵀGc - 2 x·c`` over the subsets of
    the ``helpful`` bits, that score, and whether the search finished; for ``G`` with no
    negative entry; ties go to the lowest index, or with a ``position`` table
    (:func:`_table_positions`) to the first code in table order. After ``max_codes`` codes
    scored the search stops with the best code so far (``False``).

    Depth first, each subset once (a child turns on one open bit after the last one turned
    on, most helpful first at the root, so a good code comes early). A bit whose gain given
    the bits on, ``G_kk - 2 x_k + Σ_{l on} (G_kl + G_lk)``, is positive (or zero, in index
    order: the code without it ties with a lower index) is left off in the whole branch, as
    ``G >= 0`` only raises it; and a branch ends where the child's score plus every open gain
    cannot beat the best score (in index order, nor tie it with a lower index: the codes
    below a child have higher indices)."""
    gains, open_bits, counters, codes = stack
    in_index_order = position.shape[0] == 0
    count = helpful.shape[0]
    for t in range(count):  # insertion sort by gain
        k = helpful[t]
        gains[0, k] = gram[k, k] - 2 * cross[k]
        j = t
        while j > 0 and gains[0, open_bits[0, j - 1]] > gains[0, k]:
            open_bits[0, j] = open_bits[0, j - 1]
            j -= 1
        open_bits[0, j] = k
    counters[0, 0] = count
    counters[0, 1] = 0
    codes[0, 0] = 0
    codes[0, 1] = 0
    best_index = 0
    best_score = 0  # the zero code
    depth = 0
    nodes = 0
    while depth >= 0:
        j = counters[depth, 1]
        if j >= counters[depth, 0]:
            depth -= 1
            continue
        if nodes >= max_codes:
            return best_index, best_score, False
        nodes += 1
        counters[depth, 1] = j + 1
        k = open_bits[depth, j]
        score = codes[depth, 1] + gains[depth, k]
        index = codes[depth, 0] | (1 << k)
        if score < best_score or (
            score == best_score
            and (index < best_index if in_index_order else position[index] < position[best_index])
        ):
            best_score = score
            best_index = index
        child = depth + 1
        child_count = 0
        bound = score
        for t in range(j + 1, counters[depth, 0]):
            l = open_bits[depth, t]
            gain = gains[depth, l] + gram[k, l] + gram[l, k]
            if gain < 0 or (gain == 0 and not in_index_order):
                open_bits[child, child_count] = l
                gains[child, l] = gain
                child_count += 1
                bound += gain
        if (
            child_count == 0
            or bound > best_score
            or (in_index_order and bound == best_score and index >= best_index)
        ):
            continue
        counters[child, 0] = child_count
        counters[child, 1] = 0
        codes[child, 0] = index
        codes[child, 1] = score
        depth = child
    return best_index, best_score, True


@numba.njit(cache=True, nogil=True)
def _table_positions(codes: np.ndarray) -> np.ndarray:
    """Where each code (by its index ``Σ c_k 2^k``) sits in the table ``codes``; empty unless
    the table lists all ``2^r`` codes once each."""
    count, rank = codes.shape
    if count != 1 << rank:
        return np.empty(0, dtype=np.int64)
    position = np.full(count, -1, dtype=np.int64)
    for c in range(count):
        index = 0
        for k in range(rank):
            if codes[c, k]:
                index |= 1 << k
        if position[index] >= 0:
            return np.empty(0, dtype=np.int64)
        position[index] = c
    return position


@numba.njit(cache=True, nogil=True)
def _best_table_code(
    cross: np.ndarray,
    factor_gram: np.ndarray,
    quad: np.ndarray,
    position: np.ndarray,
    helpful: np.ndarray,
    stack: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
) -> tuple[int, int]:
    """The first code in table order (``position``) of the least ``cᵀGc - 2 x·c`` and that
    score, for ``G`` with no negative entry: a bit with ``G_kk - 2 x_k > 0`` makes any code
    strictly worse than the same code without it, so only the subsets of the other bits
    are scored (Gray-code order, ``O(1)`` each from ``quad``, the index-order ``cᵀGc``; more
    than :data:`GRAY_WALK_BITS` of them by :func:`_branch_and_bound`, unless none lowers the
    score: then no code scores below the zero code's 0)."""
    rank = cross.shape[0]
    count = 0
    lowering = 0  # bits that lower the score
    for k in range(rank):
        gain = factor_gram[k, k] - 2 * cross[k]
        if gain <= 0:  # (= 0: ties, which the order breaks)
            helpful[count] = k
            count += 1
            lowering += gain < 0
    if lowering == 0 and position[0] == 0:  # no code scores below 0: the zero code, first
        return 0, 0
    if count > GRAY_WALK_BITS and lowering > 0:
        index, score, _ = _branch_and_bound(cross, factor_gram, helpful[:count], position, stack)
        return position[index], score
    best_index = 0
    best_score = 0
    index = 0
    linear = 0
    for step in range(1, 1 << count):
        flipped = 0
        while not (step >> flipped) & 1:
            flipped += 1
        k = helpful[flipped]
        if (index >> k) & 1:
            index ^= 1 << k
            linear -= cross[k]
        else:
            index |= 1 << k
            linear += cross[k]
        score = quad[index] - 2 * linear
        if score < best_score or (score == best_score and position[index] < position[best_index]):
            best_score = score
            best_index = index
    return position[best_index], best_score


@numba.njit(cache=True, nogil=True)
def solve_rows_exact(
    data: np.ndarray, factor: np.ndarray, codes: np.ndarray, out: np.ndarray, keep_ties: bool
) -> int:
    """Exact BLS of every row of ``data`` for fixed ``factor`` into ``out``; returns the error.

    Row ``i`` gets the code minimising ``||data_i - factor c||²`` (the first such code in
    ``codes``). With ``keep_ties`` a row of ``out`` that is already a valid code (one 1 when the
    table is one-hot, i.e. has ``rank`` rows) stays unless a code is strictly better, so a
    solve never worsens the current factor.
    """
    rows = data.shape[0]
    rank = factor.shape[1]
    factor_gram = gram(factor)
    exactly_one = codes.shape[0] == rank  # 2^r codes otherwise (never equal to r)
    # a full table (every code once, any order) of a factor with a nonnegative Gram: each row
    # scores only the subsets of its helpful bits (see _best_table_code)
    position = _table_positions(codes) if not exactly_one else np.empty(0, dtype=np.int64)
    pruned = position.shape[0] > 0 and factor_gram.min() >= 0
    quad = _index_code_quadratics(factor_gram) if pruned else _code_quadratics(codes, factor_gram)
    cross = np.zeros(rank, dtype=np.int64)
    helpful = np.empty(rank, dtype=np.int64)
    stack = _branch_stack(rank)
    # a row's ones and its cross products with the factor's columns as popcounts of packed
    # bits: the same integers as a pass over its entries, without a branch per entry (a
    # 50,000 x 30 solve at 50% ones, r = 3: 12-16 -> 5-8 ms; packing is a branch-free pass)
    bits = pack_row_bits(data)
    factor_bits = _pack_rows(factor)
    words = bits.shape[1]
    total = 0
    for i in range(rows):
        norm = 0
        for w in range(words):
            norm += int(_popcount(bits[i, w]))
        for k in range(rank):
            cross[k] = np.int64(_common_bits(bits, i, factor_bits, k))
        best_code = 0
        best_score = 0
        if pruned:
            best_code, best_score = _best_table_code(
                cross, factor_gram, quad, position, helpful, stack
            )
        else:
            for c in range(codes.shape[0]):
                score = quad[c]
                for k in range(rank):
                    if codes[c, k]:
                        score -= 2 * cross[k]
                if c == 0 or score < best_score:  # strict: ties keep the lowest code index
                    best_code = c
                    best_score = score
        if keep_ties:
            ones = 0
            current = 0
            for k in range(rank):
                if out[i, k]:
                    ones += 1
                    current -= 2 * cross[k]
                    for l in range(rank):
                        current += factor_gram[k, l] * out[i, l]
            if current <= best_score and (ones == 1 or not exactly_one):
                total += norm + current
                continue
        for k in range(rank):
            out[i, k] = codes[best_code, k]
        total += norm + best_score
    return total


@numba.njit(cache=True, nogil=True)
def als_loop(
    A: np.ndarray,
    A_t: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    codes_u: np.ndarray,
    codes_v: np.ndarray,
    max_solves: int,
    patience: int,
    u_first: bool,
    start_best: int,
    history: np.ndarray,
    keep_ties: bool,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Alternate exact BLS solves of ``U`` and ``V`` (updated in place); return the best pair.

    Stops after ``max_solves`` solves, at error 0, after ``patience`` consecutive solves
    without improvement, or at a fixed point (a solve that gives back the factor it replaced:
    the same best pair as going on). A row keeps its code on ties with ``keep_ties`` (its
    current code, already a best one at a fixed point), else takes the lowest code index.
    ``start_best`` is the error of the start, or ``-1`` when the start is not a valid answer
    (a broken one-hot row). ``history[s]`` receives the error after solve ``s``. Returns
    ``(best_U, best_V, best_error, solves)``; ``best_error`` is ``-1`` when no solve ran on
    an invalid start.
    """
    best_U = U.copy()
    best_V = V.copy()
    best_error = start_best
    solve_u = u_first
    solves = 0
    stalled = 0
    while solves < max_solves and best_error != 0:
        if solve_u:
            replaced = U.copy()
            error = solve_rows_exact(A, V, codes_u, U, keep_ties)
            settled = np.array_equal(U, replaced)
        else:
            replaced = V.copy()
            error = solve_rows_exact(A_t, U, codes_v, V, keep_ties)
            settled = np.array_equal(V, replaced)
        solves += 1
        history[solves] = error
        if best_error < 0 or error < best_error:
            best_U[:] = U
            best_V[:] = V
            best_error = error
            stalled = 0
        else:
            stalled += 1
        # past the first solve, the other factor was solved from the replaced one: a solve
        # that gives it back is a fixed point, which every later solve would repeat
        if error == 0 or stalled >= patience or (solves > 1 and settled):
            break
        solve_u = not solve_u
    return best_U, best_V, best_error, solves


#: Bits of the sub-rank solved exactly per row as one start of :func:`solve_rows_local`.
LOCAL_SUBRANK_BITS = 8
#: Moves (1- or 2-flips) per start of a row's local search, per unit of rank: the budget
#: every caller of :func:`solve_rows_local` gives it (BLS, ALS, the native solver).
LOCAL_MOVES_PER_RANK = 4


@numba.njit(cache=True, nogil=True)
def _flip_gain(gram: np.ndarray, field: np.ndarray, cross: np.ndarray, code: np.ndarray, k: int):
    """Change of ``cᵀGc - 2 x·c`` when bit ``k`` of ``code`` flips (``field = G c``)."""
    if code[k]:
        return gram[k, k] + 2 * cross[k] - 2 * field[k]
    return gram[k, k] - 2 * cross[k] + 2 * field[k]


@numba.njit(cache=True, nogil=True)
def _flip(gram: np.ndarray, field: np.ndarray, code: np.ndarray, k: int) -> None:
    sign = -1 if code[k] else 1
    code[k] = 1 - code[k]
    for l in range(field.shape[0]):
        field[l] += sign * gram[l, k]


@numba.njit(cache=True, nogil=True)
def _descend(
    gram: np.ndarray, cross: np.ndarray, code: np.ndarray, max_moves: int
) -> tuple[np.int64, np.int64]:
    """Best-improvement local search on ``code`` (in place) by 1-flips, and 2-flips where no
    1-flip improves; returns ``(score, work)``, work in code-bit operations."""
    rank = code.shape[0]
    field = np.zeros(rank, dtype=np.int64)
    score = np.int64(0)
    for k in range(rank):
        if code[k]:
            score -= 2 * cross[k]
            for l in range(rank):
                field[l] += gram[l, k]
    for k in range(rank):
        if code[k]:
            score += field[k]
    work = np.int64(rank * rank)
    gains = np.zeros(rank, dtype=np.int64)
    for _ in range(max_moves):
        best_k = -1
        best_gain = np.int64(0)
        for k in range(rank):
            gains[k] = _flip_gain(gram, field, cross, code, k)
            if gains[k] < best_gain:
                best_gain = gains[k]
                best_k = k
        work += rank
        if best_k >= 0:
            _flip(gram, field, code, best_k)
            score += best_gain
            work += rank
            continue
        # no single flip improves: the best pair (a flip of k then l changes l's gain by
        # 2 G_kl s_k s_l, s = 1 - 2c: +1 for a bit switched on, -1 for one switched off)
        best_pair_k = -1
        best_pair_l = -1
        for k in range(rank):
            s_k = 1 - 2 * code[k]
            for l in range(k + 1, rank):
                gain = gains[k] + gains[l] + 2 * gram[k, l] * s_k * (1 - 2 * code[l])
                if gain < best_gain:
                    best_gain = gain
                    best_pair_k = k
                    best_pair_l = l
        work += rank * rank // 2
        if best_pair_k < 0:
            break
        _flip(gram, field, code, best_pair_k)
        _flip(gram, field, code, best_pair_l)
        score += best_gain
        work += 2 * rank
    return score, work


@numba.njit(cache=True, nogil=True)
def _best_subrank_code(gram: np.ndarray, cross: np.ndarray, bits: int, code: np.ndarray) -> int:
    """The best code among those using only the first ``bits`` columns, into ``code``
    (Gray-code enumeration, one flip per step); returns the work."""
    rank = code.shape[0]
    code[:] = 0
    field = np.zeros(rank, dtype=np.int64)
    best = np.int64(0)
    best_gray = 0
    score = np.int64(0)
    gray = 0
    for t in range(1, 1 << bits):
        k = 0
        while not (t >> k) & 1:
            k += 1
        score += _flip_gain(gram, field, cross, code, k)
        _flip(gram, field, code, k)
        gray ^= 1 << k
        if score < best:
            best = score
            best_gray = gray
    for k in range(rank):
        code[k] = (best_gray >> k) & 1 if k < bits else 0
    return (1 << bits) * rank


@numba.njit(cache=True, nogil=True)
def solve_rows_local(
    cross: np.ndarray, gram: np.ndarray, out: np.ndarray, max_moves: int
) -> tuple[np.int64, np.int64]:
    """Binary least squares per row without enumerating the ``2**r`` codes: local search.

    Row ``i`` minimises ``cᵀ G c - 2 cross_i·c`` (its error up to ``||a_i||²``; ``G``
    symmetric, as a Gram matrix is: the moves' gains assume it) by
    best-improvement 1-flip and 2-flip moves (at most ``max_moves`` each) from three starts:
    the row's current code ``out[i]``, the best code using only the first
    :data:`LOCAL_SUBRANK_BITS` columns (solved exactly) and the all-zero code; ``out[i]`` gets
    the best, and keeps its code unless another is strictly better, so a solve never worsens
    the current factor. Deterministic. Returns ``(Σ scores, work)``, the work in code-bit
    operations (a budget can count it). Equals the exact solve whenever that optimum is
    reached from a start, e.g. always for ``r <= LOCAL_SUBRANK_BITS``.
    """
    rows, rank = out.shape
    total = np.int64(0)
    work = np.int64(0)
    candidate = np.zeros(rank, dtype=np.int8)
    best_code = np.zeros(rank, dtype=np.int8)
    for i in range(rows):
        best_code[:] = out[i]
        best, spent = _local_row_search(gram, cross[i], best_code, candidate, max_moves)
        work += spent
        out[i] = best_code
        total += best
    return total, work


@numba.njit(cache=True, nogil=True)
def _local_row_search(
    gram: np.ndarray, cross: np.ndarray, code: np.ndarray, candidate: np.ndarray, max_moves: int
) -> tuple[np.int64, np.int64]:
    """:func:`solve_rows_local` of one row: ``code`` holds its start and gets the best code
    found (``candidate``: work space); returns ``(score, work)``."""
    best, work = _descend(gram, cross, code, max_moves)
    for start in range(2):
        if start == 0:
            work += _best_subrank_code(
                gram, cross, min(code.shape[0], LOCAL_SUBRANK_BITS), candidate
            )
        else:
            candidate[:] = 0
        score, spent = _descend(gram, cross, candidate, max_moves)
        work += spent
        if score < best:
            best = score
            code[:] = candidate
    return best, work


#: Codes per unit of rank that :func:`solve_rows_bounded` scores in one row's branch and
#: bound before that row goes to the local search instead (MNIST 1,000 x 784, rows of
#: ``A V`` for the default's ``V``: at most 211 codes a row at r = 20, 1,966 at r = 32 and
#: 3,045 at r = 40, 99.9% of rows below 1,586; dense random rows at r = 16-32: below 140),
#: so that a row costs at most a few times its local search (O(r) per code scored).
BRANCH_CODES_PER_RANK = 64
#: Largest rank :func:`solve_rows_bounded` takes: a code is one int64 bit mask.
MAX_BRANCH_RANK = 62


@numba.njit(cache=True, nogil=True)
def solve_rows_bounded(
    cross: np.ndarray,
    gram: np.ndarray,
    out: np.ndarray,
    scores: np.ndarray,
    max_codes: int,
    max_moves: int,
) -> tuple[np.int64, np.int64]:
    """Exact binary least squares per row without a code table, for a symmetric ``G`` with no
    negative entry (a 0/1 factor's Gram) and ``r <= MAX_BRANCH_RANK``: row ``i`` gets the code
    of the least ``cᵀ G c - 2 cross_i·c`` (the lowest index ``Σ c_k 2^k`` on ties, as
    :func:`best_codes_from_stats` breaks them), found by branch and bound over the bits that
    lower the score alone. A row whose search scores ``max_codes`` codes without finishing
    gets :func:`solve_rows_local`'s answer from ``out[i]`` (``max_moves`` moves a start), or
    the search's best code so far where that is strictly better: never worse than ``out[i]``.
    Each row's score goes to ``scores[i]``. Deterministic. Returns ``(Σ scores, rows that did
    not finish)``.
    """
    rows, rank = out.shape
    if cross.shape[0] != rows or cross.shape[1] != rank or scores.shape[0] != rows:
        raise ValueError("solve_rows_bounded needs cross and out of one shape, a score per row")
    if gram.shape[0] != rank or gram.shape[1] != rank:
        raise ValueError("solve_rows_bounded needs an r x r Gram matrix")
    if rank > MAX_BRANCH_RANK:
        raise ValueError("solve_rows_bounded takes ranks up to 62 (MAX_BRANCH_RANK)")
    for k in range(rank):
        for l in range(rank):
            if gram[k, l] < 0:
                raise ValueError("solve_rows_bounded needs a Gram matrix with no negative entry")
            if gram[k, l] != gram[l, k]:  # (the local search's gains assume it)
                raise ValueError("solve_rows_bounded needs a symmetric Gram matrix")
    helpful = np.empty(rank, dtype=np.int64)
    stack = _branch_stack(rank)
    in_index_order = np.empty(0, dtype=np.int64)
    candidate = np.zeros(rank, dtype=np.int8)
    code = np.zeros(rank, dtype=np.int8)
    total = np.int64(0)
    unfinished = np.int64(0)
    for i in range(rows):
        count = _lowering_bits(cross[i], gram, helpful)
        index, score, finished = _branch_and_bound(
            cross[i], gram, helpful[:count], in_index_order, stack, max_codes
        )
        if not finished:
            unfinished += 1
            code[:] = out[i]
            local, _ = _local_row_search(gram, cross[i], code, candidate, max_moves)
            if local <= score:
                out[i] = code
                scores[i] = local
                total += local
                continue
        for k in range(rank):
            out[i, k] = (index >> k) & 1
        scores[i] = score
        total += score
    return total, unfinished


# Kernels of the spectral lower bound that runs in a background thread: numba rather than BLAS,
# whose thread count is one process-wide setting (the caller's stages change it), so that the
# same matrix gives the same bits whatever runs beside them.

_WORD_BITS = 64


@numba.njit(cache=True, nogil=True)
def _pack_rows(block: np.ndarray) -> np.ndarray:
    """Columns of a 0/1 ``block`` (``k x n``) as bits: ``(n, ceil(k / 64))`` uint64 words
    (row ``i`` is bit ``i % 64`` of word ``i // 64``)."""
    rows, columns = block.shape
    words = (rows + _WORD_BITS - 1) // _WORD_BITS
    packed = np.empty((columns, words), dtype=np.uint64)
    # a word's 64 rows OR-ed into a row of accumulators, read in block's own order (a word
    # at a time per column was 8x slower: 60,000 x 400 in 90 ms)
    accumulators = np.empty(columns, dtype=np.uint64)
    for word in range(words):
        accumulators[:] = 0
        for i in range(word * _WORD_BITS, min(rows, (word + 1) * _WORD_BITS)):
            shift = np.uint64(i % _WORD_BITS)
            for j in range(columns):
                accumulators[j] |= np.uint64(block[i, j] != 0) << shift
        packed[:, word] = accumulators
    return packed


@numba.njit(cache=True, nogil=True)
def pack_row_bits(block: np.ndarray) -> np.ndarray:
    """Rows of a 0/1 ``block`` (``k x n``, any integer type) as bits: ``(k, ceil(n / 64))``
    uint64 words (column ``j`` is bit ``j % 64`` of word ``j // 64``, as :func:`_pack_rows`
    packs rows); the compiled :func:`row_bits`, callable from other kernels.

    >>> pack_row_bits(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8)).ravel().tolist()
    [5, 2]
    """
    rows, columns = block.shape
    words = (columns + _WORD_BITS - 1) // _WORD_BITS
    packed = np.empty((rows, words), dtype=np.uint64)
    for i in range(rows):
        for word in range(words):
            first = word * _WORD_BITS
            bits = np.uint64(0)
            for b in range(min(_WORD_BITS, columns - first)):
                bits |= np.uint64(block[i, first + b] != 0) << np.uint64(b)
            packed[i, word] = bits
    return packed


def row_bits(block: np.ndarray) -> np.ndarray:
    """Each row of a 0/1 ``block`` (``k x n``, read as ``int8``) as bits:
    ``(k, ceil(n / 64))`` uint64 words, column ``j`` in bit ``j % 64`` of word ``j // 64``.
    With :func:`bit_products`, ``row_bits(A)`` and ``row_bits(F.T)`` give ``A F``.

    >>> row_bits(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8)).ravel().tolist()
    [5, 2]
    """
    return pack_row_bits(np.ascontiguousarray(block, dtype=np.int8))


def column_bits(block: np.ndarray) -> np.ndarray:
    """Each column of a 0/1 ``block`` (``k x n``) as bits: ``(n, ceil(k / 64))`` uint64
    words, that is :func:`row_bits` of ``blockᵀ`` without the transposed copy.

    >>> column_bits(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.int8)).ravel().tolist()
    [1, 2, 1]
    """
    return _pack_rows(np.ascontiguousarray(block, dtype=np.int8))


def bit_products(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``L Rᵀ`` of two 0/1 matrices given as bits (:func:`row_bits`: ``left`` ``k x w`` and
    ``right`` ``l x w`` uint64 words), as exact int64 (``k x l``): a word AND and a popcount
    per 64 entries. Dense 0/1 products in ALS are 10-30x faster than with float32 BLAS
    (``A V`` of 60,000 x 400 at r = 5: 1.6 ms instead of 43 ms, one thread); rows split over
    threads from :data:`PARALLEL_MIN_WORK` word pairs (integer sums: the same result).

    >>> A = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.int8)
    >>> V = np.array([[1, 0], [1, 1], [1, 1]], dtype=np.int8)
    >>> bit_products(row_bits(A), row_bits(V.T)).tolist()
    [[2, 1], [2, 2]]
    """
    left, right = np.ascontiguousarray(left), np.ascontiguousarray(right)
    if left.dtype != np.uint64 or right.dtype != np.uint64 or left.shape[1:] != right.shape[1:]:
        raise InvalidParameterError(
            f"left and right must be uint64 words of one width (row_bits); got {left.dtype} "
            f"{left.shape} and {right.dtype} {right.shape}"
        )
    rows = left.shape[0]
    out = np.empty((rows, right.shape[0]), dtype=np.int64)
    work = rows * right.shape[0] * left.shape[1]
    workers = default_threads() if work >= PARALLEL_MIN_WORK else 1
    _in_threads(
        lambda first, stop: _bit_products(left[first:stop], right, out[first:stop]),
        _even_ranges(rows, workers),
    )
    return out


@numba.njit(cache=True, nogil=True)
def bit_cross(bits: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """``A F`` as int64 for a 0/1 ``A`` given as its row bits (:func:`pack_row_bits`,
    ``k x ceil(n / 64)`` words) and a 0/1 ``factor`` (``n x r``): the factor's columns packed,
    then a word AND and a popcount per 64 entries, in one thread. The same counts as
    :func:`dense_cross` of ``A``: on the annealing's small dense cores (a UCI set's 242 x 22
    at r = 2) a row's 22 branches and adds become one popcount per rank.

    >>> A = np.array([[1, 1, 0], [0, 1, 1]], dtype=np.int8)
    >>> V = np.array([[1, 0], [1, 1], [1, 1]], dtype=np.int8)
    >>> bit_cross(pack_row_bits(A), V).tolist()
    [[2, 1], [2, 2]]
    """
    out = np.empty((bits.shape[0], factor.shape[1]), dtype=np.int64)
    _bit_products(bits, _pack_rows(factor), out)
    return out


@numba.njit(cache=True, nogil=True)
def _bit_products(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
    rows = left.shape[0]
    for i in range(rows):
        for k in range(right.shape[0]):
            out[i, k] = _common_bits(left, i, right, k)


@numba.njit(cache=True, nogil=True, inline="always")
def _common_bits(left: np.ndarray, i: int, right: np.ndarray, k: int) -> np.uint64:
    """The ones that rows ``left[i]`` and ``right[k]`` of packed bits share: a word AND and a
    popcount per 64 entries."""
    count = np.uint64(0)
    for word in range(left.shape[1]):
        count += _popcount(left[i, word] & right[k, word])
    return count


@numba.njit(cache=True, nogil=True)
def _popcount(x: np.uint64) -> np.uint64:
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@numba.njit(cache=True, nogil=True)
def _add_packed_gram(packed: np.ndarray, gram: np.ndarray) -> None:
    """Add ``popcount(column_j & column_k)`` over the words into ``gram[j, k]`` (both
    triangles)."""
    columns = packed.shape[0]
    for j in range(columns):
        for k in range(j, columns):
            count = _common_bits(packed, j, packed, k)
            gram[j, k] += count
            if k != j:
                gram[k, j] += count


def bit_gram(block: np.ndarray, gram: np.ndarray | None = None) -> np.ndarray:
    """``blockᵀ block`` of a dense 0/1 array as exact counts in float64 (added into ``gram``
    when given): columns packed into 64-bit words, ``n² k / 128`` word ANDs and popcounts.

    No BLAS: the same bits in any thread, whatever BLAS's thread setting (the lower bound
    sums it in the background, see ``pipeline/_bounds.py``).

    >>> bit_gram(np.array([[1, 1], [0, 1], [1, 1]], dtype=np.int8)).tolist()
    [[2.0, 2.0], [2.0, 3.0]]
    """
    block = np.ascontiguousarray(block)
    n = block.shape[1]
    if gram is None:
        gram = np.zeros((n, n), dtype=np.float64)
    _add_packed_gram(_pack_rows(block), gram)
    return gram


def chunked_bit_gram(
    shape: tuple[int, int],
    chunk_of: Callable[[int, int], np.ndarray],
    chunk_rows: int,
    *,
    threads: int = 1,
    between_chunks: Callable[[], object] | None = None,
) -> np.ndarray:
    """:func:`bit_gram` of a 0/1 matrix of ``shape`` over chunks of ``chunk_rows`` rows, each
    made dense by ``chunk_of(start, stop)`` (a slice of a dense array, or of a CSR made dense:
    the packed copy stays small), the chunks split over up to ``threads`` threads, each with
    its own partial Gram (all of them within :data:`_PARALLEL_GRAM_BYTES`): integer counts,
    so the result does not depend on the split. ``between_chunks`` (optional) is called
    before each chunk, in the thread that sums it: a background caller raises from it to stop.

    >>> block = np.array([[1, 1], [0, 1], [1, 1]], dtype=np.int8)
    >>> chunked_bit_gram(block.shape, lambda a, b: block[a:b], 1, threads=2).tolist()
    [[2.0, 2.0], [2.0, 3.0]]
    """
    rows, n = shape
    chunks = -(-rows // chunk_rows) if rows else 0
    affordable = _PARALLEL_GRAM_BYTES // (8 * max(n, 1) ** 2)
    workers = max(1, min(threads, chunks, int(affordable)))

    def part(first: int, stop: int) -> np.ndarray:
        gram = np.zeros((n, n), dtype=np.float64)
        for chunk in range(first, stop):
            if between_chunks is not None:
                between_chunks()
            bit_gram(chunk_of(chunk * chunk_rows, (chunk + 1) * chunk_rows), gram)
        return gram

    parts = _in_threads(part, _even_ranges(chunks, workers))
    gram = parts[0]
    for other in parts[1:]:
        gram += other  # exact: integer counts below 2**53
    return gram


@numba.njit(cache=True, nogil=True)
def symmetric_matvec(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``matrix @ vector`` for a symmetric ``matrix`` (C order; float64, or float32 holding
    the same values), in float64, summed row by row of it in a fixed order: the same bits in
    any thread (Lanczos in ``pipeline/_spectrum.py``; numpy's product goes through BLAS,
    whose result depends on its thread count).

    >>> symmetric_matvec(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 1.0])).tolist()
    [3.0, 4.0]
    """
    n = matrix.shape[0]
    out = np.zeros(n)
    for j in range(n):  # column j = row j: contiguous, and each out[i] adds in order of j
        x = vector[j]
        for i in range(n):
            out[i] += np.float64(matrix[j, i]) * x  # a float32 matrix: the same bits
    return out


@numba.njit(cache=True, nogil=True)
def deflated_shift(
    gram: np.ndarray, vectors: np.ndarray, weights: np.ndarray, shift: float
) -> np.ndarray:
    """The lower triangle of the symmetric ``shift I + Σ_k weights_k y_k y_kᵀ - gram`` (``y_k``
    the columns of ``vectors``; zeros above the diagonal), each entry summed in a fixed order
    (no BLAS: the same bits in any thread). Its one reader, a Cholesky factorization, reads
    one triangle: the other would double the work.

    >>> deflated_shift(np.array([[2.0, 1.0], [1.0, 2.0]]), np.ones((2, 1)), np.ones(1), 3.0)
    array([[2., 0.],
           [0., 2.]])
    """
    n, count = vectors.shape
    out = np.empty((n, n))
    for i in range(n):
        for j in range(i + 1):
            total = 0.0
            for k in range(count):
                total += weights[k] * vectors[i, k] * vectors[j, k]
            out[i, j] = total - gram[i, j]
        out[i, i] += shift
        out[i, i + 1 :] = 0.0
    return out


@numba.njit(cache=True, nogil=True)
def pattern_gram_matvec(indptr: np.ndarray, indices: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """``Aᵀ (A x)`` for a 0/1 CSR pattern ``A`` without forming ``AᵀA``: ``2 nnz`` additions
    in a fixed order (Lanczos on a sparse ``A``'s Gram, ``pipeline/_spectrum.py``).

    >>> indptr, indices = np.array([0, 2, 3]), np.array([0, 1, 1])  # rows {0, 1}, {1}
    >>> pattern_gram_matvec(indptr, indices, np.array([1.0, 2.0])).tolist()
    [3.0, 5.0]
    """
    out = np.zeros(vector.shape[0])
    for i in range(indptr.shape[0] - 1):
        total = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            total += vector[indices[p]]
        for p in range(indptr[i], indptr[i + 1]):
            out[indices[p]] += total
    return out


def dense_quadratic_forms(block: np.ndarray, M: np.ndarray) -> np.ndarray:
    """:func:`pattern_quadratic_forms` of a dense 0/1 ``block`` (the same sums in the same
    order: the same bits), each row's ones listed first: ``m n`` reads and ``Σ_i nnz_i²``
    additions, against ``m n²`` for ``(A M) ∘ A``. Rows of bytes are read 8 at a time where
    they allow it (a word of zeros is skipped in one step).

    >>> M = np.array([[1.0, 0.5], [0.5, 2.0]])
    >>> dense_quadratic_forms(np.array([[1, 1], [0, 1]], dtype=np.int8), M).tolist()
    [4.0, 2.0]
    """
    block = _kernel_block(block)
    M = _square_forms_matrix(M)
    if M.shape[0] != block.shape[1]:
        raise InvalidParameterError(
            f"M must be n x n for a block of n = {block.shape[1]} columns; got {M.shape}"
        )
    return _dense_quadratic_forms(block, _byte_words(block), M)


def _square_forms_matrix(M: Any) -> np.ndarray:
    """``M`` of the quadratic forms as the kernels take it: a square real array, contiguous;
    integers and float32/float64 as they are, float16 as float64 (exact), long double as
    float64 (rounded: numba has no such type). A complex or non-square ``M`` is refused."""
    M = np.asarray(M)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise InvalidParameterError(f"M must be a square n x n array; got shape {M.shape}")
    if M.dtype.kind not in "biuf":
        raise InvalidParameterError(f"M must be real (bool, integer or float); got {M.dtype}")
    if M.dtype.kind == "f" and M.dtype not in _NUMBA_NUMBERS:
        M = M.astype(np.float64)
    return np.ascontiguousarray(M)


def dense_row_pairs(block: np.ndarray) -> float:
    """``Σ_i nnz_i²`` of a dense 0/1 ``block``: the work of :func:`dense_quadratic_forms`'
    pairs (read 8 bytes at a time where the rows allow it, as there).

    >>> dense_row_pairs(np.array([[1, 1, 1], [0, 1, 0]], dtype=np.int8))
    10.0
    """
    block = _kernel_block(block)
    return float(_dense_row_pairs(block, _byte_words(block)))


# The float dtypes numba compiles these kernels for (not float16, nor long double).
_NUMBA_NUMBERS = tuple(map(np.dtype, (np.float32, np.float64)))


def _kernel_block(block: Any) -> np.ndarray:
    """A dense 0/1 ``block`` as the kernels take it: as it is (integers, bools, float32 or
    float64), or its nonzeros as bools where numba has no such type (float16, long double;
    the kernels read only ``!= 0``, so the sums are the same). A non-numeric or non-2-D
    ``block`` is refused.

    >>> _kernel_block(np.array([[1, 0]], dtype=np.float16)).tolist()
    [[True, False]]
    """
    block = np.asarray(block)
    if block.ndim != 2:
        raise InvalidMatrixError(f"block must be a 2-D 0/1 array; got shape {block.shape}")
    if block.dtype.kind in "biu" or block.dtype in _NUMBA_NUMBERS:
        return block
    if block.dtype.kind in "fc":  # float16, long double, complex: their nonzeros
        return block != 0
    raise InvalidMatrixError(
        f"block must be a numeric 0/1 array (bool, integer or float); got dtype {block.dtype}: "
        "convert it first, e.g. np.asarray(block, dtype=np.int8)"
    )


def _byte_words(block: np.ndarray) -> np.ndarray:
    """The rows of ``block`` as uint64 words (``rows x n/8``) when it is C-contiguous bytes
    with ``n`` a multiple of 8; else a ``rows x 0`` array (the kernels then read bytes)."""
    rows, columns = block.shape
    little = sys.byteorder == "little"  # byte b of a word is then column 8 w + b
    if little and block.dtype.itemsize == 1 and columns % 8 == 0 and block.flags.c_contiguous:
        return block.view(np.uint64)
    return np.zeros((rows, 0), dtype=np.uint64)


def dense_pattern(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR pattern (``indptr``, ``indices``: int64, columns in order) of a dense 0/1
    ``block``'s ones; only nonzero bytes are visited (a sparse row of ``int8`` bytes costs
    its words, not its columns: 2,000 x 2,000 at 0.5% ones in 2 ms, ``np.nonzero`` 22 ms).

    >>> [part.tolist() for part in dense_pattern(np.array([[0, 1, 1], [0, 0, 0], [1, 0, 0]]))]
    [[0, 2, 2, 3], [1, 2, 0]]
    """
    block = _kernel_block(block)
    words = _byte_words(block)
    return _dense_pattern(block, words)


@numba.njit(cache=True, nogil=True)
def _dense_pattern(block: np.ndarray, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = block.shape[0]
    ones = np.empty(block.shape[1] + 8, dtype=np.int64)
    bytewise = words.shape[1] == 0
    indptr = np.zeros(rows + 1, dtype=np.int64)
    for i in range(rows):  # twice over the ones: count, then write (no growing buffer)
        count = _byte_row_ones(block, i, ones) if bytewise else _word_row_ones(words, i, ones)
        indptr[i + 1] = indptr[i] + count
    indices = np.empty(indptr[rows], dtype=np.int64)
    for i in range(rows):
        count = _byte_row_ones(block, i, ones) if bytewise else _word_row_ones(words, i, ones)
        indices[indptr[i] : indptr[i] + count] = ones[:count]
    return indptr, indices


# The lowest set bit of a word by a de Bruijn multiplication: bit i maps to a distinct slot.
_DE_BRUIJN = 0x03F79D71B4CB0A89
_LOWEST_BIT = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    _LOWEST_BIT[((_DE_BRUIJN << _bit) & (2**64 - 1)) >> 58] = _bit


@numba.njit(cache=True, nogil=True)
def _word_row_ones(words: np.ndarray, i: int, ones: np.ndarray) -> int:
    """The columns of row ``i``'s ones (its bytes as uint64 ``words``) written to ``ones`` in
    order; their number returned. Only nonzero bytes are visited: the lowest set bit of a
    word gives the next one's byte, which is then cleared."""
    count = 0
    for w in range(words.shape[1]):
        x = words[i, w]
        while x != 0:
            lowest = x & (~x + np.uint64(1))
            byte = _LOWEST_BIT[(lowest * np.uint64(_DE_BRUIJN)) >> np.uint64(58)] >> 3
            ones[count] = 8 * w + byte
            count += 1
            x &= ~(np.uint64(0xFF) << np.uint64(8 * byte))
    return count


@numba.njit(cache=True, nogil=True)
def _dense_word_row_ones(words: np.ndarray, i: int, ones: np.ndarray) -> int:
    """:func:`_word_row_ones` for rows with many ones: each nonzero word's 8 bytes are read
    without a branch (every column is written, the count moves past the ones), where the
    lowest-bit loop mispredicted its exit (125,000 x 200 at 30% ones: 0.036 -> 0.012 s)."""
    count = 0
    for w in range(words.shape[1]):
        x = words[i, w]
        if x != 0:
            for byte in range(8):
                ones[count] = 8 * w + byte
                count += ((x >> np.uint64(8 * byte)) & np.uint64(0xFF)) != 0
    return count


@numba.njit(cache=True, nogil=True)
def _byte_row_ones(block: np.ndarray, i: int, ones: np.ndarray) -> int:
    """:func:`_word_row_ones` of a row read entry by entry."""
    count = 0
    for j in range(block.shape[1]):
        if block[i, j] != 0:
            ones[count] = j
            count += 1
    return count


@numba.njit(cache=True, nogil=True)
def _nonzero_bytes(x: np.uint64) -> int:
    """The number of nonzero bytes of ``x`` (each byte's bits folded into its lowest)."""
    x = (x | (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    x = (x | (x >> np.uint64(2))) & np.uint64(0x0303030303030303)
    x = (x | (x >> np.uint64(1))) & np.uint64(0x0101010101010101)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True, nogil=True)
def _dense_quadratic_forms(block: np.ndarray, words: np.ndarray, M: np.ndarray) -> np.ndarray:
    rows, columns = block.shape
    out = np.zeros(rows)
    ones = np.empty(columns, dtype=np.int64)
    by_words = words.shape[1] > 0  # separate loops: one branch inside ran 1.7x slower
    head = min(rows, _DENSE_ROW_PROBE)  # the first rows tell (a pass over all cost 15% at 1%)
    if by_words and _nonzero_byte_count(words[:head]) >= _DENSE_ROW_SHARE * head * columns:
        for i in range(rows):
            out[i] = _pairs_quadratic(M, ones, 0, _dense_word_row_ones(words, i, ones))
    elif by_words:
        for i in range(rows):
            out[i] = _pairs_quadratic(M, ones, 0, _word_row_ones(words, i, ones))
    else:
        for i in range(rows):
            out[i] = _pairs_quadratic(M, ones, 0, _byte_row_ones(block, i, ones))
    return out


# From this share of ones on, rows' ones are listed by reading every byte of a nonzero word
# (125,000 x 200: 10% ones 0.019 -> 0.017 s, 3% 0.0075 -> 0.0086 s: the lowest-bit loop wins).
_DENSE_ROW_SHARE = 1 / 16
# ... counted in this many first rows of the block.
_DENSE_ROW_PROBE = 1024


@numba.njit(cache=True, nogil=True)
def _nonzero_byte_count(words: np.ndarray) -> int:
    """The number of nonzero bytes in ``words`` (a block's ones)."""
    count = 0
    for i in range(words.shape[0]):
        for w in range(words.shape[1]):
            if words[i, w] != 0:
                count += _nonzero_bytes(words[i, w])
    return count


@numba.njit(cache=True, nogil=True)
def _dense_row_pairs(block: np.ndarray, words: np.ndarray) -> float:
    total = 0.0
    for i in range(block.shape[0]):
        count = 0
        if words.shape[1] == 0:
            for j in range(block.shape[1]):
                count += block[i, j] != 0
        else:
            for w in range(words.shape[1]):
                if words[i, w] != 0:
                    count += _nonzero_bytes(words[i, w])
        total += count * count
    return total
