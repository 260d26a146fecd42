"""Ranks beyond enumeration: the local-search row solver against exact enumeration, never
worse than its start, deterministic; the branch-and-bound row solver against every code
scored, its fallback to the local search; the native solver at rank 20 within its budget."""

from __future__ import annotations

import numpy as np
import pytest

from bmfdsl import factorize, make_exact_rank
from bmfdsl.linalg import (
    code_table,
    solve_rows_bounded,
    solve_rows_exact,
    solve_rows_local,
    squared_error,
)
from bmfdsl.solvers import solve_bls_with_error
from bmfdsl.solvers.native import NativeSettings, solve_bmf


def _problem(rng: np.random.Generator, rows: int, cols: int, rank: int):
    A = (rng.random((rows, cols)) < 0.4).astype(np.int8)
    V = (rng.random((cols, rank)) < 0.3).astype(np.int8)
    cross = A.astype(np.int64) @ V.astype(np.int64)
    return A, V, cross, V.astype(np.int64).T @ V.astype(np.int64)


@pytest.mark.parametrize("rank", [3, 6, 8])
def test_local_rows_equal_the_exact_solve_up_to_eight_columns(rank):
    rng = np.random.default_rng(rank)
    for _ in range(5):
        A, V, cross, G = _problem(rng, 30, 20, rank)
        exact = np.zeros((30, rank), np.int8)
        exact_error = solve_rows_exact(A, V, code_table(rank, False), exact, False)
        local = (rng.random((30, rank)) < 0.5).astype(np.int8)
        score, work = solve_rows_local(cross, G, local, 4 * rank)
        assert int(A.sum()) + score == exact_error == squared_error(A, local, V)
        assert work > 0


@pytest.mark.parametrize("rank", [10, 12])
def test_local_rows_are_never_worse_than_their_start(rank):
    rng = np.random.default_rng(rank)
    for _ in range(5):
        A, V, cross, G = _problem(rng, 30, 20, rank)
        start = (rng.random((30, rank)) < 0.5).astype(np.int8)
        local = start.copy()
        score, _ = solve_rows_local(cross, G, local, 4 * rank)
        exact = np.zeros((30, rank), np.int8)
        exact_error = solve_rows_exact(A, V, code_table(rank, False), exact, False)
        per_row_start = ((A - start.astype(int) @ V.T) ** 2).sum(axis=1)
        per_row_local = ((A - local.astype(int) @ V.T) ** 2).sum(axis=1)
        assert (per_row_local <= per_row_start).all()  # row by row, not just in total
        assert exact_error <= int(A.sum()) + score == squared_error(A, local, V)


def _scores_of_every_code(cross: np.ndarray, G: np.ndarray) -> np.ndarray:
    """``cᵀGc - 2 x·c`` of every code in index order (``Σ c_k 2^k``), per row."""
    rank = G.shape[0]
    codes = (np.arange(2**rank)[:, None] >> np.arange(rank)) & 1
    return np.einsum("ck,kl,cl->c", codes, G, codes)[None, :] - 2 * cross @ codes.T


@pytest.mark.parametrize("rank", [13, 15])
def test_bounded_rows_equal_every_code_scored_lowest_index_on_ties(rank):
    rng = np.random.default_rng(rank)
    for case in range(4):
        A, V, cross, G = _problem(rng, 60, 30, rank)
        if case == 1:
            V[:, 4] = V[:, 1]  # equal columns: ties
            G = V.astype(np.int64).T @ V.astype(np.int64)
            cross = A.astype(np.int64) @ V.astype(np.int64)
        if case == 2:  # any symmetric G with no negative entry, not only a Gram matrix
            extra = np.triu(rng.integers(0, 3, size=(rank, rank)), 1)
            G = G + extra + extra.T
        if case == 3:  # many helpful bits per row: deep searches
            cross = cross + rng.integers(0, 6, size=cross.shape)
        scores = _scores_of_every_code(cross, G)
        start = (rng.random((60, rank)) < 0.3).astype(np.int8)
        out, row_scores = start.copy(), np.empty(60, dtype=np.int64)
        total, unfinished = solve_rows_bounded(cross, G, out, row_scores, 1 << 40, 4 * rank)
        index = (out.astype(np.int64) << np.arange(rank)).sum(axis=1)
        assert unfinished == 0
        np.testing.assert_array_equal(index, np.argmin(scores, axis=1))
        np.testing.assert_array_equal(row_scores, scores.min(axis=1))
        assert total == row_scores.sum()


def test_bounded_rows_past_their_budget_take_the_local_search_never_worse_than_the_start():
    rank = 16
    rng = np.random.default_rng(2)
    _, _, cross, G = _problem(rng, 80, 30, rank)
    cross = cross + rng.integers(0, 8, size=cross.shape)  # many helpful bits
    scores = _scores_of_every_code(cross, G)
    start = (rng.random((80, rank)) < 0.3).astype(np.int8)
    local = start.copy()
    solve_rows_local(cross, G, local, 4 * rank)
    for budget in (0, 3):
        out, reported = start.copy(), np.empty(80, dtype=np.int64)
        total, unfinished = solve_rows_bounded(cross, G, out, reported, budget, 4 * rank)
        index = (out.astype(np.int64) << np.arange(rank)).sum(axis=1)
        row_scores = scores[np.arange(80), index]
        start_index = (start.astype(np.int64) << np.arange(rank)).sum(axis=1)
        np.testing.assert_array_equal(reported, row_scores)
        assert 0 < unfinished <= 80 and total == row_scores.sum()
        assert (row_scores <= scores[np.arange(80), start_index]).all()
        if budget == 0:  # nothing scored: the local search's answer exactly, where it searched
            searched = (2 * cross > np.diag(G)).any(axis=1)  # rows with a helpful bit
            np.testing.assert_array_equal(out[searched], local[searched])
        assert (row_scores >= scores.min(axis=1)).all()
    out = start.copy()
    assert solve_rows_bounded(cross, G, out, reported, 1 << 40, 4 * rank)[1] == 0


def test_bounded_rows_refuse_what_they_cannot_solve():
    cross, out = np.zeros((2, 3), np.int64), np.zeros((2, 3), np.int8)
    scores = np.empty(2, np.int64)
    with pytest.raises(ValueError, match="no negative entry"):
        solve_rows_bounded(cross, -np.eye(3, dtype=np.int64), out, scores, 100, 12)
    with pytest.raises(ValueError, match="symmetric"):
        solve_rows_bounded(cross, np.triu(np.ones((3, 3), np.int64)), out, scores, 100, 12)
    with pytest.raises(ValueError, match="a score per row"):
        solve_rows_bounded(cross, np.eye(3, dtype=np.int64), out, scores[:1], 100, 12)
    with pytest.raises(ValueError, match="r x r"):
        solve_rows_bounded(cross, np.eye(2, dtype=np.int64), out, scores, 100, 12)
    wide, one = np.zeros((1, 63), np.int64), np.empty(1, np.int64)
    with pytest.raises(ValueError, match="MAX_BRANCH_RANK"):
        solve_rows_bounded(wide, np.eye(63, dtype=np.int64), np.zeros((1, 63), np.int8), one, 9, 9)


def test_bls_beyond_rank_16_keeps_a_start_and_is_deterministic():
    rng = np.random.default_rng(0)
    A, V, _, _ = _problem(rng, 50, 40, 24)
    start = (rng.random((50, 24)) < 0.2).astype(np.int8)
    U, error = solve_bls_with_error(A, V, start=start)
    again, error_again = solve_bls_with_error(A, V, start=start)
    assert error == error_again == squared_error(A, U, V) <= squared_error(A, start, V)
    assert np.array_equal(U, again)


def test_native_rank_20_extends_the_rank_12_answer_within_its_budget():
    A = make_exact_rank(150, 60, 20, random_state=0)
    first = solve_bmf(A, 20, seed=3)
    second = solve_bmf(A, 20, seed=3)
    U, V, error = first.solutions[0]
    beyond = first.info["beyond_enumeration"]
    assert beyond["sub_rank"] == 12 and error <= beyond["sub_rank_error"]
    assert error == squared_error(A, U, V)
    assert np.array_equal(U, second.solutions[0][0]) and error == second.solutions[0][2]
    work = first.info["work"]
    assert work["local_als_solves"] >= 2 and 0 < work["units"] <= work["limit"]
    small = solve_bmf(A, 20, seed=3, settings=NativeSettings(work_limit=1e6))
    assert small.info["work"]["limit"] == 10**6  # the limit holds for the whole solve
    assert small.info["work"]["units"] < first.info["work"]["units"]
    # beyond the steps every solve takes (one exact solve, two local ones: what a budget of
    # one unit pays too), a limit is never overspent
    least = solve_bmf(A, 20, seed=3, settings=NativeSettings(work_limit=1)).info["work"]["units"]
    assert small.info["work"]["units"] <= least + 10**6


def test_factorize_at_rank_32_errors_fall_with_rank():
    A = make_exact_rank(120, 80, 32, random_state=1)
    errors = [factorize(A, rank, random_state=0).error for rank in (12, 20, 32)]
    assert errors[0] >= errors[1] >= errors[2]
    assert errors[0] > errors[2]


def test_bls_and_the_native_solver_stop_enumerating_at_the_same_rank():
    from bmfdsl.solvers import MAX_ENUMERATION_RANK
    from bmfdsl.solvers.native import PRACTICAL_MAX_RANK
    from bmfdsl.solvers.native._beyond import MAX_CODE_RANK

    assert MAX_ENUMERATION_RANK == MAX_CODE_RANK == PRACTICAL_MAX_RANK


def test_one_hot_als_steps_are_exact_bls_and_never_worsen():
    """U: each row to its nearest center (the lowest index on ties), as exact one-hot BLS;
    V: each center bit by majority, as exact BLS for that one-hot U (a diagonal Gram)."""
    from bmfdsl.solvers.native._beyond import OneHotData, one_hot_als
    from bmfdsl.timings import WorkBudget

    rng = np.random.default_rng(4)
    A = (rng.random((80, 30)) < 0.3).astype(np.int8)
    V = (rng.random((30, 14)) < 0.3).astype(np.int8)
    V[:, 5] = V[:, 2]  # equal centers: ties
    data = OneHotData(A)
    U, _, error, _ = one_hot_als(data, V, WorkBudget(), 1)  # the U step alone
    expected_U, expected_error = solve_bls_with_error(A, V, one_hot=True)
    np.testing.assert_array_equal(U, expected_U)
    assert error == expected_error == squared_error(A, U, V)
    U, V2, error, solves = one_hot_als(data, V, WorkBudget(), 2)  # and the V step
    expected_V, expected_error = solve_bls_with_error(A.T, U)
    np.testing.assert_array_equal(V2, expected_V)
    assert error == expected_error <= squared_error(A, U, V) and solves == 2


@pytest.mark.parametrize("side", ["U", "V"])
def test_one_hot_models_beyond_rank_12_never_lose_to_rank_12_and_are_deterministic(side):
    """Before, annealing over the free side's 2**r codes ran out of budget beyond rank 12:
    the error rose with the rank (800 at r = 12, 844 at r = 13-16 on this matrix)."""
    from bmfdsl import make_planted_blocks

    A = make_planted_blocks(300, 60, 16, density=0.1, random_state=0)[0].toarray()
    errors = []
    for rank in (12, 13, 16):
        result = solve_bmf(A, rank, one_hot=side, seed=5)
        U, V, error = result.solutions[0]
        hot = U if side == "U" else V
        assert (hot.sum(axis=1) == 1).all()  # one cluster per row
        assert error == squared_error(A, U, V)
        errors.append(error)
        if rank > 12:
            beyond = result.info["beyond_enumeration"]
            assert error <= beyond["sub_rank_error"] and beyond["restarts"] >= 1
            again = solve_bmf(A, rank, one_hot=side, seed=5).solutions[0]
            assert np.array_equal(U, again[0]) and np.array_equal(V, again[1])
    assert errors[0] > errors[1] > errors[2]


def test_one_hot_beyond_rank_12_stays_within_a_small_work_limit():
    A = make_exact_rank(120, 40, 16, random_state=2)
    small = solve_bmf(A, 16, one_hot="U", seed=0, settings=NativeSettings(work_limit=1e6))
    U, V, error = small.solutions[0]
    assert (U.sum(axis=1) == 1).all() and error == squared_error(A, U, V)
    assert small.info["beyond_enumeration"]["restarts"] == 0  # no restart fits
    assert error <= small.info["beyond_enumeration"]["sub_rank_error"]
    capped = solve_bmf(A, 16, one_hot="U", seed=0, settings=NativeSettings(num_reads=3))
    assert capped.info["beyond_enumeration"]["restarts"] == 3  # num_reads caps the restarts


def test_solutions_beyond_rank_12_are_distinct():
    A = np.kron(np.eye(4, dtype=np.int8), np.ones((5, 5), dtype=np.int8))
    for one_hot in (None, "U"):
        result = solve_bmf(A, 14, one_hot=one_hot, seed=0, settings=NativeSettings(num_solutions=5))
        keys = [U.tobytes() + V.tobytes() for U, V, _ in result.solutions]
        assert len(keys) == len(set(keys)) >= 1
        assert result.solutions[0][2] == 0


def test_one_hot_models_get_k_means_plus_plus_restarts_at_every_rank():
    """A one-hot model is clustering: after the annealing, k-means++ restarts take the
    budget it left (a quarter at least). On planted blocks the solve beats ten lone
    k-means++ runs, where the annealing portfolio alone (10,083) lost to them."""
    from bmfdsl import make_planted_blocks
    from bmfdsl.solvers.native._beyond import OneHotData, seeded_clusters
    from bmfdsl.timings import WorkBudget

    A = make_planted_blocks(2000, 100, 20, density=0.1, random_state=1)[0].toarray()
    result = solve_bmf(A, 12, one_hot="U", seed=0)
    U, V, error = result.solutions[0]
    assert (U.sum(axis=1) == 1).all() and error == squared_error(A, U, V)
    assert result.info["strategies"]["kmeans"] > 10
    data, rng = OneHotData(A), np.random.default_rng(1)
    lone = [
        seeded_clusters(data, np.zeros((100, 0), np.int8), 12, rng, WorkBudget(), 100)[2]
        for _ in range(10)
    ]
    assert error < min(lone)
    again = solve_bmf(A, 12, one_hot="U", seed=0).solutions[0]
    assert np.array_equal(U, again[0]) and np.array_equal(V, again[1])
