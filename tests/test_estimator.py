"""BinaryMatrixFactorization as a scikit-learn estimator: the official checks and the tools."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

from bmfdsl import (
    BinaryMatrixFactorization,
    InvalidMatrixError,
    InvalidParameterError,
    NotFittedError,
    UnknownNameError,
    factorize,
)
from bmfdsl.apps import make_exact_rank

# scikit-learn's checks feed real-valued random data. With ``binarize`` set the estimator
# accepts it (entries >= t count as 1) and passes every check. Without it the estimator takes
# only 0/1 input by design and rejects the random data with one clear error; these are the
# checks that cannot pass for that reason (each fits on real-valued X).
_REAL_VALUED_INPUT = "feeds real-valued X; a 0/1-only estimator rejects it (set binarize=T)"
BINARY_ONLY_EXPECTED_FAILURES = {
    name: _REAL_VALUED_INPUT
    for name in (
        "check_fit_score_takes_y",
        "check_estimators_overwrite_params",
        "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_n_features_in_after_fitting",
        "check_estimators_dtypes",
        "check_dtype_object",
        "check_pipeline_consistency",
        "check_estimators_nan_inf",
        "check_estimator_sparse_tag",
        "check_estimator_sparse_array",
        "check_estimator_sparse_matrix",
        "check_estimators_pickle",
        "check_f_contiguous_array_estimator",
        "check_transformer_data_not_an_array",
        "check_transformer_general",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_fit2d_1sample",
        "check_fit2d_1feature",
        "check_dict_unchanged",
        "check_fit_idempotent",
        "check_fit_check_is_fitted",
        "check_n_features_in",
        "check_fit2d_predict1d",
    )
}


def _expected_failures(estimator: BinaryMatrixFactorization) -> dict[str, str]:
    return BINARY_ONLY_EXPECTED_FAILURES if estimator.binarize is None else {}


@parametrize_with_checks(
    [
        BinaryMatrixFactorization(binarize=0.5, random_state=0),
        BinaryMatrixFactorization(random_state=0),
    ],
    expected_failed_checks=_expected_failures,
)
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def planted(m: int = 24, n: int = 10, r: int = 2, seed: int = 9) -> np.ndarray:
    return make_exact_rank(m, n, r, random_state=seed)


def test_fit_transform_recovers_a_planted_matrix_and_scores_it():
    A = planted()
    estimator = BinaryMatrixFactorization(n_components=2, random_state=0)
    assert not hasattr(estimator, "components_")
    with pytest.raises(NotFittedError, match="fit"):
        estimator.transform(A)
    W = estimator.fit_transform(A)
    assert estimator.components_.shape == (2, 10) and estimator.n_features_in_ == 10
    assert estimator.reconstruction_err_ == 0.0 and estimator.relative_error_ == 0.0
    np.testing.assert_array_equal(estimator.inverse_transform(W), A)
    np.testing.assert_array_equal(estimator.transform(A) @ estimator.components_, A)
    assert estimator.score(A) == 0.0
    flipped = A.copy()
    flipped[0, 0] ^= 1
    # one flipped entry costs at least 0 and at most 1 against the best W for that row
    assert -1.0 <= estimator.score(flipped) <= 0.0
    assert not hasattr(estimator, "labels_")


def test_score_is_minus_the_squared_error_of_the_best_w():
    rng = np.random.default_rng(0)
    A = (rng.random((12, 6)) < 0.4).astype(int)
    estimator = BinaryMatrixFactorization(n_components=2, random_state=0).fit(A)
    H = estimator.components_
    # brute force over every 0/1 row of W: the score is the best achievable error
    patterns = np.array([[a, b] for a in (0, 1) for b in (0, 1)])
    best = sum(min(int(((row - w @ H) ** 2).sum()) for w in patterns) for row in A)
    assert estimator.score(A) == -best


def test_parameters_are_checked_with_typed_errors():
    A = planted()
    estimator = BinaryMatrixFactorization(2)
    with pytest.raises(UnknownNameError, match="n_components"):
        estimator.set_params(rank=3)
    assert estimator.set_params(n_components=3).n_components == 3
    with pytest.raises(InvalidMatrixError, match="features"):
        BinaryMatrixFactorization(2, random_state=0).fit(A).transform(A[:, :5])
    with pytest.raises(InvalidParameterError, match="at most min"):
        BinaryMatrixFactorization(11).fit(A)
    with pytest.raises(InvalidMatrixError, match="binarize"):
        BinaryMatrixFactorization(2).fit(A * 0.7)
    with pytest.raises(InvalidParameterError, match="finite"):
        BinaryMatrixFactorization(2, binarize=float("nan")).fit(A)


def test_binarize_thresholds_real_valued_input():
    A = planted()
    noisy = A * 0.9 + 0.05  # 1 -> 0.95, 0 -> 0.05
    fitted = BinaryMatrixFactorization(2, binarize=0.5, random_state=0).fit(noisy)
    assert fitted.reconstruction_err_ == 0.0
    np.testing.assert_array_equal(fitted.transform(noisy) @ fitted.components_, A)


def test_labels_when_one_hot():
    A = np.kron(np.eye(3, dtype=int), np.ones((4, 3), dtype=int))  # 3 disjoint blocks
    rows = BinaryMatrixFactorization(3, one_hot="U", random_state=0).fit(A)
    assert rows.labels_.shape == (12,)
    # samples of the same block share a cluster, different blocks do not
    assert len(set(rows.labels_)) == 3
    assert all(len(set(rows.labels_[4 * b : 4 * b + 4])) == 1 for b in range(3))
    columns = BinaryMatrixFactorization(3, one_hot="V", random_state=0).fit(A)
    assert columns.labels_.shape == (9,) and len(set(columns.labels_)) == 3


def test_feature_names_and_set_output():
    pd = pytest.importorskip("pandas")
    A = planted()
    frame = pd.DataFrame(A, columns=[f"g{j}" for j in range(A.shape[1])])
    estimator = BinaryMatrixFactorization(2, random_state=0).set_output(transform="pandas")
    W = estimator.fit_transform(frame)
    names = ["binarymatrixfactorization0", "binarymatrixfactorization1"]
    assert list(estimator.get_feature_names_out()) == names
    assert isinstance(W, pd.DataFrame) and list(W.columns) == names
    assert list(estimator.feature_names_in_) == list(frame.columns)
    assert W.index.equals(frame.index)


def test_clone_keeps_parameters_and_drops_fitted_state():
    estimator = BinaryMatrixFactorization(3, backend="neal", random_state=5).fit(planted(r=3))
    copy = clone(estimator)
    assert copy.get_params() == estimator.get_params()
    assert not hasattr(copy, "components_")


def test_pipeline_grid_search_and_cross_validation():
    A = planted(30, 10, 3, seed=4)
    pipeline = Pipeline(
        [
            ("scale", FunctionTransformer(lambda X: X * 2.0)),  # real values: 0 or 2
            ("bmf", BinaryMatrixFactorization(binarize=1.0, random_state=0)),
        ]
    )
    W = pipeline.fit_transform(A)
    assert W.shape == (30, 2)
    search = GridSearchCV(pipeline, {"bmf__n_components": [1, 2, 3]}, cv=KFold(3))
    search.fit(A)
    # the held-out error only falls with the rank on a planted rank-3 matrix
    assert search.best_params_ == {"bmf__n_components": 3}
    assert search.best_score_ == 0.0
    scores = cross_val_score(BinaryMatrixFactorization(1, random_state=0), A, cv=KFold(3))
    assert scores.shape == (3,) and (scores <= 0).all()
    assert (scores < 0).any()  # a rank-1 model cannot fit a planted rank-3 matrix everywhere


def test_same_seed_gives_identical_factors():
    A = (np.random.default_rng(1).random((20, 8)) < 0.5).astype(int)
    first = BinaryMatrixFactorization(3, random_state=11).fit(A)
    second = BinaryMatrixFactorization(3, random_state=11).fit(A)
    np.testing.assert_array_equal(first.components_, second.components_)
    np.testing.assert_array_equal(first.transform(A), second.transform(A))


# --- issue 24 item 4: missing data, as factorize takes it -----------------------------------

PLANTED = np.kron(np.eye(3, dtype=np.int8), np.ones((3, 2), dtype=np.int8))  # 9 x 6, rank 3


def _hidden_ones() -> tuple[np.ndarray, np.ndarray]:
    """PLANTED with two of its ones flipped to 0 and marked missing (mask: 1 = observed)."""
    X = PLANTED.copy()
    mask = np.ones_like(X)
    for i, j in [(0, 0), (4, 2)]:
        X[i, j], mask[i, j] = 0, 0
    return X, mask


def test_item4_estimator_honours_a_masked_arrays_mask():
    X, mask = _hidden_ones()
    masked = np.ma.masked_array(X, mask=mask == 0)
    by_array = BinaryMatrixFactorization(n_components=3, random_state=0).fit(masked)
    by_mask = BinaryMatrixFactorization(n_components=3, random_state=0).fit(X, mask=mask)
    expected = factorize(X, 3, mask=mask, random_state=0)
    for model in (by_array, by_mask):
        assert model.factorization_.info["observed"] == int(mask.sum())
        assert model.factorization_.error == expected.error == 0  # the hidden ones fit
        assert (model.components_ == expected.V.T).all()
    unmasked = BinaryMatrixFactorization(n_components=3, random_state=0).fit(X)
    assert unmasked.factorization_.error > 0  # the flipped cells counted as data
    step = BinaryMatrixFactorization(n_components=3, random_state=0)
    Pipeline([("bmf", step)]).fit(X, bmf__mask=mask)  # a fit parameter, routed by name
    assert step.factorization_.info["observed"] == int(mask.sum())


def test_item4_transform_and_score_count_observed_entries_only():
    X, mask = _hidden_ones()
    model = BinaryMatrixFactorization(n_components=3, random_state=0).fit(X, mask=mask)
    W = model.transform(X, mask=mask)
    assert (W @ model.components_ == PLANTED).all()  # brute-force truth: the planted factors
    assert model.score(X, mask=mask) == 0.0
    assert model.score(np.ma.masked_array(X, mask=mask == 0)) == 0.0
    assert model.score(X) < 0  # without the mask the flipped cells are errors


def test_item4_estimator_refuses_a_mask_and_a_masked_array_at_once():
    X, mask = _hidden_ones()
    masked = np.ma.masked_array(X, mask=mask == 0)
    with pytest.raises(InvalidParameterError, match="not both"):
        BinaryMatrixFactorization(n_components=3, random_state=0).fit(masked, mask=mask)
    with pytest.raises(InvalidParameterError, match="not both"):
        factorize(masked, 3, mask=mask, random_state=0)


# --- issue 24 item 14: clear errors for the estimator's odd arguments ----------------------


def test_item14_estimator_backend_params_must_be_a_dict():
    with pytest.raises(InvalidParameterError, match="backend_params must be a dict"):
        BinaryMatrixFactorization(n_components=2, backend_params=[1, 2]).fit(PLANTED)


@pytest.mark.parametrize(
    ("W", "match"),
    [
        (np.ones((2, 2)), "n_components = 3"),
        (np.array([[np.nan, 1.0, 0.0]]), "NaN"),
        ([["a", "b", "c"]], "numeric"),
        (np.array([[2, 0, 0]]), "only 0 and 1"),
    ],
)
def test_item14_inverse_transform_checks_its_input(W, match):
    model = BinaryMatrixFactorization(n_components=3, random_state=0).fit(PLANTED)
    with pytest.raises(InvalidMatrixError, match=match):
        model.inverse_transform(W)
    assert (model.inverse_transform(model.transform(PLANTED)) == PLANTED).all()


def test_item14_a_nullable_int64_frame_is_valid_input():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(PLANTED).astype("Int64")
    model = BinaryMatrixFactorization(n_components=3, random_state=0).fit(frame)
    assert model.factorization_.error == 0
    assert factorize(frame, 3, random_state=0).error == 0
    frame.iloc[0, 0] = pd.NA
    with pytest.raises(InvalidMatrixError, match="NaN"):
        factorize(frame, 3, random_state=0)


@pytest.mark.parametrize("n_components", [0, 2.0, None])
def test_a_bad_n_components_is_named_as_the_estimator_names_it(n_components):
    with pytest.raises(InvalidParameterError, match=r"^n_components must be"):
        BinaryMatrixFactorization(n_components=n_components, random_state=0).fit(np.eye(4))
