"""Classical methods: baseline by hand, thresholded against brute force, penalized, registry."""

from __future__ import annotations

import numpy as np
import pytest

from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.solvers.methods import METHODS, _thresholded, baseline, get_method
from bmfdsl.solvers.methods._penalized import penalized, penalized_factors
from bmfdsl.solvers.methods._thresholded import (
    nmf,
    normalize_factors,
    threshold_search,
    thresholded,
)


def _error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    residual = np.asarray(A, dtype=np.int64) - U.astype(np.int64) @ V.T.astype(np.int64)
    return int((residual**2).sum())


# ----------------------------------------------------------------------------- baseline
# Expected factors below were worked out by hand from S1 Algorithm 2.

STAIRS = np.array([[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 0, 1]])


def test_baseline_row_elimination_by_hand() -> None:
    # k=1: row sums (3,1,2), column sums (3,1,1,1): 3 < 3 is false, so row 0 goes.
    U, V = baseline(STAIRS, 1)
    assert U.tolist() == [[1], [0], [0]]
    assert V.tolist() == [[1], [1], [1], [0]]
    # k=2: residual rows (0,1,2), columns (2,0,0,1): 2 < 2 false, so row 2 goes.
    U, V = baseline(STAIRS, 2)
    assert U.tolist() == [[1, 0], [0, 0], [0, 1]]
    assert V.tolist() == [[1, 1], [1, 0], [1, 0], [0, 1]]
    assert _error(STAIRS, U, V) == 1
    # k=3: rows (0,1,0), columns (1,0,0,0): tie, row 1 goes; exact.
    U, V = baseline(STAIRS, 3)
    assert U.tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert V[:, 2].tolist() == [1, 0, 0, 0]
    assert _error(STAIRS, U, V) == 0


def test_baseline_column_elimination_by_hand() -> None:
    # Row sums (1,1,2), column sums (3,1): 2 < 3, so column 0 goes with U = E[:, 0].
    A = np.array([[1, 0], [1, 0], [1, 1]])
    U, V = baseline(A, 1)
    assert U.tolist() == [[1], [1], [1]]
    assert V.tolist() == [[1], [0]]
    # k=2: only A[2, 1] is left; rows (0,0,1), columns (0,1): tie, row 2 goes.
    U, V = baseline(A, 2)
    assert U.tolist() == [[1, 0], [1, 0], [1, 1]]
    assert V.tolist() == [[1, 0], [0, 1]]


def test_baseline_minimum_index_ties() -> None:
    # Identity: every row and column has one 1; row 0 (minimum index) is taken first.
    U, V = baseline(np.eye(3, dtype=int), 2)
    assert U.tolist() == [[1, 0], [0, 1], [0, 0]]
    assert V.tolist() == [[1, 0], [0, 1], [0, 0]]


def test_baseline_all_ones_check() -> None:
    # A dense matrix with one 0: eliminating row 0 leaves 5 errors, all ones leaves 1.
    A = np.ones((3, 3), dtype=int)
    A[1, 1] = 0
    U, V = baseline(A, 1)
    assert U.tolist() == [[1], [1], [1]] and V.tolist() == [[1], [1], [1]]
    # Rank 2: two eliminated rows leave 2 errors; all ones (1 error) still wins.
    U, V = baseline(A, 2)
    assert U.tolist() == [[1, 0]] * 3 and V.tolist() == [[1, 0]] * 3


def test_baseline_never_overcovers_and_is_binary() -> None:
    rng = np.random.default_rng(0)
    for r in range(1, 6):
        A = (rng.random((40, 25)) < 0.3).astype(np.int8)
        U, V = baseline(A, r)
        product = U.astype(int) @ V.T
        assert set(np.unique(U)) <= {0, 1} and set(np.unique(V)) <= {0, 1}
        assert (product <= A).all()  # eliminated rows/columns never overlap


# ----------------------------------------------------------------------------- thresholded


def _brute_force_thresholds(A: np.ndarray, W: np.ndarray, H: np.ndarray) -> int:
    """Minimum error over every threshold pair whose product is binary (incl. empty ones)."""
    best = int(A.sum())
    for p in [*np.unique(W), np.inf]:
        W_binary = (p <= W).astype(np.int64)
        for q in [*np.unique(H), np.inf]:
            X = W_binary @ (q <= H).astype(np.int64)
            if X.max(initial=0) <= 1:
                best = min(best, int(((A - X) ** 2).sum()))
    return best


@pytest.mark.parametrize("seed", range(8))
def test_threshold_search_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n, r = [(5, 7, 2), (7, 5, 2), (6, 6, 3), (4, 9, 1)][seed % 4]
    A = (rng.random((m, n)) < 0.5).astype(np.int8)
    W = rng.random((m, r))  # continuous: no ties
    H = rng.random((r, n))
    U, V = threshold_search(A, W, H)
    assert _error(A, U, V) == _brute_force_thresholds(A, W, H)
    # The answer is itself a thresholding of W and H.
    p = W[U.astype(bool)].min() if U.any() else np.inf
    q = H[V.T.astype(bool)].min() if V.any() else np.inf
    np.testing.assert_array_equal(U, p <= W)
    np.testing.assert_array_equal(V.T, q <= H)


def _scanned_thresholds(A: np.ndarray, W: np.ndarray, H: np.ndarray) -> tuple[int, int]:
    """S1 Algorithm 4's scan as written: each prefix of W's order (descending, ties by
    position) against the prefixes of H's until W'H' leaves {0, 1}; the first strict
    improvement wins. Returns the prefix lengths ``(a, b)``."""
    w_order = np.argsort(-W.ravel(), kind="stable")
    h_order = np.argsort(-H.ravel(), kind="stable")
    best, best_ab = int(A.sum()), (0, 0)
    for a in range(1, w_order.size + 1):
        W_binary = np.zeros(W.size, dtype=np.int64)
        W_binary[w_order[:a]] = 1
        for b in range(1, h_order.size + 1):
            H_binary = np.zeros(H.size, dtype=np.int64)
            H_binary[h_order[:b]] = 1
            X = W_binary.reshape(W.shape) @ H_binary.reshape(H.shape)
            if X.max() > 1:
                break
            error = int(((A - X) ** 2).sum())
            if error < best:
                best, best_ab = error, (a, b)
    return best_ab


@pytest.mark.parametrize("seed", range(6))
def test_threshold_search_picks_the_scans_pair_ties_included(seed: int) -> None:
    # the incremental search must return the very pair the plain scan picks (same U and V,
    # not only the same error), also when entries of W and H tie
    rng = np.random.default_rng(seed)
    m, n, r = [(6, 8, 2), (5, 5, 3), (7, 4, 2)][seed % 3]
    A = (rng.random((m, n)) < rng.uniform(0.2, 0.8)).astype(np.int8)
    W = np.round(rng.random((m, r)), 1)  # rounded: many ties
    H = np.round(rng.random((r, n)), 1)
    U, V = threshold_search(A, W, H)
    if n < m:  # the search runs on the transposed problem Aᵀ ≈ Hᵀ Wᵀ then
        A, W, H = A.T, H.T, W.T
        U, V = V, U
    a, b = _scanned_thresholds(A, W, H)
    expected_U = np.zeros(W.size, dtype=np.int8)
    expected_U[np.argsort(-W.ravel(), kind="stable")[:a]] = 1
    expected_H = np.zeros(H.size, dtype=np.int8)
    expected_H[np.argsort(-H.ravel(), kind="stable")[:b]] = 1
    np.testing.assert_array_equal(U, expected_U.reshape(W.shape))
    np.testing.assert_array_equal(V.T, expected_H.reshape(H.shape))


def test_threshold_search_from_an_nmf_equals_brute_force() -> None:
    rng = np.random.default_rng(11)
    A = (rng.random((8, 6)) < 0.5).astype(np.int8)
    W, H = normalize_factors(*nmf(A, 3, random_state=0))
    U, V = threshold_search(A, W, H)
    assert _error(A, U, V) == _brute_force_thresholds(A, W, H)


def test_normalization_keeps_the_product() -> None:
    rng = np.random.default_rng(2)
    W, H = rng.random((6, 3)) * 5, rng.random((3, 4))
    W2, H2 = normalize_factors(W, H)
    np.testing.assert_allclose(W2 @ H2, W @ H)
    np.testing.assert_allclose(W2.max(axis=0), H2.max(axis=1))


def test_nmf_is_seeded_and_fits_a_nonnegative_rank_r_matrix() -> None:
    rng = np.random.default_rng(3)
    A = (rng.random((10, 2)) @ rng.random((2, 8)) > 0.3).astype(int)
    W1, H1 = nmf(A, 4, random_state=5)
    W2, _ = nmf(A, 4, random_state=5)
    np.testing.assert_array_equal(W1, W2)
    assert (W1 >= 0).all() and (H1 >= 0).all()
    assert np.linalg.norm(A - W1 @ H1) < np.linalg.norm(A)


@pytest.mark.parametrize(("shape", "rank"), [((300, 13), 1), ((200, 70), 3), ((64, 8), 2)])
def test_nmf_by_byte_tables_equals_the_blas_products(shape, rank, monkeypatch) -> None:
    # the tables' route (tall dense 0/1 input) against BLAS's on the same draws: the same
    # factors up to the last bits, across byte boundaries and a last partial byte
    A = (np.random.default_rng(6).random(shape) < 0.4).astype(np.int8)
    A[0] = 1  # a row of all ones: every byte value 255
    monkeypatch.setattr(_thresholded, "_BYTE_TABLE_MIN_ROWS", 1)
    assert _thresholded._byte_tables_pay(A) and not _thresholded._byte_tables_pay(A * 2)
    W, H = nmf(A, rank, random_state=1, iterations=40)
    monkeypatch.setattr(_thresholded, "_byte_tables_pay", lambda A: False)
    W_blas, H_blas = nmf(A, rank, random_state=1, iterations=40)
    np.testing.assert_allclose(W, W_blas, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(H, H_blas, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_thresholded_recovers_block_structure(rank: int) -> None:
    blocks = np.kron(np.eye(rank, dtype=int), np.ones((4, 3), dtype=int))
    U, V = thresholded(blocks, rank, random_state=0)
    assert _error(blocks, U, V) == 0


def test_thresholded_accepts_precomputed_factors_and_seeds_reproduce() -> None:
    rng = np.random.default_rng(4)
    A = (rng.random((12, 9)) < 0.5).astype(np.int8)
    W, H = rng.random((12, 2)), rng.random((2, 9))
    U, V = thresholded(A, 2, nmf=(W, H))
    expected = threshold_search(A, *normalize_factors(W, H))
    np.testing.assert_array_equal(U, expected[0])
    np.testing.assert_array_equal(V, expected[1])
    first, second = thresholded(A, 2, random_state=9), thresholded(A, 2, random_state=9)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])


def test_threshold_search_rejects_bad_shapes() -> None:
    with pytest.raises(InvalidParameterError, match="W must be"):
        threshold_search(np.ones((3, 4)), np.ones((2, 2)), np.ones((2, 4)))


# ----------------------------------------------------------------------------- penalized


def _planted(seed: int, m: int, n: int, r: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    U = np.eye(r, dtype=int)[rng.integers(0, r, m)]  # disjoint row clusters: exactly binary
    V = (rng.random((n, r)) < 0.6).astype(int)
    return U @ V.T


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_penalized_recovers_easy_planted_cases(rank: int) -> None:
    A = _planted(rank, 30, 30, rank)
    U, V = penalized(A, rank, random_state=0)
    assert set(np.unique(U)) <= {0, 1} and set(np.unique(V)) <= {0, 1}
    assert U.shape == (30, rank) and V.shape == (30, rank)
    assert _error(A, U, V) == 0


def test_penalized_seeds_reproduce_and_differ() -> None:
    rng = np.random.default_rng(5)
    A = (rng.random((15, 10)) < 0.5).astype(np.int8)
    W1, _ = penalized_factors(A, 3, random_state=1, max_iter=50)
    W2, _ = penalized_factors(A, 3, random_state=1, max_iter=50)
    W3, _ = penalized_factors(A, 3, random_state=2, max_iter=50)
    np.testing.assert_array_equal(W1, W2)
    assert not np.array_equal(W1, W3)


def test_penalized_stops_on_convergence_test() -> None:
    A = np.ones((4, 4), dtype=int)
    # Testing every iteration on an easy matrix converges long before max_iter; the result
    # then differs from running all iterations.
    short = penalized_factors(A, 1, random_state=0, max_iter=1000, test_conv=None)
    full = penalized_factors(A, 1, random_state=0, max_iter=1000, test_conv=1000)
    assert not np.allclose(short[0], full[0])


def _rounded(W: np.ndarray, H: np.ndarray, threshold: float = 0.5) -> tuple[np.ndarray, ...]:
    return (threshold <= W).astype(np.int8), np.ascontiguousarray((threshold <= H).T, np.int8)


@pytest.mark.parametrize("test_conv", [1000, None])
def test_penalized_stops_once_settled_with_the_full_loops_rounding(test_conv: int | None) -> None:
    """penalized stops when the rounding can no longer change: its U, V are those of every
    iteration run, on dense and sparse (compiled loop) inputs alike, and it stops early."""
    rng = np.random.default_rng(11)
    early = 0
    for trial in range(24):
        m, n = (int(size) for size in rng.integers(6, 60, 2))
        rank = int(rng.integers(1, min(m, n, 8) + 1))
        A = (rng.random((m, n)) < rng.choice([0.05, 0.3, 0.7])).astype(np.int8)
        full = penalized_factors(A, rank, random_state=trial, test_conv=test_conv)
        settled = penalized_factors(
            A, rank, random_state=trial, test_conv=test_conv, until_settled=True
        )
        U, V = penalized(A, rank, random_state=trial, test_conv=test_conv)
        for got, want in zip(_rounded(*settled), _rounded(*full), strict=True):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(U, _rounded(*full)[0])
        np.testing.assert_array_equal(V, _rounded(*full)[1])
        early += not np.array_equal(settled[0], full[0])
    if test_conv:  # (testing every iteration, most runs converge before they settle)
        assert early >= 12  # most runs stopped before the loop's own end


def test_penalized_runs_every_iteration_for_a_threshold_outside_the_settled_band() -> None:
    A = (np.random.default_rng(2).random((20, 15)) < 0.4).astype(np.int8)
    full = penalized_factors(A, 3, random_state=0)
    for threshold in (0.2, 0.9):
        U, V = penalized(A, 3, random_state=0, threshold=threshold)
        np.testing.assert_array_equal(U, _rounded(*full, threshold)[0])
        np.testing.assert_array_equal(V, _rounded(*full, threshold)[1])


@pytest.mark.parametrize("density", [0.05, 0.4])  # the compiled sparse loop and the dense one
def test_penalized_ends_before_its_penalty_weight_overflows(density: float) -> None:
    """A fast-growing weight would pass 1e308 within max_iter and turn every entry NaN (every
    rounding 0): the loop ends before, with finite factors, and penalized still rounds them
    as the loop run to that end does; with no iteration limit the loop ends there too."""
    A = (np.random.default_rng(0).random((20, 60)) < density).astype(np.int8)
    settings = dict(lambda_w=2.0, lambda_h=2.0, max_iter=1100)
    W, H = penalized_factors(A, 3, random_state=0, **settings)
    assert np.isfinite(W).all() and np.isfinite(H).all()
    U, V = penalized(A, 3, random_state=0, **settings)
    np.testing.assert_array_equal(U, _rounded(W, H)[0])
    np.testing.assert_array_equal(V, _rounded(W, H)[1])
    assert U.any() and V.any()
    unlimited = penalized_factors(A, 3, random_state=0, max_iter=0, lambda_w=2.0, lambda_h=2.0)
    assert np.isfinite(unlimited[0]).all()


def test_settled_entries_stay_on_their_side_beyond_the_settling_penalty() -> None:
    """The proof behind the early stop, tried adversarially: entries put at the edges of the
    settled bands (and anywhere in them) with the penalty weight at settling_penalty never
    leave their band over 200 updates, whatever the data."""
    from bmfdsl.solvers.methods._penalized import (
        SETTLED_HIGH,
        SETTLED_LOW,
        SETTLED_TOP,
        _penalized_update,
        rounding_settled,
        settling_penalty,
    )

    eps = float(np.finfo(np.float64).eps)
    rng = np.random.default_rng(4)
    for _ in range(30):
        m, n = (int(size) for size in rng.integers(3, 40, 2))
        rank = int(rng.integers(1, 6))
        A = (rng.random((m, n)) < rng.uniform(0.05, 1.0)).astype(np.float64)
        choices = np.array([0.0, SETTLED_LOW, SETTLED_HIGH, SETTLED_TOP, 1.0])
        W = rng.choice(choices, (m, rank)) + 0.0
        H = rng.choice(choices, (rank, n)) + 0.0
        np.maximum(W, eps, out=W)
        np.maximum(H, eps, out=H)
        high_w, high_h = SETTLED_HIGH <= W, SETTLED_HIGH <= H
        penalty = settling_penalty(A, rank)
        for _ in range(200):
            assert rounding_settled(W, H)
            H = np.maximum(_penalized_update(H, W.T @ A, (W.T @ W) @ H, penalty), eps)
            W = np.maximum(_penalized_update(W, A @ H.T, W @ (H @ H.T), penalty), eps)
            penalty *= 1.1
            np.testing.assert_array_equal(SETTLED_HIGH <= W, high_w)
            np.testing.assert_array_equal(SETTLED_HIGH <= H, high_h)
    # below that weight a large model term does pull an entry out of its band
    W = np.full((1, 1), SETTLED_HIGH)
    H = np.full((1, 1), SETTLED_HIGH)
    assert _penalized_update(H, W.T @ np.ones((1, 1)), (W.T @ W) @ H * 1e6, 1.0)[0, 0] < 0.5


def _numpy_penalized_factors(A, rank, *, random_state, max_iter, test_conv=1000):
    """penalized_factors' loop as numpy expressions (the form it had before its fused update)."""
    eps = float(np.finfo(np.float64).eps)
    A = np.asarray(A, dtype=np.float64)
    rng = np.random.default_rng(random_state)
    W = rng.uniform(0.0, A.max(), (A.shape[0], rank))
    H = rng.uniform(0.0, A.max(), (rank, A.shape[1]))
    D_w, D_h = np.diag(W.max(axis=0)), np.diag(H.max(axis=1))
    W = W @ (D_w + eps) ** -0.5 @ (D_h + eps) ** 0.5
    H = (D_h + eps) ** -0.5 @ (D_w + eps) ** 0.5 @ H

    def ratio(numerator, denominator):
        numerator[numerator == 0] = eps
        denominator[denominator == 0] = eps
        return numerator / denominator

    penalty_h = penalty_w = 1.0 / max_iter
    previous = current = float(np.finfo(np.float64).max)
    for iteration in range(max_iter):
        if iteration % test_conv == 0:
            if iteration > 0 and (previous - current < 1e-5 or current > previous):
                break
            previous = current
        H = H * ratio(
            W.T @ A + 3.0 * penalty_h * H * H,
            (W.T @ W) @ H + 2.0 * penalty_h * ((H + eps) * (H + eps) * (H + eps)) + penalty_h * H,
        )
        W = W * ratio(
            A @ H.T + 3.0 * penalty_w * W * W,
            W @ (H @ H.T) + 2.0 * penalty_w * ((W + eps) * (W + eps) * (W + eps)) + penalty_w * W,
        )
        penalty_h *= 1.1
        penalty_w *= 1.1
        np.maximum(H, eps, out=H)
        np.maximum(W, eps, out=W)
        if (iteration + 1) % test_conv == 0:
            residual = A - W @ H
            current = float(np.einsum("ij,ij->", residual, residual))
    return W, H


@pytest.mark.parametrize(
    ("m", "n", "rank", "density", "max_iter", "test_conv"),
    [(100, 400, 5, 0.2, 1000, 1000), (101, 17, 10, 0.4, 1000, 1000), (30, 30, 3, 0.5, 200, 7)],
)
def test_penalized_fused_update_gives_the_numpy_expressions_bits(
    m: int, n: int, rank: int, density: float, max_iter: int, test_conv: int
) -> None:
    rng = np.random.default_rng(m + n + rank)
    A = (rng.random((m, n)) < density).astype(np.int8)
    for seed in range(2):
        W, H = penalized_factors(A, rank, random_state=seed, max_iter=max_iter, test_conv=test_conv)
        W_ref, H_ref = _numpy_penalized_factors(
            A, rank, random_state=seed, max_iter=max_iter, test_conv=test_conv
        )
        assert W.tobytes() == W_ref.tobytes() and H.tobytes() == H_ref.tobytes()


@pytest.mark.parametrize(("max_iter", "test_conv"), [(200, 7), (60, None), (300, 1000)])
def test_penalized_sparse_loop_tests_convergence_where_the_numpy_loop_does(
    max_iter: int, test_conv: int | None
) -> None:
    """The sparse route runs its iterations in one compiled call between two convergence
    tests: with tests every 7 iterations, every iteration (None) or never before the end, it
    stops where the numpy loop stops, with the same values up to the last bits."""
    from bmfdsl.solvers.methods._penalized import SPARSE_DENSITY

    rng = np.random.default_rng(max_iter)
    for trial in range(4):
        A = (rng.random((60, 150)) < 0.05).astype(np.int8)
        assert np.count_nonzero(A) <= SPARSE_DENSITY * A.size
        W, H = penalized_factors(A, 4, random_state=trial, max_iter=max_iter, test_conv=test_conv)
        W_ref, H_ref = _numpy_penalized_factors(
            A, 4, random_state=trial, max_iter=max_iter, test_conv=test_conv or 1
        )
        np.testing.assert_allclose(W, W_ref, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(H, H_ref, rtol=1e-9, atol=1e-12)


def test_penalized_sparse_loop_gives_the_same_bits_in_any_number_of_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The compiled iterations are cut into calls of bounded work (so that Ctrl-C is felt);
    where the cuts fall changes nothing, down to one iteration a call."""
    from bmfdsl.solvers.methods import _penalized as module

    A = (np.random.default_rng(3).random((50, 120)) < 0.06).astype(np.int8)
    whole = penalized_factors(A, 3, random_state=0, max_iter=300)
    monkeypatch.setattr(module, "COMPILED_CALL_WORK", 1)
    cut = penalized_factors(A, 3, random_state=0, max_iter=300)
    assert whole[0].tobytes() == cut[0].tobytes() and whole[1].tobytes() == cut[1].tobytes()


def test_penalized_on_sparse_input_rounds_to_the_dense_products_answer() -> None:
    # Below SPARSE_DENSITY the data terms are summed over the ones of A: the same values up to
    # the last bits, and the same rounded U, V as the BLAS products give.
    from bmfdsl.solvers.methods._penalized import SPARSE_DENSITY

    rng = np.random.default_rng(17)
    tried = 0
    for trial in range(24):
        m, n = int(rng.integers(5, 120)), int(rng.integers(5, 400))
        rank = int(min(rng.integers(1, 9), m, n))
        A = (rng.random((m, n)) < rng.choice([0.02, 0.05, 0.1])).astype(np.int8)
        if np.count_nonzero(A) > SPARSE_DENSITY * A.size:
            continue
        tried += 1
        W, H = penalized_factors(A, rank, random_state=trial)
        W_ref, H_ref = _numpy_penalized_factors(A, rank, random_state=trial, max_iter=1000)
        np.testing.assert_allclose(W, W_ref, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(H, H_ref, rtol=1e-9, atol=1e-12)
        assert np.array_equal(W >= 0.5, W_ref >= 0.5) and np.array_equal(H >= 0.5, H_ref >= 0.5)
    assert tried >= 15


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # nimfa uses np.matrix
def test_penalized_matches_nimfa(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(np, "mat", np.asmatrix, raising=False)  # nimfa 1.4.0 predates numpy 2
    nimfa = pytest.importorskip("nimfa")
    rng = np.random.default_rng(6)
    for m, n, r, max_iter, test_conv in [(12, 9, 3, 1000, 1000), (20, 15, 4, 300, 10)]:
        A = (rng.random((m, n)) < 0.5).astype(np.float64)
        W0, H0 = rng.uniform(0, 1, (m, r)), rng.uniform(0, 1, (r, n))
        fit = nimfa.Bmf(
            A.copy(),
            seed="fixed",
            W=W0.copy(),
            H=H0.copy(),
            rank=r,
            max_iter=max_iter,
            test_conv=test_conv,
        )()
        W, H = penalized_factors(A, r, init=(W0, H0), max_iter=max_iter, test_conv=test_conv)
        np.testing.assert_allclose(W, np.asarray(fit.basis()), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(H, np.asarray(fit.coef()), rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- registry


def test_registry_lists_and_normalizes_names() -> None:
    assert set(METHODS) == {"baseline", "thresholded", "penalized"}
    assert get_method(" Baseline ") is baseline
    with pytest.raises(UnknownNameError, match="known methods: 'baseline'"):
        get_method("qubo-magic")


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_has_the_same_calling_convention(name: str) -> None:
    A = np.kron(np.eye(2, dtype=int), np.ones((3, 2), dtype=int))
    U, V = get_method(name)(A, 2, random_state=0)
    assert U.shape == (6, 2) and V.shape == (4, 2)
    assert U.dtype == np.int8 and V.dtype == np.int8


def test_nmf_on_sparse_binary_input_matches_the_dense_products() -> None:
    # A sparse 0/1 matrix takes the products over its ones (in compiled calls at this size):
    # BLAS's factors up to rounding, and the same thresholded answer.
    rng = np.random.default_rng(23)
    for trial in range(6):
        A = (rng.random((60, 300)) < 0.05).astype(np.int8)
        W, H = nmf(A, 4, random_state=trial)
        W_dense, H_dense = _dense_nmf(A, 4, np.random.default_rng(trial))
        np.testing.assert_allclose(W, W_dense, rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(H, H_dense, rtol=1e-7, atol=1e-12)
        U1, V1 = thresholded(A, 4, random_state=trial)
        U2, V2 = thresholded(A, 4, random_state=trial, nmf=_dense_nmf)
        assert np.array_equal(U1, U2) and np.array_equal(V1, V2)
    for rank in (7, 10):  # where the products' last bits differ most often
        A = (rng.random((80, 250)) < 0.06).astype(np.int8)
        W, H = nmf(A, rank, random_state=rank)
        W_dense, H_dense = _dense_nmf(A, rank, np.random.default_rng(rank))
        np.testing.assert_allclose(W, W_dense, rtol=1e-7, atol=1e-12)
        np.testing.assert_allclose(H, H_dense, rtol=1e-7, atol=1e-12)


def test_nmf_sparse_loop_gives_the_same_bits_in_any_number_of_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nmf's compiled iterations are cut into calls of bounded work, as penalized's: where the
    cuts fall changes nothing."""
    from bmfdsl.solvers.methods import _penalized as module  # the work limits' home

    A = (np.random.default_rng(4).random((50, 120)) < 0.06).astype(np.int8)
    whole = nmf(A, 3, random_state=0)
    monkeypatch.setattr(module, "COMPILED_CALL_WORK", 1)
    cut = nmf(A, 3, random_state=0)
    assert whole[0].tobytes() == cut[0].tobytes() and whole[1].tobytes() == cut[1].tobytes()


def _dense_nmf(A, rank, rng, iterations=300):
    """nmf's updates with BLAS products only (its form before the sparse products)."""
    eps = float(np.finfo(np.float64).eps)
    A = np.asarray(A, dtype=np.float64)
    scale = np.sqrt(max(A.mean(), 1e-12) / rank)
    W = rng.uniform(0.0, scale, (A.shape[0], rank))
    H = rng.uniform(0.0, scale, (rank, A.shape[1]))
    for _ in range(iterations):
        H *= (W.T @ A) / np.maximum((W.T @ W) @ H, 1e-12)
        W *= (A @ H.T) / np.maximum(W @ (H @ H.T), 1e-12)
        np.maximum(H, eps, out=H)
        np.maximum(W, eps, out=W)
    return W, H
