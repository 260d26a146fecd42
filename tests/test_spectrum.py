"""The cheap top of the spectrum: the Lanczos bound is proven (never below the true sum of the
top eigenvalues, so the lower bound never above the exact one or a brute-force optimum, even
when Lanczos is wrong), tight, and the Cholesky leverage scores are the eigendecomposition's."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse

from bmfdsl import make_bernoulli
from bmfdsl.apps._datasets import make_sparse_planted
from bmfdsl.linalg import dense_gram
from bmfdsl.pipeline import _bounds as bounds
from bmfdsl.pipeline import _sampling as sampling
from bmfdsl.pipeline import _spectrum as spectrum
from bmfdsl.pipeline import leverage_scores
from bmfdsl.pipeline._bounds import spectral_bound
from bmfdsl.pipeline._spectrum import gram_inverse, top_eigenvalue_sum_bound


def _brute_force_optimum(A: np.ndarray, rank: int) -> int:
    """min ||A - U Vᵀ||² over every binary V, with each row of U chosen best for it."""
    codes = np.array(list(itertools.product([0, 1], repeat=rank)), dtype=np.int64)
    best = None
    for choice in itertools.product(range(len(codes)), repeat=A.shape[1]):
        products = codes @ codes[list(choice)].T  # every candidate row of U Vᵀ
        errors = ((A[:, None, :] - products[None, :, :]) ** 2).sum(axis=2)
        total = int(errors.min(axis=1).sum())
        best = total if best is None else min(best, total)
    assert best is not None
    return best


def _matrices():
    yield make_bernoulli(400, 300, 0.3, random_state=0)
    yield make_bernoulli(300, 500, 0.05, random_state=1)
    yield make_sparse_planted(3000, 320, 5, random_state=2).toarray()
    planted = np.kron(np.eye(4, dtype=np.int8), np.ones((100, 80), dtype=np.int8))
    yield planted  # 400 x 320, four equal singular values, then zeros


@pytest.mark.parametrize("rank", [1, 3, 10])
def test_the_lanczos_bound_is_never_below_the_top_eigenvalues_and_is_tight(rank: int) -> None:
    for A in _matrices():
        gram = dense_gram(A if A.shape[0] >= A.shape[1] else A.T)
        eigenvalues = np.linalg.eigvalsh(gram)[::-1]
        exact = float(eigenvalues[:rank].sum())
        bound = top_eigenvalue_sum_bound(gram, rank)
        assert bound is not None  # these spectra all converge
        assert bound >= exact
        assert bound - exact <= 1e-6 * eigenvalues[0] * rank + 1e-6


@pytest.mark.parametrize("rank", [2, 5])
def test_the_cheap_spectral_bound_is_never_above_the_exact_one(
    rank: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    for A in _matrices():
        cheap = spectral_bound(A, rank)
        with monkeypatch.context() as patch:
            patch.setattr(bounds, "EXACT_EIGENVALUES_MAX_SIZE", 10**6)
            exact = spectral_bound(A, rank)
        assert cheap <= exact
        assert cheap >= exact - rank  # loses at most a unit per eigenvalue here
        assert spectral_bound(scipy.sparse.csr_array(A), rank) == cheap


@pytest.mark.parametrize("rank", [1, 2])
def test_the_lanczos_route_never_beats_brute_force_on_tiny_cases(
    rank: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounds, "EXACT_EIGENVALUES_MAX_SIZE", 0)  # every Gram takes Lanczos
    rng = np.random.default_rng(7)
    for index in range(16):
        m, n = int(rng.integers(3, 6)), int(rng.integers(3, 5))
        A = (rng.random((m, n)) < (0.3, 0.5, 0.7)[index % 3]).astype(np.int8)
        assert spectral_bound(A, rank) <= _brute_force_optimum(A, rank)


def test_wrong_ritz_values_are_refused_not_trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    A = make_bernoulli(400, 300, 0.3, random_state=3)
    gram = dense_gram(A)
    exact = float(np.linalg.eigvalsh(gram)[::-1][:3].sum())
    import scipy.sparse.linalg

    true_eigsh = scipy.sparse.linalg.eigsh

    def too_small(*args, **kwargs):  # Ritz values halved: Lanczos "missed" half the spectrum
        values, vectors = true_eigsh(*args, **kwargs)
        return values / 2, vectors

    monkeypatch.setattr(scipy.sparse.linalg, "eigsh", too_small)
    bound = top_eigenvalue_sum_bound(gram, 3)
    assert bound is None or bound >= exact  # the Cholesky check fails, or the slack covers it
    monkeypatch.setattr(bounds, "EXACT_EIGENVALUES_MAX_SIZE", 0)
    with monkeypatch.context() as patch:
        patch.setattr(bounds, "EXACT_EIGENVALUES_MAX_SIZE", 10**6)
        expected = spectral_bound(A, 3)
    assert spectral_bound(A, 3) <= expected  # the fallback keeps the bound valid


def test_the_cholesky_scores_match_the_eigendecomposition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(8)
    A = (rng.random((3000, 40)) < 0.3).astype(np.int8)
    A[:, 5] = 0  # a column without ones: its row and column of G are zero
    gram = dense_gram(A)
    assert gram_inverse(gram) is not None
    cholesky = leverage_scores(A)
    monkeypatch.setattr(sampling, "gram_inverse", lambda gram: None)  # by eigenvectors
    eigen = leverage_scores(A)
    np.testing.assert_allclose(cholesky, eigen, rtol=1e-9, atol=1e-12)
    assert cholesky.sum() == pytest.approx(39)
    duplicated = A.copy()
    duplicated[:, 7] = duplicated[:, 8]  # rank deficient: the eigendecomposition decides
    assert gram_inverse(dense_gram(duplicated)) is None


def test_the_bound_is_deterministic_and_shares_the_sampling_gram() -> None:
    from bmfdsl.linalg import as_matrix

    A = make_sparse_planted(15000, 300, 4, random_state=5)  # over 4M entries: the Gram route
    data = as_matrix(A)
    leverage_scores(data)
    assert "gram" in vars(data)  # kept for the bound
    assert spectral_bound(data, 4) == spectral_bound(A, 4) == spectral_bound(A.toarray(), 4)
    assert spectrum.top_eigenvalue_sum_bound(data.gram, 4) == top_eigenvalue_sum_bound(
        data.gram.copy(), 4
    )


def test_the_numba_products_of_the_bound_match_numpy() -> None:
    from bmfdsl.linalg import deflated_shift, symmetric_matvec

    rng = np.random.default_rng(4)
    M = rng.random((50, 50))
    M = M + M.T
    x = rng.standard_normal(50)
    np.testing.assert_allclose(symmetric_matvec(M, x), M @ x, rtol=1e-12)
    vectors = rng.standard_normal((50, 3))
    weights = np.array([3.0, 2.0, 0.5])
    expected = 7.0 * np.eye(50) + (vectors * weights) @ vectors.T - M
    shifted = deflated_shift(M, vectors, weights, 7.0)
    np.testing.assert_allclose(shifted, np.tril(expected), atol=1e-12)  # one triangle


def test_lanczos_on_the_float32_copy_of_a_count_gram_gives_the_same_bits(monkeypatch):
    rng = np.random.default_rng(3)
    A = (rng.random((3000, 300)) < 0.05).astype(np.float64)
    gram = A.T @ A  # counts: exact in float32
    assert spectrum._narrowed(gram).dtype == np.float32
    narrowed = spectrum.top_eigenpairs(gram, 4)
    monkeypatch.setattr(spectrum, "_narrowed", lambda matrix: matrix)
    wide = spectrum.top_eigenpairs(gram.copy(), 4)  # (a new array: not the kept answer)
    assert narrowed is not None and wide is not None
    for narrow_part, wide_part in zip(narrowed, wide, strict=True):
        assert np.array_equal(narrow_part, wide_part)
    assert spectrum._narrowed(gram + 0.5 * np.eye(300) / 3).dtype == np.float64
