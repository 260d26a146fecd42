"""Result types: one decoded sample of a QUBO solve, and a finished factorization."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DecodedSample", "Factorization", "relative_error", "squared_error"]


def squared_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    """``||A - U Vᵀ||²_F`` for 0/1 matrices (the number of wrong entries when UVᵀ is 0/1).

    >>> squared_error(np.eye(2, dtype=int), np.eye(2, dtype=int), np.eye(2, dtype=int))
    0
    """
    residual = (
        np.asarray(A, dtype=np.int64)
        - np.asarray(U, dtype=np.int64) @ np.asarray(V, dtype=np.int64).T
    )
    return int(np.einsum("ij,ij->", residual, residual))


def relative_error(error: float, A: np.ndarray) -> float:
    """The paper's measure ``||A - UVᵀ||²_F / ||A||²_F``.

    A matrix with no ones has ``||A||²_F = 0``: its relative error is defined as 0 when the
    factorization is exact and ``inf`` otherwise (never a division by zero).

    >>> relative_error(3, np.ones((2, 3)))
    0.5
    >>> relative_error(0, np.zeros((2, 2)))
    0.0
    """
    norm = float(np.count_nonzero(A))
    if norm == 0.0:
        return 0.0 if error == 0 else float("inf")
    return float(error) / norm


@dataclass(frozen=True)
class DecodedSample:
    """One sample of a solver, decoded into the factor matrices.

    ``energy`` is the BQM energy of the raw sample; ``error`` is ``||A - UVᵀ||²_F`` recomputed
    from the decoded U, V; ``broken`` counts violated constraints per constraint group.
    """

    U: np.ndarray
    V: np.ndarray
    energy: float
    error: int
    broken: dict[str, int]
    num_occurrences: int = 1

    @property
    def feasible(self) -> bool:
        """True when no constraint is broken."""
        return not any(self.broken.values())


@dataclass
class Factorization:
    """A finished binary matrix factorization ``A ≈ U Vᵀ``.

    Attributes:
        U: ``m x r`` 0/1 integer array.
        V: ``n x r`` 0/1 integer array.
        error: ``||A - UVᵀ||²_F``.
        relative_error: ``error / ||A||²_F`` (see :func:`relative_error` for an empty A).
        broken_constraints: violated constraints per group in the solver's raw answer.
        info: method, backend, per-stage timings in seconds, energies, certificates.
    """

    U: np.ndarray
    V: np.ndarray
    error: int
    relative_error: float
    broken_constraints: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        """The number of columns of U and V."""
        return int(self.U.shape[1])

    def reconstruct(self) -> np.ndarray:
        """The Boolean-free product ``U Vᵀ`` as an integer array."""
        return np.asarray(self.U, dtype=np.int64) @ np.asarray(self.V, dtype=np.int64).T

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable summary (factors as nested lists)."""
        return {
            "U": self.U.tolist(),
            "V": self.V.tolist(),
            "error": int(self.error),
            "relative_error": float(self.relative_error),
            "broken_constraints": dict(self.broken_constraints),
            "info": self.info,
        }
