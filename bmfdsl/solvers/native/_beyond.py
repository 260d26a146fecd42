"""Ranks beyond enumeration: the native solver without the ``2**r`` code tables.

The annealing kernels and exact row solves score every one of a row's ``2**r`` codes: at
rank 16 on MNIST 1,000 x 784 that took 7.3 s, at rank 20 85 s, and rank 32 cannot be
enumerated at all. Above :data:`MAX_CODE_RANK` (free factors only; a one-hot factor has just
``r`` codes) the solver instead

1. solves rank :data:`MAX_CODE_RANK` with the whole portfolio (certificate, seeds, restarts),
2. extends that answer by ``r - MAX_CODE_RANK`` columns: the greedy baseline (S1 Algorithm 2)
   on the ones the sub-rank answer leaves uncovered,
3. polishes the extension, and the caller's warm starts, by ALS whose row solves are the local
   search of :func:`bmfdsl.linalg.solve_rows_local` (1- and 2-flips from the current code, the
   best code of the first 8 columns and zero), which never worsens a factor.

The sub-rank answer with zero extra columns is kept as a candidate, so the error at rank
``r`` never exceeds the error at :data:`MAX_CODE_RANK`. The polish counts its work in the
solve's :class:`~bmfdsl.timings.WorkBudget` (:func:`local_solve_work`); equal seeds give equal
answers.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from bmfdsl.linalg import LOCAL_MOVES_PER_RANK, dense_cross, gram, solve_rows_local
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
    error = -1
    stale = solves = 0
    while solves < max_solves and stale < 2 and error != 0:
        if solves >= 2 and not budget.affords(0.0):  # work limit and deadline
            break
        started = time.perf_counter()
        solve_u = solves % 2 == 0
        data, fixed, solved = (A, V, U) if solve_u else (At, U, V)
        score, code_ops = solve_rows_local(
            dense_cross(data, fixed), gram(fixed), solved, LOCAL_MOVES_PER_RANK * rank
        )
        new = ones + int(score)
        budget.spend(
            local_solve_work(data.shape[0], data.shape[1], int(code_ops)),
            time.perf_counter() - started,
        )
        solves += 1
        if error < 0 or new < error:
            error, stale = new, 0
        else:
            stale += 1
    return U, V, error, solves


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
