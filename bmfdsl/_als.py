"""Alternating binary least squares (ALS): the paper's polishing step.

Starting from ``(U, V)``, solve ``V`` exactly for fixed ``U``, then ``U`` for fixed ``V``, and so
on (each step is a :mod:`bmfdsl.bls` solve). The paper does at most 20 solves and stops after two
consecutive solves without improvement; the best pair seen is returned, so ALS never worsens a
feasible start.

Both steps only need small statistics of ``A`` (``A V``, ``Aᵀ U`` and row/column sums), so a
``dask.array`` input runs blockwise: the ``U`` step maps over row blocks and the ``V`` step sums
``Aᵀ U`` over them. That works on any dask scheduler, including a distributed cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numba
import numpy as np

from bmfdsl import bls as bls_module
from bmfdsl.bls import (
    _cached_codes,
    _check_chunk_rows,
    _code_scores,
    _cross_products,
    _solve_checked,
    _solve_rows_kernel,
    solve_bls_from_stats,
)
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.validation import check_binary_matrix

__all__ = ["ALSResult", "als"]

OneHotSide = Literal["U", "V"]

# Rows of A converted to float at a time when accumulating Aᵀ U (bounded memory).
_CHUNK_ELEMENTS = 4 * 2**20


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
) -> ALSResult:
    """Polish ``A ≈ U Vᵀ`` by alternating exact BLS solves; return the best pair seen.

    The first solve is for ``V`` (as in the paper), unless ``one_hot="U"`` and the start ``U``
    breaks the constraint, in which case ``U`` is solved first. A start that breaks the one-hot
    constraint is never returned when a solve has repaired it.

    Args:
        A: ``m x n`` 0/1 matrix (array-like, scipy sparse or ``dask.array``).
        U: ``m x r`` 0/1 start.
        V: ``n x r`` 0/1 start.
        max_solves: at most this many BLS solves (the paper: 20).
        patience: stop after this many consecutive solves without improvement (the paper: 2).
        one_hot: ``"V"`` (``"U"``): every row of ``V`` (``U``) holds exactly one 1.
        chunk_rows: rows per chunk in the BLS scoring (bounded memory).
        backend, backend_params: the BLS QUBO backend for rank > 16 (see
            :func:`bmfdsl.bls.solve_bls`).

    Returns:
        An :class:`ALSResult`.

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> result = als(A, [[1, 0], [0, 0], [0, 1]], np.eye(3, 2, dtype=int))
    >>> result.history, result.error, result.solves
    ([5, 2, 0], 0, 2)
    """
    if one_hot not in (None, "U", "V"):
        raise InvalidParameterError(f'one_hot must be None, "U" or "V"; got {one_hot!r}')
    max_solves = _check_count(max_solves, "max_solves", minimum=0)
    patience = _check_count(patience, "patience", minimum=1)
    chunk_rows = _check_chunk_rows(chunk_rows)
    if isinstance(A, _DaskData):  # already validated (the factorize pipeline)
        data: _DaskData | _NumpyData = A
    else:
        data = _DaskData(A) if _is_dask_array(A) else _NumpyData(A, chunk_rows)
    m, n = data.shape
    U = check_binary_matrix(U, name="U")
    V = check_binary_matrix(V, name="V")
    if U.shape[0] != m or V.shape[0] != n or U.shape[1] != V.shape[1]:
        raise InvalidMatrixError(
            f"U must be {m} x r and V {n} x r for a {m}x{n} A; got U {U.shape} and V {V.shape}"
        )
    solve_options: dict[str, Any] = {
        "chunk_rows": chunk_rows,
        "backend": backend,
        "backend_params": backend_params,
    }

    cross_t: np.ndarray | None = data.transposed_cross(U)  # Aᵀ U: the first V step needs it anyway
    start_error = int(data.total - 2 * np.sum(cross_t * V) + np.sum(_gram(U) * _gram(V)))
    history = [start_error]
    start_feasible = _is_one_hot(U if one_hot == "U" else V) if one_hot else True
    side = "U" if one_hot == "U" and not start_feasible else "V"
    rank = U.shape[1]
    # Small in-memory problems (restarts on paper-sized matrices) run the whole loop in one
    # compiled kernel: no per-solve Python overhead. Larger ones use the chunked BLAS route.
    if (
        isinstance(data, _NumpyData)
        and backend is None
        and rank <= bls_module._KERNEL_MAX_RANK
        and m * n <= bls_module._KERNEL_MAX_ENTRIES
    ):
        return _als_compiled(
            data.A, U, V, one_hot, max_solves, patience, side, start_error, start_feasible
        )
    best = (U, V, start_error if start_feasible else None)
    stalled = solves = 0
    while solves < max_solves and best[2] != 0:  # an exact start needs no polishing
        if side == "V":
            if cross_t is None:
                cross_t = data.transposed_cross(U)
            gram = _gram(U)
            V, error = solve_bls_from_stats(
                cross_t, gram, data.column_norms, one_hot=one_hot == "V", **solve_options
            )
        else:
            U, error = data.solve_rows(V, one_hot=one_hot == "U", **solve_options)
        cross_t = None
        solves += 1
        history.append(error)
        if best[2] is None or error < best[2]:
            best, stalled = (U, V, error), 0
        else:
            stalled += 1
        if error == 0 or stalled >= patience:
            break
        side = "U" if side == "V" else "V"
    best_U, best_V, best_error = best
    return ALSResult(
        U=best_U,
        V=best_V,
        error=start_error if best_error is None else best_error,
        solves=solves,
        history=history,
    )


def _check_count(value: Any, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidParameterError(f"{name} must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _gram(factor: np.ndarray) -> np.ndarray:
    wide = factor.astype(np.int64)
    return wide.T @ wide


def _is_one_hot(factor: np.ndarray) -> bool:
    return bool(np.all(factor.sum(axis=1) == 1))


def _is_dask_array(A: Any) -> bool:
    return type(A).__module__.split(".")[0] == "dask" and hasattr(A, "map_blocks")


class _NumpyData:
    """An in-memory ``A`` with the statistics ALS needs."""

    def __init__(self, A: Any, chunk_rows: int | None) -> None:
        self.A = check_binary_matrix(A)
        self.shape = self.A.shape
        self.chunk_rows = chunk_rows
        self.column_norms = np.count_nonzero(self.A, axis=0).astype(np.int64)
        self.total = int(self.column_norms.sum())

    def transposed_cross(self, U: np.ndarray) -> np.ndarray:
        m, n = self.shape
        dtype = np.float32 if m < 2**24 else np.float64  # exact integer sums
        step = self.chunk_rows or max(1, _CHUNK_ELEMENTS // max(n, 1))
        total = np.zeros((n, U.shape[1]), dtype=np.float64)
        for start in range(0, m, step):
            block = self.A[start : start + step].astype(dtype)
            total += block.T @ U[start : start + step].astype(dtype)
        return np.rint(total).astype(np.int64)

    def solve_rows(self, V: np.ndarray, **options: Any) -> tuple[np.ndarray, int]:
        return _solve_checked(self.A, V, **options)


class _DaskData:
    """A ``dask.array`` ``A``: row blocks that each span all columns."""

    def __init__(self, A: Any) -> None:
        if A.ndim != 2 or 0 in A.shape:
            raise InvalidMatrixError(f"A must be a non-empty 2-D array; got shape {A.shape}")
        self.A = A.rechunk({1: -1})
        self.shape = tuple(int(s) for s in self.A.shape)
        non_binary = ((self.A != 0) & (self.A != 1)).sum()
        column_norms = (self.A != 0).sum(axis=0, dtype=np.int64)
        import dask

        non_binary, self.column_norms = dask.compute(non_binary, column_norms)
        if int(non_binary):
            raise InvalidMatrixError(
                f"A must contain only 0 and 1; found {int(non_binary)} other value(s). "
                "Binarize it first (e.g. (A >= threshold).astype(int))."
            )
        self.column_norms = np.asarray(self.column_norms, dtype=np.int64)
        self.total = int(self.column_norms.sum())

    def take_rows(self, indices: np.ndarray) -> np.ndarray:
        """Rows ``indices`` (repeats allowed, any order) gathered as an ``int8`` numpy array."""
        unique, inverse = np.unique(np.asarray(indices, dtype=np.int64), return_inverse=True)
        rows = check_binary_matrix(np.asarray(self.A[unique].compute()))
        return np.ascontiguousarray(rows[np.ravel(inverse)])

    def _row_chunked(self, factor: np.ndarray) -> Any:
        import dask.array as da

        return da.from_array(factor, chunks=(self.A.chunks[0], factor.shape[1]))

    def transposed_cross(self, U: np.ndarray) -> np.ndarray:
        product = self.A.astype(np.int64).T @ self._row_chunked(U.astype(np.int64))
        return np.asarray(product.compute(), dtype=np.int64)

    def solve_rows(self, V: np.ndarray, **options: Any) -> tuple[np.ndarray, int]:
        import dask

        rank = V.shape[1]
        # One int64 block per row block: the codes and, in the last column, the row errors.
        # Only the int8 codes and one summed error are gathered (no m x (r + 1) int64 result).
        solved = self.A.map_blocks(
            _solve_block,
            V,
            options,
            dtype=np.int64,
            chunks=(self.A.chunks[0], (rank + 1,)),
        )
        codes, error = dask.compute(solved[:, :rank].astype(np.int8), solved[:, rank].sum())
        return np.ascontiguousarray(codes, dtype=np.int8), int(error)


def _solve_block(block: np.ndarray, V: np.ndarray, options: dict[str, Any]) -> np.ndarray:
    block = check_binary_matrix(block)
    gram = _gram(V)
    cross = _cross_products(block, V, options.get("chunk_rows"))
    U, _ = solve_bls_from_stats(cross, gram, **options)
    row_errors = np.count_nonzero(block, axis=1) + _code_scores(cross, gram, U)
    return np.concatenate([U.astype(np.int64), row_errors[:, None]], axis=1)


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
    best_U, best_V, best_error, solves = _als_kernel(
        A,
        np.ascontiguousarray(A.T),
        U.copy(),
        V.copy(),
        _cached_codes(rank, one_hot == "U"),
        _cached_codes(rank, one_hot == "V"),
        max_solves,
        patience,
        side == "U",
        start_error if start_feasible else -1,
        history,
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


@numba.njit(cache=True)
def _als_kernel(
    A: np.ndarray,
    A_t: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    codes_u: np.ndarray,
    codes_v: np.ndarray,
    max_solves: int,
    patience: int,
    u_first: bool,
    start_best: int,
    history: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    best_U = U.copy()
    best_V = V.copy()
    best_error = start_best  # -1: the start is not a valid answer (broken one-hot)
    solve_u = u_first
    solves = 0
    stalled = 0
    while solves < max_solves and best_error != 0:
        if solve_u:
            error = _solve_rows_kernel(A, V, codes_u, U)
        else:
            error = _solve_rows_kernel(A_t, U, codes_v, V)
        solves += 1
        history[solves] = error
        if best_error < 0 or error < best_error:
            best_U[:] = U
            best_V[:] = V
            best_error = error
            stalled = 0
        else:
            stalled += 1
        if error == 0 or stalled >= patience:
            break
        solve_u = not solve_u
    return best_U, best_V, best_error, solves
