"""How far a 0/1 factorization is from its data: ``||A - U Vᵀ||²_F`` and the paper's relative
error, for dense, scipy sparse and dask matrices."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from bmfdsl.linalg._matrix import as_matrix, dense_squared_error
from bmfdsl.validation import check_sparse_structure, is_sparse


def squared_error(A: Any, U: np.ndarray, V: np.ndarray) -> int:
    """``||A - U Vᵀ||²_F`` for 0/1 matrices (the number of wrong entries when UVᵀ is 0/1).

    Computed in row chunks, so the temporaries stay small whatever the size of ``A`` (no
    ``m x n`` integer copy is made); a ``dask.array`` ``A`` is summed block by block, and a
    scipy sparse one as ``||A||² - 2 Σ(A ∘ UVᵀ) + Σ((UᵀU) ∘ (VᵀV))`` (integer ``U``, ``V``;
    see :meth:`bmfdsl.linalg.SparseMatrix.squared_error`). A wrapped matrix
    (:class:`~bmfdsl.linalg.BinaryMatrix`) scores itself.

    >>> squared_error(np.eye(2, dtype=int), np.eye(2, dtype=int), np.eye(2, dtype=int))
    0
    >>> squared_error([[1, 1], [0, 1]], [[1], [1]], [[1], [0]])  # UVᵀ = [[1, 0], [1, 0]]
    3
    """
    U = np.asarray(U)
    V = np.asarray(V)
    if isinstance(A, np.ndarray | list | tuple):  # raw dense data: scored without a checked copy
        return dense_squared_error(np.asarray(A), U, V)
    return as_matrix(A).squared_error(U, V)


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
        check_sparse_structure(A)  # count_nonzero sums duplicates: a kernel that trusts indices
        norm = float(A.count_nonzero())
    else:
        norm = float(np.count_nonzero(A))
    if norm == 0.0:
        return 0.0 if error == 0 else float("inf")
    return float(error) / norm
