"""Alternating binary least squares (ALS): the paper's polishing step.

Starting from ``(U, V)``, solve ``V`` exactly for fixed ``U``, then ``U`` for fixed ``V``, and so
on (each step is a :func:`~bmfdsl.solvers.solve_bls` solve). The paper does at most 20 solves
and stops after two consecutive solves without improvement; the best pair seen is returned, so
ALS never worsens a feasible start.

Both steps only need small statistics of ``A`` (``A V``, ``Aᵀ U`` and row/column sums), so a
``dask.array`` input runs blockwise: the ``U`` step maps over row blocks and the ``V`` step sums
``Aᵀ U`` over them. That works on any dask scheduler, including a distributed cluster.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.linalg import InMemoryMatrix, als_loop, as_matrix, check_device, code_table, gram
from bmfdsl.solvers._bls import fits_compiled_kernel, solve_bls_and_cross, solve_bls_from_stats
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
        patience: stop after this many consecutive solves without improvement (the paper: 2).
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
    one_hot = check_one_hot(one_hot)
    device = check_device(device)
    max_solves = _check_count(max_solves, "max_solves", minimum=0)
    patience = _check_count(patience, "patience", minimum=1)
    if chunk_rows is not None:
        chunk_rows = _check_count(chunk_rows, "chunk_rows", minimum=1)
    data = as_matrix(A, chunk_rows)  # a matrix wrapped by the pipeline is validated already
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
        "device": device,
    }

    # Aᵀ U: the first V step needs it anyway
    cross_t: np.ndarray | None = data.transposed_cross(U, device=device)
    start_error = int(data.total - 2 * np.sum(cross_t * V) + np.sum(gram(U) * gram(V)))
    history = [start_error]
    start_feasible = _is_one_hot(U if one_hot == "U" else V) if one_hot else True
    side = "U" if one_hot == "U" and not start_feasible else "V"
    rank = U.shape[1]
    # Small in-memory problems (restarts on paper-sized matrices) run the whole loop in one
    # compiled kernel: no per-solve Python overhead. Larger ones (and array devices) use the
    # chunked BLAS route.
    compiled = device == "cpu" and fits_compiled_kernel(rank, m * n)
    if isinstance(data, InMemoryMatrix) and backend is None and compiled:
        return _als_compiled(
            data.A, U, V, one_hot, max_solves, patience, side, start_error, start_feasible
        )
    best = (U, V, start_error if start_feasible else None)
    stalled = solves = 0
    while solves < max_solves and best[2] != 0:  # an exact start needs no polishing
        if solves and deadline is not None and time.perf_counter() > deadline:
            break
        if side == "V":
            if cross_t is None:
                cross_t = data.transposed_cross(U, device=device)
            V, error = solve_bls_from_stats(
                cross_t,
                gram(U),
                data.column_norms,
                one_hot=one_hot == "V",
                start=V,  # beyond exact ranks: the local search never worsens V
                **solve_options,
            )
            cross_t = None
        else:  # a dask A gives Aᵀ U for the next step in the same pass
            U, error, cross_t = solve_bls_and_cross(
                data, V, one_hot=one_hot == "U", start=U, **solve_options
            )
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
