"""scipy sparse input: checked, factorized and scored without densifying the whole matrix.

A sparse matrix must give exactly what its dense form gives (same seed: same U, V, error and
lower bound), and a sampled run must never make the whole matrix dense (``toarray`` is
watched, and the traced peak memory stays far below the dense size) unless it has so many
ones that a dense copy is small and faster (then exactly once).
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
import scipy.sparse

from bmfdsl import BinaryMatrixFactorization, als, factorize
from bmfdsl.apps import main
from bmfdsl.apps._datasets import make_sparse_planted
from bmfdsl.errors import InvalidMatrixError, ModelTooLargeError
from bmfdsl.linalg import SparseMatrix, as_matrix, relative_error, squared_error
from bmfdsl.pipeline import leverage_scores
from bmfdsl.pipeline._bounds import spectral_bound
from bmfdsl.pipeline._sampling import choose_sample_size
from bmfdsl.pipeline._strategy import structure_sample_rows
from bmfdsl.solvers import solve_bls_with_error
from bmfdsl.validation import check_binary_matrix, check_sparse_binary_matrix


def _random(shape, p, seed):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.int8)


def _planted(m, n, rank, p_u, p_v, noise, seed):
    """A planted low-rank 0/1 matrix with a fraction ``noise`` of its entries flipped."""
    rng = np.random.default_rng(seed)
    U = rng.random((m, rank)) < p_u
    V = rng.random((n, rank)) < p_v
    A = (U.astype(np.int64) @ V.T.astype(np.int64) > 0) ^ (rng.random((m, n)) < noise)
    return A.astype(np.int8)


@pytest.fixture
def watch_toarray(monkeypatch):
    """Record the shape of every sparse matrix made dense (CSR, CSC and COO, both APIs)."""
    shapes = []
    classes = [
        scipy.sparse.csr_array,
        scipy.sparse.csr_matrix,
        scipy.sparse.csc_array,
        scipy.sparse.csc_matrix,
        scipy.sparse.coo_array,
        scipy.sparse.coo_matrix,
    ]
    for cls in classes:
        original = cls.toarray

        def watched(self, *args, _original=original, **kwargs):
            shapes.append(self.shape)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "toarray", watched)
    return shapes


def _same(dense, sparse):
    assert np.array_equal(dense.U, sparse.U) and np.array_equal(dense.V, sparse.V)
    assert dense.error == sparse.error and dense.relative_error == sparse.relative_error
    assert dense.lower_bound == sparse.lower_bound
    for key in ("lower_bound", "error_before_als", "als_solves", "sampled_rows", "transposed"):
        assert dense.info.get(key) == sparse.info.get(key), key


# -- validation --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (scipy.sparse.csr_array([[0, 2], [1, 0]]), r"found 1 other value\(s\), e\.g\. 2"),
        (scipy.sparse.csr_matrix([[0.5, 0.0], [1.0, 0.0]]), r"e\.g\. 0\.5"),
        (scipy.sparse.csr_array([[np.nan, 1.0]]), "1 NaN or infinite"),
        (scipy.sparse.csc_array([[np.inf, 0.0]]), "1 NaN or infinite"),
        (scipy.sparse.csr_array((0, 3), dtype=np.int8), "empty"),
        (scipy.sparse.csr_matrix((4, 0), dtype=np.int8), "empty"),
        # duplicates add up, as toarray() would: 1 + 1 = 2 at (0, 0)
        (scipy.sparse.coo_array(([1, 1], ([0, 0], [0, 0])), shape=(2, 2)), r"e\.g\. 2"),
        (scipy.sparse.coo_array(np.array([1, 0])), "must be 2-D"),
    ],
)
def test_bad_sparse_input_gives_the_typed_error_everywhere(matrix, message):
    for check in (check_sparse_binary_matrix, check_binary_matrix, lambda A: factorize(A, 1)):
        with pytest.raises(InvalidMatrixError, match=message):
            check(matrix)
    with pytest.raises(InvalidMatrixError, match=message):
        factorize(matrix, 1, sample_rows=1)


def test_bad_sparse_input_is_refused_by_the_estimator_with_its_hint():
    with pytest.raises(InvalidMatrixError, match=r"only 0 and 1.*binarize=T"):
        BinaryMatrixFactorization(1).fit(scipy.sparse.csr_array([[0, 2], [1, 0]]))
    with pytest.raises(InvalidMatrixError, match="Negative"):
        BinaryMatrixFactorization(1).fit(scipy.sparse.csr_array([[0, -1], [1, 0]]))
    with pytest.raises(InvalidMatrixError, match="NaN"):
        BinaryMatrixFactorization(1).fit(scipy.sparse.csr_array([[np.nan, 1.0], [1.0, 0.0]]))


def test_validation_drops_explicit_zeros_and_leaves_the_input_alone():
    coo = scipy.sparse.coo_array(([1.0, 0.0, 1.0], ([0, 1, 1], [1, 0, 1])), shape=(3, 2))
    csr = scipy.sparse.csr_matrix(coo)
    csr.data[0] = 0.0  # an explicit zero at (0, 1)
    before = csr.copy()
    checked = check_sparse_binary_matrix(csr)
    assert checked.dtype == np.int8 and checked.nnz == 1 and (checked.data == 1).all()
    assert checked.toarray().tolist() == [[0, 0], [0, 1], [0, 0]]
    assert (csr != before).nnz == 0 and csr.nnz == before.nnz  # not modified
    unsorted = scipy.sparse.csr_array(
        (np.ones(2), np.array([1, 0]), np.array([0, 2])), shape=(1, 2)
    )
    assert check_sparse_binary_matrix(unsorted).toarray().tolist() == [[1, 1]]
    assert unsorted.indices.tolist() == [1, 0]  # the caller's index order is untouched


# -- the data layer -----------------------------------------------------------------------


def test_sparse_data_layer_matches_dense_statistics():
    A = _random((70, 40), 0.15, seed=0)
    U, V = _random((70, 4), 0.4, seed=1), _random((40, 4), 0.4, seed=2)
    data = as_matrix(scipy.sparse.csc_matrix(A))
    assert isinstance(data, SparseMatrix)
    assert data.total == int(A.sum())
    assert data.column_norms.tolist() == A.sum(axis=0).tolist()
    assert data.row_norms.tolist() == A.sum(axis=1).tolist()
    assert np.array_equal(data.cross(V), A.astype(np.int64) @ V)
    assert np.array_equal(data.transposed_cross(U), A.T.astype(np.int64) @ U)
    assert np.array_equal(data.take_rows([5, 5, 0]), A[[5, 5, 0]])
    assert np.array_equal(data.T.csr.toarray(), A.T)
    assert data.T.T is data  # one transposed copy, built once
    error = int(((A.astype(np.int64) - U.astype(np.int64) @ V.T) ** 2).sum())
    assert data.squared_error(U, V) == squared_error(data.csr, U, V) == error
    assert relative_error(error, data.csr) == relative_error(error, A)


def test_column_counts_are_exact_at_any_thread_count():
    # past PARALLEL_MIN_WORK indices the counts are summed over threads' ranges
    from bmfdsl.linalg import kernel_threads, pattern_column_counts
    from bmfdsl.linalg._kernels import PARALLEL_MIN_WORK

    indices = np.random.default_rng(0).integers(0, 97, PARALLEL_MIN_WORK + 5)
    expected = np.bincount(indices, minlength=100)
    with kernel_threads(1):
        alone = pattern_column_counts(indices, 100)
    for threads in (2, 3):
        with kernel_threads(threads):
            split = pattern_column_counts(indices, 100)
        assert split.dtype == np.int64 and np.array_equal(split, expected)
    assert np.array_equal(alone, expected) and alone[97:].tolist() == [0, 0, 0]


@pytest.mark.parametrize("shape", [(300, 90), (90, 300)])
def test_spectral_bound_is_the_dense_number_on_both_routes(shape):
    A = _random(shape, 0.1, seed=3)
    sparse = scipy.sparse.csr_array(A)
    for budget in (None, 3e5):  # the Gram route, then the blocks route
        assert spectral_bound(sparse, 4, max_flops=budget) == spectral_bound(A, 4, max_flops=budget)


def test_leverage_scores_of_a_large_sparse_matrix_match_the_dense_route():
    A = _random((2100, 2100), 0.01, seed=4)  # over 4M entries: the Gram route
    scores = leverage_scores(scipy.sparse.csr_array(A))
    np.testing.assert_allclose(scores, leverage_scores(A), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("one_hot", [False, True])
def test_bls_and_als_on_sparse_equal_dense(one_hot):
    A = _planted(400, 50, 3, 0.3, 0.3, 0.05, seed=5)
    sparse = scipy.sparse.csr_array(A)
    V = _random((50, 3), 0.3, seed=6)
    if one_hot:
        V = np.eye(3, dtype=np.int8)[np.arange(50) % 3]
    dense_U, dense_error = solve_bls_with_error(A, V, one_hot=one_hot)
    sparse_U, sparse_error = solve_bls_with_error(sparse, V, one_hot=one_hot)
    assert np.array_equal(dense_U, sparse_U) and dense_error == sparse_error
    side = "V" if one_hot else None
    dense = als(A, dense_U, V, one_hot=side)  # the compiled loop (small)
    polished = als(sparse, dense_U, V, one_hot=side)  # the statistics loop
    assert np.array_equal(dense.U, polished.U) and np.array_equal(dense.V, polished.V)
    assert dense.history == polished.history and dense.error == polished.error


# -- factorize ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "p", "rank", "sample_rows", "kind"),
    [
        ((40, 30), 0.3, 3, None, scipy.sparse.csr_matrix),  # unsampled: densified once
        ((3000, 40), 0.1, 4, "auto", scipy.sparse.csr_array),  # tall, sampled
        ((60, 3000), 0.05, 3, "auto", scipy.sparse.coo_matrix),  # wide: solved on Aᵀ
        ((2500, 1700), 0.01, 3, 40, scipy.sparse.csc_array),  # over 4M entries: Gram routes
    ],
)
def test_factorize_sparse_equals_dense(shape, p, rank, sample_rows, kind):
    A = _planted(*shape, rank, 0.2, 0.2, p / 4, seed=sum(shape))
    dense = factorize(A, rank, sample_rows=sample_rows, random_state=0)
    sparse = factorize(kind(A), rank, sample_rows=sample_rows, random_state=0)
    _same(dense, sparse)


@pytest.mark.parametrize("method", ["baseline", "thresholded"])
def test_comparison_methods_and_one_hot_on_sparse_equal_dense(method):
    A = _planted(2500, 30, 3, 0.3, 0.3, 0.05, seed=7)
    sparse = scipy.sparse.csr_array(A)
    _same(
        factorize(A, 3, method=method, sample_rows="auto", random_state=1),
        factorize(sparse, 3, method=method, sample_rows="auto", random_state=1),
    )
    _same(
        factorize(A, 3, one_hot="V", sample_rows="auto", random_state=1),
        factorize(sparse, 3, one_hot="V", sample_rows="auto", random_state=1),
    )


def test_masked_sparse_input_is_densified_and_equals_dense():
    A = _random((12, 9), 0.4, seed=13)
    mask = _random((12, 9), 0.8, seed=14)
    dense = factorize(A, 2, mask=mask, random_state=0)
    sparse = factorize(scipy.sparse.csr_array(A), 2, mask=mask, random_state=0)
    assert np.array_equal(dense.U, sparse.U) and dense.error == sparse.error


def test_a_sparse_matrix_too_big_to_densify_is_refused_before_allocating(watch_toarray):
    m, n = 200_000, 20_000  # 3.7 GiB dense, 40 ones
    rows, cols = np.arange(0, m, 5000), np.arange(0, n, 500)
    A = scipy.sparse.csr_array((np.ones(rows.size, np.int8), (rows, cols)), shape=(m, n))
    with pytest.raises(ModelTooLargeError, match="sample_rows='auto'") as raised:
        factorize(A, 2, random_state=0)
    assert "3.7 GiB" in str(raised.value)
    assert not watch_toarray  # refused before anything was made dense


def test_a_sampled_sparse_run_never_densifies_the_matrix(watch_toarray):
    m, n = 150_000, 600
    A = make_sparse_planted(m, n, 4, random_state=8)
    warm = scipy.sparse.csr_array(_random((2100, 30), 0.1, seed=0))
    factorize(warm, 4, sample_rows="auto", random_state=0)  # numba loads outside the trace
    watch_toarray.clear()
    tracemalloc.start()
    try:
        result = factorize(A, 4, sample_rows="auto", random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.info["sampled_rows"] == choose_sample_size(m, n, 4)
    assert result.error == squared_error(A, result.U, result.V)
    # only sampled rows (the core, the portfolio's uniform sample) and n x n Gram matrices
    # were made dense, never m x n
    most_rows = max(structure_sample_rows((m, n), 4), n)
    assert watch_toarray and all(rows * cols <= most_rows * n for rows, cols in watch_toarray)
    # the dense int8 matrix alone would be 90 MB; the run's own peak (chunks, O(m r) codes,
    # n x n Grams) stays far below it
    assert peak < m * n / 2, peak


def test_a_sampled_sparse_run_with_many_ones_densifies_once_and_equals_dense(watch_toarray):
    A = _planted(6000, 40, 3, 0.4, 0.4, 0.02, seed=21)
    sparse = scipy.sparse.csr_array(A)
    assert SparseMatrix(sparse).dense_pays()
    assert not SparseMatrix(scipy.sparse.csr_array(_random((6000, 40), 0.1, seed=2))).dense_pays()
    dense_result = factorize(A, 3, sample_rows="auto", random_state=0)
    watch_toarray.clear()
    sparse_result = factorize(sparse, 3, sample_rows="auto", random_state=0)
    _same(dense_result, sparse_result)
    assert watch_toarray.count(A.shape) == 1
    assert sparse_result.info["storage"] == "dense"


def test_a_sampled_dense_run_with_few_ones_runs_on_its_pattern():
    A = _planted(8000, 60, 3, 0.05, 0.1, 0.002, seed=22)
    assert np.count_nonzero(A) < 0.03 * A.size
    sparse_result = factorize(scipy.sparse.csr_array(A), 3, sample_rows="auto", random_state=0)
    dense_result = factorize(A, 3, sample_rows="auto", random_state=0)
    _same(dense_result, sparse_result)
    assert dense_result.info["storage"] == sparse_result.info["storage"] == "sparse"
    # unsampled, the core solve takes A dense as it is; with more ones, dense stays dense
    assert factorize(A, 3, random_state=0).info["storage"] == "dense"
    more = _planted(8000, 60, 3, 0.3, 0.3, 0.01, seed=23)
    assert factorize(more, 3, sample_rows="auto").info["storage"] == "dense"
    assert factorize(scipy.sparse.csr_array(more), 3, sample_rows=40).info["storage"] == "dense"


def test_estimator_on_sparse_equals_dense_and_transform_stays_sparse(watch_toarray):
    X = _planted(2400, 30, 3, 0.3, 0.3, 0.03, seed=9)
    sparse = scipy.sparse.csr_matrix(X)
    options = {"n_components": 3, "sample_rows": "auto", "random_state": 0}
    dense_model = BinaryMatrixFactorization(**options)
    sparse_model = BinaryMatrixFactorization(**options)
    W = dense_model.fit_transform(X)
    W_sparse = sparse_model.fit_transform(sparse)
    assert np.array_equal(W, W_sparse)
    assert np.array_equal(dense_model.components_, sparse_model.components_)
    assert dense_model.reconstruction_err_ == sparse_model.reconstruction_err_
    watch_toarray.clear()
    assert np.array_equal(sparse_model.transform(sparse), dense_model.transform(X))
    assert sparse_model.score(sparse) == dense_model.score(X)
    assert watch_toarray == []  # transform and score never densify
    assert sparse_model.__sklearn_tags__().input_tags.sparse


def test_estimator_binarizes_sparse_values_as_dense(watch_toarray):
    rng = np.random.default_rng(10)
    X = np.where(_random((2200, 20), 0.2, seed=11) == 1, rng.random((2200, 20)) + 0.01, 0.0)
    options = {"n_components": 2, "binarize": 0.5, "sample_rows": "auto", "random_state": 0}
    dense = BinaryMatrixFactorization(**options).fit(X)
    sparse = BinaryMatrixFactorization(**options).fit(scipy.sparse.csr_array(X))
    assert np.array_equal(dense.components_, sparse.components_)
    watch_toarray.clear()
    assert np.array_equal(sparse.transform(scipy.sparse.csr_array(X)), dense.transform(X))
    assert watch_toarray == []


def test_cli_factorizes_a_sparse_npz_like_its_dense_npy(tmp_path, capsys):
    A = _planted(2200, 25, 2, 0.3, 0.3, 0.02, seed=12)
    scipy.sparse.save_npz(tmp_path / "A.npz", scipy.sparse.csr_matrix(A))
    np.save(tmp_path / "A.npy", A)
    reports = []
    for name in ("A.npz", "A.npy"):
        out = tmp_path / name.replace(".", "_")
        argv = ["factorize", str(tmp_path / name), "-r", "2", "--sample-rows", "auto"]
        assert main([*argv, "--seed", "3", "--out", str(out)]) == 0
        reports.append((out / "report.json").read_text())
        assert np.loadtxt(out / "U.csv", delimiter=",", ndmin=2).shape == (2200, 2)
    sparse_report, dense_report = (json.loads(text) for text in reports)
    for key in ("error", "lower_bound", "relative_error"):
        assert sparse_report[key] == dense_report[key]
    capsys.readouterr()
