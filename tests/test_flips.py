"""The flip descent: exact errors, local optimality against brute force, its work limit, and
its place at the end of the native solve and of the default ``factorize``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bmfdsl import factorize
from bmfdsl.apps import make_bernoulli
from bmfdsl.errors import InvalidParameterError
from bmfdsl.solvers.native import NativeSettings, flip_allowance, flip_descent, solve_bmf
from bmfdsl.solvers.native._flips import FLIP_STEP_WORK, MAX_FLIP_TABLE, flip_work_per_sweep


def brute_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    residual = A.astype(np.int64) - U.astype(np.int64) @ V.astype(np.int64).T
    return int((residual**2).sum())


def best_long_factor_error(A: np.ndarray, short: np.ndarray) -> int:
    """min over the long side's factor of the error, every code of every row tried."""
    codes = np.array(list(itertools.product([0, 1], repeat=short.shape[1])))
    errors = ((A[:, None, :] - (codes @ short.T)[None, :, :]) ** 2).sum(axis=-1)
    return int(errors.min(axis=1).sum())


@pytest.mark.parametrize("seed", range(40))
def test_the_descent_ends_at_an_exact_local_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n, rank = (int(x) for x in (rng.integers(2, 10), rng.integers(2, 10), rng.integers(1, 4)))
    A = (rng.random((m, n)) < rng.uniform(0.2, 0.8)).astype(np.int8)
    U = (rng.random((m, rank)) < 0.5).astype(np.int8)
    V = (rng.random((n, rank)) < 0.5).astype(np.int8)
    result = flip_descent(A, U, V, 1e12)
    assert result is not None
    assert result.error == brute_error(A, result.U, result.V)
    tall = A if m >= n else A.T
    start, short = (V, result.V) if m >= n else (U, result.U)
    assert result.error <= best_long_factor_error(tall, start)  # never above ALS's next step
    assert result.error == best_long_factor_error(tall, short)  # the long factor is exact
    for j, k in itertools.product(range(short.shape[0]), range(rank)):
        flipped = short.copy()
        flipped[j, k] ^= 1
        assert best_long_factor_error(tall, flipped) >= result.error, (j, k)


def test_the_work_limit_stops_the_descent_and_is_counted() -> None:
    A = make_bernoulli(300, 20, 0.5, random_state=1)
    rng = np.random.default_rng(2)
    U, V = (rng.random((300, 4)) < 0.5).astype(np.int8), (rng.random((20, 4)) < 0.5).astype(np.int8)
    free = flip_descent(A, U, V, 1e12)
    none = flip_descent(A, U, V, 0.0)  # the table only: the start's exact long factor
    assert free is not None and none is not None
    assert none.flips == 0 and np.array_equal(none.V, V)
    assert none.error == best_long_factor_error(A, V) >= free.error and free.flips > 0
    assert free.work > none.work > 0
    again = flip_descent(A, U, V, 1e12)
    assert again is not None and np.array_equal(again.V, free.V) and again.work == free.work


def test_flips_that_cannot_help_are_passed_over_by_their_bound() -> None:
    rng = np.random.default_rng(5)
    m, n, rank = 400, 30, 4
    U = (rng.random((m, rank)) < 0.3).astype(np.int8)
    V = np.zeros((n, rank), dtype=np.int8)
    for k in range(rank):  # disjoint column blocks: U Vᵀ is 0/1
        V[7 * k : 7 * k + 7, k] = 1
    A = (U.astype(np.int64) @ V.T > 0).astype(np.int8)
    A[rng.random(A.shape) < 0.02] ^= 1
    result = flip_descent(A, U, V, 1e12)
    assert result is not None and result.flips == 0
    table = FLIP_STEP_WORK * m * 2**rank * (rank + 1)
    # every flip bounded (m steps), few judged in full (m 2**(r-1) steps)
    assert result.work < table + 0.2 * flip_work_per_sweep((m, n), rank)
    for j, k in itertools.product(range(n), range(rank)):  # and none of those passed helps
        flipped = V.copy()
        flipped[j, k] ^= 1
        assert best_long_factor_error(A, flipped) >= result.error, (j, k)


def test_open_flips_are_judged_only_on_rows_their_bound_leaves_open() -> None:
    """Dense noisy data: the bound leaves flips open, and judging them row by row (only rows
    whose bound is below their best without the factor, stopping at the total) costs a
    fraction of judging every row, with the same local optimum."""
    rng = np.random.default_rng(11)
    m, n, rank = 600, 24, 5
    U0 = (rng.random((m, rank)) < 0.4).astype(np.int64)
    V0 = (rng.random((n, rank)) < 0.4).astype(np.int64)
    A = ((U0 @ V0.T > 0) ^ (rng.random((m, n)) < 0.1)).astype(np.int8)
    first = flip_descent(A, U0.astype(np.int8), V0.astype(np.int8), 1e12)
    assert first is not None
    result = flip_descent(A, first.U, first.V, 1e12)  # from a local optimum: one sweep, no flip
    assert result is not None and result.flips == 0 and result.error == first.error
    table = FLIP_STEP_WORK * m * 2**rank * (rank + 1)
    bounds = FLIP_STEP_WORK * n * rank * m
    assert result.work - table - bounds < 0.25 * (flip_work_per_sweep((m, n), rank) - bounds)
    for j, k in itertools.product(range(n), range(rank)):
        flipped = result.V.copy()
        flipped[j, k] ^= 1
        assert best_long_factor_error(A, flipped) >= result.error, (j, k)


def test_too_large_tables_and_low_ranks_get_no_descent() -> None:
    rows = MAX_FLIP_TABLE // 2**10 + 1
    A = np.zeros((rows, 3), dtype=np.int8)
    assert flip_descent(A, np.zeros((rows, 10), np.int8), np.zeros((3, 10), np.int8), 1e9) is None
    assert flip_allowance((rows, 3), 10, 3e9) == 0.0
    assert flip_allowance((300, 20), 1, 3e9) == 0.0 and flip_allowance((300, 20), 4, 3e9, 0) == 0.0
    assert 0 < flip_allowance((300, 20), 4, 3e9) <= 0.2 * 3e9


def test_the_native_solve_ends_with_the_descent_and_it_never_hurts() -> None:
    A = make_bernoulli(400, 30, 0.5, random_state=0)
    without = solve_bmf(A, 5, seed=1, settings=NativeSettings(flip_sweeps=0))
    default = solve_bmf(A, 5, seed=1)
    assert without.info["strategies"]["flips"] == 0
    assert default.info["restarts"] == without.info["restarts"]  # the same search before it
    U, V, error = default.solutions[0]
    assert error == brute_error(A, U, V) <= without.solutions[0][2]
    with pytest.raises(InvalidParameterError, match="flip_sweeps"):
        NativeSettings(flip_sweeps=-1)


def test_factorize_polishes_its_full_data_answer_by_flips() -> None:
    A = make_bernoulli(250, 24, 0.5, random_state=3)
    default = factorize(A, 5, random_state=0)
    without = factorize(A, 5, random_state=0, flip_sweeps=0)
    assert "flip_descent" in default.info and "flip_descent" not in without.info
    assert default.info["flip_descent"]["error_before"] == without.error
    assert default.error == brute_error(A, default.U, default.V) <= without.error


@pytest.mark.data
def test_the_final_descent_keeps_the_lowest_end_of_the_best_answers(monkeypatch, data_dir):
    # apb at k = 12: the best answer before the descent (561) ends at 560, the second best
    # (564) at 558; the descent of the best answer alone would have kept 560
    from bmfdsl.pipeline import _factorize

    A = np.loadtxt(data_dir / "uci-binary" / "apb.txt", dtype=np.int8)
    several = factorize(A, 12, random_state=0)
    monkeypatch.setattr(_factorize, "FLIP_STARTS", 1)
    alone = factorize(A, 12, random_state=0)
    descent = several.info["flip_descent"]
    assert descent["error_before"] == alone.info["flip_descent"]["error_before"]
    assert several.error == brute_error(A, several.U, several.V) < alone.error
    assert descent["start"] == several.info["portfolio"]["chosen"]
    errors = several.info["portfolio"]["errors"]
    assert errors[descent["start"]] > min(errors.values()) == descent["error_before"]
