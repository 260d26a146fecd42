"""Synthetic data sets of the paper: Bernoulli noise, exact rank (Algorithm 3), planted blocks.

Every generator is seeded through ``random_state`` (``None``, an int or a
``numpy.random.Generator``): the same seed gives the same matrix, bit for bit. The real data
sets (MNIST, leukemia, melanoma) are loaded by :mod:`bmfdsl.apps._datafiles`.
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numba
import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.validation import check_random_state


def _check_shape(m: Any, n: Any) -> tuple[int, int]:
    for name, value in (("m", m), ("n", n)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InvalidParameterError(f"{name} must be a positive integer; got {value!r}")
    return int(m), int(n)


def _check_probability(name: str, p: Any, *, open_interval: bool) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"{name} must be a number in [0, 1]; got {p!r}") from exc
    low_ok = value > 0 if open_interval else value >= 0
    high_ok = value < 1 if open_interval else value <= 1
    if not (low_ok and high_ok):
        interval = "(0, 1)" if open_interval else "[0, 1]"
        raise InvalidParameterError(f"{name} must lie in {interval}; got {p!r}")
    return value


def make_bernoulli(m: int, n: int, p: float, random_state: Any = None) -> np.ndarray:
    """An ``m x n`` 0/1 matrix with independent ``Bernoulli(p)`` entries (Tables 2-4).

    Args:
        m: number of rows.
        n: number of columns.
        p: probability of a one, in ``[0, 1]``.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.

    Returns:
        An ``int8`` array of shape ``(m, n)``.

    >>> A = make_bernoulli(4, 3, 0.5, random_state=0)
    >>> A.shape, A.dtype.name, set(A.flat) <= {0, 1}
    ((4, 3), 'int8', True)
    >>> bool((make_bernoulli(4, 3, 0.5, random_state=0) == A).all())
    True
    """
    m, n = _check_shape(m, n)
    p = _check_probability("p", p, open_interval=False)
    rng = check_random_state(random_state)
    return (rng.random((m, n)) < p).astype(np.int8)


@numba.njit(cache=True)
def _seed_numba(seed: int) -> None:
    np.random.seed(seed)


@numba.njit(cache=True)
def _set_add(members: np.ndarray, position: np.ndarray, size: int, item: int) -> int:
    members[size] = item
    position[item] = size
    return size + 1


@numba.njit(cache=True)
def _set_remove(members: np.ndarray, position: np.ndarray, size: int, item: int) -> int:
    # Swap-remove keeps the set dense so a uniform draw is one random index.
    last = members[size - 1]
    slot = position[item]
    members[slot] = last
    position[last] = slot
    position[item] = -1
    return size - 1


@numba.njit(cache=True)
def _offending_set(bad_count: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The indices with ``bad_count > 0`` as a swap-remove set: ``(members, position, size)``."""
    members = np.empty(bad_count.size, dtype=np.int64)
    position = np.full(bad_count.size, -1, dtype=np.int64)
    size = 0
    for index in range(bad_count.size):
        if bad_count[index] > 0:
            size = _set_add(members, position, size, index)
    return members, position, size


@numba.njit(cache=True)
def _count_ones(factor: np.ndarray) -> int:
    ones = 0
    for i in range(factor.shape[0]):
        for k in range(factor.shape[1]):
            ones += factor[i, k]
    return ones


@numba.njit(cache=True)
def _drop_one(
    factor: np.ndarray,
    other: np.ndarray,
    overlap: np.ndarray,
    own_bad: np.ndarray,
    own_members: np.ndarray,
    own_position: np.ndarray,
    own_size: int,
    other_bad: np.ndarray,
    other_members: np.ndarray,
    other_position: np.ndarray,
    other_size: int,
    nonzero: np.ndarray,
) -> tuple[int, int]:  # pragma: no cover
    """Zero a random one of a random offending row of ``factor``; returns the two set sizes.

    One routine serves both factors: for U, ``overlap`` is UVᵀ and ``other`` is V; for V,
    ``overlap`` is its transpose and ``other`` is U (rows and columns swap roles).
    """
    i = own_members[np.random.randint(own_size)]
    count = 0
    for k in range(factor.shape[1]):
        if factor[i, k] != 0:
            nonzero[count] = k
            count += 1
    k = nonzero[np.random.randint(count)]
    factor[i, k] = 0
    for j in range(other.shape[0]):
        if other[j, k] != 0:
            overlap[i, j] -= 1
            if overlap[i, j] == 1:
                own_bad[i] -= 1
                other_bad[j] -= 1
                if other_bad[j] == 0:
                    other_size = _set_remove(other_members, other_position, other_size, j)
    if own_bad[i] == 0:
        own_size = _set_remove(own_members, own_position, own_size, i)
    return own_size, other_size


@numba.njit(cache=True)
def _eliminate_overlaps(U: np.ndarray, V: np.ndarray, seed: int) -> None:  # pragma: no cover
    """Algorithm 3's while loop, with incremental bookkeeping instead of recomputing UVᵀ.

    ``overlap[i, j] = (U Vᵀ)_ij``; a row i of U (column j of V) is in φ while some entry of
    its row (column) of UVᵀ exceeds 1. Such a row has at least two ones, so the paper's
    "sum_k u_ik > 2" is read as ``>= 2`` (with ``> 2`` the loop never ends for r = 2).
    """
    np.random.seed(seed)
    m, r = U.shape
    n = V.shape[0]
    overlap = np.zeros((m, n), dtype=np.int32)
    for i in range(m):
        for j in range(n):
            total = 0
            for k in range(r):
                total += U[i, k] * V[j, k]
            overlap[i, j] = total
    bad_in_row = np.zeros(m, dtype=np.int64)
    bad_in_col = np.zeros(n, dtype=np.int64)
    for i in range(m):
        for j in range(n):
            if overlap[i, j] > 1:
                bad_in_row[i] += 1
                bad_in_col[j] += 1
    row_members, row_position, row_size = _offending_set(bad_in_row)
    col_members, col_position, col_size = _offending_set(bad_in_col)
    ones_u = _count_ones(U)
    ones_v = _count_ones(V)
    nonzero = np.empty(r, dtype=np.int64)
    while row_size > 0:
        # ρ(U) >= ρ(V), compared without division: ones_u / (m r) >= ones_v / (n r).
        if ones_u * n >= ones_v * m:
            row_size, col_size = _drop_one(
                U, V, overlap,
                bad_in_row, row_members, row_position, row_size,
                bad_in_col, col_members, col_position, col_size,
                nonzero,
            )  # fmt: skip
            ones_u -= 1
        else:
            col_size, row_size = _drop_one(
                V, U, overlap.T,
                bad_in_col, col_members, col_position, col_size,
                bad_in_row, row_members, row_position, row_size,
                nonzero,
            )  # fmt: skip
            ones_v -= 1


@overload
def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = ...,
    p_v: float = ...,
    random_state: Any = ...,
    *,
    return_factors: Literal[False] = ...,
) -> np.ndarray: ...


@overload
def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = ...,
    p_v: float = ...,
    random_state: Any = ...,
    *,
    return_factors: Literal[True],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...


def make_exact_rank(
    m: int,
    n: int,
    r: int,
    p_u: float = 0.7,
    p_v: float = 0.7,
    random_state: Any = None,
    *,
    return_factors: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A 0/1 matrix with an exact rank-``r`` binary factorization (the paper's S1 Algorithm 3).

    U and V start with independent ``Bernoulli(p_u)`` / ``Bernoulli(p_v)`` entries; while some
    entry of ``U Vᵀ`` exceeds 1, a one is removed from a random offending row of the factor
    with the higher density. The result is ``A = U Vᵀ``, binary, so ``||A - U Vᵀ|| = 0``.

    Args:
        m: number of rows of A (rows of U).
        n: number of columns of A (rows of V).
        r: the rank of the planted factorization (columns of U and V).
        p_u: initial density of U, in ``(0, 1)``; the paper uses 0.7.
        p_v: initial density of V, in ``(0, 1)``; the paper uses 0.7.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.
        return_factors: also return the planted factors.

    Returns:
        ``A`` (``int8``, ``m x n``), or ``(A, U, V)`` when ``return_factors`` is true.

    >>> A, U, V = make_exact_rank(6, 5, 2, random_state=1, return_factors=True)
    >>> A.shape, U.shape, V.shape
    ((6, 5), (6, 2), (5, 2))
    >>> bool((A == U.astype(int) @ V.T).all()) and set(A.flat) <= {0, 1}
    True
    """
    m, n = _check_shape(m, n)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
        raise InvalidParameterError(f"rank r must be a positive integer; got {r!r}")
    p_u = _check_probability("p_u", p_u, open_interval=True)
    p_v = _check_probability("p_v", p_v, open_interval=True)
    rng = check_random_state(random_state)
    U = (rng.random((m, int(r))) < p_u).astype(np.int8)
    V = (rng.random((n, int(r))) < p_v).astype(np.int8)
    _eliminate_overlaps(U, V, int(rng.integers(2**31 - 1)))
    A = (U.astype(np.int64) @ V.astype(np.int64).T).astype(np.int8)
    if return_factors:
        return A, U, V
    return A


def make_sparse_planted(
    m: int, n: int, r: int, random_state: Any = None, *, return_factors: bool = False
) -> Any:
    """A large, sparse 0/1 matrix with ``r`` planted blocks, as scipy CSR (about 1% ones).

    Each block spans about 5% of the rows and ``0.2 / r`` of the columns (4% at ``r = 5``), so
    the density stays near 1% whatever ``r``; ``m n / 1000`` random ones are added as noise.
    Built from index arrays: no dense ``m x n`` array ever exists (recommender-sized data).

    Args:
        m: number of rows.
        n: number of columns.
        r: the number of planted blocks.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.
        return_factors: also return the planted factors ``U`` (``m x r``) and ``V``
            (``n x r``), ``int8``: the block memberships, so the planted error is known.

    Returns:
        A ``scipy.sparse.csr_array`` of ``int8`` ones, shape ``(m, n)``; or ``(A, U, V)``
        with ``return_factors``.

    >>> A = make_sparse_planted(2000, 300, 5, random_state=0)
    >>> A.shape, A.dtype.name, set(A.data.tolist()), bool(0.005 < A.nnz / (2000 * 300) < 0.02)
    ((2000, 300), 'int8', {1}, True)
    >>> same, U, V = make_sparse_planted(2000, 300, 5, random_state=0, return_factors=True)
    >>> bool((same != A).nnz == 0), U.shape, V.shape
    (True, (2000, 5), (300, 5))
    """
    import scipy.sparse

    m, n = _check_shape(m, n)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
        raise InvalidParameterError(f"r must be a positive integer; got {r!r}")
    rng = check_random_state(random_state)
    p_rows, p_columns = 0.05, 0.04 * 5 / int(r)
    rows, columns = [], []
    U = np.zeros((m, int(r)), dtype=np.int8)
    V = np.zeros((n, int(r)), dtype=np.int8)
    for k in range(int(r)):
        block_rows = np.flatnonzero(rng.random(m) < p_rows)
        block_columns = np.flatnonzero(rng.random(n) < p_columns)
        U[block_rows, k] = V[block_columns, k] = 1
        rows.append(np.repeat(block_rows, block_columns.size))
        columns.append(np.tile(block_columns, block_rows.size))
    noise = m * n // 1000
    rows.append(rng.integers(0, m, noise))
    columns.append(rng.integers(0, n, noise))
    row_index, column_index = np.concatenate(rows), np.concatenate(columns)
    ones = np.ones(row_index.size, dtype=np.int8)
    A = scipy.sparse.csr_array((ones, (row_index, column_index)), shape=(m, n))
    A.data[:] = 1  # overlapping blocks were summed: back to 0/1
    return (A, U, V) if return_factors else A


def make_planted_blocks(
    m: int,
    n: int,
    r: int,
    *,
    density: float = 0.02,
    removed: float = 0.05,
    added: float = 0.001,
    random_state: Any = None,
) -> tuple[Any, np.ndarray, np.ndarray]:
    """A sparse 0/1 matrix of ``r`` planted blocks of varying size, with its planted factors.

    Block ``k`` spans a random ``p_k`` of the rows and ``q_k`` of the columns, with
    ``p_k = 0.1 u_k`` and ``q_k = density / (0.1 r) v_k`` for ``u_k, v_k`` uniform on
    ``[0.3, 1.7]`` (sizes vary up to about 6x; the blocks' union covers about ``density`` of
    ``A``). Blocks overlap where their random rows and columns meet (``A`` holds a 1 there, the
    integer product ``U Vᵀ`` a 2). Noise goes both ways: each one of a block is removed with
    probability ``removed``, and ``added * m * n`` random positions are set to 1. The planted
    error ``||A - U Vᵀ||²`` is therefore known and near the optimum for small noise. Built from
    index arrays: no dense ``m x n`` array ever exists.

    Args:
        m: number of rows.
        n: number of columns.
        r: the number of planted blocks (columns of ``U`` and ``V``).
        density: expected share of ``A`` covered by the blocks, in ``(0, 1)``.
        removed: probability that a block's one is removed, in ``[0, 1)``.
        added: share of ``m n`` positions set to 1 at random, in ``[0, 1)``.
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.

    Returns:
        ``(A, U, V)``: a ``scipy.sparse.csr_array`` of ``int8`` ones (``m x n``) and the
        planted ``int8`` factors (``m x r``, ``n x r``).

    >>> A, U, V = make_planted_blocks(2000, 300, 4, random_state=0)
    >>> A.shape, U.shape, V.shape, set(A.data.tolist())
    ((2000, 300), (2000, 4), (300, 4), {1})
    >>> bool(0.01 < A.nnz / (2000 * 300) < 0.04), bool(len(set(U.sum(axis=0).tolist())) > 1)
    (True, True)
    """
    import scipy.sparse

    m, n = _check_shape(m, n)
    if isinstance(r, bool) or not isinstance(r, int | np.integer) or r < 1:
        raise InvalidParameterError(f"r must be a positive integer; got {r!r}")
    density = _check_probability("density", density, open_interval=True)
    removed = _check_probability("removed", removed, open_interval=False)
    added = _check_probability("added", added, open_interval=False)
    if removed >= 1 or added >= 1:
        raise InvalidParameterError(f"removed and added must be below 1; got {removed}, {added}")
    rng = check_random_state(random_state)
    r = int(r)
    row_share = 0.1 * rng.uniform(0.3, 1.7, r)
    column_share = np.minimum(1.0, density / (0.1 * r) * rng.uniform(0.3, 1.7, r))
    U = (rng.random((m, r)) < row_share).astype(np.int8)
    V = (rng.random((n, r)) < column_share).astype(np.int8)
    rows, columns = [], []
    for k in range(r):
        block_rows, block_columns = np.flatnonzero(U[:, k]), np.flatnonzero(V[:, k])
        rows.append(np.repeat(block_rows, block_columns.size))
        columns.append(np.tile(block_columns, block_rows.size))
    blocks = scipy.sparse.csr_array(
        (np.ones(sum(part.size for part in rows), dtype=np.int8),
         (np.concatenate(rows), np.concatenate(columns))),
        shape=(m, n),
    )  # fmt: skip
    blocks.sum_duplicates()
    blocks.data[:] = 1  # overlapping blocks were summed: back to 0/1
    blocks.data[rng.random(blocks.nnz) < removed] = 0
    blocks.eliminate_zeros()
    noise = int(added * m * n)
    extra = scipy.sparse.csr_array(
        (np.ones(noise, dtype=np.int8), (rng.integers(0, m, noise), rng.integers(0, n, noise))),
        shape=(m, n),
    )
    A = scipy.sparse.csr_array(blocks + extra)
    A.data[:] = 1
    return A, U, V
