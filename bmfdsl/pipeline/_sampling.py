"""Leverage-score row sampling (the paper's section "Handling large rectangular matrices").

Let ``B`` (``m x rank(A)``) be an orthonormal basis of the column space of ``A``. The leverage
score of row ``i`` is ``l_i = ||B_i*||²``; the scores sum to ``rank(A)``, so
``p_i = l_i / rank(A)`` is a probability distribution that favours rows which are hard to
express through the others. Sampling ``s`` rows with replacement from ``p`` gives a small core
matrix to factorize; the full ``U`` then comes from binary least squares.

Large matrices take rank-``r`` scores instead: with ``rank`` given and more than
:data:`~bmfdsl.pipeline._spectrum.FULL_SPECTRUM_MAX_SIZE` (256) columns, ``B`` holds only the
top ``r`` left singular vectors, ``B = A V_r Σ_r⁻¹`` from the top ``r`` eigenpairs of ``AᵀA``
that Lanczos finds (the same pairs the spectral lower bound then reuses), so the scores cost
``O(n² r)`` for Lanczos and one ``A``-times-``n x r`` product instead of ``G⁺`` (``n³/3``) and
``Σ nnz_i²`` (sparse) or ``m n²`` (dense) quadratic forms. The scores then favour the rows
that carry the top ``r`` directions, the ones a rank-``r`` factorization models (Drineas et
al.'s rank-``k`` leverage scores). The paper's matrices (``n ≤ 256``: all its experiments) keep
its full-rank scores, so their samples are unchanged.

Beyond :data:`SUBSAMPLE_MIN_ROWS` rows (in memory, rank-``r`` route) :func:`sample_rows`
draws in two stages: a uniform subsample of :data:`SCORE_SUBSAMPLE_ROWS` rows, then ``s`` rows
of it by their rank-``r`` scores, computed from the subsample's own top eigenpairs (a sparse
subsample's by products with ``A`` and ``Aᵀ``, with no Gram matrix). A row's score depends
only on the projector, which the subsample estimates as well as all rows when they are many;
the draw's cost then stays flat in ``m`` (at 5·10⁶ x 1,000 the full ``AᵀA`` took 0.9 s of one
thread and ``A P`` 0.2 s). The exact ``AᵀA`` is then the lower bound's alone, computed in the
background while the pipeline solves.
"""

from __future__ import annotations

from typing import Any, TypeGuard

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import (
    BinaryMatrix,
    DaskMatrix,
    InMemoryMatrix,
    SparseMatrix,
    as_matrix,
)
from bmfdsl.pipeline._spectrum import (
    FULL_SPECTRUM_MAX_SIZE,
    gram_inverse,
    pattern_top_eigenpairs,
    top_eigenpairs,
)
from bmfdsl.solvers.native import one_blas_thread  # loaded with the pipeline, not in a stage
from bmfdsl.validation import check_random_state

#: The paper samples this many rows ...
PAPER_SAMPLE_SIZE = 30
#: ... whenever the matrix has at least this many rows.
SAMPLING_MIN_ROWS = 2000
#: A wide matrix gets this many sampled rows per factor (at most as many as it has columns).
ROWS_PER_FACTOR = 20
#: Rows of the uniform subsample whose rank-``r`` scores :func:`sample_rows` draws from, on an
#: in-memory matrix of more than :data:`SUBSAMPLE_MIN_ROWS` rows and more than 256 columns (a
#: planted component of 1% of the rows still has about 80 rows in it, where the core draws
#: a few hundred rows at most).
SCORE_SUBSAMPLE_ROWS = 2**13
#: Rows from which :func:`sample_rows` draws in two stages (below, one: the Gram matrix of all
#: rows is cheap there).
SUBSAMPLE_MIN_ROWS = 2**15

# Rows converted to float at a time on the Gram route: at most this many entries (8 MB).
_CHUNK_ENTRIES = 2**20
# Scores by pairs of ones (scalar reads of M) rather than BLAS products (m n² flops) while the
# pairs are at most this share of those flops (125,000 x 200, one BLAS thread: pairs 0.07 s
# at 30% ones, 0.17 s at 45%, 0.19 s at 60%; products 0.19-0.23 s at every share).
_PAIRS_PER_PRODUCT = 0.25


def leverage_scores(A: Any, rank: int | None = None) -> np.ndarray:
    """Row leverage scores ``l_i = ||B_i*||²`` of a 0/1 matrix.

    With ``rank`` given and more than 256 columns, ``B`` spans the top ``rank`` left singular
    vectors only (see the module docstring; it falls back to the full-rank scores when
    Lanczos does not converge or ``rank >= n - 1``). Otherwise, the paper's scores:

    ``B`` is an orthonormal basis of ``range(A)``, the left singular vectors of the nonzero
    singular values. The scores come from the exact integer Gram matrix ``G = AᵀA`` (for
    ``dask.array`` input summed over row blocks: only ``n x n`` numbers travel, ``A`` is never
    loaded whole), as ``l_i = a_i G⁺ a_iᵀ``: ``G⁺`` by Cholesky when ``G`` is well
    conditioned on the nonzero columns (``n³/3`` work), else from its eigendecomposition with
    singular values below ``σ_max · 1e-7`` counted as zero (the Gram route cannot resolve
    smaller ones). The scores equal a thin SVD's up to rounding (1e-14 relative; 240 samples
    of 2,000-50,000 x 20-200 matrices drew the same rows), at a tenth of its time (50,000 x 30:
    0.12 s by SVD, 0.013 s; 10,000 x 200: 0.16 s, 0.016 s).

    A scipy sparse ``A`` (or a dense one with under 3% ones) takes the pattern route, with
    nothing made dense: ``AᵀA`` and the scores are sums over the pairs of ones of each row.
    A wrapped ``A`` (:func:`~bmfdsl.linalg.as_matrix`) keeps its Gram matrix for the lower
    bound.

    Args:
        A: ``m x n`` 0/1 matrix (array-like, scipy sparse or ``dask.array``; a dask array must
            have few columns, its row blocks are widened to span all of them).
        rank: the factorization's rank ``r`` (``None``: full-rank scores at every size).

    Returns:
        ``float64`` array of length ``m``; all zeros when ``A`` has no ones.

    >>> leverage_scores([[1, 0], [1, 0], [0, 1]]).round(3).tolist()
    [0.5, 0.5, 1.0]
    """
    with one_blas_thread():  # n x n eigenproblems: two threads on a busy machine took 100x
        return _leverage_scores(as_matrix(A, with_gram=True), rank)  # dask: Gram in its check


def _leverage_scores(data: BinaryMatrix, rank: int | None) -> np.ndarray:
    if rank is not None and (
        isinstance(rank, bool) or not isinstance(rank, int | np.integer) or rank < 1
    ):
        raise InvalidParameterError(f"rank must be None or a positive integer; got {rank!r}")
    if rank is not None and data.shape[1] > FULL_SPECTRUM_MAX_SIZE and data.total > 0:
        source = data.pattern() if _few_ones(data) else data  # (shares_gram is its negation)
        projector = _top_projector(_top_pairs(source, rank), rank)
        if projector is not None:
            return _rank_scores(source, projector)
    if isinstance(data, DaskMatrix):
        return _blockwise_leverage_scores(data)
    if isinstance(data, SparseMatrix):
        return _sparse_leverage_scores(data)
    m = data.shape[0]
    if data.total == 0:
        return np.zeros(m)
    if _few_ones(data):
        return _sparse_leverage_scores(data.pattern())
    return _block_scores(data.dense(), _score_matrix(data.gram, m))


def _few_ones(data: BinaryMatrix) -> TypeGuard[InMemoryMatrix]:
    """Whether ``data`` is a dense array with so few ones that its scores take the pattern
    route (:meth:`~bmfdsl.linalg.InMemoryMatrix.sparse_pays`, the rule by which ``factorize``
    holds it as a pattern): pairs of ones instead of dense products, the same Gram matrix and
    projector. 100,000 x 2,000, one BLAS thread: at 1% 24 s -> 4.2 s; at 5% 23 -> 18 s; at
    10% 23 -> 36 s."""
    return isinstance(data, InMemoryMatrix) and data.sparse_pays()


def shares_gram(data: BinaryMatrix, rank: int | None) -> bool:
    """Whether the leverage scores of ``data`` (wrapped) at ``rank`` read its own Gram matrix
    (``data.gram``, kept for the lower bound): rank-``r`` scores of anything but a dense array
    with few ones, which takes the cheaper pattern route to its own Gram matrix.

    >>> from bmfdsl.linalg import as_matrix
    >>> wide = as_matrix(np.ones((3, 300), dtype=np.int8))
    >>> shares_gram(wide, 2), shares_gram(wide, None), shares_gram(as_matrix([[1]]), 1)
    (True, False, False)
    """
    if rank is None or data.shape[1] <= FULL_SPECTRUM_MAX_SIZE:
        return False
    return not _few_ones(data)


def subsamples_scores(data: BinaryMatrix, rank: int | None) -> bool:
    """Whether :func:`sample_rows` draws ``data``'s rows in two stages (see the module
    docstring): rank-``r`` scores of an in-memory matrix of more than
    :data:`SUBSAMPLE_MIN_ROWS` rows.

    >>> from bmfdsl.linalg import as_matrix
    >>> subsamples_scores(as_matrix(np.ones((4, 300), dtype=np.int8)), 2)
    False
    """
    return (
        rank is not None
        and data.shape[1] > FULL_SPECTRUM_MAX_SIZE
        and data.shape[0] > max(SUBSAMPLE_MIN_ROWS, SCORE_SUBSAMPLE_ROWS)
        and not isinstance(data, DaskMatrix)
    )


def _row_subset(data: BinaryMatrix, rows: np.ndarray) -> BinaryMatrix:
    """Rows ``rows`` (sorted, distinct) of ``data`` as a matrix of the same kind."""
    if isinstance(data, SparseMatrix):
        return SparseMatrix(data.csr[rows])
    return as_matrix(data.take_rows(rows))


def _top_pairs(source: BinaryMatrix, rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The top Lanczos pairs of ``AᵀA``: from the Gram matrix (kept by the wrapper, where the
    lower bound may reuse it), or, for a sparse ``A`` that holds none and has fewer than
    ``n²/2`` ones, from products by ``A`` and ``Aᵀ`` (a subsample's scores: no Gram at all)."""
    if isinstance(source, SparseMatrix) and "gram" not in vars(source):
        n = source.shape[1]
        if 2 * source.total < n * n:
            return pattern_top_eigenpairs(source.csr.indptr, source.csr.indices, n, rank)
    return top_eigenpairs(source.gram, rank)


def _top_projector(pairs: tuple[np.ndarray, np.ndarray] | None, rank: int) -> np.ndarray | None:
    """``V_r Σ_r⁻¹`` (``n x r``, fewer columns when ``A`` has rank below ``r``) from the top
    Lanczos ``pairs`` of ``AᵀA``; ``None`` when Lanczos gives none."""
    if pairs is None:
        return None
    values, vectors = pairs[0][:rank], pairs[1][:, :rank]
    singular = np.sqrt(np.clip(values, 0.0, None))
    keep = singular > max(float(singular[0]), 1.0) * 1e-7  # the Gram route's resolution
    if not keep.any():
        return None
    return vectors[:, keep] / singular[keep]


def _rank_scores(data: Any, projector: np.ndarray) -> np.ndarray:
    """``l_i = ||a_i P||²`` for the thin projector ``P`` (``n x k``, ``k`` about ``r``)."""
    if isinstance(data, DaskMatrix):
        return _gathered_scores(data, _thin_block_scores, projector)
    if isinstance(data, SparseMatrix):
        basis = data.cross(projector)  # scipy's A @ P, bit for bit, over threads
        return np.einsum("ik,ik->i", basis, basis)
    return _thin_block_scores(data.dense(), projector)


def _thin_block_scores(block: np.ndarray, projector: np.ndarray) -> np.ndarray:
    """``||a_i P||²`` for the rows of ``block``, over row chunks (a small float copy)."""
    step = max(1, _CHUNK_ENTRIES // max(block.shape[1], 1))
    scores = np.empty(block.shape[0])
    for start in range(0, block.shape[0], step):
        basis = np.asarray(block[start : start + step], dtype=np.float64) @ projector
        scores[start : start + step] = np.einsum("ik,ik->i", basis, basis)
    return scores


def _gram_projector(gram: np.ndarray, m: int) -> np.ndarray:
    """``V_k Σ_k⁻¹`` from ``AᵀA``: rows of ``A`` times it are rows of the basis ``B``."""
    n = gram.shape[0]
    eigenvalues, eigenvectors = np.linalg.eigh(gram)
    singular = np.sqrt(np.clip(eigenvalues, 0.0, None))
    if singular.max() <= 0:  # A has no ones: no basis, every score is 0
        return np.zeros((n, 0))
    tolerance = singular.max() * max(max(m, n) * np.finfo(np.float64).eps, 1e-7)
    keep = singular > tolerance
    return eigenvectors[:, keep] / singular[keep]


def _score_matrix(gram: np.ndarray, m: int) -> np.ndarray:
    """``M = P Pᵀ`` (``= G⁺`` on the numerical range) with ``l_i = a_i M a_iᵀ``: by Cholesky
    when ``G`` is well conditioned, from the eigendecomposition otherwise."""
    inverse = gram_inverse(gram)
    if inverse is not None:
        return inverse
    projector = _gram_projector(gram, m)
    return projector @ projector.T


def _block_scores(block: np.ndarray, scores_matrix: np.ndarray) -> np.ndarray:
    """Leverage scores ``a_i M a_iᵀ`` of the rows of ``block``: summed over each row's pairs
    of ones when they are few (a dask block of 125,000 x 200 at 1%: 0.23 -> 0.02 s), else
    by products over row chunks (which keep the float copy small)."""
    from bmfdsl.linalg import dense_quadratic_forms, dense_row_pairs

    block = np.asarray(block)
    if dense_row_pairs(block) <= _PAIRS_PER_PRODUCT * block.shape[0] * block.shape[1] ** 2:
        scores = dense_quadratic_forms(block, scores_matrix)
        return np.maximum(scores, 0.0)  # rounding must not make a probability negative
    step = max(1, _CHUNK_ENTRIES // block.shape[1])
    scores = np.empty(block.shape[0])
    for start in range(0, block.shape[0], step):
        rows = np.asarray(block[start : start + step], dtype=np.float64)
        scores[start : start + step] = np.einsum("ik,ik->i", rows @ scores_matrix, rows)
    return np.maximum(scores, 0.0)  # rounding must not make a probability negative


def _sparse_leverage_scores(data: SparseMatrix) -> np.ndarray:
    """Leverage scores of a sparse ``A``: exact ``AᵀA``, then ``l_i = a_i M a_iᵀ``.

    Each score sums ``M`` over the pairs of ones of its row: ``Σ nnz_i²`` reads instead of
    ``nnz · k`` for ``A P``. The Gram matrix and ``M`` equal the dense route's bit for bit;
    the scores differ from it by rounding only.
    """
    from bmfdsl.linalg import pattern_quadratic_forms

    m = data.shape[0]
    if data.total == 0:
        return np.zeros(m)
    M = _score_matrix(data.gram, m)
    scores = pattern_quadratic_forms(data.csr.indptr, data.csr.indices, M)
    return np.maximum(scores, 0.0)  # rounding must not make a probability negative


def _blockwise_leverage_scores(data: DaskMatrix) -> np.ndarray:
    """Leverage scores of a dask array in two passes: ``AᵀA`` per block, then scores per block."""
    m = data.shape[0]
    if data.total == 0:
        return np.zeros(m)
    return _gathered_scores(data, _block_scores, _score_matrix(data.gram, m))


def _gathered_scores(data: DaskMatrix, block_scores: Any, matrix: np.ndarray) -> np.ndarray:
    """``block_scores(block, matrix)`` of every row block, each sent to the client as it is
    done and joined there (a dask array's compute first joined them on one worker: 4,000,000
    x 200 in 32 blocks on 2 workers, the workers' CPU 2.61 -> 2.24-2.33 s)."""
    return np.concatenate(data.per_block(block_scores, matrix)).astype(np.float64, copy=False)


def sampling_probabilities(A: Any, rank: int | None = None) -> np.ndarray:
    """The paper's row distribution ``p_i = l_i / rank(A)``; it sums to 1 (``rank``: rank-``r``
    scores for more than 256 columns, see :func:`leverage_scores`).

    A matrix with no ones has no leverage: every row then gets ``1 / m``.

    >>> sampling_probabilities([[1, 0], [1, 0], [0, 1]]).round(12).tolist()
    [0.25, 0.25, 0.5]
    >>> sampling_probabilities([[0, 0], [0, 0]]).tolist()
    [0.5, 0.5]
    """
    scores = leverage_scores(A, rank)
    total = scores.sum()  # equals the numerical rank (or r)
    if total <= 0:
        return np.full(scores.shape, 1.0 / scores.size)
    # Dividing by the sum (= rank up to rounding) makes the total exactly 1 for rng.choice.
    return scores / total


def sample_rows(
    A: Any, s: int, *, rank: int | None = None, random_state: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``s`` row indices with replacement from the leverage-score distribution.

    Args:
        A: ``m x n`` 0/1 matrix (also a ``dask.array``: see :func:`leverage_scores`; only the
            ``m`` probabilities are gathered, never ``A``).
        s: number of rows to draw (duplicates possible).
        rank: the factorization's rank: rank-``r`` leverage scores when ``A`` has more than
            256 columns (``None``: the paper's full-rank scores at every size).
        random_state: ``None``, an int seed or a ``numpy.random.Generator``.

    Returns:
        ``(indices, probabilities)``: the ``s`` drawn row indices in draw order and the
        sampling probability ``p_i`` of each drawn row (drawn in two stages, see the module
        docstring: its probability within the subsample times the subsample's share).

    >>> indices, probabilities = sample_rows([[1, 0], [0, 1]], 4, random_state=0)
    >>> len(indices), probabilities.tolist()
    (4, [0.5, 0.5, 0.5, 0.5])
    """
    if isinstance(s, bool) or not isinstance(s, int | np.integer) or s < 1:
        raise InvalidParameterError(f"the sample size s must be a positive integer; got {s!r}")
    data = as_matrix(A)
    rng = check_random_state(random_state)
    if subsamples_scores(data, rank):  # two stages: uniform, then by score (module docstring)
        m = data.shape[0]
        subset = np.sort(rng.choice(m, size=SCORE_SUBSAMPLE_ROWS, replace=False))
        inner = sampling_probabilities(_row_subset(data, subset), rank)
        picks = rng.choice(inner.size, size=int(s), replace=True, p=inner)
        return subset[picks], inner[picks] * (SCORE_SUBSAMPLE_ROWS / m)
    probabilities = sampling_probabilities(data, rank)
    indices = rng.choice(probabilities.size, size=int(s), replace=True, p=probabilities)
    return indices, probabilities[indices]


def choose_sample_size(m: int, n: int, rank: int) -> int:
    """The sample size used for ``sample_rows="auto"``: the paper's rule, widened with the
    rank and the short side.

    Matrices with fewer than 2,000 rows are not sampled (returns ``m``). From 2,000 rows on,
    ``s = max(30, r, min(n, 20 r))`` rows are sampled: the paper's 30 (its matrices have
    ``n = 30`` columns, so its core is square, and so is ours there), and on a wider matrix 20
    rows per factor (a square core at most), so that a component spanning 5% of the rows shows
    in the core about once per factor and every factor's columns are seen.

    >>> [choose_sample_size(m, 30, r) for m, r in [(30, 5), (2000, 5), (50000, 40)]]
    [30, 30, 40]
    >>> choose_sample_size(200_000, 1000, 5), choose_sample_size(200_000, 2000, 10)
    (100, 200)
    """
    for name, value in (("m", m), ("n", n), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise InvalidParameterError(f"{name} must be a positive integer; got {value!r}")
    if m < SAMPLING_MIN_ROWS:
        return int(m)
    return int(min(m, max(PAPER_SAMPLE_SIZE, rank, min(n, ROWS_PER_FACTOR * rank))))
