"""Ranks beyond enumeration: the native solver without the ``2**r`` code tables.

The annealing kernels and exact row solves score every one of a row's ``2**r`` codes: at
rank 16 on MNIST 1,000 x 784 that took 7.3 s, at rank 20 85 s, and rank 32 cannot be
enumerated at all. Above :data:`MAX_CODE_RANK` the solver instead

1. solves rank :data:`MAX_CODE_RANK` with the whole portfolio (certificate, seeds, restarts),
2. extends that answer by ``r - MAX_CODE_RANK`` columns: the greedy baseline (S1 Algorithm 2)
   on the ones the sub-rank answer leaves uncovered,
3. polishes the extension, and the caller's warm starts, by ALS whose row solves are the local
   search of :func:`bmfdsl.linalg.solve_rows_local` (1- and 2-flips from the current code, the
   best code of the first 8 columns and zero), which never worsens a factor.

A one-hot model (every row of ``U``, or of ``V``, one cluster) goes the same way, with
steps 2-3 made for it (:func:`polish_one_hot_beyond`): its free factor has ``2**r`` codes, yet
with one cluster per row its Gram matrix is diagonal, so exact ALS is cheap at any rank (each
row to its nearest center; each center bit by majority). Step 2 adds one cluster at a time,
centred on the row the answer fits worst, each followed by that ALS; step 3 is k-means++
restarts while the budget lasts (before, annealing over the ``2**r`` codes ran out of budget
beyond rank 12: on 300 x 60 planted blocks the error rose from 800 at r = 12 to 844 at
r = 13-16 and 1,221 at r = 24, in 9 s).

The sub-rank answer with zero extra columns (empty clusters) is kept as a candidate, so the
error at rank ``r`` never exceeds that of the rank-:data:`MAX_CODE_RANK` answer it extends
(solved on three quarters of the budget: a rank-12 solve with the whole budget can be
lower). The polish counts its work in the solve's :class:`~bmfdsl.timings.WorkBudget`
(:func:`local_solve_work`); equal seeds give equal answers.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from bmfdsl.linalg import (
    LOCAL_MOVES_PER_RANK,
    BinaryMatrix,
    as_matrix,
    dense_cross,
    gram,
    solve_rows_local,
)
from bmfdsl.solvers.methods import baseline
from bmfdsl.solvers.native._settings import NativeSettings, local_solve_work
from bmfdsl.timings import WorkBudget

#: Largest rank whose row codes are enumerated (annealing, exact BLS); beyond it, see above.
MAX_CODE_RANK = 12


def local_als(
    A: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    budget: WorkBudget,
    max_solves: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """ALS from ``(U, V)`` with local-search row solves (U first), until two solves in a row
    bring no gain, ``max_solves`` solves, or the budget (after the first two solves) runs
    out. Returns ``(U, V, error, solves)``; no solve worsens the error.

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((2, 2), dtype=np.int8))
    >>> start = np.array([[1, 0], [1, 0], [0, 0], [0, 1]], dtype=np.int8)
    >>> U, V, error, solves = local_als(A, start, start.copy(), WorkBudget(), 10)
    >>> error
    0
    """
    A = np.ascontiguousarray(A, dtype=np.int8)
    At = np.ascontiguousarray(A.T)
    U = np.ascontiguousarray(U, dtype=np.int8).copy()
    V = np.ascontiguousarray(V, dtype=np.int8).copy()
    ones = int(np.count_nonzero(A))
    rank = U.shape[1]

    def solve(solve_u: bool) -> tuple[int, float]:
        data, fixed, solved = (A, V, U) if solve_u else (At, U, V)  # solved in place
        score, code_ops = solve_rows_local(
            dense_cross(data, fixed), gram(fixed), solved, LOCAL_MOVES_PER_RANK * rank
        )
        return ones + int(score), local_solve_work(data.shape[0], data.shape[1], int(code_ops))

    error, solves = _alternate(solve, budget, max_solves)
    return U, V, error, solves


def _alternate(
    solve: Callable[[bool], tuple[int, float]], budget: WorkBudget, max_solves: int
) -> tuple[int, int]:
    """ALS's rounds and stopping rule, one for every ALS of this module: ``solve(solve_u)``
    makes one half-step (``U`` first) and returns the error after it and its work units;
    it stops after two solves in a row without gain, ``max_solves`` solves, an exact pair, or
    the budget (after the first two solves). Returns ``(the least error, solves)``."""
    error = -1
    stale = solves = 0
    while solves < max_solves and stale < 2 and error != 0:
        if solves >= 2 and not budget.affords(0.0):  # work limit and deadline
            break
        started = time.perf_counter()
        new, work = solve(solves % 2 == 0)
        budget.spend(work, time.perf_counter() - started)
        solves += 1
        if error < 0 or new < error:
            error, stale = new, 0
        else:
            stale += 1
    return error, solves


def extend(A: np.ndarray, U: np.ndarray, V: np.ndarray, rank: int) -> tuple[np.ndarray, ...]:
    """``(U, V)`` with ``rank - r`` more columns: the greedy baseline on the ones of ``A``
    that ``U Vᵀ`` leaves uncovered (zero columns when none are left).

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((2, 2), dtype=np.int8))
    >>> half = np.array([[1], [1], [0], [0]], dtype=np.int8)
    >>> U, V = extend(A, half, half, 2)  # the new column: the baseline's densest row
    >>> U[:, 1].tolist(), V[:, 1].tolist()
    ([0, 0, 1, 0], [0, 0, 1, 1])
    """
    extra = rank - U.shape[1]
    covered = (U.astype(np.int64) @ V.T.astype(np.int64)) > 0
    uncovered = (A.astype(bool) & ~covered).astype(np.int8)
    if extra <= 0:
        return U, V
    if uncovered.any() and extra <= min(uncovered.shape):
        new_U, new_V = baseline(uncovered, extra)
    else:
        new_U = np.zeros((A.shape[0], extra), np.int8)
        new_V = np.zeros((A.shape[1], extra), np.int8)
    return (
        np.ascontiguousarray(np.hstack([U, np.asarray(new_U, np.int8)])),
        np.ascontiguousarray(np.hstack([V, np.asarray(new_V, np.int8)])),
    )


def polish_beyond(
    A: np.ndarray,
    rank: int,
    sub_rank_answer: tuple[np.ndarray, np.ndarray, int],
    warm: list[tuple[np.ndarray, np.ndarray]],
    settings: NativeSettings,
    budget: WorkBudget,
) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], dict[str, Any]]:
    """Steps 2-3 of the module docstring: the candidates ``(error, U, V)`` best first, and
    what was done (solves, extra columns)."""
    U0, V0, error0 = sub_rank_answer
    zero = np.zeros((A.shape[0], rank - U0.shape[1]), np.int8)
    zero_v = np.zeros((A.shape[1], rank - U0.shape[1]), np.int8)
    candidates = [(int(error0), np.hstack([U0, zero]), np.hstack([V0, zero_v]))]
    solves = 0
    for U, V in [extend(A, U0, V0, rank), *warm]:
        U, V, error, done = local_als(A, U, V, budget, settings.max_solves)
        solves += done
        candidates.append((error, U, V))
    candidates.sort(key=lambda item: item[0])  # stable: the sub-rank answer first on ties
    return candidates, {"local_als_solves": solves, "sub_rank": int(U0.shape[1])}


class OneHotData:
    """``A`` (``m x n``, 0/1) as the one-hot polish reads it: its ones, and on first use (a
    pass over ``A`` each) the ones per row and ``A`` and ``Aᵀ`` wrapped for exact BLS."""

    def __init__(self, A: np.ndarray) -> None:
        self.A = np.ascontiguousarray(A, dtype=np.int8)
        self.ones = int(np.count_nonzero(self.A))  # (fast: what a restart's cost needs)

    @functools.cached_property
    def row_ones(self) -> np.ndarray:
        """The ones of each row (int64)."""
        return self.A.sum(axis=1, dtype=np.int64)

    @functools.cached_property
    def rows(self) -> BinaryMatrix:
        """``A`` for ``U``'s solves."""
        return as_matrix(self.A)

    @functools.cached_property
    def columns(self) -> BinaryMatrix:
        """``Aᵀ`` for ``V``'s solves."""
        return as_matrix(np.ascontiguousarray(self.A.T))

    def step_work(self, rows: int, columns: int, rank: int) -> float:
        """Work units of one exact BLS step: a pass over the ones per factor column
        (``A F``) and ``rank`` scores per row."""
        return local_solve_work(rows, columns, (self.ones + rows) * rank)


def one_hot_als(
    data: OneHotData, V: np.ndarray, budget: WorkBudget, max_solves: int
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Exact ALS from ``V`` with a one-hot ``U`` (``U`` first, so no start ``U`` is needed) by
    :func:`~bmfdsl.solvers.solve_bls_many`: each row of ``A`` goes to its nearest center
    (the lowest index on ties), and ``V``, whose Gram matrix ``UᵀU`` is then diagonal, is
    solved without a code table at any rank (each center bit by majority). Stops as
    :func:`local_als` does; returns ``(U, V, error, solves)``; no solve worsens the error.

    >>> A = np.kron(np.eye(2, dtype=np.int8), np.ones((2, 2), dtype=np.int8))
    >>> V = np.array([[1, 0], [0, 0], [0, 0], [0, 1]], dtype=np.int8)
    >>> U, V, error, solves = one_hot_als(OneHotData(A), V, WorkBudget(), 10)
    >>> U.tolist(), V.T.tolist(), error
    ([[1, 0], [1, 0], [0, 1], [0, 1]], [[1, 1, 0, 0], [0, 0, 1, 1]], 0)
    """
    from bmfdsl.solvers import solve_bls_many

    m, n = data.A.shape
    V = np.ascontiguousarray(V, dtype=np.int8)
    rank = V.shape[1]
    U = np.zeros((m, rank), dtype=np.int8)

    def solve(solve_u: bool) -> tuple[int, float]:
        nonlocal U, V
        if solve_u:
            ((U, error, _),) = solve_bls_many(data.rows, [V], one_hot=True)
            return error, data.step_work(m, n, rank)
        ((V, error, _),) = solve_bls_many(data.columns, [U])
        return error, data.step_work(n, m, rank)

    error, solves = _alternate(solve, budget, max_solves)
    return U, V, error, solves


def extend_one_hot(
    data: OneHotData,
    U: np.ndarray,
    V: np.ndarray,
    rank: int,
    budget: WorkBudget,
    max_solves: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(U, V)`` (``U`` one-hot) with clusters added up to ``rank``, one at a time: its center
    is the row of ``A`` that the answer fits worst (the first on ties; an empty cluster once
    every row fits exactly), then :func:`one_hot_als`. Returns ``(U, V, error, solves)``.

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((2, 2), dtype=np.int8))
    >>> U, V = np.ones((6, 1), dtype=np.int8), A[:1].T.copy()  # one cluster: the first block
    >>> U, V, error, _ = extend_one_hot(OneHotData(A), U, V, 3, WorkBudget(), 10)
    >>> error, V.sum(axis=0).tolist()
    (0, [2, 2, 2])
    """
    A = data.A
    U = np.ascontiguousarray(U, dtype=np.int8)
    V = np.ascontiguousarray(V, dtype=np.int8)
    error: int | None = None
    solves = 0
    while V.shape[1] < rank:
        cluster = np.argmax(U, axis=1)
        cross = dense_cross(A, V)[np.arange(A.shape[0]), cluster]
        fits = data.row_ones + V.sum(axis=0, dtype=np.int64)[cluster] - 2 * cross
        worst = int(np.argmax(fits))
        center = A[worst] if fits[worst] > 0 else np.zeros(A.shape[1], dtype=np.int8)
        V = np.ascontiguousarray(np.column_stack([V, center]), dtype=np.int8)
        U, V, error, done = one_hot_als(data, V, budget, max_solves)
        solves += done
    if error is None:  # nothing to add: the pair polished as it is
        U, V, error, solves = one_hot_als(data, V, budget, max_solves)
    return U, V, error, solves


def seeded_clusters(
    data: OneHotData,
    V: np.ndarray,
    rank: int,
    rng: np.random.Generator,
    budget: WorkBudget,
    max_solves: int,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """k-means++ for one-hot ``U``: ``V``'s centers (none, or a smaller answer's) and more up
    to ``rank``, each a row of ``A`` drawn with probability proportional to its error under
    the centers so far, the all-zero center included (an empty cluster once every row fits
    exactly), then :func:`one_hot_als`. Returns ``(U, V, error, solves)``.

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((2, 2), dtype=np.int8))
    >>> start, rng = np.zeros((6, 0), dtype=np.int8), np.random.default_rng(0)
    >>> U, V, error, _ = seeded_clusters(OneHotData(A), start, 3, rng, WorkBudget(), 10)
    >>> error
    0
    """
    A = data.A
    m, n = A.shape
    centers = [np.ascontiguousarray(V[:, k], dtype=np.int8) for k in range(V.shape[1])]
    fits = data.row_ones.copy()  # each row's error under the zero center and those so far
    if centers:
        scores = V.sum(axis=0, dtype=np.int64)[None, :] - 2 * dense_cross(A, V)
        fits += np.minimum(scores.min(axis=1), 0)
    started = time.perf_counter()
    while len(centers) < rank:
        total = int(fits.sum())
        drawn = int(rng.choice(m, p=fits / total)) if total else -1
        center = A[drawn] if total else np.zeros(n, dtype=np.int8)
        centers.append(center)
        overlap = dense_cross(A, center[:, None])[:, 0]
        fits = np.minimum(fits, data.row_ones + int(center.sum()) - 2 * overlap)
    added = rank - V.shape[1]
    budget.spend(data.step_work(m, n, added), time.perf_counter() - started)
    return one_hot_als(data, np.column_stack(centers).astype(np.int8), budget, max_solves)


def kmeans_restarts(
    data: OneHotData,
    rank: int,
    starts: list[np.ndarray],
    best: int | None,
    rng: np.random.Generator,
    budget: WorkBudget,
    settings: NativeSettings,
) -> Iterator[tuple[int, np.ndarray, np.ndarray, int]]:
    """:func:`seeded_clusters` restarts, from each of ``starts`` (centers: ``n x k`` with
    ``k <= rank``) in turn: ``(error, U, V, solves)`` of each, while the budget affords one
    (ten solves' worth), at most ``settings.num_reads`` when given, until an answer is exact
    (``best``: the error to beat, ``None`` for none yet), and with ``settings.patience`` until
    that many in a row (and at least as many as it took to find the best) brought no better
    answer."""
    m, n = data.A.shape
    restart_work = 10 * data.step_work(m, n, rank)
    restarts = stale = found_at = 0
    last_seconds = None  # (under a time limit a restart starts while one like the last fits)
    while (
        best != 0
        and (settings.num_reads is None or restarts < settings.num_reads)
        and budget.affords(restart_work, last_seconds)
        and (settings.patience is None or stale < max(settings.patience, found_at))
    ):
        start = starts[restarts % len(starts)]
        started = time.perf_counter()
        U, V, error, solves = seeded_clusters(data, start, rank, rng, budget, settings.max_solves)
        last_seconds = time.perf_counter() - started
        restarts += 1
        if best is None or error < best:
            best, stale, found_at = error, 0, restarts
        else:
            stale += 1
        yield error, U, V, solves


def polish_one_hot_beyond(
    A: np.ndarray,
    rank: int,
    one_hot: str,
    sub_rank_answer: tuple[np.ndarray, np.ndarray, int],
    warm: list[tuple[np.ndarray, np.ndarray]],
    settings: NativeSettings,
    budget: WorkBudget,
    rng: np.random.Generator,
) -> tuple[list[tuple[int, np.ndarray, np.ndarray]], dict[str, Any]]:
    """:func:`polish_beyond` for a one-hot ``one_hot`` side (``"U"`` or ``"V"``): the
    candidates ``(error, U, V)`` best first (the sub-rank answer with empty clusters, its
    extension by :func:`extend_one_hot`, each warm start's ``V`` polished by
    :func:`one_hot_als`, then :func:`kmeans_restarts` from the sub-rank answer's centers and
    from none in turn), and what was done."""
    U0, V0, error0 = sub_rank_answer
    flip = one_hot == "V"  # solved as its transpose, whose U is one-hot
    data = OneHotData(A.T if flip else A)
    hot, free = (V0, U0) if flip else (U0, V0)
    pad = rank - hot.shape[1]
    padded = (
        np.hstack([hot, np.zeros((hot.shape[0], pad), np.int8)]),
        np.hstack([free, np.zeros((free.shape[0], pad), np.int8)]),
    )
    found = [(int(error0), *padded)]
    U, V, error, solves = extend_one_hot(data, hot, free, rank, budget, settings.max_solves)
    found.append((error, U, V))
    for warm_U, warm_V in warm:
        U, V, error, done = one_hot_als(
            data, warm_U if flip else warm_V, budget, settings.max_solves
        )
        solves += done
        found.append((error, U, V))
    best = min(error for error, _, _ in found)
    restarts = 0
    for error, U, V, done in kmeans_restarts(
        data, rank, [free, free[:, :0]], best, rng, budget, settings
    ):
        solves += done
        restarts += 1
        found.append((error, U, V))
    found.sort(key=lambda item: item[0])  # stable: the sub-rank answer first on ties
    candidates = [(error, V, U) if flip else (error, U, V) for error, U, V in found]
    done_info = {"local_als_solves": solves, "sub_rank": int(U0.shape[1]), "restarts": restarts}
    return candidates, done_info
