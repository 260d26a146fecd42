"""Zhang et al. (2010)'s thresholding BMF, as the paper's efficient S1 Algorithm 4.

Start from a nonnegative factorization ``A ≈ W H``, rescale it (Zhang et al.'s boundedness
normalisation) and pick the two thresholds ``p`` (for ``W``) and ``q`` (for ``H``) that make
``[W >= p] [H >= q]`` a binary matrix closest to ``A``. Every threshold pair is searched: there
are only ``mr + 1`` distinct thresholdings of ``W`` and ``nr + 1`` of ``H``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba
import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.solvers.methods._penalized import (
    COMPILED_CALL_WORK,
    compiled_patterns,
    floor_at_eps,
    sparse_products,
    update_terms,
)
from bmfdsl.validation import check_binary_matrix, check_random_state, check_rank

_EPS = float(np.finfo(np.float64).eps)

#: Multiplicative-update iterations of the default NMF.
NMF_ITERATIONS = 300

NMFSolver = Callable[[np.ndarray, int, np.random.Generator], tuple[np.ndarray, np.ndarray]]


def nmf(
    A: Any, rank: int, *, random_state: Any = None, iterations: int = NMF_ITERATIONS
) -> tuple[np.ndarray, np.ndarray]:
    """Nonnegative matrix factorization ``A ≈ W H`` by Lee and Seung's multiplicative updates.

    Frobenius loss; ``W`` (``m x r``) and ``H`` (``r x n``) start uniform on
    ``[0, sqrt(mean(A) / r))`` (scikit-learn's ``init="random"`` scale) and take a fixed
    number of updates ``H ← H ∘ (WᵀA) / (WᵀWH)``, ``W ← W ∘ (AHᵀ) / (WHHᵀ)`` (denominators
    floored at 1e-12, entries floored at machine epsilon). On a 0/1 ``A`` with at most
    ``SPARSE_DENSITY`` ones (see :func:`~bmfdsl.solvers.methods._penalized.sparse_products`)
    ``WᵀA`` and ``AHᵀ`` are summed over its ones: BLAS's products up to the last bits, in
    about half the time (100 x 1,000, 5% ones); where penalized's ``compiled_patterns`` says
    so, the updates run in compiled calls without the GIL, as penalized's, their model terms
    BLAS products called from numba: the same factors up to the last bits (the default at 10⁵ rows
    5-15% faster beside the other seed threads). The thresholded answers were the same on 160
    sparse instances; a review found 5 of 8,312 at ranks 4-12 where the last bits moved a
    threshold, each by at most 1 in error (never worse there). A dense, tall and not wide 0/1
    ``A`` (see :data:`_BYTE_TABLE_MIN_ROWS`) takes the products by byte tables instead
    (:func:`_nmf_byte_steps`: the same factors up to the last bits; the native solver's 100
    solves of Tables 1-4 at 50,000 x 30 kept every error, Table 3 at r = 3 took 2.3 s instead
    of 3.0 s, its NMF 0.75 s instead of 1.6 s). Same seed, same factors.

    >>> W, H = nmf(np.eye(2), 2, random_state=0)
    >>> bool(np.abs(W @ H - np.eye(2)).max() < 0.01)
    True
    """
    A = np.asarray(A, dtype=np.float64)
    rng = check_random_state(random_state)
    m, n = A.shape
    scale = np.sqrt(max(A.mean(), 1e-12) / rank)
    W = rng.uniform(0.0, scale, (m, rank))
    H = rng.uniform(0.0, scale, (rank, n))
    sparse = sparse_products(A)  # 0/1 and sparse: products over the ones, as penalized
    if sparse is None and _byte_tables_pay(A):
        column_bytes = _column_bytes(A)
        H_t = np.ascontiguousarray(H.T)
        per_call = max(1, COMPILED_CALL_WORK // (m * column_bytes.shape[0] * rank))
        for first in range(0, iterations, per_call):
            _nmf_byte_steps(column_bytes, W, H_t, min(per_call, iterations - first))
        return W, np.ascontiguousarray(H_t.T)
    compiled = compiled_patterns(sparse, m, n, rank)
    if compiled is not None:  # as penalized: compiled calls
        rows, columns, per_call = compiled
        H_t = np.ascontiguousarray(H.T)
        for first in range(0, iterations, per_call):
            _nmf_sparse_steps(
                rows.indptr, rows.indices, columns.indptr, columns.indices, W, H_t,
                min(per_call, iterations - first),
            )  # fmt: skip
        return W, np.ascontiguousarray(H_t.T)
    for _ in range(iterations):
        data_h = W.T @ A if sparse is None else sparse[1].cross(W).T
        H *= data_h / np.maximum((W.T @ W) @ H, 1e-12)
        data_w = A @ H.T if sparse is None else sparse[0].cross(H.T)
        W *= data_w / np.maximum(W @ (H @ H.T), 1e-12)
        # Entries drifting to 0 would turn subnormal (very slow arithmetic); keep them at eps.
        np.maximum(H, _EPS, out=H)
        np.maximum(W, _EPS, out=W)
    return W, H


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _nmf_sparse_steps(
    indptr: np.ndarray,
    indices: np.ndarray,
    t_indptr: np.ndarray,
    t_indices: np.ndarray,
    W: np.ndarray,
    H_t: np.ndarray,
    iterations: int,
) -> None:
    """``iterations`` updates of :func:`nmf` in place on ``W`` and ``H_t`` (``Hᵀ``) for a 0/1
    ``A`` given as the CSR patterns of ``A`` and ``Aᵀ``, as penalized's compiled loop does
    them: the data terms summed over the ones, the model terms BLAS products, no GIL."""
    m, rank = W.shape
    n = H_t.shape[0]
    data_w = np.empty((m, rank))
    data_h = np.empty((n, rank))
    for _ in range(iterations):
        model_h = update_terms(t_indptr, t_indices, W, H_t, data_h)
        for j in range(n):
            for k in range(rank):
                H_t[j, k] *= data_h[j, k] / max(model_h[j, k], 1e-12)
        model_w = update_terms(indptr, indices, H_t, W, data_w)
        for i in range(m):
            for k in range(rank):
                W[i, k] *= data_w[i, k] / max(model_w[i, k], 1e-12)
        floor_at_eps(H_t)
        floor_at_eps(W)


#: Shapes where :func:`_nmf_byte_steps` beats BLAS's products over a float copy of a dense 0/1
#: ``A``: tall (the copy no longer fits in cache, and the tables' fixed cost is spread over
#: many rows) and not wide (the tables grow with the columns). One BLAS thread, as the seeds
#: run: 50,000 x 30 at r = 2 / 3 / 5 took 0.54 / 0.71 / 1.38 s instead of 1.14 / 1.65 /
#: 1.85 s, 20,000 x 200 at r = 8 1.9 s instead of 4.1 s; BLAS won at 8,192 x 30 (r = 5, its
#: copy in cache) and at 10,000 x 784 (r = 10).
_BYTE_TABLE_MIN_ROWS = 16_384
_BYTE_TABLE_MAX_COLUMNS = 256
#: Rows per block of :func:`_nmf_byte_steps`' passes: a block of ``W`` stays in cache while
#: the byte columns are scanned.
_BYTE_BLOCK_ROWS = 512
#: Copies of the tables that consecutive rows add into: rows with the same byte (most rows of
#: low-rank data) would otherwise wait on each other's adds.
_LANES = 4


def _byte_tables_pay(A: np.ndarray) -> bool:
    """Whether :func:`nmf` runs :func:`_nmf_byte_steps` on ``A``: a 0/1 array of a shape
    where they are faster than BLAS (see :data:`_BYTE_TABLE_MIN_ROWS`)."""
    m, n = A.shape
    if m < _BYTE_TABLE_MIN_ROWS or n > _BYTE_TABLE_MAX_COLUMNS:
        return False
    return bool(np.count_nonzero(A) == np.count_nonzero(A == 1))


def _column_bytes(A: np.ndarray) -> np.ndarray:
    """A 0/1 ``A`` (``m x n``) as the bytes of its rows, byte column first: ``(ceil(n / 8),
    m)`` ``uint8``, column ``j`` in bit ``j % 8`` of byte ``j // 8`` (whatever the byte order
    of the machine's words).

    >>> _column_bytes(np.array([[1, 0, 1], [0, 1, 0]])).tolist()
    [[5, 2]]
    """
    return np.ascontiguousarray(np.packbits(A != 0, axis=1, bitorder="little").T)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _nmf_byte_steps(
    column_bytes: np.ndarray, W: np.ndarray, H_t: np.ndarray, iterations: int
) -> None:
    """``iterations`` updates of :func:`nmf` in place on ``W`` and ``H_t`` (``Hᵀ``) for a dense
    0/1 ``A`` given as :func:`_column_bytes`, without the GIL.

    A byte of a row takes one of 256 values, so the data terms go by tables. ``A Hᵀ``: per
    byte column, the 256 sums of ``Hᵀ``'s rows over a byte's ones (each one add from the
    value without its lowest bit), then a row adds one table entry per byte. ``WᵀA``: a row
    of ``W`` is added once per byte column into the slot of its byte, and the 256 slots are
    spread over the byte's 8 columns. That is ``m n r / 8`` adds a product instead of BLAS's
    ``m n r`` multiply-adds over a float copy of ``A``; the model terms are the same BLAS
    Grams. The sums run in another order than BLAS's: the same factors up to the last bits.
    """
    byte_count, m = column_bytes.shape
    n, rank = H_t.shape
    lanes = np.empty((byte_count, _LANES, 256, rank))
    table = np.empty((byte_count, 256, rank))
    data_h = np.empty((n, rank))
    data_w = np.empty((_BYTE_BLOCK_ROWS, rank))
    model = np.empty(rank)
    for _ in range(iterations):
        # H ← H ∘ (WᵀA) / (WᵀW H), in the transposed layout
        lanes[:] = 0.0
        for start in range(0, m, _BYTE_BLOCK_ROWS):
            stop = min(m, start + _BYTE_BLOCK_ROWS)
            for p in range(byte_count):
                for i in range(start, stop):
                    value = column_bytes[p, i]
                    lane = i & (_LANES - 1)
                    for k in range(rank):
                        lanes[p, lane, value, k] += W[i, k]
        data_h[:] = 0.0
        for p in range(byte_count):
            for value in range(1, 256):
                for k in range(rank):
                    total = lanes[p, 0, value, k]
                    for lane in range(1, _LANES):
                        total += lanes[p, lane, value, k]
                    for t in range(min(8, n - 8 * p)):
                        if (value >> t) & 1:
                            data_h[8 * p + t, k] += total
        gram = np.dot(W.T, W)
        for j in range(n):
            for k in range(rank):
                model[k] = 0.0
                for q in range(rank):
                    model[k] += H_t[j, q] * gram[q, k]
            for k in range(rank):
                H_t[j, k] *= data_h[j, k] / max(model[k], 1e-12)
        # W ← W ∘ (A Hᵀ) / (W H Hᵀ); bits past column n are never set
        for p in range(byte_count):
            table[p, 0, :] = 0.0
            for value in range(1, 256):
                low = value & -value
                t = 0
                while (1 << t) != low:
                    t += 1
                for k in range(rank):
                    added = H_t[8 * p + t, k] if 8 * p + t < n else 0.0
                    table[p, value, k] = table[p, value ^ low, k] + added
        gram = np.dot(H_t.T, H_t)
        for start in range(0, m, _BYTE_BLOCK_ROWS):
            stop = min(m, start + _BYTE_BLOCK_ROWS)
            data_w[: stop - start] = 0.0
            for p in range(byte_count):
                for i in range(start, stop):
                    value = column_bytes[p, i]
                    for k in range(rank):
                        data_w[i - start, k] += table[p, value, k]
            for i in range(start, stop):
                for k in range(rank):
                    model[k] = 0.0
                    for q in range(rank):
                        model[k] += W[i, q] * gram[q, k]
                for k in range(rank):
                    W[i, k] *= data_w[i - start, k] / max(model[k], 1e-12)
        floor_at_eps(H_t)
        floor_at_eps(W)


def normalize_factors(W: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zhang et al.'s boundedness rescaling: column ``k`` of ``W`` and row ``k`` of ``H`` get
    the same maximum ``sqrt(max W_*k · max H_k*)``; ``W H`` is unchanged.

    >>> W, H = normalize_factors(np.array([[4.0]]), np.array([[1.0]]))
    >>> W.tolist(), H.tolist()
    ([[2.0]], [[2.0]])
    """
    column_max = W.max(axis=0)
    row_max = H.max(axis=1)
    usable = (column_max > 0) & (row_max > 0)  # an all-zero factor stays as it is
    factor = np.ones_like(column_max)
    factor[usable] = np.sqrt(row_max[usable] / column_max[usable])
    return W * factor, H / factor[:, None]


def threshold_search(A: Any, W: Any, H: Any) -> tuple[np.ndarray, np.ndarray]:
    """The best binary pair ``([W >= p], [H >= q])`` over all thresholds (S1 Algorithm 4).

    Entries of ``W`` (and of ``H``) are switched on one at a time in descending order (ties by
    row-major position); for each prefix of ``W`` the prefixes of ``H`` are scanned with the
    error updated one column at a time, stopping as soon as ``W' H'`` leaves ``{0, 1}`` (it
    cannot come back). The best strictly improving pair wins; ``U = V = 0`` when nothing beats
    the empty factorization. The matrix is transposed first when ``n < m``. Switching on one
    entry of ``W`` updates the errors of all prefixes of ``H`` in one pass of ``O(1)`` steps
    (see :func:`_search`), for ``O(m n r²)`` time at most.

    Args:
        A: ``m x n`` 0/1 matrix.
        W: ``m x r`` real matrix.
        H: ``r x n`` real matrix.

    Returns:
        ``(U, V)`` with ``A ≈ U Vᵀ``: ``U = [W >= p]`` (``m x r``), ``V = [H >= q]ᵀ`` (``n x r``),
        as ``int8``.

    >>> U, V = threshold_search([[1, 1], [0, 0]], [[0.9], [0.1]], [[0.8, 0.7]])
    >>> U.ravel().tolist(), V.ravel().tolist()
    ([1, 0], [1, 1])
    """
    A = check_binary_matrix(A)
    W = np.asarray(W, dtype=np.float64)
    H = np.asarray(H, dtype=np.float64)
    m, n = A.shape
    if W.ndim != 2 or H.ndim != 2 or W.shape[0] != m or H.shape != (W.shape[1], n):
        raise InvalidParameterError(
            f"W must be {m} x r and H r x {n} for a {m}x{n} A; got W {W.shape} and H {H.shape}"
        )
    if not (np.isfinite(W).all() and np.isfinite(H).all()):
        raise InvalidParameterError("W and H must be finite")
    if n < m:  # search the transposed problem Aᵀ ≈ Hᵀ Wᵀ: columns are then short
        V, U = threshold_search(A.T, H.T, W.T)
        return U, V
    rank = W.shape[1]
    w_order = np.argsort(-W.ravel(), kind="stable")
    h_order = np.argsort(-H.ravel(), kind="stable")
    w_prefix, h_prefix = _search(
        np.ascontiguousarray(A.T),  # columns of A as contiguous rows
        (w_order // rank).astype(np.int64),
        (w_order % rank).astype(np.int64),
        (h_order // n).astype(np.int64),
        (h_order % n).astype(np.int64),
        rank,
    )
    U = np.zeros(m * rank, dtype=np.int8)
    U[w_order[:w_prefix]] = 1
    H_binary = np.zeros(rank * n, dtype=np.int8)
    H_binary[h_order[:h_prefix]] = 1
    return U.reshape(m, rank), np.ascontiguousarray(H_binary.reshape(rank, n).T)


@numba.njit(cache=True, nogil=True)  # the seed portfolio runs it beside other seeds
def _search(
    A_columns: np.ndarray,
    w_rows: np.ndarray,
    w_cols: np.ndarray,
    h_rows: np.ndarray,
    h_cols: np.ndarray,
    rank: int,
) -> tuple[int, int]:
    """Best ``(a, b)``: switch on the first ``a`` entries of W's order and ``b`` of H's.

    Scanned as S1 Algorithm 4 does (prefixes of ``W`` outside, of ``H`` inside, stopping at
    the first step that makes ``W'H'`` leave ``{0, 1}``; the first strict improvement wins),
    but incrementally: the errors of every prefix of ``H`` are kept, and switching on entry
    ``(i, k)`` of ``W`` changes them only through row ``i`` of ``W'H'``, which one pass over
    the steps of ``H`` updates in ``O(1)`` a step. The errors are the same integers, so the
    answer is the one of rescanning every row (5,000 x 1,000 at rank 10: 15 s -> 0.1 s).
    """
    n, m = A_columns.shape
    total = 0
    for j in range(n):
        for i in range(m):
            total += A_columns[j, i]
    best_error = total
    best_a = 0
    best_b = 0
    steps = h_rows.size
    errors = np.full(steps, total, dtype=np.int64)  # error after H-steps 0..b, this W prefix
    binary_steps = steps  # the H-steps before the first one that leaves {0, 1}
    W_on = np.zeros((m, rank), dtype=np.bool_)
    before = np.zeros(n, dtype=np.int64)  # row i of W'H' without the new entry, by column
    after = np.zeros(n, dtype=np.int64)  # the same with it
    for a in range(w_rows.size):
        i = w_rows[a]
        k_new = w_cols[a]
        W_on[i, k_new] = True
        change = 0  # errors[b] gains this: sum over j of the new entry's effect on (i, j)
        scanned = binary_steps
        for b in range(binary_steps):
            k = h_rows[b]
            j = h_cols[b]
            if W_on[i, k]:
                target = A_columns[j, i]
                old_before = before[j]
                old_after = after[j]
                if k != k_new:
                    before[j] = old_before + 1
                after[j] = old_after + 1
                new_before = before[j]
                new_after = after[j]
                change += (target - new_after) ** 2 - (target - old_after) ** 2
                change -= (target - new_before) ** 2 - (target - old_before) ** 2
                if new_after >= 2:  # W'H' leaves {0, 1} here: this step and all after it
                    scanned = b + 1
                    binary_steps = b
                    break
            errors[b] += change
            if errors[b] < best_error:
                best_error = errors[b]
                best_a = a + 1
                best_b = b + 1
        for b in range(scanned):  # reset row i's counts for the next entry
            j = h_cols[b]
            before[j] = 0
            after[j] = 0
    return best_a, best_b


def thresholded(
    A: Any,
    rank: int,
    *,
    random_state: Any = None,
    nmf: NMFSolver | tuple[Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Thresholded BMF (Zhang et al. 2010, Algorithm 2) with the exact threshold search.

    Steps: an NMF ``A ≈ W H``; Zhang et al.'s rescaling (:func:`normalize_factors`); the
    exhaustive search over threshold pairs (:func:`threshold_search`).

    Args:
        A: ``m x n`` 0/1 matrix; a scipy sparse one is densified (this method works on
            dense residuals; :func:`bmfdsl.factorize` hands it only the sampled core when
            ``sample_rows`` is set).
        rank: target rank ``r``.
        random_state: seed of the default NMF's initialisation.
        nmf: ``None`` for the module's :func:`nmf` (multiplicative updates,
            ``NMF_ITERATIONS`` iterations), a callable ``(A, rank, rng) -> (W, H)``, or a
            precomputed pair ``(W, H)``.

    Returns:
        ``(U, V)``: ``m x r`` and ``n x r`` ``int8`` arrays.

    >>> A = np.kron(np.eye(2, dtype=int), np.ones((2, 2), dtype=int))
    >>> U, V = thresholded(A, 2, random_state=0)
    >>> int(np.abs(A - U @ V.T).sum())
    0
    """
    A = check_binary_matrix(A)
    rank = check_rank(rank, A.shape)
    if nmf is None:
        W, H = _default_nmf(A, rank, check_random_state(random_state))
    elif callable(nmf):
        W, H = nmf(A, rank, check_random_state(random_state))
    else:
        W, H = nmf
    W, H = normalize_factors(np.asarray(W, dtype=np.float64), np.asarray(H, dtype=np.float64))
    return threshold_search(A, W, H)


def _default_nmf(A: np.ndarray, rank: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    return nmf(A, rank, random_state=rng)
