"""Alternating binary least squares (ALS): the paper's polishing step.

Starting from ``(U, V)``, solve ``V`` exactly for fixed ``U``, then ``U`` for fixed ``V``, and so
on (each step is a :func:`~bmfdsl.solvers.solve_bls` solve). The paper does at most 20 solves
and stops after two consecutive solves without improvement; the best pair seen is returned, so
ALS never worsens a feasible start. A run also stops at a fixed point: a solve over the code
table (rank at most 12, no backend) that gives back the factor it replaced would be repeated
by every later solve, so stopping there returns the pair the paper's rule does, with fewer
solves.

Both steps only need small statistics of ``A`` (``A V``, ``Aᵀ U`` and row/column sums), so a
``dask.array`` input runs blockwise: the ``U`` step maps over row blocks and the ``V`` step sums
``Aᵀ U`` over them. That works on any dask scheduler, including a distributed cluster.

:func:`als_batch` runs several starts together (the seed portfolio's candidates): one pass over
``A`` per half-step serves every start still running, and each ends exactly as it would alone;
:func:`als` is its one-start case.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.linalg import (
    BinaryMatrix,
    DaskMatrix,
    InMemoryMatrix,
    SparseMatrix,
    als_loop,
    as_matrix,
    check_device,
    code_table,
    default_threads,
    gram,
    kernel_threads,
)
from bmfdsl.solvers._bls import (
    MAX_ENUMERATION_RANK,
    fits_compiled_kernel,
    solve_bls_from_stats,
    solve_bls_many,
)
from bmfdsl.validation import check_binary_matrix, check_one_hot

OneHotSide = Literal["U", "V"]


@dataclass(frozen=True)
class ALSResult:
    """The best factor pair found by :func:`als`.

    Attributes:
        U: ``m x r`` ``int8`` factor.
        V: ``n x r`` ``int8`` factor.
        error: ``||A - U Vᵀ||²_F`` of ``(U, V)``.
        solves: number of BLS solves performed.
        history: the error of the start followed by the error after each solve.
    """

    U: np.ndarray
    V: np.ndarray
    error: int
    solves: int
    history: list[int] = field(default_factory=list)


def als(
    A: Any,
    U: Any,
    V: Any,
    *,
    max_solves: int = 20,
    patience: int = 2,
    one_hot: str | None = None,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: dict[str, Any] | None = None,
    deadline: float | None = None,
    device: str = "cpu",
) -> ALSResult:
    """Polish ``A ≈ U Vᵀ`` by alternating exact BLS solves; return the best pair seen.

    The first solve is for ``V`` (as in the paper), unless ``one_hot="U"`` and the start ``U``
    breaks the constraint, in which case ``U`` is solved first. A start that breaks the one-hot
    constraint is never returned when a solve has repaired it.

    Args:
        A: ``m x n`` 0/1 matrix (array-like, scipy sparse: kept sparse, or ``dask.array``).
        U: ``m x r`` 0/1 start.
        V: ``n x r`` 0/1 start.
        max_solves: at most this many BLS solves (the paper: 20).
        patience: stop after this many consecutive solves without improvement (the paper: 2),
            or sooner at a fixed point (the same pair).
        one_hot: ``"V"`` (``"U"``): every row of ``V`` (``U``) holds exactly one 1.
        chunk_rows: rows per chunk in the BLS scoring (bounded memory).
        backend, backend_params: the BLS QUBO backend for rank > 12 (see
            :func:`bmfdsl.solvers.solve_bls`).
        deadline: opt-in ``time.perf_counter()`` value (a time-limited run): no solve starts
            after it, except the first. Not reproducible; small problems, solved in one
            compiled loop, finish it regardless.
        device: where each solve scores its codes and a dense ``A`` its products ``A V`` and
            ``Aᵀ U`` (see :func:`bmfdsl.solvers.solve_bls`): ``"cpu"`` (default), ``"gpu"``
            (CuPy, ``bmfdsl[gpu]``) or ``"numpy"``. Every device gives the same result.

    Returns:
        An :class:`ALSResult`.

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> result = als(A, [[1, 0], [0, 0], [0, 1]], np.eye(3, 2, dtype=int))
    >>> result.history, result.error, result.solves
    ([5, 2, 0], 0, 2)
    """
    return als_batch(
        A,
        [ALSStart(U, V)],
        max_solves=max_solves,
        patience=patience,
        one_hot=one_hot,
        chunk_rows=chunk_rows,
        backend=backend,
        backend_params=backend_params,
        deadline=deadline,
        device=device,
    )[0]


@dataclass(frozen=True)
class ALSStart:
    """One start of :func:`als_batch`: ``U`` (``m x r``) and ``V`` (``n x r``), and what is
    known about them already, which spares a pass over ``A``.

    Attributes:
        U, V: the 0/1 start.
        error: ``||A - U Vᵀ||²_F`` when known (e.g. from the BLS solve that gave ``U``); it
            is trusted, so it must be exact.
        cross: ``Aᵀ U`` (``n x r`` integers) when known (a dask BLS sums it in its own pass).
    """

    U: Any
    V: Any
    error: int | None = None
    cross: np.ndarray | None = None


def als_batch(
    A: Any,
    starts: Sequence[ALSStart],
    *,
    max_solves: int = 20,
    patience: int = 2,
    one_hot: str | None = None,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: dict[str, Any] | None = None,
    deadline: float | None = None,
    device: str = "cpu",
    threads: int = 1,
) -> list[ALSResult]:
    """:func:`als` from several starts (one rank) at once: each half-step makes one pass over
    ``A`` for all the starts still running (``A [V_1 … V_k]`` for the ``U`` steps,
    ``Aᵀ [U_1 … U_k]`` for the ``V`` steps; a dask ``A`` sums the latter in the former's pass),
    and each start's row solves read their own columns. A start stops as it would alone and
    leaves the batch; every result is bit-identical to :func:`als` from that start (same
    factors, error, solves and history), since the products are exact integers.

    Args:
        A: as in :func:`als`.
        starts: the :class:`ALSStart` of each run.
        max_solves, patience, one_hot, chunk_rows, backend, backend_params, deadline, device:
            as in :func:`als`, for every run.
        threads: split the starts (every ``threads``-th together) into up to this many
            batches, run side by side in threads: the same results (each start's are its own),
            sooner where cores are idle. An in-memory ``A`` of at least
            :data:`THREADED_MIN_ENTRIES` entries on the CPU only (a dask ``A`` has its own
            workers); BLAS's own threads are the caller's to set.

    Returns:
        One :class:`ALSResult` per start, in order.

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> results = als_batch(A, [ALSStart([[1, 0], [0, 0], [0, 1]], np.eye(3, 2, dtype=int)),
    ...                         ALSStart(np.ones((3, 2), dtype=int), np.ones((3, 2), dtype=int))])
    >>> [(result.history, result.error) for result in results]
    [([5, 2, 0], 0), ([21, 3, 1, 1], 1)]
    """
    one_hot = check_one_hot(one_hot)
    device = check_device(device)
    max_solves = _check_count(max_solves, "max_solves", minimum=0)
    patience = _check_count(patience, "patience", minimum=1)
    threads = _check_count(threads, "threads", minimum=1)
    if chunk_rows is not None:
        chunk_rows = _check_count(chunk_rows, "chunk_rows", minimum=1)
    data = as_matrix(A, chunk_rows)  # a matrix wrapped by the pipeline is validated already
    checked = [_checked_start(start, data.shape) for start in starts]
    if len({start.U.shape[1] for start in checked}) > 1:
        raise InvalidMatrixError(
            f"every start must have the same rank; got {[start.U.shape for start in checked]}"
        )
    solve_options: dict[str, Any] = {
        "chunk_rows": chunk_rows,
        "backend": backend,
        "backend_params": backend_params,
        "device": device,
    }
    if not checked:
        return []
    groups = min(threads, len(checked))
    m, n = data.shape
    settings = _Settings(max_solves, patience, one_hot, solve_options, deadline)
    if (
        groups > 1
        and device == "cpu"
        and not isinstance(data, DaskMatrix)
        and m * n >= THREADED_MIN_ENTRIES
    ):
        return _side_by_side(data, checked, groups, settings)
    return _batch(data, checked, settings, None)


#: Entries of ``A`` from which :func:`als_batch` runs its batches side by side when asked for
#: threads (8 dense starts at r = 10: 10,000 x 200, 0.07 -> 0.05 s on 2 cores; 3,000 x 200,
#: 10 ms either way: below, the threads' start and the GIL eat what they save).
THREADED_MIN_ENTRIES = 2**20


@dataclass(frozen=True)
class _Settings:
    """What every run of a batch shares (see :func:`als_batch`)."""

    max_solves: int
    patience: int
    one_hot: str | None
    solve_options: dict[str, Any]
    deadline: float | None


def _side_by_side(
    data: BinaryMatrix, checked: list[ALSStart], groups: int, settings: _Settings
) -> list[ALSResult]:
    """:func:`_batch` of every ``groups``-th start together, the batches in threads (each
    start's result is its own, whatever its batch); the CPUs shared out among them for the
    pattern kernels. A failure (or an interrupt of the caller) stops the other batches at
    their next half-step."""
    data.column_norms  # noqa: B018 - cached once here, not by each thread
    if isinstance(data, SparseMatrix):
        data.row_norms  # noqa: B018 - (every U solve reads them)
    stop = threading.Event()
    share = max(1, default_threads() // groups)

    def batch(group: list[ALSStart]) -> list[ALSResult]:
        try:
            with kernel_threads(share):
                return _batch(data, group, settings, stop)
        except BaseException:
            stop.set()  # whichever batch fails, the others stop
            raise

    ordered: list[ALSResult] = [None] * len(checked)  # type: ignore[list-item]
    with ThreadPoolExecutor(groups, thread_name_prefix="bmfdsl-als") as pool:
        futures = [pool.submit(batch, checked[first::groups]) for first in range(groups)]
        try:
            for first, future in enumerate(futures):
                ordered[first::groups] = future.result()
        except BaseException:
            stop.set()  # before the pool joins its threads
            raise
    return ordered


def _batch(
    data: BinaryMatrix,
    checked: list[ALSStart],
    settings: _Settings,
    stop: threading.Event | None,
) -> list[ALSResult]:
    """The runs of :func:`als_batch` from validated ``checked`` starts, one pass over ``A``
    per half-step for all; ``stop``, once set, ends them (their results are then unused)."""
    max_solves, patience, one_hot = settings.max_solves, settings.patience, settings.one_hot
    solve_options, deadline = settings.solve_options, settings.deadline
    device = solve_options["device"]
    backend = solve_options["backend"]
    m, n = data.shape
    rank = checked[0].U.shape[1]
    # Solves over the code table are a function of the other factor alone (beyond it a row's
    # local search also reads its start; a backend samples): then a solve that gives back the
    # factor it replaced marks a fixed point, which every later solve would repeat.
    exact = backend is None and rank <= MAX_ENUMERATION_RANK
    # Small in-memory problems (restarts on paper-sized matrices) run the whole loop in one
    # compiled kernel: no per-solve Python overhead. Larger ones (and array devices) use the
    # chunked BLAS route.
    held = data.A if isinstance(data, InMemoryMatrix) else None
    compiled = (
        held is not None
        and backend is None
        and device == "cpu"
        and fits_compiled_kernel(rank, m * n)
    )
    # Aᵀ U of the starts: one pass for all (the first V step needs it anyway), except where
    # the error is known and the compiled loop needs no statistics
    lacking = [
        index
        for index, start in enumerate(checked)
        if start.cross is None and not (compiled and start.error is not None)
    ]
    crosses = [start.cross for start in checked]
    for index, cross in zip(
        lacking, _transposed_crosses(data, [checked[i].U for i in lacking], device), strict=True
    ):
        crosses[index] = cross
    results: list[ALSResult | None] = [None] * len(checked)
    runs: list[_Run] = []
    for index, (start, cross_t) in enumerate(zip(checked, crosses, strict=True)):
        U, V = start.U, start.V
        if start.error is not None:
            start_error = int(start.error)
        else:
            assert cross_t is not None
            start_error = int(data.total - 2 * np.sum(cross_t * V) + np.sum(gram(U) * gram(V)))
        start_feasible = _is_one_hot(U if one_hot == "U" else V) if one_hot else True
        side = "U" if one_hot == "U" and not start_feasible else "V"
        if compiled:
            assert held is not None
            results[index] = _als_compiled(
                held, U, V, one_hot, max_solves, patience, side, start_error, start_feasible
            )
        else:
            run = _Run(index, U, V, cross_t, side, [start_error], exact)
            run.best = (U, V, start_error if start_feasible else None)
            runs.append(run)
    while stop is None or not stop.is_set():
        running = [run for run in runs if run.running(max_solves)]
        if deadline is not None and time.perf_counter() > deadline:
            for run in running:
                run.stopped = run.stopped or run.solves > 0  # the first solve always runs
            running = [run for run in running if not run.stopped]
        if not running:
            break
        _step_V([run for run in running if run.side == "V"], data, one_hot, solve_options)
        _step_U([run for run in running if run.side == "U"], data, one_hot, solve_options)
        for run in running:
            run.flip(patience)
    for run in runs:
        best_U, best_V, best_error = run.best
        results[run.index] = ALSResult(
            U=best_U,
            V=best_V,
            error=run.history[0] if best_error is None else best_error,
            solves=run.solves,
            history=run.history,
        )
    return [result for result in results if result is not None]


@dataclass
class _Run:
    """One start's ALS in a batch: its current pair, side, best pair and stopping state."""

    index: int
    U: np.ndarray
    V: np.ndarray
    cross_t: np.ndarray | None  # Aᵀ U of the current U, when in hand
    side: str
    history: list[int]
    exact: bool  # whether a solve depends on the other factor alone (see als_batch)
    best: tuple[np.ndarray, np.ndarray, int | None] = field(init=False)
    solves: int = 0
    stalled: int = 0
    stopped: bool = False
    settled: bool = False  # at a fixed point: every later solve would repeat the pair

    def running(self, max_solves: int) -> bool:
        """Whether another solve is due (an exact pair needs no polishing)."""
        return not self.stopped and self.solves < max_solves and self.best[2] != 0

    def record(self, error: int, replaced: np.ndarray) -> None:
        """Count a solve that gave ``(self.U, self.V)`` with ``error``; ``replaced`` is the
        factor the solve replaced. Past the first solve, the other factor was solved from
        ``replaced``, so an exact solve that gives ``replaced`` back settles the run."""
        solved = self.U if self.side == "U" else self.V
        self.solves += 1
        self.history.append(error)
        self.settled = self.exact and self.solves > 1 and np.array_equal(solved, replaced)
        if self.best[2] is None or error < self.best[2]:
            self.best, self.stalled = (self.U, self.V, error), 0
        else:
            self.stalled += 1

    def flip(self, patience: int) -> None:
        """Stop after an exact pair, ``patience`` solves without improvement or at a fixed
        point (the same best pair as going on to ``patience``), else turn."""
        if self.history[-1] == 0 or self.stalled >= patience or self.settled:
            self.stopped = True
        self.side = "U" if self.side == "V" else "V"


def _checked_start(start: ALSStart, shape: tuple[int, int]) -> ALSStart:
    m, n = shape
    U = check_binary_matrix(start.U, name="U")
    V = check_binary_matrix(start.V, name="V")
    if U.shape[0] != m or V.shape[0] != n or U.shape[1] != V.shape[1]:
        raise InvalidMatrixError(
            f"U must be {m} x r and V {n} x r for a {m}x{n} A; got U {U.shape} and V {V.shape}"
        )
    return replace(start, U=U, V=V)


def _transposed_crosses(data: BinaryMatrix, Us: list[np.ndarray], device: str) -> list[np.ndarray]:
    """``Aᵀ U`` for each ``U`` of ``Us`` (one rank): one pass over ``A`` for all, exact."""
    if not Us:
        return []
    rank = Us[0].shape[1]
    stacked = data.transposed_cross(np.concatenate(Us, axis=1), device=device)
    return [
        np.ascontiguousarray(stacked[:, index * rank : (index + 1) * rank])
        for index in range(len(Us))
    ]


def _step_V(
    runs: list[_Run], data: BinaryMatrix, one_hot: str | None, solve_options: dict[str, Any]
) -> None:
    """The V half-step of ``runs``: their missing ``Aᵀ U`` in one pass, then each solve."""
    lacking = [run for run in runs if run.cross_t is None]
    for run, cross in zip(
        lacking,
        _transposed_crosses(data, [run.U for run in lacking], solve_options["device"]),
        strict=True,
    ):
        run.cross_t = cross
    for run in runs:
        assert run.cross_t is not None
        replaced = run.V
        run.V, error = solve_bls_from_stats(
            run.cross_t,
            gram(run.U),
            data.column_norms,
            one_hot=one_hot == "V",
            start=run.V,  # beyond exact ranks: the local search never worsens V
            **solve_options,
        )
        run.cross_t = None
        run.record(error, replaced)


def _step_U(
    runs: list[_Run], data: BinaryMatrix, one_hot: str | None, solve_options: dict[str, Any]
) -> None:
    """The U half-step of ``runs``: one pass over ``A`` for all (a dask ``A`` gives each
    ``Aᵀ U`` for the next step in the same pass)."""
    if not runs:
        return
    solved = solve_bls_many(
        data,
        [run.V for run in runs],
        one_hot=one_hot == "U",
        starts=[run.U for run in runs],
        **solve_options,
    )
    for run, (U, error, cross) in zip(runs, solved, strict=True):
        replaced, run.U, run.cross_t = run.U, U, cross
        run.record(error, replaced)


def _check_count(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _is_one_hot(factor: np.ndarray) -> bool:
    return bool(np.all(factor.sum(axis=1) == 1))


def _als_compiled(
    A: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    one_hot: str | None,
    max_solves: int,
    patience: int,
    side: str,
    start_error: int,
    start_feasible: bool,
) -> ALSResult:
    """The loop of :func:`als` in one numba kernel (same steps, ties and stopping rule)."""
    rank = U.shape[1]
    history = np.zeros(max_solves + 1, dtype=np.int64)
    history[0] = start_error
    best_U, best_V, best_error, solves = als_loop(
        A,
        np.ascontiguousarray(A.T),
        U.copy(),
        V.copy(),
        code_table(rank, one_hot == "U"),
        code_table(rank, one_hot == "V"),
        max_solves,
        patience,
        side == "U",
        start_error if start_feasible else -1,
        history,
        False,  # ties go to the lowest code index, as on the chunked route
    )
    if best_error < 0:  # no solve ran: the (infeasible) start is all there is
        best_U, best_V, best_error = U, V, start_error
    return ALSResult(
        U=best_U,
        V=best_V,
        error=int(best_error),
        solves=int(solves),
        history=[int(h) for h in history[: solves + 1]],
    )
