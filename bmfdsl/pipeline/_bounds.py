"""Lower bounds on the optimal BMF error ``min ||A - U Vᵀ||²_F``: how good an answer is.

Every bound here is valid for the unconstrained problem, hence also for any constrained
version of it (one-hot rows shrink the feasible set, so its optimum can only be larger):

* **spectral**: ``U Vᵀ`` has rank at most ``r``, so by Eckart-Young the error is at least
  ``Σ_{i>r} σ_i²``; the error is an integer, so its ceiling is a bound too. Computed from the
  Gram matrix of the short side (``AᵀA`` for a tall ``A``: ``O(m n²)`` work, no SVD of ``A``).
  When that is over the work budget, the long side is cut into blocks of ``k`` lines and the
  blocks' spectral bounds are summed (each block's error is at least its own rank-``r``
  optimum; a weaker bound, still valid).
* **rank-1**: with ``X = Σ_k u_k v_kᵀ`` and nonnegative terms,
  ``||A - X||² >= Σ_k ||A - u_k v_kᵀ||² - (r-1)||A||² >= r·E₁ - (r-1)||A||²`` where ``E₁`` is
  the optimal rank-1 error, used when :func:`bmfdsl.solvers.native._certify.exact_rank1` proves it
  within a small budget. For ``r = 1`` it is ``E₁`` itself.
* **observed blocks** (missing data): the error counts observed entries only, so the bounds
  above do not apply to ``A`` itself; but every fully observed block (rows ``R`` x columns
  ``C``) of ``A`` still holds a rank-``r`` product, so its spectral bound counts, and blocks on
  disjoint cells add up. Consecutive groups of ``k`` rows (or columns) each give the block of
  the columns (rows) they all observe; the best sum over a few ``k`` is the bound.
* **certificate**: a solver that proved its answer optimal on the same matrix.
* **exact engine**: the proven bound of CP-SAT (:func:`bmfdsl.solvers.solve_exact`,
  ``certify=`` seconds).

The cheap bounds (spectral, rank-1) are budgeted in work, not time, so the same input always
gives the same bound; the default budgets keep them within a few percent of a default solve.

>>> import numpy as np
>>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1]])
>>> spectral_bound(A, 1)  # σ² ≈ 4.73, 1.27, 0: no rank-1 product has error below 2
2
>>> from bmfdsl.result import gap
>>> gap(4, 1), gap(0, 0)
(0.75, 0.0)
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.linalg import (
    DaskMatrix,
    InMemoryMatrix,
    SparseMatrix,
    bit_gram_work,
    default_threads,
    dense_gram,
    exact_gram,
)
from bmfdsl.pipeline._background import close_with_call
from bmfdsl.pipeline._spectrum import FULL_SPECTRUM_MAX_SIZE, top_eigenvalue_sum_bound
from bmfdsl.validation import is_sparse

#: Work cap of the rank-1 bound's exact search, in row operations (about 15 ms).
DEFAULT_RANK1_ENUMERATION = 2**24
# Larger matrices skip the rank-1 bound: finding its distinct lines alone costs too much, and
# at rank 1 the native solver's own certificate covers them.
_RANK1_MAX_CELLS = 2**18
# Floating-point operations allowed to the spectral bound: at least this many, and at least
# _SPECTRAL_WORK_PER_CELL per cell and rank unit (a default solve does far more per cell).
_SPECTRAL_MIN_FLOPS = 10**8
#: Data (entries) from which :func:`start_bound` computes the spectral bound in the
#: background.
BACKGROUND_BOUND_CELLS = 2**20
_SPECTRAL_WORK_PER_CELL = 15
#: Gram matrices up to this size get all their eigenvalues; larger ones a proven bound on
#: their top ``r`` from Lanczos (``pipeline/_spectrum.py``): ``O(n² r)`` steps and one
#: Cholesky factorization instead of ``O(n³)`` with a large constant.
EXACT_EIGENVALUES_MAX_SIZE = FULL_SPECTRUM_MAX_SIZE
# Group sizes tried by the observed-blocks bound: rank + 1 ... rank + this. Larger groups
# share fewer observed lines (a random 80% mask: 0.8^k of them), so their blocks shrink.
_OBSERVED_GROUP_SIZES = 8


@dataclass(frozen=True)
class LowerBound:
    """The best lower bound found and where it came from.

    Attributes:
        value: the bound (an integer; ``0`` when nothing better is known).
        source: ``"zero"``, ``"spectral"``, ``"rank-1"``, ``"observed-blocks"``,
            ``"certificate"`` or ``"cp-sat"``.
        parts: every bound computed, by source (``None``: tried, not proven in budget).
    """

    value: int
    source: str
    parts: dict[str, int | None] = field(default_factory=dict)

    def raised(self, value: int, source: str) -> LowerBound:
        """This bound with ``source``'s ``value`` added (kept only if it is higher)."""
        parts = {**self.parts, source: int(value)}
        if value > self.value:
            return LowerBound(int(value), source, parts)
        return LowerBound(self.value, self.source, parts)

    def to_info(self) -> dict[str, Any]:
        """A JSON-friendly summary for ``Factorization.info["lower_bound"]``."""
        return {"value": self.value, "source": self.source, **self.parts}


def _spectral_tail(gram: np.ndarray, rank: int) -> float:
    """A value never above ``Σ_{i>r} λ_i(gram)``, with eigenvalue rounding errors taken off.

    Up to :data:`EXACT_EIGENVALUES_MAX_SIZE` all eigenvalues are computed; above it, the
    trace (exact: a count of ones) less a proven bound on the top ``r`` eigenvalues from
    Lanczos (see ``pipeline/_spectrum.py``), all eigenvalues only when that fails.
    """
    size = gram.shape[0]
    if size <= rank:
        return 0.0
    if size > EXACT_EIGENVALUES_MAX_SIZE:
        top = top_eigenvalue_sum_bound(gram, rank)
        if top is not None:
            return float(np.trace(gram)) - top
    eigenvalues = np.linalg.eigvalsh(gram)  # ascending
    # Each computed eigenvalue is within ~size·eps·||G|| of the true one (backward stability).
    tolerance = 8.0 * size * np.finfo(np.float64).eps * max(float(eigenvalues[-1]), 1.0)
    return float(np.sum(eigenvalues[: size - rank])) - (size - rank) * tolerance


def _block_tail(block: np.ndarray, rank: int) -> float:
    block = block.astype(np.float32)  # Gram entries count ones (< 2**24 here): exact
    gram = block.T @ block if block.shape[0] >= block.shape[1] else block @ block.T
    return _spectral_tail(gram.astype(np.float64), rank)


def _default_flops(m: int, n: int, rank: int) -> float:
    return max(_SPECTRAL_MIN_FLOPS, _SPECTRAL_WORK_PER_CELL * m * n * rank)


def _gram_fits(long_side: int, short_side: int, line_counts: np.ndarray, max_flops: float) -> bool:
    """Whether the exact Gram matrix is within budget: ``long·short²/64`` word operations
    (bit counts, :func:`~bmfdsl.linalg.bit_gram_work`) or ``Σ nnz_i²`` pairs of ones,
    whichever is less (:func:`~bmfdsl.linalg.exact_gram` takes the cheaper route, and a dense
    Gram is counted in bits); one rule for dense and sparse input, so that both give the same
    bound."""
    pairs = float(np.dot(line_counts.astype(np.float64), line_counts.astype(np.float64)))
    return min(bit_gram_work(long_side, short_side), pairs) <= max_flops


class _CancelledError(Exception):
    """Raised inside a :class:`BoundJob`'s thread when the job is cancelled."""


class BoundJob:
    """The spectral bound of a large in-memory matrix, computed in a background thread while
    the pipeline solves (start it with :func:`start_bound`).

    The thread sums the exact ``AᵀA`` (integer counts, by numba kernels on all CPUs but one,
    :func:`_background_threads`: the CSR pattern kernel, or bit-packed popcounts for a dense
    array) and, beyond 256 columns, proves the top-``r`` eigenvalue sum (Lanczos by a numba
    product and one Cholesky, see ``pipeline/_spectrum.py``; with ``eigenvalues=False`` these
    two steps wait for :meth:`result`, in the caller's thread). BLAS's thread count is one
    process-wide setting that the caller's stages change meanwhile, so no number of the bound
    comes from a BLAS product: the Gram counts and the Lanczos products are numba's, ARPACK's
    own vector steps do not depend on it (checked under 1, 2 and 4 threads), and of the Cholesky
    factorization (LAPACK) only its success is used, not its digits. The bound is then the same
    number whatever the main thread does, and equal to :func:`spectral_bound`'s (Cholesky's
    outcome could only change if ``λ_max(G - Z)`` fell within its rounding, ``n·eps·‖X‖``, of a
    tried shift). :meth:`result` waits for it; :meth:`cancel` stops it between row chunks and
    joins it (the pipeline does so when it fails, so no thread outlives a failed call).
    ``blas_hold``: a context the starting thread entered (BLAS on one thread, see
    :func:`start_bound`), left by that thread's :meth:`result` or :meth:`cancel`.
    """

    def __init__(
        self,
        tall: Any,
        rank: int,
        *,
        eigenvalues: bool = True,
        blas_hold: contextlib.ExitStack | None = None,
    ) -> None:
        self._tall = tall  # the wrapped long-side matrix (its Gram, if held, is reused)
        self._rank = rank
        self._eigenvalues = eigenvalues  # whether Lanczos and Cholesky run in the thread
        self._blas_hold = blas_hold
        self._stop = threading.Event()
        self._gram: np.ndarray | None = None
        self._tail: float | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="bmfdsl-bound", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            gram = self._sum_gram()
            self._gram = gram
            if gram.shape[0] > EXACT_EIGENVALUES_MAX_SIZE and self._eigenvalues:
                self._check()
                top = top_eigenvalue_sum_bound(gram, self._rank)
                if top is not None:
                    self._tail = float(np.trace(gram)) - top
        except _CancelledError:
            pass
        except BaseException as error:  # handed to the caller by result()
            self._error = error

    def _check(self) -> None:
        if self._stop.is_set():
            raise _CancelledError

    def _sum_gram(self) -> np.ndarray:
        tall = self._tall
        if "gram" in vars(tall):
            return np.asarray(tall.gram)
        if isinstance(tall, SparseMatrix):
            # the kernel reads the rows in place and checks between its chunks: slicing the
            # CSR into chunks and summing their Grams cost as much as the counting
            return exact_gram(tall.csr, threads=_background_threads(), between_chunks=self._check)
        return dense_gram(tall.array, self._check, threads=_background_threads())

    def result(self) -> int:
        """The spectral bound (waits for the thread); eigenvalues it left to the caller (256
        columns or fewer, or Lanczos not certified) are computed in the calling thread."""
        self._thread.join()
        self._release_blas()
        if self._error is not None:
            raise self._error
        if self._gram is None:
            raise RuntimeError("the bound's background job was cancelled")
        tail = self._tail if self._tail is not None else _spectral_tail(self._gram, self._rank)
        return max(0, math.ceil(tail - 1e-9))

    def cancel(self) -> None:
        """Stop the thread at its next row chunk (or eigenvalue step) and wait for it."""
        self._stop.set()
        self._thread.join()
        self._release_blas()

    def _release_blas(self) -> None:
        if self._blas_hold is not None:
            self._blas_hold.close()  # (a second close does nothing)

    def alive(self) -> bool:
        """Whether the thread still runs."""
        return self._thread.is_alive()


def _background_threads() -> int:
    """The threads the background bound sums a Gram matrix with: all CPUs but the one
    the caller's serial stages need (one thread on two CPUs). The counts are exact integers,
    so the bound does not depend on it. ``make_sparse_planted`` 5·10⁶ x 2,000
    (``Σ nnz_i² = 9.5·10⁹``) at r = 5 on 16 CPUs: on one thread the run waited 1.7-2.3 s
    for the bound (2.9-3.4 s in all), on 8 threads 0.21-0.24 s, on 15 0.13-0.15 s (1.37 s
    in all; ``bench/results/bound_threads_device.md``).

    >>> 1 <= _background_threads() <= max(1, default_threads())
    True
    """
    return max(1, default_threads() - 1)


def _blas_spares_the_caller() -> bool:
    """Whether BLAS calls in a background thread leave the caller's core alone: at least 4
    CPUs, or BLAS on one thread. On two busy cores with two BLAS threads, ARPACK's and
    Cholesky's calls beside the solve doubled the process's CPU time (BLAS's idle threads
    spin) and the run's wall time; the eigenvalue steps then stay in the caller's thread,
    which gives the same numbers. The process's own setting, not a one-thread stage's (a
    sampled run starts the bound while its seeds hold BLAS to one thread)."""
    if len(os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else ()) >= 4:
        return True
    from bmfdsl.solvers.native import process_blas_threads

    threads = process_blas_threads()  # not the one thread the portfolio's seeds hold it to
    return threads is not None and all(count <= 1 for count in threads)


def start_bound(data: Any, rank: int, *, hold_blas: bool = False) -> BoundJob | None:
    """Start :func:`spectral_bound` of a wrapped in-memory ``data`` (dense or sparse, at
    least :data:`BACKGROUND_BOUND_CELLS` entries) in a background thread (:class:`BoundJob`);
    ``None`` when there is nothing to start: smaller or dask data, ``r`` at least the short
    side, or a Gram matrix over the work budget (the bound is then summed over blocks, in the
    caller's thread).

    Where BLAS calls in the thread would compete with the caller's core (fewer than 4 CPUs,
    BLAS on several threads: see :func:`_blas_spares_the_caller`), Lanczos and Cholesky wait
    for :meth:`BoundJob.result`, in the caller's thread, unless ``hold_blas``: the caller
    then keeps BLAS on one thread (:func:`~bmfdsl.solvers.native.one_blas_thread`) until it
    calls :meth:`~BoundJob.result` or :meth:`~BoundJob.cancel`, and the thread computes them
    too (10⁵ x 2,000 at r = 10 on 2 cores: 0.12-0.22 s of Lanczos at the end otherwise). The
    pipeline asks for it on a sampled run, whose caller's stages then make only exact integer
    products: no answer depends on BLAS's thread count there.

    >>> import numpy as np, scipy.sparse
    >>> from bmfdsl.linalg import as_matrix
    >>> start_bound(as_matrix(scipy.sparse.eye(3, format="csr")), 1) is None  # small
    True
    >>> A = np.kron(np.eye(4, dtype=np.int8), np.ones((1000, 75), dtype=np.int8))
    >>> job = start_bound(as_matrix(A), 3)
    >>> job.result(), spectral_bound(A, 3)  # one block of 75,000 ones left out
    (75000, 75000)
    """
    if not isinstance(data, InMemoryMatrix | SparseMatrix):
        return None
    m, n = data.shape
    if m * n < BACKGROUND_BOUND_CELLS or min(m, n) <= rank:
        return None
    tall = data if m >= n else data.T
    if isinstance(tall, SparseMatrix):
        counts = np.diff(tall.csr.indptr)
    else:
        counts = np.count_nonzero(tall.array, axis=1)
    if "gram" not in vars(tall) and not _gram_fits(
        max(m, n), min(m, n), counts, _default_flops(m, n, rank)
    ):
        return None
    spares = _blas_spares_the_caller()
    if spares or not hold_blas:
        job = BoundJob(tall, rank, eigenvalues=spares)
    else:
        from bmfdsl.solvers.native import one_blas_thread

        with contextlib.ExitStack() as hold:  # a job that fails to start releases it here
            hold.enter_context(one_blas_thread())
            job = BoundJob(tall, rank, blas_hold=hold.pop_all())
    close_with_call(job.cancel)  # no thread outlives a factorize that fails
    return job


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def _partial_gram(tall: Any, deadline: float, gram_of: Any, step: int) -> np.ndarray:
    """``AᵀA`` of the first rows of ``tall`` (dense, or CSR with ``gram_of=exact_gram``) that
    the ``deadline`` affords, ``step`` rows at a time (at least one step): the Gram matrix of
    a row subset, whose bound is a valid, weaker one."""
    gram = gram_of(tall[:step])
    for start in range(step, tall.shape[0], step):
        if _past(deadline):
            break
        gram += gram_of(tall[start : start + step])
    return gram


def spectral_bound(
    A: Any, rank: int, *, max_flops: float | None = None, deadline: float | None = None
) -> int:
    """``ceil(Σ_{i>r} σ_i(A)²)``, safely rounded down: no rank-``r`` product does better.

    Args:
        A: ``m x n`` 0/1 matrix (numpy array-like, scipy sparse or ``dask.array``, or one
            wrapped by :func:`~bmfdsl.linalg.as_matrix`, whose Gram matrix, once computed, is
            reused). A sparse one gets the same bound as its dense form, from exact sparse
            Gram products (the budget rule is the same, so that both give the same number).
        rank: the factorization rank ``r``.
        max_flops: work budget in floating-point operations (default:
            ``max(1e8, 15·m·n·r)``), for the exact Gram matrix of the short side
            (``min(long·short²/64, Σ_i nnz_i²)``: bit counts or pairs of ones; free when a
            wrapped ``A`` already holds it). Over budget, the long side is split into blocks
            whose bounds are summed (weaker, still valid); ``0`` when even that does not fit.
        deadline: a ``time.perf_counter()`` value (opt-in, for a time-limited run): the Gram
            matrix (when not held already) or the blocks cover only the rows read by then,
            at least one chunk or block. Rows left out only weaken the bound: the error on a
            subset of rows is at least that subset's spectral bound. Not reproducible.

    >>> import numpy as np
    >>> spectral_bound(np.eye(4), 2), spectral_bound(np.eye(4), 4)
    (2, 0)
    """
    if isinstance(A, DaskMatrix) or type(A).__module__.split(".")[0] == "dask":
        return _dask_spectral_bound(A, rank)
    if isinstance(A, SparseMatrix) or is_sparse(A):
        return _sparse_spectral_bound(A, rank, max_flops, deadline)
    data = A if isinstance(A, InMemoryMatrix) else None
    A = np.asarray(A.array if isinstance(A, InMemoryMatrix) else A)
    tall = A if A.shape[0] >= A.shape[1] else A.T
    long_side, short_side = tall.shape
    if short_side <= rank:
        return 0
    if max_flops is None:
        max_flops = _default_flops(long_side, short_side, rank)
    tall_data = None if data is None else data if A.shape[0] >= A.shape[1] else data.T
    cached = tall_data is not None and "gram" in vars(tall_data)
    if cached or _gram_fits(long_side, short_side, np.count_nonzero(tall, axis=1), max_flops):
        if tall_data is not None and (cached or deadline is None):
            gram = tall_data.gram
        else:
            step = max(1, 2**20 // tall.shape[1])
            gram = (
                dense_gram(tall)
                if deadline is None
                else _partial_gram(tall, deadline, dense_gram, step)
            )
        tail = _spectral_tail(gram, rank)
    else:
        # blocks of k lines: Grams cost ~ long·short·k, their eigenvalues ~ long·k²
        block_rows = int(max_flops // (long_side * (short_side + short_side // 2)))
        if block_rows <= rank:
            return 0
        tail = 0.0
        for start in range(0, long_side, block_rows):
            tail += _block_tail(tall[start : start + block_rows], rank)
            if _past(deadline):
                break
    return max(0, math.ceil(tail - 1e-9))


def _sparse_spectral_bound(
    A: Any, rank: int, max_flops: float | None, deadline: float | None
) -> int:
    """:func:`spectral_bound` of a sparse ``A``: the dense route's Grams, exactly, sparsely."""
    data = A if isinstance(A, SparseMatrix) else SparseMatrix(A)
    m, n = data.shape
    tall_data = data if m >= n else data.T  # the pipeline's transposed copy, if any
    tall = tall_data.csr
    long_side, short_side = tall.shape
    if short_side <= rank:
        return 0
    if max_flops is None:
        max_flops = _default_flops(m, n, rank)
    cached = "gram" in vars(tall_data)
    if cached or _gram_fits(long_side, short_side, np.diff(tall.indptr), max_flops):
        if cached or deadline is None:
            gram = tall_data.gram
        else:
            gram = _partial_gram(tall, deadline, exact_gram, 2**16)
        tail = _spectral_tail(gram, rank)
    else:  # the dense route's blocks, so that the bound is the same number
        block_rows = int(max_flops // (long_side * (short_side + short_side // 2)))
        if block_rows <= rank:
            return 0
        tail = 0.0
        for start in range(0, long_side, block_rows):
            block = tall[start : start + block_rows]
            tall_block = block.shape[0] >= block.shape[1]
            tail += _spectral_tail(exact_gram(block, rows=not tall_block), rank)
            if _past(deadline):
                break
    return max(0, math.ceil(tail - 1e-9))


def _dask_spectral_bound(A: Any, rank: int) -> int:
    """The spectral bound of a ``dask.array`` from ``AᵀA`` summed over its row blocks."""
    m, n = (int(size) for size in A.shape)
    if min(m, n) <= rank or min(m, n) > 4096:  # the Gram must fit in memory comfortably
        return 0
    if isinstance(A, DaskMatrix):
        gram = (A if m >= n else A.T).gram  # the sampling's, when it ran on this side
    else:
        import dask.array as da

        tall = (A if m >= n else A.T).astype(np.float64)
        gram = np.asarray(da.dot(tall.T, tall).compute(), dtype=np.float64)
    return max(0, math.ceil(_spectral_tail(gram, rank) - 1e-9))


def rank1_bound(
    A: np.ndarray,
    rank: int,
    *,
    max_enumeration: int = DEFAULT_RANK1_ENUMERATION,
    rank1_upper: int | None = None,
    to_beat: int = 0,
) -> int | None:
    """``r·E₁ - (r-1)·||A||²`` with ``E₁`` the proven optimal rank-1 error (``None``: not
    proven within ``max_enumeration``, or skipped because it cannot beat ``to_beat``).

    ``rank1_upper`` is any known rank-1 error (``E₁`` is at most that): when even it gives a
    bound no higher than ``to_beat`` the exact search is skipped.

    >>> import numpy as np
    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> rank1_bound(A, 1), rank1_bound(A, 2)  # E₁ = 1, ||A||² = 5: 2·1 - 5 < 0
    (1, 0)
    """
    from bmfdsl.solvers.native import exact_rank1

    A = np.asarray(A, dtype=np.int8)
    norm = int(np.count_nonzero(A))
    upper = norm if rank1_upper is None else min(int(rank1_upper), norm)
    if rank * upper - (rank - 1) * norm <= to_beat:
        return None
    exact = exact_rank1(A, max_enumeration=max_enumeration)
    if exact is None:
        return None
    return max(0, rank * exact[2] - (rank - 1) * norm)


def _best_column_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    """The smallest ``||A - u_k v_kᵀ||²`` over the answer's columns: an upper bound on E₁."""
    U = np.asarray(U, dtype=np.int64)
    V = np.asarray(V, dtype=np.int64)
    hits = np.einsum("ik,ik->k", U, np.asarray(A, dtype=np.int64) @ V)  # u_kᵀ A v_k
    sizes = U.sum(axis=0) * V.sum(axis=0)
    return int(np.count_nonzero(A)) + int(np.min(sizes - 2 * hits))


def cheap_lower_bound(
    A: Any,
    rank: int,
    *,
    U: np.ndarray | None = None,
    V: np.ndarray | None = None,
    certified_error: int | None = None,
    max_enumeration: int = DEFAULT_RANK1_ENUMERATION,
    deadline: float | None = None,
    spectral: int | None = None,
) -> LowerBound:
    """The best of 0, the spectral bound, the rank-1 bound and a solver's certificate.

    Args:
        A: the ``m x n`` 0/1 matrix factorized (numpy, scipy sparse, a
            :class:`~bmfdsl.linalg.SparseMatrix` or ``dask.array``; the rank-1 search runs
            only on small matrices, densified when sparse).
        rank: the rank ``r``.
        U, V: the answer (optional): its columns give a rank-1 error that decides whether
            the rank-1 search can help at all.
        certified_error: the error of a solution a solver proved optimal on this same ``A``
            (and under the same constraints), if any.
        max_enumeration: budget of the rank-1 search (row operations).
        deadline: opt-in ``time.perf_counter()`` value for the spectral bound (see
            :func:`spectral_bound`).
        spectral: the spectral bound when already known (a :class:`BoundJob`'s result).

    >>> import numpy as np
    >>> A = np.kron(np.eye(3, dtype=int), np.ones((2, 2), dtype=int))
    >>> cheap_lower_bound(A, 2).to_info()["value"]  # σ² = 4, 4, 4: the tail is 4
    4
    """
    bound = LowerBound(0, "zero")
    if spectral is None:
        spectral = spectral_bound(A, rank, deadline=deadline)
    bound = bound.raised(spectral, "spectral")
    if certified_error is not None:
        bound = bound.raised(int(certified_error), "certificate")
    A = _unwrapped(A)
    lazy = type(A).__module__.split(".")[0] == "dask"  # np.size would compute it
    cells = 0 if lazy else int(np.prod(A.shape)) if is_sparse(A) else np.size(A)
    if not lazy and cells <= _RANK1_MAX_CELLS:
        A = np.asarray(A.toarray() if is_sparse(A) else A)  # small: at most 256K cells
        upper = None if U is None or V is None else _best_column_error(A, U, V)
        rank1 = rank1_bound(
            A, rank, max_enumeration=max_enumeration, rank1_upper=upper, to_beat=bound.value
        )
        if rank1 is not None:
            bound = bound.raised(rank1, "rank-1")
    return bound


def _unwrapped(A: Any) -> Any:
    """The array a wrapped matrix holds (scipy CSR for a sparse one); others as they are."""
    if isinstance(A, InMemoryMatrix | DaskMatrix):
        return A.array
    if isinstance(A, SparseMatrix):
        return A.csr
    return A


def observed_blocks_bound(A: Any, mask: Any, rank: int) -> int:
    """A lower bound on ``min Σ_observed (a_ij - (U Vᵀ)_ij)²`` over rank-``r`` products.

    Rows are cut into consecutive groups of ``k`` (``k = r+1 ... r+8``); each group and the
    columns it observes in full form a fully observed block, whose error is at least its
    spectral bound; the groups' cells are disjoint, so their bounds add up. The same runs on
    columns, and the best sum is returned (``0`` when no block is larger than ``r`` both ways).

    Args:
        A: ``m x n`` 0/1 array (unobserved entries may hold anything: they are ignored).
        mask: ``m x n`` 0/1 array, 1 = observed.
        rank: the rank ``r``.

    >>> import numpy as np
    >>> A = np.kron(np.eye(3, dtype=int), np.ones((2, 2), dtype=int))
    >>> mask = np.ones_like(A); mask[0, 5] = 0
    >>> observed_blocks_bound(A, mask, 1), spectral_bound(A, 1)  # one entry less to count
    (6, 8)
    """
    A = np.asarray(A)
    observed = np.asarray(mask) != 0
    sizes = range(rank + 1, rank + 1 + _OBSERVED_GROUP_SIZES)
    return max(
        [0]
        + [_grouped_blocks_bound(A, observed, rank, size) for size in sizes]
        + [_grouped_blocks_bound(A.T, observed.T, rank, size) for size in sizes]
    )


def _grouped_blocks_bound(A: np.ndarray, observed: np.ndarray, rank: int, size: int) -> int:
    """The summed spectral bounds of groups of ``size`` rows x the columns each fully observes."""
    total = 0
    for start in range(0, A.shape[0], size):
        columns = observed[start : start + size].all(axis=0)
        if min(len(observed[start : start + size]), int(columns.sum())) > rank:
            total += spectral_bound(A[start : start + size][:, columns], rank)
    return total


def proven_optimal(info: Mapping[str, Any]) -> bool:
    """Whether a backend's ``info`` says it proved its answer optimal."""
    backend_info = info.get("backend_info") or {}
    certificate = backend_info.get("certificate") if isinstance(backend_info, Mapping) else None
    return isinstance(certificate, Mapping) and certificate.get("optimal") is True


def certificate_error(info: Mapping[str, Any]) -> int | None:
    """The proven-optimal error a backend reported in ``info`` (``None`` if it proved none)."""
    error = info.get("error_before_als")
    return int(error) if proven_optimal(info) and error is not None else None


@dataclass(frozen=True)
class Proof:
    """An answer with its lower bound (possibly improved by the exact engine).

    Attributes:
        U, V, error: the answer (the exact engine's when it found a better one).
        bound: the best lower bound and its sources.
        timings: seconds spent: ``"bounds"`` and, with ``certify``, ``"certify"``.
        info: what the exact engine reported, with ``heuristic_error`` (the error it started
            from), ``improved`` (it found a better answer), ``cheap_bound`` (the bound before
            it) and ``outcome`` (:func:`certify_outcome`, or ``"already proven"`` when the
            cheap bounds proved the answer and it did not run); empty without ``certify``.
    """

    U: np.ndarray
    V: np.ndarray
    error: int
    bound: LowerBound
    timings: dict[str, float]
    info: dict[str, Any]


def certify_outcome(improved: bool, cheap_bound: int, bound: int, optimal: bool) -> str:
    """What the exact engine added, in words: ``"proven optimal"``, ``"raised the bound"``,
    ``"found a better answer"`` (joined with ``" and "`` when several hold) or
    ``"nothing new"``.

    >>> certify_outcome(False, 26, 50, True), certify_outcome(False, 26, 26, False)
    ('raised the bound and proven optimal', 'nothing new')
    """
    said = [
        text
        for text, holds in (
            ("found a better answer", improved),
            ("raised the bound", bound > cheap_bound),
            ("proven optimal", optimal),
        )
        if holds
    ]
    return " and ".join(said) if said else "nothing new"


def check_certify(certify: Any, *, in_memory: bool) -> float | None:
    """Validate ``factorize``'s ``certify`` early (before the solve): seconds or ``None``."""
    if certify is None:
        return None
    from bmfdsl.errors import InvalidParameterError
    from bmfdsl.solvers import check_seconds, require_ortools

    seconds = check_seconds(certify)
    if not in_memory:
        raise InvalidParameterError(
            "certify needs an in-memory matrix; compute the dask array first (A.compute())"
        )
    require_ortools()
    return seconds


def prove(
    A: Any,
    rank: int,
    U: np.ndarray,
    V: np.ndarray,
    error: int,
    *,
    one_hot: str | None = None,
    certified_error: int | None = None,
    certify: float | None = None,
    seed: int = 0,
    mask: np.ndarray | None = None,
    deadline: float | None = None,
    background: BoundJob | None = None,
) -> Proof:
    """Bound the answer ``(U, V)`` of ``A`` at ``rank``: the cheap bounds always, the exact
    engine (CP-SAT, hinted with the answer) for ``certify`` seconds when asked.

    ``A`` may be a wrapped matrix (:class:`~bmfdsl.linalg.BinaryMatrix`). With a ``mask``
    (1 = observed) the error counts observed entries only: the bound is then
    :func:`observed_blocks_bound` (the exact engine does not take a mask). ``deadline``
    (a ``time.perf_counter()`` value, opt-in) cuts the spectral bound short (see
    :func:`spectral_bound`). ``background``: a :class:`BoundJob` of the same ``A`` and
    ``rank`` (:func:`start_bound`) whose result is the spectral bound (its wait counts in
    ``timings["bounds"]``).

    >>> import numpy as np
    >>> A = np.kron(np.eye(2, dtype=int), np.ones((2, 2), dtype=int))
    >>> U = V = np.kron(np.eye(2, dtype=int), np.ones((2, 1), dtype=int))
    >>> proof = prove(A, 1, U[:, :1], V[:, :1], 4)
    >>> proof.bound.value, proof.bound.source  # σ² = 4, 4: the answer is optimal
    (4, 'spectral')
    """
    if certify is not None and mask is not None:
        from bmfdsl.errors import InvalidParameterError

        raise InvalidParameterError("certify= is not available with a mask (missing data)")
    from bmfdsl.solvers.native import one_blas_thread

    start = time.perf_counter()
    # one BLAS thread: Lanczos on a 1,000 x 1,000 Gram took 0.4 s on two threads of a busy
    # two-core machine and 0.004 s on one
    with one_blas_thread():
        if mask is None:  # a wrapped A lends the bound its Gram matrix, if sampling made it
            bound = cheap_lower_bound(
                A,
                rank,
                U=U,
                V=V,
                certified_error=certified_error,
                deadline=deadline,
                spectral=None if background is None else background.result(),
            )
        else:
            bound = LowerBound(0, "zero").raised(
                observed_blocks_bound(_unwrapped(A), mask, rank), "observed-blocks"
            )
    A = _unwrapped(A)
    timings = {"bounds": time.perf_counter() - start}
    info: dict[str, Any] = {}
    if certify is not None and bound.value >= error:
        info = {"outcome": "already proven", "cheap_bound": bound.value}
    elif certify is not None:
        from bmfdsl.solvers import solve_exact

        if is_sparse(A):  # CP-SAT takes the matrix dense (it is only practical when small)
            A = A.toarray()
        start = time.perf_counter()
        exact = solve_exact(
            A,
            rank,
            seconds=certify,
            hint=(U, V),
            one_hot=one_hot,
            lower_bound=bound.value,
            seed=seed,
        )
        timings["certify"] = time.perf_counter() - start
        improved = exact.error is not None and exact.error < error
        heuristic_error, cheap_bound = int(error), bound.value
        if improved:
            assert exact.U is not None and exact.V is not None and exact.error is not None
            U, V, error = exact.U, exact.V, exact.error
        bound = bound.raised(min(exact.lower_bound, error), "cp-sat")
        info = {
            **exact.info,
            "heuristic_error": heuristic_error,
            "improved": improved,
            "cheap_bound": cheap_bound,
            "outcome": certify_outcome(improved, cheap_bound, bound.value, bound.value >= error),
        }
    return Proof(U, V, int(error), bound, timings, info)
