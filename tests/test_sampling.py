"""Leverage-score sampling: closed forms, sums, seeds, the large-matrix route."""

from __future__ import annotations

import numpy as np
import pytest

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import InMemoryMatrix
from bmfdsl.pipeline import _sampling as sampling
from bmfdsl.pipeline import leverage_scores, sample_rows
from bmfdsl.pipeline._sampling import choose_sample_size, sampling_probabilities


def _projection_diagonal(A: np.ndarray) -> np.ndarray:
    """Leverage scores as the diagonal of the projector A A⁺ (independent of the SVD route)."""
    A = A.astype(np.float64)
    return np.diag(A @ np.linalg.pinv(A))


def test_duplicated_rows_share_leverage_and_unique_rows_have_full_leverage() -> None:
    # Ten copies of one row and one unique row: the copies split a leverage of 1 between them.
    A = np.array([[1, 1, 0]] * 10 + [[0, 0, 1]])
    scores = leverage_scores(A)
    np.testing.assert_allclose(scores, [0.1] * 10 + [1.0], atol=1e-12)
    probabilities = sampling_probabilities(A)
    np.testing.assert_allclose(probabilities, [0.05] * 10 + [0.5], atol=1e-12)
    assert probabilities.argmax() == 10


@pytest.mark.parametrize("seed", range(4))
def test_scores_match_projector_diagonal_and_sum_to_rank(seed: int) -> None:
    rng = np.random.default_rng(seed)
    A = (rng.random((25, 8)) < 0.3).astype(np.int8)
    A[:, 7] = A[:, 0]  # a rank-deficient column
    scores = leverage_scores(A)
    np.testing.assert_allclose(scores, _projection_diagonal(A), atol=1e-9)
    assert scores.sum() == pytest.approx(np.linalg.matrix_rank(A))
    probabilities = sampling_probabilities(A)
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert (probabilities >= 0).all()


def _svd_scores(A: np.ndarray) -> np.ndarray:
    """The paper's scores by a thin SVD (numpy's ``matrix_rank`` cut), independent of the
    Gram route."""
    left, singular, _ = np.linalg.svd(A.astype(np.float64), full_matrices=False)
    rank = int(np.sum(singular > singular[0] * max(A.shape) * np.finfo(np.float64).eps))
    return np.einsum("ik,ik->i", left[:, :rank], left[:, :rank])


def test_the_gram_route_matches_the_svd(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    A = (rng.random((300, 10)) < 0.4).astype(np.int8)
    A[:, 9] = A[:, 1]
    np.testing.assert_allclose(leverage_scores(A), _svd_scores(A), atol=1e-9)
    monkeypatch.setattr(sampling, "_CHUNK_ENTRIES", 64)  # forces chunked products
    np.testing.assert_allclose(leverage_scores(A), _svd_scores(A), atol=1e-9)


def test_a_dense_matrix_with_few_ones_takes_the_pattern_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(6)
    A = (rng.random((600, 40)) < 0.025).astype(np.int8)
    A[:, 39] = A[:, 2]  # rank-deficient, as real data often is

    def dense_gram(_: object) -> np.ndarray:
        raise AssertionError("a matrix with 2.5% ones should not take the dense Gram route")

    monkeypatch.setattr(InMemoryMatrix, "gram", property(dense_gram))
    np.testing.assert_allclose(leverage_scores(A), _svd_scores(A), atol=1e-9)


def test_matrix_without_ones_gets_uniform_probabilities() -> None:
    A = np.zeros((4, 3), dtype=int)
    np.testing.assert_array_equal(leverage_scores(A), np.zeros(4))
    np.testing.assert_array_equal(sampling_probabilities(A), np.full(4, 0.25))
    indices, _ = sample_rows(A, 5, random_state=0)
    assert ((indices >= 0) & (indices < 4)).all()


def test_seeds_reproduce_and_sampling_favours_high_leverage_rows() -> None:
    A = np.array([[1, 1, 0]] * 10 + [[0, 0, 1]])
    first = sample_rows(A, 400, random_state=42)
    second = sample_rows(A, 400, random_state=42)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    indices, probabilities = first
    np.testing.assert_allclose(probabilities, sampling_probabilities(A)[indices])
    share_of_unique_row = np.mean(indices == 10)  # expected 0.5, sd 0.025
    assert 0.4 < share_of_unique_row < 0.6
    assert not np.array_equal(sample_rows(A, 400, random_state=43)[0], indices)


def test_sample_size_rule() -> None:
    assert choose_sample_size(30, 30, 5) == 30
    assert choose_sample_size(1999, 30, 3) == 1999
    assert choose_sample_size(2000, 30, 5) == 30
    assert choose_sample_size(50_000, 30, 5) == 30
    assert choose_sample_size(2000, 30, 50) == 50
    with pytest.raises(InvalidParameterError):
        choose_sample_size(0, 30, 5)
    with pytest.raises(InvalidParameterError):
        sample_rows(np.ones((2, 2)), 0)


def _top_left_singular_scores(A: np.ndarray, rank: int) -> np.ndarray:
    """Rank-r leverage scores from a full SVD (independent of the Lanczos route)."""
    left, _, _ = np.linalg.svd(A.astype(np.float64), full_matrices=False)
    return np.einsum("ik,ik->i", left[:, :rank], left[:, :rank])


@pytest.mark.parametrize("sparse", [False, True])
def test_rank_scores_of_a_wide_matrix_match_the_top_singular_vectors(sparse: bool) -> None:
    import scipy.sparse

    rng = np.random.default_rng(7)
    U = (rng.random((400, 3)) < 0.3).astype(np.int8)
    V = (rng.random((300, 3)) < 0.3).astype(np.int8)
    noise = rng.random((400, 300)) < 0.02
    A = ((U @ V.T > 0) ^ noise).astype(np.int8)  # 300 columns: beyond the full-rank size
    data = scipy.sparse.csr_array(A) if sparse else A
    scores = leverage_scores(data, rank=3)
    np.testing.assert_allclose(scores, _top_left_singular_scores(A, 3), atol=1e-8)
    assert scores.sum() == pytest.approx(3.0)
    full = leverage_scores(data)  # without a rank: the paper's full-rank scores
    assert full.sum() == pytest.approx(np.linalg.matrix_rank(A))
    first, _ = sample_rows(data, 20, rank=3, random_state=4)
    again, _ = sample_rows(data, 20, rank=3, random_state=4)
    np.testing.assert_array_equal(first, again)


def test_paper_sized_matrices_keep_full_rank_scores_with_a_rank() -> None:
    rng = np.random.default_rng(8)
    A = (rng.random((3000, 30)) < 0.3).astype(np.int8)
    np.testing.assert_array_equal(leverage_scores(A, rank=3), leverage_scores(A))


@pytest.mark.parametrize("rank", [0, -1, 2.0, True])
def test_a_bad_rank_is_refused(rank: object) -> None:
    with pytest.raises(InvalidParameterError, match="rank"):
        leverage_scores(np.eye(3), rank=rank)  # type: ignore[arg-type]


def test_rank_scores_of_a_dense_matrix_with_few_ones_take_the_pattern_route(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import scipy.sparse

    rng = np.random.default_rng(9)
    A = (rng.random((500, 300)) < 0.02).astype(np.int8)
    expected = leverage_scores(scipy.sparse.csr_array(A), rank=4)

    def dense_gram(_: object) -> np.ndarray:
        raise AssertionError("a matrix with 2% ones should not take the dense Gram route")

    monkeypatch.setattr(InMemoryMatrix, "gram", property(dense_gram))
    np.testing.assert_allclose(leverage_scores(A, rank=4), expected, atol=1e-9)
    np.testing.assert_allclose(expected, _top_left_singular_scores(A, 4), atol=1e-8)


def test_a_wide_sampled_factorization_times_the_shared_gram_and_repeats_for_a_seed() -> None:
    from bmfdsl import factorize

    rng = np.random.default_rng(10)
    U = (rng.random((3000, 2)) < 0.3).astype(np.int8)
    V = (rng.random((300, 2)) < 0.3).astype(np.int8)
    A = ((U @ V.T) > 0).astype(np.int8)
    first = factorize(A, 2, sample_rows="auto", random_state=3)
    again = factorize(A, 2, sample_rows="auto", random_state=3)
    assert {"gram", "sampling"} <= set(first.info["timings"])
    np.testing.assert_array_equal(first.U, again.U)
    np.testing.assert_array_equal(first.V, again.V)
    planted = int(((A - U.astype(int) @ V.T.astype(int)) ** 2).sum())
    assert first.error == again.error <= planted
    assert 0 <= first.lower_bound <= first.error


@pytest.mark.parametrize("sparse", [False, True])
def test_many_rows_are_drawn_in_two_stages_by_the_subsample_scores(
    monkeypatch: pytest.MonkeyPatch, sparse: bool
) -> None:
    import scipy.sparse

    monkeypatch.setattr(sampling, "SCORE_SUBSAMPLE_ROWS", 600)  # the rule at test size
    monkeypatch.setattr(sampling, "SUBSAMPLE_MIN_ROWS", 1500)
    rng = np.random.default_rng(11)
    U = np.zeros((2000, 3), dtype=np.int8)
    U[:40, 0] = 1  # a rare component: 2% of the rows carry it
    U[40:, 1:] = rng.random((1960, 2)) < 0.3
    V = (rng.random((300, 3)) < 0.3).astype(np.int8)
    A = ((U @ V.T) > 0).astype(np.int8)
    data = scipy.sparse.csr_array(A) if sparse else A
    indices, probabilities = sample_rows(data, 200, rank=3, random_state=5)
    again, _ = sample_rows(data, 200, rank=3, random_state=5)
    np.testing.assert_array_equal(indices, again)
    assert indices.min() >= 0 and indices.max() < 2000 and (probabilities > 0).all()
    # the rare component's rows (2% of A) are over-drawn, as by the full scores
    assert np.mean(indices < 40) > 0.1
    monkeypatch.setattr(sampling, "SUBSAMPLE_MIN_ROWS", 4000)  # fewer rows: one stage
    one_stage, p_one = sample_rows(data, 200, rank=3, random_state=5)
    np.testing.assert_allclose(p_one, sampling_probabilities(data, 3)[one_stage])
    # two stages report a row's probability on the whole matrix's scale (its share within
    # the subsample times 600 / 2000): about the one-stage draw's, not 2000 / 600 times it
    assert 0.5 < probabilities.mean() / p_one.mean() < 2.0


def test_subsampled_scores_skip_the_pipelines_shared_gram(monkeypatch: pytest.MonkeyPatch) -> None:
    from bmfdsl import factorize, make_sparse_planted

    monkeypatch.setattr(sampling, "SCORE_SUBSAMPLE_ROWS", 1000)
    monkeypatch.setattr(sampling, "SUBSAMPLE_MIN_ROWS", 4000)
    A = make_sparse_planted(5000, 300, 2, random_state=0)
    result = factorize(A, 2, sample_rows="auto", random_state=0, als=False)
    assert "sampling" in result.info["timings"] and "gram" not in result.info["timings"]
    assert 0 <= result.lower_bound <= result.error


def test_block_scores_by_pairs_of_ones_equal_the_products_and_the_pattern_route() -> None:
    import scipy.sparse

    from bmfdsl.linalg import dense_quadratic_forms, pattern_quadratic_forms

    rng = np.random.default_rng(8)
    block = (rng.random((300, 40)) < 0.1).astype(np.int8)
    M = sampling._score_matrix(block.T.astype(np.float64) @ block, 300)
    by_pairs = sampling._block_scores(block, M)
    np.testing.assert_allclose(by_pairs, np.einsum("ij,jk,ik->i", block, M, block), atol=1e-12)
    csr = scipy.sparse.csr_array(block)
    pattern = pattern_quadratic_forms(csr.indptr, csr.indices, M)
    assert np.array_equal(dense_quadratic_forms(block, M), pattern)  # the same sums, bit for bit
    dense = np.ones((30, 40), dtype=np.int8)  # all pairs: the products' route, same scores
    M_dense = np.eye(40) / 30
    np.testing.assert_allclose(sampling._block_scores(dense, M_dense), np.full(30, 40 / 30))


def _reference_quadratic_form(M: np.ndarray, ones: list[int]) -> float:
    """``a M aᵀ`` summed in the kernels' documented order, one pair chain after another."""
    total = 0.0
    for p, j in enumerate(ones):
        total += M[j, j]
        pairs = 0.0
        for k in ones[p + 1 :]:
            pairs += M[j, k]
        total += 2.0 * pairs
    return total


@pytest.mark.parametrize("share", [0.02, 0.3, 0.9])  # below and above the dense row listing
def test_quadratic_forms_keep_their_order_of_sums_bit_for_bit(share: float) -> None:
    # the sampled rows of a seed depend on these bits: chains run side by side in the kernel,
    # each in its order (rows of 0 to 64 ones: every remainder of the chains' groups of 4)
    import scipy.sparse

    from bmfdsl.linalg import dense_quadratic_forms, pattern_quadratic_forms

    rng = np.random.default_rng(int(share * 100))
    block = (rng.random((200, 64)) < share).astype(np.int8)
    block[0] = 0
    block[1] = 1
    M = rng.standard_normal((64, 64)) * 1e3
    M = M + M.T
    expected = [_reference_quadratic_form(M, list(np.flatnonzero(row))) for row in block]
    assert np.array_equal(dense_quadratic_forms(block, M), expected)
    csr = scipy.sparse.csr_array(block)
    assert np.array_equal(pattern_quadratic_forms(csr.indptr, csr.indices, M), expected)


@pytest.mark.parametrize("columns", [40, 37])  # words of 8 bytes, and a width that has none
def test_dense_quadratic_forms_read_words_and_bytes_alike(columns: int) -> None:
    import scipy.sparse

    from bmfdsl.linalg import dense_quadratic_forms, dense_row_pairs, pattern_quadratic_forms

    rng = np.random.default_rng(columns)
    block = (rng.random((500, columns)) < 0.05).astype(np.int8)
    block[:3] = 0
    block[3, -1] = block[4, 0] = 1  # ones at both ends of a row
    M = rng.standard_normal((columns, columns))
    M = M + M.T
    csr = scipy.sparse.csr_array(block)
    expected = pattern_quadratic_forms(csr.indptr, csr.indices, M)
    # C-contiguous bytes (words where the width allows), a strided view, bools, floats
    for variant in (block, np.asfortranarray(block), block.astype(bool), block.astype(float)):
        assert np.array_equal(dense_quadratic_forms(variant, M), expected)
        assert dense_row_pairs(variant) == float(np.sum(np.diff(csr.indptr) ** 2))


def test_dense_quadratic_forms_take_float16_and_refuse_what_is_not_a_0_1_matrix() -> None:
    from bmfdsl.errors import InvalidMatrixError
    from bmfdsl.linalg import dense_quadratic_forms, dense_row_pairs

    rng = np.random.default_rng(16)
    block = (rng.random((50, 24)) < 0.3).astype(np.int8)
    M = rng.standard_normal((24, 24))
    M = (M + M.T).astype(np.float16).astype(np.float64)  # float16 values, exact in float64
    expected = dense_quadratic_forms(block, M)
    half = block.astype(np.float16)  # numba has no float16: the kernels get its nonzeros
    assert np.array_equal(dense_quadratic_forms(half, M), expected)
    assert np.array_equal(dense_quadratic_forms(half, M.astype(np.float16)), expected)
    assert dense_row_pairs(half) == dense_row_pairs(block)
    with pytest.raises(InvalidMatrixError, match="numeric 0/1 array"):
        dense_quadratic_forms(block.astype(str), M)
    with pytest.raises(InvalidMatrixError, match="2-D"):
        dense_row_pairs(block[0])


@pytest.mark.parametrize(
    ("M", "message"),
    [
        (np.eye(5), "n x n for a block of n = 6"),  # read out of bounds before
        (np.ones((6, 5)), "square"),
        (np.eye(6, dtype=complex), "real"),
    ],
)
def test_the_quadratic_forms_refuse_an_m_that_does_not_fit(M: np.ndarray, message: str) -> None:
    import scipy.sparse

    from bmfdsl.linalg import dense_quadratic_forms, pattern_quadratic_forms

    block = np.ones((3, 6), dtype=np.int8)
    with pytest.raises(InvalidParameterError, match=message):
        dense_quadratic_forms(block, M)
    csr = scipy.sparse.csr_array(block)
    with pytest.raises(InvalidParameterError):  # a column beyond M, or M not square and real
        pattern_quadratic_forms(csr.indptr, csr.indices, M)


def test_the_pattern_quadratic_forms_refuse_a_row_pointer_past_the_indices() -> None:
    from bmfdsl.linalg import pattern_quadratic_forms

    indices = np.array([0, 1, 1])
    with pytest.raises(InvalidParameterError, match="end within the 3 indices"):
        pattern_quadratic_forms(np.array([0, 2, 5]), indices, np.eye(2))  # read past before
    with pytest.raises(InvalidParameterError, match="starting at 0"):
        pattern_quadratic_forms(np.array([1, 2, 3]), indices, np.eye(2))
    with pytest.raises(InvalidParameterError, match="nondecreasing"):
        pattern_quadratic_forms(np.array([0, 3, 2]), indices, np.eye(2))
    assert pattern_quadratic_forms(np.array([0, 2, 3]), indices, np.eye(2)).tolist() == [2, 1]
