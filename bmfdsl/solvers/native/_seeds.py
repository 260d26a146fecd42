"""Seed families for a whole-matrix solve: structure that annealing from random states misses.

Random restarts and the greedy baseline get stuck on sparse block structure (a 300 x 1,000 core
of planted blocks: error 1,575 against a planted 281). Two cheap families find such blocks
directly, and ALS (the polish every seed gets) finishes them:

* **NMF-threshold**: the thresholded method's answer (Zhang et al. 2010; the one
  implementation is :func:`bmfdsl.solvers.methods.thresholded`), on a uniform sample of rows
  when the whole matrix would make its exhaustive threshold search expensive; the polish then
  solves ``U`` for the full matrix from its ``V``.
* **Clusters**: k-means of the columns (and, separately, of the rows) into ``r + 1`` and
  ``2r`` groups (spare groups absorb empty and overlapping lines); the ``r`` groups of largest
  gain each become one factor, the other factor follows in closed form (the majority rule is
  the exact BLS answer for disjoint groups).

Every seed draws from its own generator, so the caller's stream (and with it every later
restart) stays as it was; :func:`seed_work` is their price in the cost model's units.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

from bmfdsl.linalg import dense_gram
from bmfdsl.solvers.methods import thresholded
from bmfdsl.solvers.native._settings import (
    PRACTICAL_MAX_RANK,
    auto_work_limit,
    solve_work,
)

#: Work limit of one threshold search (``rows * n * r² * min(rows, n)`` steps, about 0.3 s on
#: the calibration machine): beyond it the NMF-threshold seed runs on a row sample.
_THRESHOLD_STEPS = 3e9
_NMF_ITERATIONS = 300  # the thresholded method's default NMF (its NMF_ITERATIONS)
_KMEANS_ITERATIONS = 20
# Integers below this are exact in float32: sums of 0/1 products up to this many terms.
_EXACT_FLOAT32_SUMS = 2**24
# Largest share of ones at which k-means multiplies sparse (see _kmeans).
_SPARSE_KMEANS_DENSITY = 1 / 16
#: Rows of each sample of :func:`exact_rank_probes`, and the most samples it draws.
EXACT_PROBE_ROWS = 4096
EXACT_PROBES = 3
# Columns up to which the probe's test (the eigenvalues of AᵀA) costs little beside the
# seeds on all rows.
_EXACT_PROBE_MAX_COLUMNS = 512
#: The names of :func:`structure_seeds`' seeds, in the order it yields them.
SEED_NAMES = ("nmf-threshold", "columns-r+1", "rows-r+1", "columns-2r", "rows-2r")
# Work units per multiply-add of the seeds' dense products (numpy BLAS: cheaper than a cell of
# the numba kernels); matches their measured seconds at WORK_PER_SECOND.
_FLOP_WORK = 0.5


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """A context that runs BLAS on one thread, where ``threadpoolctl`` is installed.

    The seeds make hundreds of small products (NMF updates, k-means); on a loaded machine a
    multi-threaded BLAS spends most of their time waiting for its threads (a 250 x 1,000 NMF:
    5.2 s on two threads, 0.2 s on one, at load 7 on two cores). Without ``threadpoolctl``
    (it comes with scikit-learn) BLAS keeps its own setting.

    BLAS's thread count is one setting per process, and only the thread that set it can
    restore it (a restore from another thread left BLAS on one thread for good). So the thread
    that enters first owns the setting: its contexts nest, and its last one left restores it,
    once every context entered meanwhile in another thread (the portfolio's seed threads, a
    second caller's stages) has left: their float work keeps the one thread it started with,
    so its bits do not depend on another thread's timing (a failed call waits there for its
    running seeds). With OpenBLAS on pthreads a limit set from a thread other than the main
    one did not take effect: a call made from such a thread computes its BLAS steps with
    BLAS's own thread count, and its eigen and Cholesky steps can differ from a main-thread
    call's in the last bits.

    >>> with one_blas_thread():
    ...     with one_blas_thread():
    ...         pass
    """
    return _one_blas_thread()


_controller: Any = None  # threadpoolctl's view of the loaded BLAS libraries
_controller_modules = -1  # len(sys.modules) when it was made


def _blas_controller() -> Any:
    """threadpoolctl's controller of the loaded libraries (``None`` without threadpoolctl),
    made again only when modules were imported since: finding the libraries reads the
    process's memory map (about 1.3 ms, five times a call of the default ``factorize``: 3%
    of one at 10⁵ x 1,000), setting a limit through a kept controller takes 0.03 ms. Call it
    under ``_blas_limit_lock``."""
    global _controller, _controller_modules
    if _controller is None or _controller_modules != len(sys.modules):
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - the optional package is absent
            return None
        _controller = ThreadpoolController()
        _controller_modules = len(sys.modules)
    return _controller


# The limit's state, guarded by _blas_limit_changed's (reentrant: a garbage collection that
# runs a never-closed portfolio's finalizer under it may leave a context of this thread).
_blas_limit_changed = threading.Condition(threading.RLock())
_blas_limit_owner: int | None = None  # the thread that set the limit (threading.get_ident)
_blas_limit_depth = 0  # the owner's contexts entered and not yet left
_blas_limit_guests = 0  # other threads' contexts entered under the owner's limit, not yet left
_blas_limit: Any = None  # threadpoolctl's limits while the owner holds them
_blas_original: list[int] | None = None  # the BLAS libraries' thread counts before it


def process_blas_threads() -> list[int] | None:
    """The thread counts of the loaded BLAS libraries as the process set them, a limit of
    :func:`one_blas_thread` in force aside (``None`` without ``threadpoolctl``): what a stage
    that plans around BLAS's threads should read, cheaply (threadpoolctl's own
    ``threadpool_info`` reads the memory map on every call).

    >>> outside = process_blas_threads()
    >>> with one_blas_thread():
    ...     process_blas_threads() == outside
    True
    """
    with _blas_limit_changed:
        if _blas_original is not None:
            return list(_blas_original)
        controller = _blas_controller()
        if controller is None:  # pragma: no cover - the optional package is absent
            return None
        return [int(entry["num_threads"]) for entry in controller.select(user_api="blas").info()]


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    global _blas_limit_owner, _blas_limit_depth, _blas_limit_guests, _blas_limit, _blas_original
    me = threading.get_ident()
    with _blas_limit_changed:
        owns = _blas_limit_owner in (None, me)
        if not owns:
            _blas_limit_guests += 1
        elif _blas_limit_depth == 0:
            controller = _blas_controller()
            if controller is not None:
                blas = controller.select(user_api="blas")
                original = [int(entry["num_threads"]) for entry in blas.info()]
                _blas_limit = controller.limit(limits=1, user_api="blas")
                _blas_original = original
            _blas_limit_owner = me  # only once the limit is set: a failure leaves no owner
        if owns:
            _blas_limit_depth += 1
    try:
        yield
    finally:
        with _blas_limit_changed:
            if not owns:
                _blas_limit_guests -= 1
                _blas_limit_changed.notify_all()
            else:
                _blas_limit_depth -= 1
                if _blas_limit_depth == 0:
                    # the guests' float work must run under the limit it started under (the
                    # same bits in any thread): the owner restores BLAS, which only the
                    # thread that set it can, once they have left
                    while _blas_limit_guests:
                        _blas_limit_changed.wait()
                    if _blas_limit is not None:
                        _blas_limit.restore_original_limits()
                    _blas_limit = _blas_limit_owner = _blas_original = None


def threshold_rows(shape: tuple[int, int], rank: int) -> int:
    """Rows of the NMF-threshold seed's sample: all of them while the search is cheap.

    >>> threshold_rows((300, 30), 3), threshold_rows((20000, 2000), 5)
    (300, 156)
    """
    m, n = shape
    rows = m
    while rows > rank and rows * n * rank * rank * min(rows, n) > _THRESHOLD_STEPS:
        rows = max(rank, rows // 2)
    return int(rows)


def seed_work(shape: tuple[int, int], rank: int) -> float:
    """Work units of :func:`structure_seeds` on a matrix of ``shape``: the NMF-threshold seed
    (:func:`nmf_threshold_work`) and the k-means passes (four clusterings of ``m`` and ``n``
    points).

    >>> seed_work((30, 30), 3) > nmf_threshold_work((30, 30), 3) > 0
    True
    """
    m, n = shape
    kmeans = _KMEANS_ITERATIONS * 2.0 * m * n * (3 * rank + 1) * 2
    return nmf_threshold_work(shape, rank) + _FLOP_WORK * kmeans


def nmf_threshold_work(shape: tuple[int, int], rank: int, max_rows: int | None = None) -> float:
    """Work units of :func:`nmf_threshold_seed` (with ``max_rows``) on a matrix of ``shape``:
    the NMF's products and the threshold search.

    >>> nmf_threshold_work((50_000, 30), 2, max_rows=4096) < nmf_threshold_work((50_000, 30), 2)
    True
    """
    rows = _seed_rows(shape, rank, max_rows)
    n = shape[1]
    nmf = _NMF_ITERATIONS * 4.0 * rows * n * rank
    search = rows * n * rank * rank * min(rows, n) / 8  # it stops early, typically
    return _FLOP_WORK * (nmf + search)


def _seed_rows(shape: tuple[int, int], rank: int, max_rows: int | None) -> int:
    rows = threshold_rows(shape, rank)
    return rows if max_rows is None else max(rank, min(rows, max_rows))


#: ALS solves allowed per seed polish in :func:`sampled_core_work_limit` (a polish stops
#: after 2 without gain).
_SEED_POLISH_SOLVES = 10


def sampled_core_work_limit(shape: tuple[int, int], rank: int) -> float:
    """The work budget of a sampled core's solve when it is one seed of the pipeline's
    portfolio (which tries the comparison methods and these structure seeds on a larger
    uniform sample beside it, and finishes every candidate on the full data): the solve's own
    seeds (the greedy baseline and :func:`structure_seeds`, each polished by ALS); never more
    than the default budget (:func:`~bmfdsl.solvers.native.auto_work_limit`). The pipeline
    runs no annealing restart there (``num_reads=0``): on the 35 sampled runs of
    bench_scale and bench_families the restarts never changed the final error.

    >>> from bmfdsl.solvers.native import auto_work_limit
    >>> sampled_core_work_limit((100, 1000), 5) < auto_work_limit((100, 1000))
    True
    >>> sampled_core_work_limit((30, 30), 3) <= auto_work_limit((30, 30))
    True
    """
    codes = 2 ** min(rank, PRACTICAL_MAX_RANK)
    polish = (len(SEED_NAMES) + 1) * _SEED_POLISH_SOLVES * solve_work(*shape, codes, codes)
    return float(min(auto_work_limit(shape), seed_work(shape, rank) + polish))


def structure_seeds(
    A: np.ndarray, rank: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The seeds of both families as ``(U, V)`` pairs (``int8``), NMF-threshold first.

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 4), dtype=np.int8))
    >>> errors = [int(((A - U @ V.T) ** 2).sum()) for U, V in structure_seeds(A, 2, rng=None)]
    >>> min(errors)
    0
    """
    generator = np.random.default_rng(rng)
    transposed = np.ascontiguousarray(A.T)  # once for both row clusterings
    with one_blas_thread():
        seeds = [nmf_threshold_seed(A, rank, generator)]
        for clusters in (rank + 1, 2 * rank):
            seeds.append(column_cluster_seed(A, rank, clusters, generator))
            V, U = column_cluster_seed(transposed, rank, clusters, generator)
            seeds.append((U, V))
    yield from seeds


def nmf_threshold_seed(
    A: np.ndarray, rank: int, rng: np.random.Generator, max_rows: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The thresholded method's ``(U, V)``; on a uniform row sample (``U`` zero outside it)
    when the whole matrix would make the threshold search expensive, or when it has more
    than ``max_rows`` rows."""
    m = A.shape[0]
    rows = _seed_rows(A.shape, rank, max_rows)
    if rows >= m:
        return thresholded(A, rank, random_state=rng)
    sample = np.sort(rng.choice(m, size=rows, replace=False))
    U_sample, V = thresholded(np.ascontiguousarray(A[sample]), rank, random_state=rng)
    U = np.zeros((m, rank), dtype=np.int8)
    U[sample] = U_sample
    return U, V


def exact_rank_probes(
    A: np.ndarray, rank: int, rng: np.random.Generator
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Up to :data:`EXACT_PROBES` NMF-threshold seeds, each on its own uniform sample of
    :data:`EXACT_PROBE_ROWS` rows, made one at a time as they are asked for, for an ``A`` of
    more than twice that many rows, at most 512 columns and real rank at most ``rank``; none
    for any other ``A``.

    An answer of error 0 is a real factorization of rank ``rank``: it exists only when the
    eigenvalues of ``AᵀA`` past the ``rank`` largest sum to 0 (below 0.5 here, for rounding),
    so data with any noise gets no probe. When ALS from one reaches error 0 the seeds on all
    rows are not needed: on Table 1's exact-rank 50,000 x 30 they were 1.2 of a 1.4 s solve
    (r = 2), their NMF alone 300 products with all 50,000 rows. An NMF on a sample finds the
    exact factors about as often as one on all rows (at r = 5 two tries in three).

    >>> A = np.kron(np.ones((5000, 1), dtype=np.int8), np.eye(2, 6, dtype=np.int8))
    >>> U, V = next(exact_rank_probes(A, 2, np.random.default_rng(0)))
    >>> V.sum(axis=0).tolist()  # the two columns of A's rows, in some order
    [1, 1]
    >>> list(exact_rank_probes(A, 1, np.random.default_rng(0)))  # A has rank 2 > 1
    []
    """
    m, n = A.shape
    if m <= 2 * EXACT_PROBE_ROWS or n > _EXACT_PROBE_MAX_COLUMNS:
        return
    eigenvalues = np.linalg.eigvalsh(dense_gram(A))  # ascending
    if eigenvalues[: max(0, n - rank)].sum() >= 0.5:
        return
    for _ in range(EXACT_PROBES):
        yield nmf_threshold_seed(A, rank, rng, max_rows=EXACT_PROBE_ROWS)


def column_cluster_seed(
    A: np.ndarray, rank: int, clusters: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(U, V)`` from a k-means of ``A``'s columns into ``clusters`` groups: ``V`` puts the
    ``rank`` groups of largest gain in one factor each, ``U`` takes each row's majority over
    the group's columns (the exact BLS answer for disjoint groups).

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 4), dtype=np.int8))
    >>> U, V = column_cluster_seed(A, 2, 2, np.random.default_rng(0))
    >>> int(((A - U @ V.T) ** 2).sum())
    0
    """
    m, n = A.shape
    labels = _kmeans(A, min(clusters, n), rng)
    groups = max(int(labels.max()) + 1, 1)
    onehot = np.zeros((n, groups), dtype=np.float32)
    onehot[np.arange(n), labels] = 1.0
    ones_in_group = A.astype(np.float32) @ onehot  # m x groups
    sizes = onehot.sum(axis=0)
    rows_on = 2 * ones_in_group > sizes  # the majority rule
    gain = np.where(rows_on, 2 * ones_in_group - sizes, 0.0).sum(axis=0)  # error removed
    kept = np.argsort(-gain, kind="stable")[:rank]
    U = np.zeros((m, rank), dtype=np.int8)
    V = np.zeros((n, rank), dtype=np.int8)
    for factor, group in enumerate(kept):
        if gain[group] > 0:
            U[:, factor] = rows_on[:, group]
            V[:, factor] = labels == group
    return U, V


def _kmeans(lines: np.ndarray, clusters: int, rng: np.random.Generator) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding of the columns of the 0/1 matrix ``lines``: each
    column's group (an empty group is dropped).

    The points are 0/1, so a center is a group's integer sum over its size, and every
    distance ``|p|² - 2 p·s/size + |s|²/size²`` comes from exact integers (``p·s``: a product
    of 0/1 points with integer sums, exact in floats below 2**53, in any summation order),
    divided and summed in float64 in one fixed order: the same labels from the dense
    products (BLAS) and, where at most :data:`_SPARSE_KMEANS_DENSITY` of ``lines`` is ones,
    from sparse ones (``O(ones x clusters)`` a step instead of ``O(m n clusters)``: the
    structure seeds of a 2,000 x 2,000 sample at 0.5% ones took 0.26 s, k-means 0.23 s of it).
    """
    dims, count = lines.shape
    ones = int(np.count_nonzero(lines))
    if ones <= _SPARSE_KMEANS_DENSITY * lines.size:
        import scipy.sparse

        from bmfdsl.linalg import dense_pattern

        indptr, indices = dense_pattern(lines)
        values = np.ones(indices.size, dtype=np.float64)
        pattern = scipy.sparse.csr_array((values, indices, indptr), shape=lines.shape)

        def points_times(F: np.ndarray) -> np.ndarray:
            return np.asarray(pattern.T @ F)  # count x k

        def members_sum(M: np.ndarray) -> np.ndarray:
            return np.asarray(pattern @ M)  # dims x k
    else:
        # float32 copies while every product is an exact float32 integer (each, and each
        # partial sum, counts at most all the ones), else float64
        dtype = np.float32 if ones < _EXACT_FLOAT32_SUMS else np.float64
        points: np.ndarray = lines.T.astype(dtype)  # the layout the products were tuned on

        def points_times(F: np.ndarray) -> np.ndarray:
            return (points @ F.astype(dtype)).astype(np.float64)

        def members_sum(M: np.ndarray) -> np.ndarray:
            return (M.T.astype(dtype) @ points).T.astype(np.float64)

    squared = lines.sum(axis=0, dtype=np.int64).astype(np.float64)  # |p|² of 0/1 points
    sums = np.empty((clusters, dims), dtype=np.float64)  # each center's integer sum...
    sizes = np.ones(clusters, dtype=np.float64)  # ... over its size

    def distance_to(pick: int) -> np.ndarray:
        """Squared distance of every point to point ``pick`` (made a center): ``p·q`` read
        off the rows of ``lines`` where ``q`` is 1."""
        rows = np.flatnonzero(lines[:, pick])
        dot = lines[rows].sum(axis=0, dtype=np.int64).astype(np.float64)
        return np.maximum(squared - 2 * dot + squared[pick], 0)

    pick = int(rng.integers(count))
    sums[0] = lines[:, pick]
    nearest = distance_to(pick)
    for k in range(1, clusters):
        total = float(nearest.sum())
        pick = int(rng.choice(count, p=nearest / total)) if total > 0 else int(rng.integers(count))
        sums[k] = lines[:, pick]
        nearest = np.minimum(nearest, distance_to(pick))
    labels = np.full(count, -1, dtype=np.int64)
    for _ in range(_KMEANS_ITERATIONS):
        center_norms = np.einsum("kj,kj->k", sums, sums) / sizes**2
        distances = squared[:, None] - 2 * (points_times(sums.T) / sizes) + center_norms
        new_labels = np.argmin(distances, axis=1)
        if np.array_equal(new_labels, labels):
            break
        labels = new_labels
        members = np.zeros((count, clusters), dtype=np.float64)
        members[np.arange(count), labels] = 1.0
        counts = np.bincount(labels, minlength=clusters).astype(np.float64)
        filled = counts > 0  # an empty group keeps its center
        sums[filled] = members_sum(members).T[filled]
        sizes[filled] = counts[filled]
    _, compact = np.unique(labels, return_inverse=True)
    return compact.astype(np.int64)
