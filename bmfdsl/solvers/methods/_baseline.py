"""The paper's baseline (S1 Algorithm 2): eliminate the densest row or column, r times."""

from __future__ import annotations

from typing import Any

import numpy as np

from bmfdsl.validation import check_binary_matrix, check_rank


def baseline(A: Any, rank: int, *, random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Rank-``r`` BMF by densest row / column elimination (Malik et al. 2021, S1 Algorithm 2).

    For ``k = 1..r``: with residual ``E = A - U Vᵀ``, take the first row ``i'`` with the most
    ones and the first column ``j'`` with the most ones (minimum index on ties). If the column
    holds strictly more ones than the row, factor ``k`` covers that column
    (``U[:, k] = E[:, j']``, ``V[j', k] = 1``); otherwise it covers the row (``U[i', k] = 1``,
    ``V[:, k] = E[i', :]``). Finally, if the all-ones rank-1 matrix is strictly better, return
    it (``U = [1, 0, ...]``, ``V = [1, 0, ...]``).

    Every step zeroes a row or a column of the residual, so ``U Vᵀ <= A`` stays 0/1 and the
    residual keeps only 0/1 entries.

    Args:
        A: ``m x n`` 0/1 matrix; a scipy sparse one is densified (this method works on
            dense residuals; :func:`bmfdsl.factorize` hands it only the sampled core when
            ``sample_rows`` is set).
        rank: target rank ``r``.
        random_state: ignored (the method is deterministic); accepted so that every method in
            :data:`bmfdsl.solvers.methods.METHODS` is called the same way.

    Returns:
        ``(U, V)``: ``m x r`` and ``n x r`` ``int8`` arrays.

    >>> U, V = baseline([[1, 0], [1, 0], [1, 1]], 1)
    >>> U.ravel().tolist(), V.ravel().tolist()
    ([1, 1, 1], [1, 0])
    """
    A = check_binary_matrix(A)
    rank = check_rank(rank, A.shape)
    m, n = A.shape
    U = np.zeros((m, rank), dtype=np.int8)
    V = np.zeros((n, rank), dtype=np.int8)
    residual = A.copy()  # stays 0/1: see the docstring
    row_sums = residual.sum(axis=1, dtype=np.int64)
    column_sums = residual.sum(axis=0, dtype=np.int64)
    for k in range(rank):
        densest_row = int(np.argmax(row_sums))  # argmax returns the first maximum
        densest_column = int(np.argmax(column_sums))
        if row_sums[densest_row] < column_sums[densest_column]:
            covered = residual[:, densest_column].copy()
            U[:, k] = covered
            V[densest_column, k] = 1
            residual[:, densest_column] = 0
            row_sums -= covered
            column_sums[densest_column] = 0
        else:
            covered = residual[densest_row].copy()
            U[densest_row, k] = 1
            V[:, k] = covered
            residual[densest_row] = 0
            column_sums -= covered
            row_sums[densest_row] = 0
    ones = int(np.count_nonzero(A))
    all_ones_error = m * n - ones
    if all_ones_error < int(row_sums.sum()):
        U[:] = 0
        V[:] = 0
        U[:, 0] = 1
        V[:, 0] = 1
    return U, V
