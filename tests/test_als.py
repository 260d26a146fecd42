"""ALS: never worsens, respects max_solves / patience (the paper's pair, at a fixed point
sooner), keeps one-hot factors one-hot."""

from __future__ import annotations

import numpy as np
import pytest

from bmfdsl import als
from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.solvers import solve_bls_with_error


def _error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    residual = A.astype(np.int64) - U.astype(np.int64) @ V.T.astype(np.int64)
    return int((residual**2).sum())


def _instance(seed: int, m: int = 40, n: int = 15, r: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    A = (rng.random((m, n)) < 0.5).astype(np.int8)
    U = (rng.random((m, r)) < 0.5).astype(np.int8)
    V = (rng.random((n, r)) < 0.5).astype(np.int8)
    return A, U, V


@pytest.mark.parametrize("seed", range(5))
def test_never_worsens_and_reports_true_error(seed: int) -> None:
    A, U, V = _instance(seed)
    result = als(A, U, V)
    assert result.history[0] == _error(A, U, V)
    assert result.error == _error(A, result.U, result.V)
    assert result.error <= result.history[0]
    assert result.error == min(result.history)
    assert all(b <= a for a, b in zip(result.history, result.history[1:], strict=False))


def test_exact_start_is_kept_without_solving() -> None:
    rng = np.random.default_rng(1)
    U = (rng.random((20, 3)) < 0.5).astype(np.int8)
    V = np.eye(3, dtype=np.int8)[rng.integers(0, 3, 10)]  # one 1 per row: U Vᵀ is 0/1
    A = U.astype(int) @ V.T
    result = als(A, U, V)
    assert result.error == 0 and result.solves == 0 and result.history == [0]
    np.testing.assert_array_equal(result.U, U)
    np.testing.assert_array_equal(result.V, V)


def test_planted_factorization_is_recovered_from_a_perturbed_start() -> None:
    rng = np.random.default_rng(11)
    U = (rng.random((60, 3)) < 0.5).astype(np.int8)
    V = np.eye(3, dtype=np.int8)[rng.integers(0, 3, 12)]
    A = U.astype(int) @ V.T
    U_start = U.copy()
    U_start[:5] ^= 1  # a few wrong rows: the V solve keeps V, the U solve repairs them
    result = als(A, U_start, V)
    assert result.history[0] > 0
    assert result.error == 0


def test_first_solve_is_v_then_u_and_matches_bls() -> None:
    A, U, V = _instance(2)
    result = als(A, U, V, max_solves=2, patience=5)
    V1, error1 = solve_bls_with_error(A.T, U)
    U2, error2 = solve_bls_with_error(A, V1)
    assert result.history == [_error(A, U, V), error1, error2]
    assert error2 < error1  # so the best pair is the last one
    np.testing.assert_array_equal(result.U, U2)
    np.testing.assert_array_equal(result.V, V1)


@pytest.mark.parametrize("max_solves", [0, 1, 3])
def test_max_solves_is_respected(max_solves: int) -> None:
    A, U, V = _instance(3)
    result = als(A, U, V, max_solves=max_solves, patience=100)
    assert result.solves <= max_solves
    assert len(result.history) == result.solves + 1
    if max_solves == 0:
        assert result.error == _error(A, U, V)
        np.testing.assert_array_equal(result.U, U)


def _brute_force_bls(A: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Each row's best code over all 2^r, ties to the lowest code index (the library's rule)."""
    rank = V.shape[1]
    codes = np.array([[(index >> k) & 1 for k in range(rank)] for index in range(2**rank)])
    errors = ((A[:, None, :] - (codes @ V.T)[None, :, :]) ** 2).sum(axis=2)
    return codes[np.argmin(errors, axis=1)].astype(np.int8)


def _papers_als(
    A: np.ndarray, U: np.ndarray, V: np.ndarray, max_solves: int, patience: int
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """The paper's rule as written: V first, stop after ``patience`` solves in a row without
    improvement or at ``max_solves``; the best pair and the history."""
    history = [_error(A, U, V)]
    best = (U, V, history[0])
    stalled = 0
    for solve in range(max_solves):
        if solve % 2 == 0:
            V = _brute_force_bls(A.T, U)
        else:
            U = _brute_force_bls(A, V)
        history.append(_error(A, U, V))
        if history[-1] < best[2]:
            best, stalled = (U, V, history[-1]), 0
        else:
            stalled += 1
        if history[-1] == 0 or stalled >= patience:
            break
    return best[0], best[1], history


@pytest.mark.parametrize("route", ["compiled", "chunked"])
@pytest.mark.parametrize("patience", [1, 2, 3])
def test_the_same_pair_as_the_papers_stopping_rule(
    monkeypatch: pytest.MonkeyPatch, route: str, patience: int
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    if route == "chunked":
        monkeypatch.setattr(bls_module, "_KERNEL_MAX_ENTRIES", 0)
    settled = 0
    for seed in range(12):
        A, U, V = _instance(seed, m=60, n=20, r=4)
        result = als(A, U, V, max_solves=50, patience=patience)
        U_paper, V_paper, history = _papers_als(A, U, V, 50, patience)
        assert result.error == min(history) == _error(A, result.U, result.V)
        np.testing.assert_array_equal(result.U, U_paper)
        np.testing.assert_array_equal(result.V, V_paper)
        # the same solves, stopped at the paper's rule or earlier at a fixed point
        assert result.history == history[: len(result.history)]
        if len(result.history) < len(history):
            settled += 1
            assert result.solves >= 2 and result.history[-1] == result.history[-2]
    assert settled > 0 if patience > 1 else settled == 0  # one stale solve: nothing to spare


def test_default_is_the_papers_twenty_solves() -> None:
    A, U, V = _instance(5, m=200, n=30, r=5)
    assert als(A, U, V).solves <= 20


@pytest.mark.parametrize("side", ["U", "V"])
def test_one_hot_side_stays_one_hot(side: str) -> None:
    A, U, V = _instance(6, r=4)
    # Infeasible starts: the constrained side is repaired and the start is not returned.
    result = als(A, U, V, one_hot=side)  # type: ignore[arg-type]
    factor = result.U if side == "U" else result.V
    assert (factor.sum(axis=1) == 1).all()
    assert result.error == _error(A, result.U, result.V)


def test_one_hot_feasible_start_never_worsens() -> None:
    A, U, _ = _instance(7, r=3)
    V = np.eye(3, dtype=np.int8)[np.arange(A.shape[1]) % 3]
    result = als(A, U, V, one_hot="V")
    assert (result.V.sum(axis=1) == 1).all()
    assert result.error <= _error(A, U, V)


def test_dask_input_gives_the_same_answer() -> None:
    da = pytest.importorskip("dask.array")
    A, U, V = _instance(8, m=90, n=12, r=3)
    expected = als(A, U, V)
    got = als(da.from_array(A, chunks=(25, 6)), U, V)
    assert got.history == expected.history
    np.testing.assert_array_equal(got.U, expected.U)
    np.testing.assert_array_equal(got.V, expected.V)


def test_dask_on_a_local_distributed_cluster() -> None:
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    A, U, V = _instance(9, m=60, n=10, r=2)
    expected = als(A, U, V, one_hot="V")
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=":0"
    ):
        got = als(da.from_array(A, chunks=(20, 10)), U, V, one_hot="V")
    assert got.error == expected.error
    np.testing.assert_array_equal(got.V, expected.V)


def test_bad_inputs_raise_typed_errors() -> None:
    A, U, V = _instance(10)
    with pytest.raises(InvalidMatrixError, match="U must be"):
        als(A, U[:-1], V)
    with pytest.raises(InvalidParameterError, match="one_hot"):
        als(A, U, V, one_hot="W")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="patience"):
        als(A, U, V, patience=0)
    with pytest.raises(InvalidParameterError, match="max_solves"):
        als(A, U, V, max_solves=-1)


@pytest.mark.parametrize("one_hot", [None, "U", "V"])
@pytest.mark.parametrize("seed", range(4))
def test_compiled_small_path_equals_blas_path(
    monkeypatch: pytest.MonkeyPatch, one_hot: str | None, seed: int
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    A, U, V = _instance(20 + seed, m=25, n=18, r=2 + seed)
    compiled = als(A, U, V, one_hot=one_hot, max_solves=7, patience=2)
    monkeypatch.setattr(bls_module, "_KERNEL_MAX_ENTRIES", 0)  # force the chunked BLAS route
    general = als(A, U, V, one_hot=one_hot, max_solves=7, patience=2)
    assert compiled.history == general.history
    assert compiled.solves == general.solves and compiled.error == general.error
    np.testing.assert_array_equal(compiled.U, general.U)
    np.testing.assert_array_equal(compiled.V, general.V)
