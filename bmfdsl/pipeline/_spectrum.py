"""The top of a Gram matrix's spectrum, cheaply and with proofs: what the lower bound and the
leverage scores need from ``G = AᵀA`` (``n x n``, exact integers) without its full
eigendecomposition.

* :func:`top_eigenvalue_sum_bound`: a number never below ``Σ_{i≤r} λ_i(G)``. Lanczos (ARPACK)
  finds Ritz pairs ``(θ_k, y_k)``; they are only estimates, so they are turned into a proof by
  Ky Fan's dual: for any ``Z ⪰ 0`` and ``t`` with ``G - Z ⪯ t I``,
  ``Σ_{i≤r} λ_i(G) <= r t + tr(Z)`` (for orthonormal ``Q``,
  ``tr(QᵀGQ) = tr(Qᵀ(G - Z)Q) + tr(QᵀZQ) <= r t + tr(Z)``). With
  ``Z = Σ_{k≤r} (θ_k - θ_{r+1}) y_k y_kᵀ`` (positive semidefinite for whatever vectors ARPACK
  returned) and ``t`` just above ``θ_{r+1}``, ``t I - G + Z ⪰ 0`` is checked by a Cholesky
  factorization, whose backward error (Higham, Thm 10.3: ``|ΔX| <= γ_{n+1} |Rᵀ||R|``) and the
  rounding of forming ``X`` are added to ``t``. The bound is then ``Σ_{k≤r} θ_k`` up to
  ``r·1e-9·θ_1``; when no small ``t`` passes (Ritz values not converged), ``None`` asks the
  caller for the full eigenvalues. Cost: ``O(n² r)`` per Lanczos step and one ``n³/3``
  Cholesky, against ``~9 n³`` for all eigenpairs.
* :func:`gram_inverse`: ``G⁺`` by Cholesky when ``G`` is well conditioned on its nonzero
  columns (``n³/3``), which is the projector the paper's leverage scores need; ``None`` when
  it is not (the caller then takes the eigendecomposition and cuts the small eigenvalues).

* :func:`top_eigenpairs`: the Ritz pairs behind the bound, computed once per Gram matrix and
  shared: the rank-``r`` leverage scores of large matrices (``pipeline/_sampling.py``) read
  their top ``r`` eigenvectors, and the bound of the same ``G`` reuses them.

All are deterministic: the Lanczos start vector is fixed.

>>> import numpy as np
>>> A = np.kron(np.eye(30), np.ones((3, 2)))[:, :50]  # σ² = 6 (25 times)
>>> G = A.T @ A
>>> round(top_eigenvalue_sum_bound(G, 3), 6)  # the sum of the top three is 18
18.0
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from functools import partial

import numpy as np

# loaded with the pipeline (about 12 ms), not inside the first sampling or bound that needs it
from scipy.sparse.linalg import ArpackError, LinearOperator, eigsh

#: Gram matrices up to this size get their full spectrum (the paper's leverage scores, all
#: eigenvalues in the bound); larger ones only their top ``r`` eigenpairs by Lanczos.
FULL_SPECTRUM_MAX_SIZE = 256
# More Ritz pairs than the rank, so that θ_{r+1} converges (ARPACK's own rule of thumb).
_EXTRA_RITZ_PAIRS = 6
#: Relative accuracy of the Ritz values of :func:`pattern_top_eigenpairs`, which only the
#: leverage scores read (a subsample's, or a sparse ``A``'s without a Gram matrix): they weigh
#: a random draw (1e-6 moved each probability by at most 6e-12 of itself and drew the same
#: rows on every benchmark instance), where machine precision took about 50% more Lanczos
#: products. The bound's pairs (:func:`top_eigenpairs`) are converged fully: its proof needs
#: them.
SCORE_RITZ_TOLERANCE = 1e-6
# Shifts tried above θ_{r+1}, relative to θ_1: the first that Cholesky certifies is used.
_SHIFTS = (1e-9, 1e-6, 1e-3)
# A matrix whose estimated reciprocal condition (1-norm) is below this is treated as rank
# deficient: its inverse would not match the truncated eigendecomposition's to precision.
_MIN_RCOND = 1e-8
_EPS = float(np.finfo(np.float64).eps)


def top_eigenvalue_sum_bound(gram: np.ndarray, rank: int) -> float | None:
    """An upper bound on the sum of the ``rank`` largest eigenvalues of the symmetric
    positive semidefinite ``gram``, proven with floating-point errors accounted for; ``None``
    when Lanczos did not give a certifiable one (use all eigenvalues then).

    >>> import numpy as np
    >>> G = np.diag(np.arange(1.0, 41.0))
    >>> round(top_eigenvalue_sum_bound(G, 2), 6)  # 40 + 39
    79.0
    """
    from scipy.linalg import lapack

    from bmfdsl.linalg import deflated_shift

    n = int(gram.shape[0])
    gram = np.ascontiguousarray(gram, dtype=np.float64)
    pairs = top_eigenpairs(gram, rank)
    if pairs is None:
        return None
    values, vectors = pairs
    scale = max(float(values[0]), 1.0)
    level = max(float(values[rank]), 0.0)  # θ_{r+1}: the level the top r are deflated to
    weights = np.clip(values[:rank] - level, 0.0, None)
    top = np.ascontiguousarray(vectors[:, :rank])  # Z = Σ_k w_k y_k y_kᵀ: semidefinite as is
    # tr(Z) = Σ_k w_k ||y_k||²: n r nonnegative terms, so the relative rounding error of the
    # sum is below (n r + 2) eps (recursive summation; doubled for room)
    trace = float(np.einsum("ik,ik,k->", top, top, weights))
    trace *= 1.0 + 2.0 * (n * rank + 2) * _EPS
    largest_entry = float(np.abs(gram).max())
    row_norm = float(np.sqrt(np.einsum("ik,ik->i", top, top).max()))
    # ||R||²_F of the computed factor is at most tr(X) / (1 - γ_{n+1}): the diagonal of
    # RᵀR = X + ΔX with |ΔX| <= γ_{n+1} |Rᵀ||R| gives Σ_k R_ki² <= X_ii / (1 - γ_{n+1}). Read
    # from X rather than from R, the bound does not depend on LAPACK's rounding (its blocking
    # follows BLAS's thread count), only on whether Cholesky succeeds.
    gamma = 2.0 * (n + 1) * _EPS
    for shift in _SHIFTS:
        t = level + shift * scale
        X = deflated_shift(gram, top, weights, t)  # t I - (G - Z), its lower triangle
        frobenius_squared = float(np.trace(X)) * (1.0 + 4.0 * n * _EPS) / (1.0 - gamma)
        # Xᵀ is Fortran-ordered as LAPACK wants (X would be copied: 20 ms at n = 2,000), and
        # its upper triangle is X's lower one
        _, info = lapack.dpotrf(X.T, lower=0, overwrite_a=1)
        if info != 0:  # not positive definite: t is not above λ_max(G - Z) yet
            continue
        # each entry of X is off by at most this (Z's r products, then two additions) ...
        largest_weight = weights.max(initial=0.0) * row_norm**2
        entry_error = (rank + 4) * _EPS * (largest_weight + largest_entry + t)
        # ... so the spectral norm of the error is at most n times it; Cholesky's backward
        # error is at most γ_{n+1} || |Rᵀ||R| ||₂ <= γ_{n+1} ||R||²_F (taken with room to spare)
        cholesky_error = 8.0 * (n + 1) * _EPS * frobenius_squared
        certified_shift = (t + n * entry_error + cholesky_error) * (1.0 + 8.0 * _EPS)
        return float(rank * certified_shift + trace)
    return None


# The last Lanczos answer: (weak reference to G, rank, answer). Sampling and the bound ask for
# the same G's top pairs in one factorize call; a weak reference keeps no G alive.
_last_pairs_lock = threading.Lock()  # the bound may run in a background thread
_last_pairs: list[tuple[weakref.ref[np.ndarray], int, tuple[np.ndarray, np.ndarray] | None]] = []


def top_eigenpairs(gram: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``rank + 6`` (at most ``n - 1``) largest Ritz pairs of the symmetric ``gram`` by
    Lanczos (ARPACK, fixed start vector), eigenvalues descending; ``None`` when
    ``0 < rank < n - 1`` fails or ARPACK did not converge. The last answer is kept for the
    same array and rank (arrays must not be changed in place after the call).

    >>> import numpy as np
    >>> values, vectors = top_eigenpairs(np.diag(np.arange(1.0, 41.0)), 2)
    >>> values[:3].round(6).tolist(), vectors.shape
    ([40.0, 39.0, 38.0], (40, 8))
    """
    from bmfdsl.linalg import symmetric_matvec

    n = int(gram.shape[0])
    if not 0 < rank < n - 1:
        return None
    with _last_pairs_lock:
        for reference, kept_rank, answer in _last_pairs:
            if reference() is gram and kept_rank == rank:
                return answer
    matrix = _narrowed(np.ascontiguousarray(gram, dtype=np.float64))
    found = _lanczos(n, rank, lambda x: symmetric_matvec(matrix, x))
    with _last_pairs_lock:
        _last_pairs[:] = [(weakref.ref(gram), rank, found)]
    return found


def _narrowed(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` as float32 where that holds every entry exactly (a Gram matrix of counts
    below 2**24), else as it is: each Lanczos product reads all of it, and the kernel
    multiplies in float64 either way, so the products are the same bits from half the
    memory (2,000 x 2,000: 32 MB a product; 52 products took 0.13 s).

    >>> _narrowed(np.array([[2.0, 1.0], [1.0, 3.0]])).dtype, _narrowed(np.array([[0.5]])).dtype
    (dtype('float32'), dtype('float32'))
    >>> _narrowed(np.array([[2.0**25 + 1]])).dtype
    dtype('float64')
    """
    narrow = matrix.astype(np.float32)
    return narrow if np.array_equal(narrow, matrix) else matrix


def pattern_top_eigenpairs(
    indptr: np.ndarray, indices: np.ndarray, columns: int, rank: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`top_eigenpairs` of ``AᵀA`` for a 0/1 CSR pattern ``A`` (``columns`` wide),
    without forming it: each Lanczos product is ``Aᵀ(A x)``, ``2 nnz`` additions instead of
    ``n²`` (8,192 x 2,000 rows of 1% ones: 0.3 M against 4 M). For leverage scores: the Ritz
    values to :data:`SCORE_RITZ_TOLERANCE` only.

    >>> import scipy.sparse
    >>> A = scipy.sparse.csr_array(np.kron(np.eye(30), np.ones((3, 2))))
    >>> values, _ = pattern_top_eigenpairs(A.indptr, A.indices, 60, 2)
    >>> values[:3].round(6).tolist()
    [6.0, 6.0, 6.0]
    """
    from bmfdsl.linalg import pattern_gram_matvec

    if not 0 < rank < columns - 1:
        return None
    product = partial(pattern_gram_matvec, indptr, indices)
    return _lanczos(columns, rank, product, tolerance=SCORE_RITZ_TOLERANCE)


def _lanczos(
    n: int, rank: int, product: Callable[[np.ndarray], np.ndarray], tolerance: float = 0.0
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``rank + 6`` (at most ``n - 1``) largest Ritz pairs of the symmetric operator
    ``product`` by ARPACK from a fixed start vector, descending, to the relative
    ``tolerance`` (0: machine precision); ``None`` without convergence. The products are
    numba kernels, not BLAS: the same pairs in any thread, whatever BLAS's process-wide
    thread setting (ARPACK's own vector steps were checked not to depend on it)."""
    count = min(n - 1, rank + _EXTRA_RITZ_PAIRS)
    start = np.random.default_rng(0).standard_normal(n)  # fixed: the same G, the same pairs
    operator = LinearOperator(
        (n, n),
        matvec=lambda x: product(np.ascontiguousarray(x, np.float64).ravel()),
        dtype=np.float64,
    )
    try:
        values, vectors = eigsh(operator, k=count, which="LA", v0=start, tol=tolerance)
    except ArpackError:  # includes ArpackNoConvergence
        return None
    order = np.argsort(values)[::-1]
    return values[order], vectors[:, order]


def gram_inverse(gram: np.ndarray) -> np.ndarray | None:
    """``G⁺`` of a Gram matrix that is well conditioned on its nonzero columns (zero columns
    of ``A`` give zero rows and columns of ``G`` and of ``G⁺``), by Cholesky; ``None`` when
    ``G`` is close to singular there (duplicated or dependent columns).

    >>> import numpy as np
    >>> G = np.array([[2.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 1.0]])
    >>> gram_inverse(G).round(12).tolist()
    [[1.0, 0.0, -1.0], [0.0, 0.0, 0.0], [-1.0, 0.0, 2.0]]
    >>> gram_inverse(np.ones((2, 2))) is None
    True
    """
    from scipy.linalg import cho_solve, lapack

    n = gram.shape[0]
    used = np.flatnonzero(np.diag(gram) > 0)
    inverse = np.zeros((n, n))
    if used.size == 0:
        return inverse
    part = np.ascontiguousarray(gram[np.ix_(used, used)])
    factor, info = lapack.dpotrf(part, lower=1)
    if info != 0:
        return None
    rcond, info = lapack.dpocon(factor, float(np.abs(part).sum(axis=0).max()), uplo="L")
    if info != 0 or not rcond >= _MIN_RCOND:
        return None
    # two triangular solves (BLAS 3) beat LAPACK's dpotri by far in OpenBLAS
    part_inverse = cho_solve((factor, True), np.eye(used.size), check_finite=False)
    inverse[np.ix_(used, used)] = (part_inverse + part_inverse.T) / 2  # exactly symmetric
    return inverse
