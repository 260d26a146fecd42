"""Masked and weighted BMF: ``min Σ_ij c_ij (a_ij - (U Vᵀ)_ij)²`` over 0/1 ``U``, ``V``.

``c_ij = 0`` marks a missing entry (masked BMF), other values weigh entries. The solver is
exact weighted binary least squares for one factor given the other (every row code is
scored with two matrix products) inside alternating minimisation, restarted from the
plain BMF portfolio's answer on the observed part (missing entries read as 0:
:func:`~bmfdsl.solvers.native.solve_bmf` with its default, counted budget), from the paper's
baseline on it and from seeded random factors. The plain answer makes the weighted search
as strong as plain BMF's: with every entry observed at weight 1 it starts from the plain
answer, and with entries missing it is never worse, on the observed entries, than that plain
solve of the matrix with them filled with 0 (32 random restarts alone had left an exact
rank-3 40 x 20 matrix at error 48, and masked planted matrices at 2-9x the fill-and-solve
error). The restarts are counted (``num_reads`` of them, a
:class:`~bmfdsl.timings.WorkBudget` in restarts) and the plain solve's budget counts work, so
the same seed always gives the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import code_table, weighted_squared_error
from bmfdsl.solvers.methods import baseline
from bmfdsl.solvers.native._portfolio import solve_bmf
from bmfdsl.solvers.native._settings import check_warm_starts
from bmfdsl.timings import WorkBudget

#: Row codes are enumerated: 2**rank of them, so rank is capped.
MAX_RANK = 12
_MAX_ROUNDS = 50


def weighted_bls(
    A: np.ndarray, C: np.ndarray, V: np.ndarray, *, exactly_one: bool = False
) -> tuple[np.ndarray, float]:
    """The best 0/1 ``U`` for fixed ``V``: ``argmin Σ c (A - U Vᵀ)²``, row by row, exactly.

    Every row code is scored (only the ``r`` one-hot codes with ``exactly_one``; beyond
    rank 12 nothing else is taken); of equally good codes a row takes the first in
    ``"lexicographic"`` order of :func:`bmfdsl.linalg.code_table`.

    >>> A = np.array([[1, 1], [0, 1]]); C = np.array([[1, 0], [1, 1]])
    >>> U, error = weighted_bls(A, C, np.array([[1], [1]]))
    >>> U.ravel().tolist(), error
    ([1, 0], 1.0)
    """
    if V.shape[1] > MAX_RANK and not exactly_one:  # 2**r codes a row, in float64
        raise InvalidParameterError(
            f"masked/weighted BMF enumerates 2**rank row codes; rank {V.shape[1]} > {MAX_RANK}"
        )
    codes = code_table(V.shape[1], exactly_one, "lexicographic").astype(np.float64)
    P = codes @ V.astype(np.float64).T  # (K, n): each code's row of U Vᵀ
    Af = A.astype(np.float64)
    cost = (C * Af * Af).sum(axis=1)[:, None] - 2.0 * (C * Af) @ P.T + C @ (P * P).T
    best = np.argmin(cost, axis=1)
    return codes[best].astype(np.int8), float(cost[np.arange(A.shape[0]), best].sum())


def weighted_als(
    A: np.ndarray, C: np.ndarray, U: np.ndarray, V: np.ndarray, one_hot: str | None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Alternate exact weighted BLS for V and U until neither improves."""
    error = weighted_squared_error(A, U, V, C)
    for _ in range(_MAX_ROUNDS):
        V, _ = weighted_bls(A.T, C.T, U, exactly_one=one_hot == "V")
        U, new_error = weighted_bls(A, C, V, exactly_one=one_hot == "U")
        if new_error >= error - 1e-9:
            return U, V, min(error, new_error)
        error = new_error
    return U, V, error


@dataclass
class WeightedResult:
    """Solutions best first (``(U, V, error)``) and what was done."""

    solutions: list[tuple[np.ndarray, np.ndarray, float]]
    info: dict[str, Any] = field(default_factory=dict)


def solve_weighted_bmf(
    A: np.ndarray,
    C: np.ndarray,
    rank: int,
    *,
    one_hot: str | None = None,
    num_reads: int = 32,
    seed: int | None = None,
    initial_factors: Any = (),
    num_solutions: int = 1,
) -> WeightedResult:
    """Weighted BMF by restarted exact alternating minimisation (see the module docs).

    >>> A = np.kron(np.eye(3, dtype=np.int8), np.ones((4, 3), dtype=np.int8))
    >>> C = np.ones(A.shape)
    >>> C[0, 0] = C[5, 4] = 0  # two entries missing
    >>> solve_weighted_bmf(A, C, 3, seed=0).solutions[0][2]
    0.0
    """
    if rank > MAX_RANK:
        raise InvalidParameterError(
            f"masked/weighted BMF enumerates 2**rank row codes; rank {rank} > {MAX_RANK}"
        )
    m, n = A.shape
    rng = np.random.default_rng(seed)
    observed = (A * (C > 0)).astype(np.int8)
    seeds = check_warm_starts(initial_factors, (m, n), rank)
    # the seed a plain model's solve gets: with every entry observed at weight 1, the answer
    # the plain model would start from (the random restarts draw from rng as before)
    plain = solve_bmf(observed, rank, one_hot=one_hot, seed=seed)
    seeds.append(plain.solutions[0][:2])
    seeds.append(baseline(observed, rank))
    found: dict[bytes, tuple[np.ndarray, np.ndarray, float]] = {}
    for U, V in seeds:
        _restart(A, C, U, V, one_hot, found)
    restarts = WorkBudget(work_limit=num_reads)  # one unit per restart from random factors
    while restarts.affords(1):
        if one_hot == "V":
            V = np.eye(rank, dtype=np.int8)[rng.integers(0, rank, n)]
        else:
            V = (rng.random((n, rank)) < 0.5).astype(np.int8)
        _restart(A, C, np.zeros((m, rank), np.int8), V, one_hot, found)
        restarts.spend(1)
    starts = len(seeds) + round(restarts.work)
    ranked = sorted(found.values(), key=lambda s: s[2])
    return WeightedResult(ranked[:num_solutions], {"starts": starts, "work": {"restarts": starts}})


def _restart(
    A: np.ndarray,
    C: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    one_hot: str | None,
    found: dict[bytes, tuple[np.ndarray, np.ndarray, float]],
) -> None:
    """Weighted ALS from ``(U, V)`` (an all-zero ``U``, or any with a one-hot ``U``, is solved
    for first) into ``found``, keyed by the factors: the first of equal answers stays."""
    if one_hot == "U" or not U.any():
        U, _ = weighted_bls(A, C, V, exactly_one=one_hot == "U")
    if one_hot == "V" and (V.sum(axis=1) != 1).any():
        V, _ = weighted_bls(A.T, C.T, U, exactly_one=True)
    U, V, error = weighted_als(A, C, U.astype(np.int8), V.astype(np.int8), one_hot)
    found.setdefault(U.tobytes() + V.tobytes(), (U, V, error))
