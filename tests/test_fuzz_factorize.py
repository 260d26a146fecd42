"""Property-based fuzzing of ``factorize``'s invariants over shapes, dtypes, layouts and ranks.

Whatever the input: factors are 0/1 of shapes ``(m, r)`` and ``(n, r)``, the reported error
is ``||A - U Vᵀ||²`` recomputed here by brute force, the relative error is that over
``||A||²``, and the same seed gives bit-identical factors.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bmfdsl import factorize

DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.float32, np.float64]
LAYOUTS = ["C", "F", "strided", "sparse", "list"]
METHODS = ["qubo", "baseline", "thresholded", "penalized"]


@st.composite
def problems(draw):
    m = draw(st.integers(1, 9))
    n = draw(st.integers(1, 9))
    bits = draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n))
    matrix = np.array(bits, dtype=draw(st.sampled_from(DTYPES))).reshape(m, n)
    rank = draw(st.integers(1, min(m, n)))
    return matrix, rank, draw(st.sampled_from(LAYOUTS)), draw(st.sampled_from(METHODS))


def as_layout(matrix: np.ndarray, layout: str):
    if layout == "F":
        return np.asfortranarray(matrix)
    if layout == "strided":  # a view with gaps between its elements
        wide = np.zeros((matrix.shape[0], 2 * matrix.shape[1]), dtype=matrix.dtype)
        wide[:, ::2] = matrix
        return wide[:, ::2]
    if layout == "sparse":
        return scipy.sparse.csr_matrix(matrix)
    if layout == "list":
        return matrix.astype(int).tolist()
    return np.ascontiguousarray(matrix)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,  # the same examples every run: no flaky CI
    database=None,  # and no .hypothesis folder left in the checkout
    suppress_health_check=[HealthCheck.too_slow],
)
@given(problems(), st.integers(0, 2**31 - 1))
def test_factorize_invariants_hold_for_any_binary_input(problem, seed):
    matrix, rank, layout, method = problem
    A = as_layout(matrix, layout)
    result = factorize(A, rank, method=method, random_state=seed)
    m, n = matrix.shape
    U, V = np.asarray(result.U), np.asarray(result.V)
    assert U.shape == (m, rank) and V.shape == (n, rank)
    assert set(np.unique(U)) <= {0, 1} and set(np.unique(V)) <= {0, 1}
    exact = matrix.astype(np.int64)
    residual = exact - U.astype(np.int64) @ V.astype(np.int64).T
    error = int((residual**2).sum())
    assert result.error == error
    total = int(exact.sum())
    assert result.relative_error == (error / total if total else 0.0)
    again = factorize(as_layout(matrix, layout), rank, method=method, random_state=seed)
    assert np.array_equal(again.U, U) and np.array_equal(again.V, V)
