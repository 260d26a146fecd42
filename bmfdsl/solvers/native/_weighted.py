"""Masked and weighted BMF: ``min Σ_ij c_ij (a_ij - (U Vᵀ)_ij)²`` over 0/1 ``U``, ``V``.

``c_ij = 0`` marks a missing entry (masked BMF), other values weigh entries. The solver is
exact weighted binary least squares for one factor given the other (every row code is
scored with two matrix products) inside alternating minimisation, restarted from the
paper's baseline on the observed part and from seeded random factors. The number of restarts
(``num_reads``) is the budget, so the same seed always gives the same answer.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.solvers.methods import baseline

__all__ = ["WeightedResult", "solve_weighted_bmf", "weighted_bls"]

#: Row codes are enumerated: 2**rank of them, so rank is capped.
MAX_RANK = 12
_MAX_ROUNDS = 50


def _codes(rank: int, one_hot: bool) -> np.ndarray:
    if one_hot:
        return np.eye(rank, dtype=np.float64)
    return np.array(list(itertools.product((0, 1), repeat=rank)), dtype=np.float64)


def weighted_bls(
    A: np.ndarray, C: np.ndarray, V: np.ndarray, *, one_hot: bool = False
) -> tuple[np.ndarray, float]:
    """The best 0/1 ``U`` for fixed ``V``: ``argmin Σ c (A - U Vᵀ)²``, row by row, exactly.

    >>> A = np.array([[1, 1], [0, 1]]); C = np.array([[1, 0], [1, 1]])
    >>> U, error = weighted_bls(A, C, np.array([[1], [1]]))
    >>> U.ravel().tolist(), error
    ([1, 0], 1.0)
    """
    codes = _codes(V.shape[1], one_hot)
    P = codes @ V.astype(np.float64).T  # (K, n): each code's row of U Vᵀ
    Af = A.astype(np.float64)
    cost = (C * Af * Af).sum(axis=1)[:, None] - 2.0 * (C * Af) @ P.T + C @ (P * P).T
    best = np.argmin(cost, axis=1)
    return codes[best].astype(np.int8), float(cost[np.arange(A.shape[0]), best].sum())


def weighted_error(A: np.ndarray, C: np.ndarray, U: np.ndarray, V: np.ndarray) -> float:
    """``Σ c (A - U Vᵀ)²``."""
    residual = A.astype(np.float64) - U.astype(np.float64) @ V.astype(np.float64).T
    return float((C * residual * residual).sum())


def weighted_als(
    A: np.ndarray, C: np.ndarray, U: np.ndarray, V: np.ndarray, one_hot: str | None
) -> tuple[np.ndarray, np.ndarray, float]:
    """Alternate exact weighted BLS for V and U until neither improves."""
    error = weighted_error(A, C, U, V)
    for _ in range(_MAX_ROUNDS):
        V, _ = weighted_bls(A.T, C.T, U, one_hot=one_hot == "V")
        U, new_error = weighted_bls(A, C, V, one_hot=one_hot == "U")
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
    """Weighted BMF by restarted exact alternating minimisation (see the module docs)."""
    if rank > MAX_RANK:
        raise InvalidParameterError(
            f"masked/weighted BMF enumerates 2**rank row codes; rank {rank} > {MAX_RANK}"
        )
    m, n = A.shape
    rng = np.random.default_rng(seed)
    observed = (A * (C > 0)).astype(np.int8)
    U0, V0 = baseline(observed, rank)
    starts: list[tuple[np.ndarray, np.ndarray]] = [
        (np.asarray(U), np.asarray(V)) for U, V in initial_factors
    ]
    starts.append((U0, V0))
    for _ in range(num_reads):
        if one_hot == "V":
            V = np.eye(rank, dtype=np.int8)[rng.integers(0, rank, n)]
        else:
            V = (rng.random((n, rank)) < 0.5).astype(np.int8)
        starts.append((np.zeros((m, rank), np.int8), V))
    found: dict[bytes, tuple[np.ndarray, np.ndarray, float]] = {}
    for U, V in starts:
        if one_hot == "U" or not U.any():
            U, _ = weighted_bls(A, C, V, one_hot=one_hot == "U")
        if one_hot == "V" and (V.sum(axis=1) != 1).any():
            V, _ = weighted_bls(A.T, C.T, U, one_hot=True)
        U, V, error = weighted_als(A, C, U.astype(np.int8), V.astype(np.int8), one_hot)
        key = U.tobytes() + V.tobytes()
        found.setdefault(key, (U, V, error))
    ranked = sorted(found.values(), key=lambda s: s[2])
    return WeightedResult(
        ranked[:num_solutions], {"starts": len(starts), "work": {"restarts": len(starts)}}
    )
