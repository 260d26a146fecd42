"""Result types: one decoded sample of a QUBO solve, and a finished factorization."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.matrix import DaskMatrix, InMemoryMatrix, SparseMatrix, is_dask_array
from bmfdsl.validation import is_sparse

__all__ = [
    "DecodedSample",
    "Factorization",
    "gap",
    "relative_error",
    "squared_error",
    "to_jsonable",
]


# Entries of A handled per chunk by squared_error: its temporaries stay a few MB for any m.
_ERROR_CHUNK_ENTRIES = 2**20
_FLOAT64_EXACT = 2**53  # integers below this are exact in float64


def squared_error(A: Any, U: np.ndarray, V: np.ndarray) -> int:
    """``||A - U Vᵀ||²_F`` for 0/1 matrices (the number of wrong entries when UVᵀ is 0/1).

    Computed in row chunks, so the temporaries stay small whatever the size of ``A`` (no
    ``m x n`` integer copy is made); a ``dask.array`` ``A`` is summed block by block, and a
    scipy sparse one as ``||A||² - 2 Σ(A ∘ UVᵀ) + Σ((UᵀU) ∘ (VᵀV))`` (integer ``U``, ``V``;
    see :meth:`bmfdsl.matrix.SparseMatrix.squared_error`).

    >>> squared_error(np.eye(2, dtype=int), np.eye(2, dtype=int), np.eye(2, dtype=int))
    0
    >>> squared_error([[1, 1], [0, 1]], [[1], [1]], [[1], [0]])  # UVᵀ = [[1, 0], [1, 0]]
    3
    """
    U = np.asarray(U)
    V = np.asarray(V)
    if is_dask_array(A) or isinstance(A, DaskMatrix):
        data = A if isinstance(A, DaskMatrix) else DaskMatrix(A)
        per_block = data.sum_blocks(
            _block_squared_error, data.row_aligned(U), V, shape=(1,), dtype=np.int64
        )
        return int(per_block[0])
    if isinstance(A, SparseMatrix) or is_sparse(A):
        return (A if isinstance(A, SparseMatrix) else SparseMatrix(A)).squared_error(U, V)
    A = A.A if isinstance(A, InMemoryMatrix) else np.asarray(A)
    m, n = A.shape
    step = max(1, _ERROR_CHUNK_ENTRIES // max(n, 1))
    # Exact in float64 (BLAS speed) while every chunk's sum of squares stays below 2^53.
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


def _block_squared_error(block: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.ndarray:
    return np.array([squared_error(block, U, V)], dtype=np.int64)


def relative_error(error: float, A: Any) -> float:
    """The paper's measure ``||A - UVᵀ||²_F / ||A||²_F``.

    ``A`` is the 0/1 matrix, or directly its number of ones ``||A||²_F`` (an int: what large
    and distributed pipelines keep instead of the matrix).

    A matrix with no ones has ``||A||²_F = 0``: its relative error is defined as 0 when the
    factorization is exact and ``inf`` otherwise (never a division by zero).

    >>> relative_error(3, np.ones((2, 3)))
    0.5
    >>> relative_error(3, 6)
    0.5
    >>> relative_error(0, np.zeros((2, 2)))
    0.0
    """
    if isinstance(A, numbers.Integral):
        norm = float(A)
    elif is_sparse(A):
        norm = float(A.count_nonzero())
    else:
        norm = float(np.count_nonzero(A))
    if norm == 0.0:
        return 0.0 if error == 0 else float("inf")
    return float(error) / norm


def gap(error: int, lower_bound: int) -> float:
    """The proven relative gap ``(error - lower_bound) / error`` (0 when ``error`` is 0).

    >>> gap(10, 10), gap(10, 0)
    (0.0, 1.0)
    """
    if error <= 0:
        return 0.0
    return max(0.0, (error - lower_bound) / error)


@dataclass(frozen=True)
class DecodedSample:
    """One sample of a solver, decoded into the factor matrices.

    ``energy`` is the BQM energy of the decoded assignment, recomputed at the weights used
    (a structure-aware solver's U, V get their feasible completion first); ``error`` is the
    model's error metric recomputed from U, V (``||A - UVᵀ||²_F`` for plain BMF; a float for
    weighted models); ``broken`` counts violated constraints per constraint group.
    """

    U: np.ndarray
    V: np.ndarray
    energy: float
    error: int | float
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
        lower_bound: a proven lower bound on the optimal error of this problem (see
            :mod:`bmfdsl.bounds`; ``info["lower_bound"]`` says where it came from).
    """

    U: np.ndarray
    V: np.ndarray
    error: int
    relative_error: float
    broken_constraints: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    lower_bound: int = 0

    @property
    def gap(self) -> float:
        """The proven relative gap ``(error - lower_bound) / error`` (0 when error is 0).

        >>> Factorization(np.zeros((2, 1)), np.zeros((2, 1)), 4, 1.0, lower_bound=3).gap
        0.25
        """
        return gap(self.error, self.lower_bound)

    @property
    def certified_optimal(self) -> bool:
        """True when the error is proven optimal (it equals the lower bound)."""
        return self.error <= self.lower_bound

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
            "lower_bound": int(self.lower_bound),
            "gap": self.gap,
            "certified_optimal": self.certified_optimal,
            "info": self.info,
        }


def to_jsonable(value: Any) -> Any:
    """A JSON-friendly copy of solver or run info.

    Numpy scalars become Python values, small arrays lists, non-finite floats strings.

    >>> to_jsonable({"a": np.int64(2), "b": (np.float32(0.5), float("inf"))})
    {'a': 2, 'b': [0.5, 'inf']}
    """
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return to_jsonable(value.item())
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= 64 else f"<array {value.shape}>"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return repr(value)
