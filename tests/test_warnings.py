"""Warnings a user needs, and none they do not: no rank beyond the code tables warns (no route
scores ``2**r`` codes there; the cost model still says what one would take), and a dask array
handed to the estimator (which loads it whole) does."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bmfdsl import BinaryMatrixFactorization, PerformanceWarning, factorize, make_exact_rank
from bmfdsl.solvers.native import PRACTICAL_MAX_RANK, exact_solve_seconds


def test_no_rank_beyond_the_code_tables_warns_and_a_masked_one_says_why_it_stops():
    """Free factors (branch and bound) and one-hot models (clusters) beyond rank 12 score no
    ``2**r`` codes, so nothing warns; a masked model's weighted solves would, and refuse."""
    from bmfdsl.errors import InvalidParameterError

    A = make_exact_rank(16, 16, 2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        for options in ({}, {"method": "baseline"}, {"one_hot": "V"}, {"one_hot": "U"}):
            factorize(A, PRACTICAL_MAX_RANK + 1, random_state=0, **options)
    seen = np.ones(A.shape, dtype=np.int8)
    seen[0, 0] = 0
    with pytest.raises(InvalidParameterError, match=r"enumerates 2\*\*rank row codes; rank 13"):
        factorize(A, PRACTICAL_MAX_RANK + 1, mask=seen, random_state=0)
    # the estimator's masked transform solves U for its fitted V: the same refusal
    model = BinaryMatrixFactorization(n_components=PRACTICAL_MAX_RANK + 1, random_state=0)
    model.fit(A)
    with pytest.raises(InvalidParameterError, match=r"enumerates 2\*\*rank row codes; rank 13"):
        model.transform(A, mask=seen)


def test_the_expected_time_follows_the_cost_model():
    # doubling per rank (the codes dominate on a thin matrix) and linear in the rows
    assert exact_solve_seconds((100, 20), 16) > 1.9 * exact_solve_seconds((100, 20), 15)
    ratio = exact_solve_seconds((20_000, 20), 14) / exact_solve_seconds((10_000, 20), 14)
    assert 1.9 < ratio < 2.1


def test_the_estimator_warns_that_it_loads_a_dask_array():
    da = pytest.importorskip("dask.array", reason="needs the dask extra")
    A = make_exact_rank(12, 8, 2, random_state=0)
    model = BinaryMatrixFactorization(n_components=2, random_state=0)
    with pytest.warns(PerformanceWarning, match="loads a dask array fully into memory"):
        W = model.fit_transform(da.from_array(A, chunks=(6, 8)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)  # numpy input: no warning
        W_numpy = BinaryMatrixFactorization(n_components=2, random_state=0).fit_transform(A)
    assert np.array_equal(W, W_numpy)


def test_a_generic_backend_on_a_large_unsampled_model_is_warned_about():
    """11,250 variables (120 x 30 at rank 3): the warning names the size and the ways out;
    native (structure-aware) and a time-limited call are not warned about."""
    A = make_exact_rank(120, 30, 3, random_state=0)
    with pytest.warns(PerformanceWarning, match="11,250 variables.*sample_rows='auto'.*time_l"):
        factorize(A, 3, backend="neal", num_reads=1, num_sweeps=10, random_state=0)
    with pytest.warns(PerformanceWarning) as caught:  # steepest takes no time_limit
        factorize(A, 3, backend="steepest", num_reads=1, random_state=0)
    assert "time_limit" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        factorize(A, 3, random_state=0)
        factorize(A, 3, backend="neal", num_reads=1, time_limit=0.5, random_state=0)


def test_every_warning_names_the_users_line_whatever_the_entry():
    """Raised deep in the package (the pipeline, the estimator, a model compile, a deprecated
    keyword), each warning is attributed to this file: the line that called bmfdsl."""
    from bmfdsl import compile_model
    from bmfdsl.modeling import ModelBuilder, squared_residual

    A = make_exact_rank(120, 30, 3, random_state=0)
    small = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 2), dtype=np.int8))
    calls = [
        lambda: factorize(A, 3, backend="neal", num_reads=1, num_sweeps=10, random_state=0),
        lambda: factorize(small, 2, model_data={"k": 2}, random_state=0),
        lambda: compile_model("at-most-k-bmf", small, 2, data={"kk": 2}),
        lambda: squared_residual(small, np.zeros(small.shape), weights=np.ones(small.shape)),
        lambda: ModelBuilder(small, rank=1).declare_bmf(weights=np.ones(small.shape)),
    ]
    try:
        import dask.array as da

        chunks = da.from_array(small, chunks=(3, 4))
        estimator = BinaryMatrixFactorization(n_components=2, random_state=0)
        calls.append(lambda: estimator.fit(chunks))
    except ImportError:  # the dask extra: the other entries are still checked
        pass
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert caught, call
        assert {warning.filename for warning in caught} == {__file__}, [
            (str(w.message)[:60], w.filename) for w in caught
        ]
