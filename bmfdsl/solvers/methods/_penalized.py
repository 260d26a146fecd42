"""Zhang et al. (2007)'s penalty BMF with the settings of nimfa 1.4.0's ``Bmf``.

The paper ran nimfa's ``Bmf`` with its defaults except ``max_iter = test_conv = 1000``. This is
an independent vectorised re-implementation of the same computation, so that results match
without depending on nimfa (whose numpy-matrix code needs ``np.mat`` on numpy 2):

1. Initialisation: ``W ~ U[0, max A)^{m x r}``, then ``H ~ U[0, max A)^{r x n}`` (nimfa's
   ``"random"`` seeding; here drawn from ``random_state``).
2. Normalisation, as nimfa computes it: with ``D_W = diag(column maxima of W)`` and
   ``D_H = diag(row maxima of H)``, ``W ← W P(D_W, -½) P(D_H, ½)`` and
   ``H ← P(D_H, -½) P(D_W, ½) H`` where ``P(D, s) = (D + eps)^s`` element-wise — on the
   *whole* matrix, so off-diagonal zeros become ``eps^s`` (about ``6.7e7`` for ``s = -½``).
   That deviates from Zhang et al.'s diagonal rescaling, but it is what produced the paper's
   numbers, so it is reproduced here.
3. For ``max_iter`` iterations (``λ`` starting at ``1 / max_iter``; ``λ_W``, ``λ_H`` multiplied
   by ``lambda_w``, ``lambda_h`` after each iteration):
   ``H ← H ∘ (WᵀA + 3λ_H H∘H) / (WᵀWH + 2λ_H (H+eps)³ + λ_H H)``, then the same for ``W``
   with ``AHᵀ`` and ``W(HHᵀ)``; zeros in numerators and denominators become ``eps``; afterwards
   entries below ``eps`` are raised to ``eps``. Every ``test_conv`` iterations the objective
   ``||A - WH||²`` is compared with the previous check: an improvement below
   ``min_residuals``, or an increase, stops the loop.
4. Final rounding (Zhang et al.; nimfa leaves this to the caller): entries ``>= 0.5`` become 1.

:func:`penalized` stops the loop as soon as the rounding provably cannot change any more
(:func:`settling_penalty`): the growing penalty pins every entry at most 1/4 or at least 3/4
(and at most 2) to its side long before the 1,000th iteration (after 170-240 iterations on
the paper's sizes, the UCI sets and the portfolio's 200 x 2,000 cores; the rounded factors
last changed at iteration 50-130). The rounded ``U``, ``V`` are then those of all 1,000
iterations, bit for bit, at any ``threshold`` in ``(1/4, 3/4]`` (others run every
iteration); :func:`penalized_factors`, which returns the real values, runs them all.

The update is one fused numba pass per factor (the same IEEE operations as the numpy
expressions); on sparse input (at most :data:`SPARSE_DENSITY` ones) ``WᵀA`` and ``AHᵀ`` are
summed over the ones of ``A``, equal to BLAS's products up to the last bits, and the
iterations between two convergence tests run in one compiled call without the GIL
(:func:`_penalized_sparse_steps`): on the portfolio's sampled cores, beside its other
threads, the Python loop had waited for the GIL at each of its ten calls per iteration
(planted 10⁵ x 1,000, r = 5: the default 0.18 -> 0.12 s; the rounded ``U``, ``V`` the same
on 160 sparse instances).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numba
import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import pattern_cross_into
from bmfdsl.validation import check_binary_matrix, check_random_state, check_rank

_EPS = float(np.finfo(np.float64).eps)
#: Largest share of ones at which the data terms ``WᵀA`` and ``AHᵀ`` are summed over the ones
#: of ``A`` (:meth:`bmfdsl.linalg.SparseMatrix.cross`) rather than by dense BLAS
#: products: penalized at 100 x 1,000, rank 5, 5% ones took 0.06 s instead of 0.13 s; beyond
#: about 15% ones BLAS is faster. The sums differ from BLAS's in the last bits only; the rounded
#: ``U``, ``V`` were the same on each of 154 instances tried (random at 2-12% ones, planted,
#: the four UCI sets at k = 2, 5, 10), and tests compare them on more.
SPARSE_DENSITY = 0.125
#: Work of one iteration (:func:`sparse_loop_work`) below which sparse input runs its iterations
#: in compiled calls (:func:`_penalized_sparse_steps`; thresholded's NMF likewise): the
#: portfolio's sampled cores (200 x 2,000 at 2% ones, r = 10: 0.3 M) and the paper's sizes;
#: above it the Python loop's overhead is small and the sums over the ones use threads
#: (``SparseMatrix.cross``).
COMPILED_MAX_WORK = 2**22
#: Work per compiled call (a bound on the iterations between two returns to Python, so that
#: Ctrl-C is felt within about a tenth of a second); the result does not depend on it.
COMPILED_CALL_WORK = 2**26
#: Entries at most :data:`SETTLED_LOW` or at least :data:`SETTLED_HIGH` (and at most
#: :data:`SETTLED_TOP`) stay so once the penalty weight reaches :func:`settling_penalty`; the
#: rounding at any threshold between them is then final.
SETTLED_LOW = 0.25
SETTLED_HIGH = 0.75
SETTLED_TOP = 2.0
#: The largest penalty weight an iteration uses: past about 1e308 the updates' products
#: overflow to infinity and their quotients to NaN (``lambda = 2`` after about 1,030
#: iterations, the default 1.1 after about 7,400).
LARGEST_PENALTY = 1e290


def penalized(
    A: Any,
    rank: int,
    *,
    random_state: Any = None,
    max_iter: int = 1000,
    test_conv: int | None = 1000,
    lambda_w: float = 1.1,
    lambda_h: float = 1.1,
    min_residuals: float | None = 1e-5,
    threshold: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Penalty-function BMF (Zhang et al. 2007) with nimfa ``Bmf``'s update rules.

    See the module docstring for the exact computation.

    Args:
        A: ``m x n`` 0/1 matrix; a scipy sparse one is densified (this method works on
            dense residuals; :func:`bmfdsl.factorize` hands it only the sampled core when
            ``sample_rows`` is set).
        rank: target rank ``r``.
        random_state: seed of the random initialisation.
        max_iter: maximum number of iterations (the paper: 1000).
        test_conv: test convergence every this many iterations (the paper: 1000; ``None``
            tests every iteration, nimfa's default).
        lambda_w, lambda_h: growth factors of the penalty weights (nimfa's default 1.1).
        min_residuals: smallest objective improvement between tests that keeps going.
        threshold: final rounding threshold (entries ``>= threshold`` become 1); in
            ``(1/4, 3/4]`` the loop stops once that rounding is settled.

    Returns:
        ``(U, V)``: ``m x r`` and ``n x r`` ``int8`` arrays.

    >>> A = np.kron(np.eye(2, dtype=int), np.ones((3, 3), dtype=int))
    >>> U, V = penalized(A, 2, random_state=1)
    >>> int(np.abs(A - U @ V.T).sum())
    0
    """
    W, H = penalized_factors(
        A,
        rank,
        random_state=random_state,
        max_iter=max_iter,
        test_conv=test_conv,
        lambda_w=lambda_w,
        lambda_h=lambda_h,
        min_residuals=min_residuals,
        until_settled=SETTLED_LOW < threshold <= SETTLED_HIGH,
    )
    U = (threshold <= W).astype(np.int8)
    V = np.ascontiguousarray((threshold <= H).T.astype(np.int8))
    return U, V


def penalized_factors(
    A: Any,
    rank: int,
    *,
    random_state: Any = None,
    init: tuple[Any, Any] | None = None,
    max_iter: int = 1000,
    test_conv: int | None = 1000,
    lambda_w: float = 1.1,
    lambda_h: float = 1.1,
    min_residuals: float | None = 1e-5,
    until_settled: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """The real-valued ``W`` (``m x r``) and ``H`` (``r x n``) before the final rounding.

    ``init`` replaces the random initialisation by a given ``(W, H)`` (nimfa's ``"fixed"``
    seeding); the normalisation is applied to it all the same. ``until_settled`` stops the
    loop once no entry can cross from at most :data:`SETTLED_LOW` or at least
    :data:`SETTLED_HIGH` any more (:func:`settling_penalty`; never where ``lambda_w`` or
    ``lambda_h`` is below 1): the values are then those of that iteration, but the rounding
    at any threshold in ``(SETTLED_LOW, SETTLED_HIGH]`` is the full loop's. The loop also
    ends before a penalty weight would pass :data:`LARGEST_PENALTY` (the paper's settings
    reach 2.5e38), where the updates would overflow and leave every entry NaN.

    >>> W, H = penalized_factors(np.ones((2, 2)), 1, random_state=0, max_iter=50, test_conv=None)
    >>> np.round(W @ H, 3).tolist()
    [[1.0, 1.0], [1.0, 1.0]]
    """
    A = check_binary_matrix(A).astype(np.float64)
    rank = check_rank(rank, A.shape)
    if max_iter < 0 or (test_conv is not None and test_conv < 1):
        raise InvalidParameterError(
            f"max_iter must be >= 0 and test_conv >= 1 or None; got {max_iter}, {test_conv}"
        )
    m, n = A.shape
    if init is None:
        rng = check_random_state(random_state)
        top = A.max()
        W = rng.uniform(0.0, top, (m, rank))
        H = rng.uniform(0.0, top, (rank, n))
    else:
        W = np.array(init[0], dtype=np.float64)
        H = np.array(init[1], dtype=np.float64)
        if W.shape != (m, rank) or H.shape != (rank, n):
            raise InvalidParameterError(
                f"init must be (W, H) of shapes ({m}, {rank}) and ({rank}, {n}); "
                f"got {W.shape} and {H.shape}"
            )
    W, H = _nimfa_normalize(W, H)
    sparse = sparse_products(A)

    penalty_w = penalty_h = 1.0 / max_iter if max_iter else 0.1
    limit = iterations_below_overflow(penalty_w, max(lambda_w, lambda_h))
    if max_iter:
        limit = min(limit, max_iter)
    previous = current = float(np.finfo(np.float64).max)
    iteration = 0
    compiled = compiled_patterns(sparse, m, n, rank)
    H_t = np.ascontiguousarray(H.T) if compiled is not None else H  # the kernel's layout
    settles_at = math.inf
    if until_settled and min(lambda_w, lambda_h) >= 1:
        settles_at = settling_penalty(A, rank)
    settled = False
    while not (settled or iteration >= limit):
        testing = not test_conv or iteration % test_conv == 0
        if testing and iteration > 0:
            if min_residuals and previous - current < min_residuals:
                break
            if current > previous:
                break
        if testing:
            previous = current
        # the iterations up to the next test (the loop's only reads of the iterates)
        steps = int(test_conv - iteration % test_conv if test_conv else 1)
        steps = min(steps, limit - iteration)
        if compiled is not None:
            rows, columns, per_call = compiled
            steps = min(steps, per_call)
            W = np.ascontiguousarray(W)
            penalty_h, penalty_w, done = _penalized_sparse_steps(
                rows.indptr, rows.indices, columns.indptr, columns.indices, W, H_t,
                steps, penalty_h, penalty_w, lambda_h, lambda_w, settles_at,
            )  # fmt: skip
            H = H_t.T
            settled = done < steps
            steps = done
        else:
            for done in range(steps):
                if min(penalty_h, penalty_w) >= settles_at and rounding_settled(W, H):
                    settled = True
                    steps = done
                    break
                data_h = W.T @ A if sparse is None else sparse[1].cross(W).T
                H = _penalized_update(H, data_h, (W.T @ W) @ H, penalty_h)
                data_w = A @ H.T if sparse is None else sparse[0].cross(H.T)
                W = _penalized_update(W, data_w, W @ (H @ H.T), penalty_w)
                penalty_h *= lambda_h
                penalty_w *= lambda_w
                np.maximum(H, _EPS, out=H)  # avoid underflow to 0 (a fixed point of the updates)
                np.maximum(W, _EPS, out=W)
        iteration += steps
        more = not (settled or iteration >= limit)  # else the value would go unread
        if more and (not test_conv or iteration % test_conv == 0):
            residual = A - W @ H
            current = float(np.einsum("ij,ij->", residual, residual))
    return W, np.ascontiguousarray(H)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _penalized_update(
    factor: np.ndarray, data_term: np.ndarray, model_term: np.ndarray, penalty: float
) -> np.ndarray:
    """One multiplicative update of ``factor`` (``H`` or ``W``), element by element:
    ``F ∘ (D + 3λ F∘F) / (M + 2λ (F+eps)³ + λ F)`` with ``D`` the data term (``WᵀA`` or
    ``AHᵀ``) and ``M`` the model term (``WᵀWH`` or ``WHHᵀ``); exact zeros in numerator and
    denominator become eps (as nimfa's ``elop``).

    The same IEEE operations in the same order as the numpy expression
    ``F * ((D + 3.0 * λ * F * F) / (M + 2.0 * λ * (F + eps) ** 3 + λ * F))`` (the cube as
    two products), so the same bits, in one pass instead of a dozen temporaries: the numpy
    form spent most of its time in their overhead at the cores the pipeline hands it.
    """
    updated = np.empty(factor.shape)
    triple = 3.0 * penalty
    double = 2.0 * penalty
    for i in range(factor.shape[0]):
        for j in range(factor.shape[1]):
            value = factor[i, j]
            numerator = data_term[i, j] + triple * value * value
            shifted = value + _EPS
            denominator = model_term[i, j] + double * (shifted * shifted * shifted)
            denominator = denominator + penalty * value
            if numerator == 0:
                numerator = _EPS
            if denominator == 0:
                denominator = _EPS
            updated[i, j] = value * (numerator / denominator)
    return updated


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _penalized_sparse_steps(
    indptr: np.ndarray,
    indices: np.ndarray,
    t_indptr: np.ndarray,
    t_indices: np.ndarray,
    W: np.ndarray,
    H_t: np.ndarray,
    steps: int,
    penalty_h: float,
    penalty_w: float,
    lambda_h: float,
    lambda_w: float,
    settles_at: float,
) -> tuple[float, float, int]:
    """``steps`` iterations of the loop in place on ``W`` (``m x r``) and ``H_t`` (``Hᵀ``,
    ``n x r``) for a 0/1 ``A`` given as the CSR patterns of ``A`` and ``Aᵀ``, fewer if the
    rounding settles first (both penalty weights at least ``settles_at`` and
    :func:`rounding_settled`); returns the grown penalty weights and the iterations done. The
    data terms are summed over the ones in index order
    (:func:`~bmfdsl.linalg.pattern_cross_into`), the model terms are BLAS products (from
    numba, so the same as numpy's up to the last bits), the updates as
    :func:`_penalized_update` computes them: one call instead of ten per iteration, without
    the GIL (beside the portfolio's other threads, the loop waited for it at every call)."""
    m, rank = W.shape
    n = H_t.shape[0]
    data_w = np.empty((m, rank))
    data_h = np.empty((n, rank))
    for done in range(steps):
        if min(penalty_h, penalty_w) >= settles_at and rounding_settled(W, H_t):
            return penalty_h, penalty_w, done
        model_h = update_terms(t_indptr, t_indices, W, H_t, data_h)
        H_t[:, :] = _penalized_update(H_t, data_h, model_h, penalty_h)
        model_w = update_terms(indptr, indices, H_t, W, data_w)
        W[:, :] = _penalized_update(W, data_w, model_w, penalty_w)
        penalty_h *= lambda_h
        penalty_w *= lambda_w
        floor_at_eps(H_t)  # avoid underflow to 0 (a fixed point of the updates)
        floor_at_eps(W)
    return penalty_h, penalty_w, steps


def iterations_below_overflow(penalty: float, growth: float) -> int:
    """How many iterations, starting at weight ``penalty`` and multiplying it by ``growth``
    after each, use a weight of at most :data:`LARGEST_PENALTY` (``sys.maxsize``: all, for
    ``growth <= 1``).

    >>> iterations_below_overflow(1e-3, 1.1), iterations_below_overflow(1e-3, 2.0)
    (7079, 974)
    """
    if growth <= 1:
        return sys.maxsize
    if penalty > LARGEST_PENALTY:
        return 0
    return math.floor(math.log(LARGEST_PENALTY / penalty) / math.log(growth)) + 1


def settling_penalty(A: np.ndarray, rank: int) -> float:
    """A penalty weight beyond which the updates keep every entry that is at most
    :data:`SETTLED_LOW` there, every one at least :data:`SETTLED_HIGH` (and at most
    :data:`SETTLED_TOP`) there, once all entries of ``W`` and ``H`` are so
    (:func:`rounding_settled`), for a 0/1 ``A`` and growth factors at least 1.

    Why: an update is ``F' = F (D + 3λF²) / (M + 2λ(F+eps)³ + λF)`` with data term
    ``D >= 0``, model term ``M >= 0`` and ``λ`` the weight of that factor (the caller compares
    the smaller of the two weights with the one returned here). While every entry is at most ``T``
    (:data:`SETTLED_TOP`), ``D <= T d`` (``d``: the most ones in a row or column of ``A``) and
    ``M <= r max(m, n) T³``. Dropping ``M`` gives ``F' <= (D + 3λF²) / (λ(2F² + 1))``, so
    ``F' <= 3/2 + D/λ <= T`` for ``λ >= T d / (T - 3/2)``, and an ``F <= l`` stays so for
    ``λ l (1 - l)(1 - 2l) >= D`` (the bracket ``l(2F² + 1) - 3F²`` is least at ``F = l``).
    Dropping ``D`` instead, an ``F >= h`` stays so for ``λ h² ((3 - 2h) h - 1) >= h M``
    (``F((3 - 2h)F² - h)`` grows on ``[h, T]``, so ``F = h`` is the tightest). The ``W``
    update reads the new ``H``, which these keep within the same bounds. The weight returned
    is twice the largest of the three: a margin far beyond rounding errors and the ``eps`` in
    ``(F+eps)³``.

    >>> settling_penalty(np.eye(4), 2) > 0
    True
    """
    low, high, top = SETTLED_LOW, SETTLED_HIGH, SETTLED_TOP
    most_ones = float(max(A.sum(axis=0).max(), A.sum(axis=1).max()))
    largest_model_term = rank * max(A.shape) * top**3
    return 2.0 * max(
        top * most_ones / (top - 1.5),
        top * most_ones / (low * (1 - low) * (1 - 2 * low)),
        high * largest_model_term / (high**2 * ((3 - 2 * high) * high - 1)),
    )


@numba.njit(cache=True, nogil=True)
def rounding_settled(W: np.ndarray, H: np.ndarray) -> bool:
    """Whether every entry of ``W`` and ``H`` is at most :data:`SETTLED_LOW`, or at least
    :data:`SETTLED_HIGH` and at most :data:`SETTLED_TOP` (see :func:`settling_penalty`)."""
    return _settled(W) and _settled(H)


@numba.njit(cache=True, nogil=True)
def _settled(F: np.ndarray) -> bool:
    for i in range(F.shape[0]):
        for k in range(F.shape[1]):
            value = F[i, k]
            if not (value <= SETTLED_LOW or SETTLED_HIGH <= value <= SETTLED_TOP):
                return False
    return True


@numba.njit(cache=True, nogil=True)
def floor_at_eps(F: np.ndarray) -> None:
    """Raise the entries of ``F`` below machine epsilon to it, in place (``np.maximum(F, eps,
    out=F)`` inside compiled loops: the multiplicative updates' iterates stay positive)."""
    for i in range(F.shape[0]):
        for k in range(F.shape[1]):
            F[i, k] = max(F[i, k], _EPS)


@numba.njit(cache=True, nogil=True)
def update_terms(
    indptr: np.ndarray, indices: np.ndarray, other: np.ndarray, factor: np.ndarray, data: np.ndarray
) -> np.ndarray:
    """The terms of one multiplicative update of ``factor`` (``Hᵀ`` or ``W``, a row per
    pattern row) given the ``other`` factor: the data term (``(WᵀA)ᵀ`` or ``A Hᵀ``, summed
    over the ones of the pattern into ``data``) and, returned, the model term
    ``factor (otherᵀ other)`` (``((WᵀW) H)ᵀ`` or ``W (H Hᵀ)``, BLAS products)."""
    pattern_cross_into(indptr, indices, other, data)
    return np.dot(factor, np.dot(other.T, other))


def compiled_patterns(
    sparse: tuple[Any, Any] | None, m: int, n: int, rank: int
) -> tuple[Any, Any, int] | None:
    """Where the multiplicative updates run in compiled calls, for the patterns
    :func:`sparse_products` gave: the CSR patterns of ``A`` and ``Aᵀ`` and the iterations per
    call (work at most :data:`COMPILED_CALL_WORK`, so that Ctrl-C is felt between calls);
    ``None`` for dense input or an iteration above :data:`COMPILED_MAX_WORK` (the Python loop,
    whose sums over the ones use the threads of ``SparseMatrix.cross``).

    >>> compiled_patterns(None, 9, 9, 2) is None  # dense input
    True
    >>> compiled_patterns(sparse_products(np.eye(9)), 9, 9, 2)[2]  # 2**26 // (36 + 144)
    372827
    """
    if sparse is None:
        return None
    work = sparse_loop_work(sparse[0].csr.nnz, m, n, rank)
    if work >= COMPILED_MAX_WORK:
        return None
    return sparse[0].csr, sparse[1].csr, max(1, COMPILED_CALL_WORK // work)


def sparse_loop_work(ones: int, m: int, n: int, rank: int) -> int:
    """One iteration's work on sparse input: the data terms over the ``ones`` and the model
    terms' products (:data:`COMPILED_MAX_WORK` and :data:`COMPILED_CALL_WORK` count in it).

    >>> sparse_loop_work(1000, 100, 1000, 5)
    65000
    """
    return 2 * ones * rank + 2 * (m + n) * rank * rank


def sparse_products(A: np.ndarray) -> tuple[Any, Any] | None:
    """For a 0/1 ``A`` with at most :data:`SPARSE_DENSITY` ones: ``A`` and ``Aᵀ`` as sparse
    patterns whose ``cross(F)`` is ``A F`` summed over the ones; else ``None``
    (dense BLAS products are faster, or ``A`` holds other values).

    >>> sparse_products(np.eye(2)) is None, sparse_products(np.eye(9))[0].cross(np.ones((9, 1)))[0]
    (True, array([1.]))
    """
    ones = np.count_nonzero(A)
    if ones > SPARSE_DENSITY * A.size or ones != np.count_nonzero(A == 1):
        return None
    from bmfdsl.linalg import SparseMatrix

    pattern = SparseMatrix.from_dense(A)
    return pattern, SparseMatrix(pattern.csr.T.tocsr())


def _nimfa_normalize(W: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """nimfa's normalisation: element-wise powers of the full diagonal matrices plus eps."""
    D_w = np.diag(W.max(axis=0))
    D_h = np.diag(H.max(axis=1))
    W = W @ (D_w + _EPS) ** -0.5 @ (D_h + _EPS) ** 0.5
    H = (D_h + _EPS) ** -0.5 @ (D_w + _EPS) ** 0.5 @ H
    return W, H
