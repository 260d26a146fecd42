"""The native structure-aware BMF solver: kernels, certificates, portfolio and backend."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace

import numba
import numpy as np
import pytest
import scipy.sparse

import bmfdsl
from bmfdsl import factorize
from bmfdsl.apps import make_bernoulli, make_exact_rank, make_planted_blocks
from bmfdsl.backends.native import NativeSampler
from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import _matrix, code_table, squared_error, weighted_squared_error
from bmfdsl.modeling import BMFStructure
from bmfdsl.solvers.native import NativeSettings, exact_rank1, solve_bmf, solve_weighted_bmf
from bmfdsl.solvers.native._anneal import als_polish, anneal_replicas, row_codes, total_error
from bmfdsl.solvers.native._portfolio import compile_kernels
from bmfdsl.testing import check_structured_sampler
from bmfdsl.timings import WorkBudget


def _all_factors(rows: int, rank: int, one_hot: bool = False):
    for bits in itertools.product((0, 1), repeat=rows * rank):
        F = np.array(bits, dtype=np.int8).reshape(rows, rank)
        if one_hot and not (F.sum(axis=1) == 1).all():
            continue
        yield F


def _brute_force(A: np.ndarray, rank: int, one_hot: str | None = None) -> int:
    m, n = A.shape
    best = None
    for U in _all_factors(m, rank, one_hot == "U"):
        for V in _all_factors(n, rank, one_hot == "V"):
            error = squared_error(A, U, V)
            best = error if best is None else min(best, error)
    return best


@pytest.mark.parametrize("rank", [1, 2, 3, 5])
def test_row_codes_are_a_gray_sequence_of_every_code(rank):
    codes, flips = row_codes(rank, exactly_one=False)
    assert len({tuple(c) for c in codes.tolist()}) == 2**rank
    for t in range(1, 2**rank):
        differ = np.flatnonzero(codes[t] != codes[t - 1])
        assert differ.tolist() == [flips[t]]
    one_hot, _ = row_codes(rank, exactly_one=True)
    assert (one_hot.sum(axis=1) == 1).all() and len(one_hot) == rank


@pytest.mark.parametrize("rank", [1, 3, 6])
def test_code_table_orders_are_permutations_that_break_ties_as_documented(rank):
    index = code_table(rank, False)
    as_codes = {order: code_table(rank, False, order) for order in ("gray", "lexicographic")}
    for table in (index, *as_codes.values()):
        assert sorted(map(tuple, table.tolist())) == sorted(map(tuple, index.tolist()))
        assert not table.flags.writeable  # shared by every caller
    code_of_row = index @ (1 << np.arange(rank))
    assert code_of_row.tolist() == list(range(2**rank))  # row c is code c
    lexicographic = np.array(list(itertools.product((0, 1), repeat=rank)), dtype=np.int8)
    assert np.array_equal(as_codes["lexicographic"], lexicographic)
    steps = np.abs(np.diff(as_codes["gray"].astype(int), axis=0)).sum(axis=1)
    assert (steps == 1).all()  # one bit per step: the annealing kernels' incremental scores
    for order in ("index", "gray", "lexicographic"):
        assert np.array_equal(code_table(rank, True, order), np.eye(rank, dtype=np.int8))


def test_code_table_rejects_an_unknown_order():
    with pytest.raises(InvalidParameterError, match="order must be"):
        code_table(2, False, "binary")


def test_weighted_squared_error_is_the_weighted_residual_in_every_chunking(monkeypatch):
    rng = np.random.default_rng(5)
    A = (rng.random((37, 11)) < 0.5).astype(np.int8)
    U = (rng.random((37, 3)) < 0.5).astype(np.int8)
    V = (rng.random((11, 3)) < 0.5).astype(np.int8)
    weights = rng.integers(0, 4, size=A.shape).astype(np.float64)  # integers: exact sums
    expected = float((weights * (A - U.astype(int) @ V.T) ** 2).sum())
    assert weighted_squared_error(A, U, V, weights) == expected
    assert BMFStructure(A, 3, entry_weights=weights).error(U, V) == expected
    assert weighted_squared_error(A, U, V, np.ones(A.shape)) == squared_error(A, U, V)
    monkeypatch.setattr(_matrix, "_ERROR_CHUNK_ENTRIES", 50)  # chunks of 4 rows
    assert weighted_squared_error(A, U, V, weights) == expected


def test_work_budget_counts_work_and_watches_an_opt_in_deadline():
    budget = WorkBudget(work_limit=10.0, seconds_per_unit=0.5)
    assert budget.deadline is None and budget.affords(10.0) and not budget.affords(10.5)
    budget.spend(4.0, seconds=1.0)
    assert budget.work == 4.0 and budget.seconds_per_unit == 0.25
    assert budget.remaining() == 6.0 and not budget.fits_work(7.0)
    budget.spend(7.0)  # a step may overrun: the budget only says what it can afford
    assert budget.remaining() == 0.0 and budget.seconds_per_unit == 0.25
    unbounded = WorkBudget()
    assert unbounded.affords(1e300) and unbounded.remaining() == math.inf
    started = time.perf_counter()
    timed = WorkBudget(time_limit=60.0, seconds_per_unit=1e-3, started=started)
    assert timed.deadline == started + 60.0
    assert timed.affords(1e3) and not timed.affords(1e6)  # 1 s fits, 1,000 s does not
    assert not timed.fits_time(61.0) and 0 < timed.remaining() <= 60_000
    assert WorkBudget(time_limit=0.0, started=started - 1).remaining() == 0.0


@pytest.mark.parametrize("one_hot", [None, "V"])
def test_weighted_solver_restarts_num_reads_times_whatever_the_seeds(one_hot):
    rng = np.random.default_rng(2)
    A = (rng.random((9, 6)) < 0.5).astype(np.int8)
    C = (rng.random((9, 6)) < 0.8).astype(np.float64)
    U0 = np.zeros((9, 2), np.int8)
    V0 = np.eye(2, dtype=np.int8)[np.arange(6) % 2]
    for reads, warm in ((0, ()), (5, ()), (5, [(U0, V0)])):
        result = solve_weighted_bmf(A, C, 2, one_hot=one_hot, num_reads=reads, initial_factors=warm)
        assert result.info["starts"] == reads + 2 + len(warm)  # + the plain answer, baseline
        U, V, error = result.solutions[0]
        assert error == pytest.approx(weighted_squared_error(A, U, V, C))
        if one_hot == "V":
            assert (V.sum(axis=1) == 1).all()
    again = solve_weighted_bmf(A, C, 2, one_hot=one_hot, num_reads=7, seed=4)
    once = solve_weighted_bmf(A, C, 2, one_hot=one_hot, num_reads=7, seed=4)
    assert np.array_equal(again.solutions[0][0], once.solutions[0][0])


@pytest.mark.parametrize("seed", [0, 3])
def test_weighted_solver_is_as_strong_as_plain_bmf(seed):
    """With every entry observed at weight 1 the weighted search starts from the plain
    portfolio's answer (the same seed, so the same answer); with entries missing it is never
    worse, on the observed entries, than filling them with 0 and solving plain BMF."""
    A = make_planted_blocks(120, 40, 4, density=0.3, random_state=seed)[0].toarray()
    plain = solve_bmf(A, 4, seed=seed).solutions[0]
    weighted = solve_weighted_bmf(A, np.ones(A.shape), 4, seed=seed).solutions[0]
    assert weighted[2] <= plain[2]
    mask = (np.random.default_rng(seed).random(A.shape) < 0.8).astype(np.float64)
    filled_U, filled_V, _ = solve_bmf(A * mask.astype(np.int8), 4, seed=seed).solutions[0]
    masked = solve_weighted_bmf(A, mask, 4, seed=seed).solutions[0]
    assert masked[2] <= weighted_squared_error(A, filled_U, filled_V, mask)
    assert masked[2] == pytest.approx(weighted_squared_error(A, masked[0], masked[1], mask))


def _bls_reference(A, V, one_hot=False):
    """Independent exact BLS: try every code for every row."""
    codes = np.array(list(_all_factors(1, V.shape[1], one_hot))).reshape(-1, V.shape[1])
    errors = ((A[:, None, :] - (codes @ V.T)[None, :, :]) ** 2).sum(axis=2)
    return errors.min(axis=1).sum()


@pytest.mark.parametrize("one_hot", [False, True])
def test_first_als_solve_is_an_exact_bls(one_hot):
    rng = np.random.default_rng(3)
    A = (rng.random((12, 7)) < 0.5).astype(np.int8)
    V = (rng.random((7, 3)) < 0.5).astype(np.int8)
    U = np.zeros((12, 3), np.int8)
    U[:, 0] = 1  # feasible for both variants
    codes_u = row_codes(3, one_hot)
    error, solves = als_polish(A, U, V.copy(), *codes_u, *row_codes(3, False), 1)
    assert solves == 1
    assert error == _bls_reference(A.astype(int), V.astype(int), one_hot)
    assert error == squared_error(A, U, V)


def test_als_never_worsens_and_reports_the_true_error():
    rng = np.random.default_rng(0)
    for _ in range(10):
        A = (rng.random((15, 9)) < 0.4).astype(np.int8)
        U = (rng.random((15, 3)) < 0.5).astype(np.int8)
        V = (rng.random((9, 3)) < 0.5).astype(np.int8)
        before = squared_error(A, U, V)
        error, _ = als_polish(A, U, V, *row_codes(3, False), *row_codes(3, False), 100)
        assert error <= before
        assert error == squared_error(A, U, V)


@pytest.mark.parametrize("swap", [False, True])
def test_anneal_replicas_tracks_exact_errors(swap):
    rng = np.random.default_rng(1)
    A = (rng.random((10, 8)) < 0.5).astype(np.int8)
    R, r, S = 3, 2, 40
    U = (rng.random((R, 10, r)) < 0.5).astype(np.int8)
    V = (rng.random((R, 8, r)) < 0.5).astype(np.int8)
    temperatures = np.repeat(np.geomspace(2.0, 0.1, S)[:, None], R, axis=1)
    best_U, best_V = np.zeros((10, r), np.int8), np.zeros((8, r), np.int8)
    codes = row_codes(r, False)
    out = anneal_replicas(A, U, V, temperatures, swap, *codes, *codes, 5, best_U, best_V)
    for rep in range(R):
        assert out[rep] == squared_error(A, U[rep], V[rep])
    assert out[R] == squared_error(A, best_U, best_V) <= out[:R].min()
    assert total_error(A, best_U, best_V) == out[R]


@numba.njit
def _plain_draws(B, G, X, codes, temperature):
    """Heat-bath draws of every row of ``X`` written plainly: each code's energy
    ``cᵀGc - 2 b·c`` from scratch, its weight by ``exp``; returns the energies drawn."""
    K, r = codes.shape
    weights = np.zeros(K)
    energy = np.zeros(K, dtype=np.int64)
    total = 0
    for i in range(X.shape[0]):
        for t in range(K):
            e = 0
            for k in range(r):
                for l in range(r):
                    e += codes[t, k] * G[k, l] * codes[t, l]
                e -= 2 * codes[t, k] * B[i, k]
            energy[t] = e
        emin = energy.min()
        norm = 0.0
        for t in range(K):
            gap = (energy[t] - emin) / temperature
            weights[t] = np.exp(-gap) if gap < 30.0 else 0.0
            norm += weights[t]
        pick = np.random.random() * norm
        chosen = K - 1
        acc = 0.0
        for t in range(K):
            acc += weights[t]
            if pick < acc:
                chosen = t
                break
        while weights[chosen] == 0.0:
            chosen -= 1
        X[i, :] = codes[chosen]
        total += energy[chosen]
    return total


@numba.njit
def _plain_sweeps(A, U, V, codes_u, codes_v, temperatures, seed, v_scale):
    """One replica's sweeps as :func:`anneal_replicas` defines them, by :func:`_plain_draws`;
    returns the error after each sweep."""
    np.random.seed(seed)
    errors = np.zeros(temperatures.shape[0], dtype=np.int64)
    for s in range(temperatures.shape[0]):
        _plain_draws(_product(A, V), _product(V.T, V), U, codes_u, temperatures[s])
        drawn = _plain_draws(
            _product(A.T, U), _product(U.T, U), V, codes_v, temperatures[s] * v_scale
        )
        errors[s] = A.sum() + drawn
    return errors


@numba.njit
def _product(X, Y):
    out = np.zeros((X.shape[0], Y.shape[1]), dtype=np.int64)
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            for k in range(Y.shape[1]):
                out[i, k] += np.int64(X[i, j]) * Y[j, k]
    return out


@pytest.mark.parametrize("one_hot", [False, True])
def test_annealing_draws_equal_the_plain_heat_bath(one_hot):
    # the kernel's shortcuts (weights by integer gap from a table, cᵀGc along the Gray order,
    # the best code tracked while scoring) draw the same codes, cold to hot, gaps beyond the
    # table included
    rng = np.random.default_rng(3)
    for rank in (1, 2, 5, 8):
        codes_u, codes_v = row_codes(rank, one_hot), row_codes(rank, False)
        A = (rng.random((40, 25)) < 0.4).astype(np.int8)
        U = (rng.random((1, 40, rank)) < 0.4).astype(np.int8)
        V = (rng.random((1, 25, rank)) < 0.4).astype(np.int8)
        if one_hot:
            U[0] = codes_u[0][rng.integers(0, rank, 40)]
        temperatures = np.geomspace(1e4, 0.05, 12)
        U_plain, V_plain = U[0].copy(), V[0].copy()
        best_U, best_V = np.zeros((40, rank), np.int8), np.zeros((25, rank), np.int8)
        errors = []
        for s, temperature in enumerate(temperatures):  # one call a sweep: errors per sweep
            out = anneal_replicas(
                A, U, V, np.array([[temperature]]), False, *codes_u, *codes_v, 7 + s,
                best_U, best_V, 1.6,
            )  # fmt: skip
            errors.append(out[0])
            plain = _plain_sweeps(A, U_plain, V_plain, codes_u[0], codes_v[0],
                                  np.array([temperature]), 7 + s, 1.6)  # fmt: skip
            assert out[0] == plain[0] == squared_error(A, U[0], V[0])
            assert np.array_equal(U[0], U_plain) and np.array_equal(V[0], V_plain)
        assert len(set(errors)) > 1  # the draws moved


def test_exact_rank1_matches_brute_force():
    rng = np.random.default_rng(7)
    for trial in range(25):
        m, n = rng.integers(1, 6, size=2)
        A = (rng.random((m, n)) < rng.random()).astype(np.int8)
        if trial % 4 == 0 and n > 1:
            A[:, -1] = A[:, 0]  # duplicate columns are merged
        u, v, error = exact_rank1(A)
        assert error == squared_error(A, u, v) == _brute_force(A, 1)


def test_exact_rank1_refuses_when_too_costly():
    A = make_bernoulli(30, 30, 0.5, random_state=0)
    assert exact_rank1(A, max_enumeration=1000) is None


@pytest.mark.parametrize("density", [0.15, 0.5, 0.85])
def test_rank1_branch_and_bound_equals_enumeration(density):
    # a budget below 2**G * rows forces the branch and bound; a huge one the enumeration
    rng = np.random.default_rng(int(density * 100))
    for _ in range(8):
        m, n = rng.integers(4, 13, size=2)
        A = (rng.random((m, n)) < density).astype(np.int8)
        A[: m // 3] = A[m - m // 3 :]  # duplicated rows carry weight 2
        enumerated = exact_rank1(A, max_enumeration=2**62)
        searched = exact_rank1(A, max_enumeration=min(A.shape) + 8 * A.shape[0] * 10**4)
        assert enumerated is not None and searched is not None
        assert searched[2] == enumerated[2] == squared_error(A, searched[0], searched[1])


def test_rank1_branch_and_bound_certifies_sparse_and_dense_30x30():
    for p in (0.2, 0.8):
        A = make_bernoulli(30, 30, p, random_state=1)
        exact = exact_rank1(A)
        assert exact is not None
        # no rank-1 anneal from many starts does better than the certified value
        result = solve_bmf(A, 1, seed=0, settings=NativeSettings(max_enumeration=0, num_reads=8))
        assert exact[2] <= result.solutions[0][2]
        assert exact[2] == squared_error(A, exact[0], exact[1])


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_planted_30x30_recovered_and_certified(rank):
    A = make_exact_rank(30, 30, rank, random_state=100 + rank)
    result = solve_bmf(A, rank, seed=rank, settings=NativeSettings(time_limit=5.0))
    U, V, error = result.solutions[0]
    assert error == 0 == squared_error(A, U, V)
    assert result.info["certificate"]["optimal"]


@pytest.mark.parametrize(("shape", "rank", "one_hot"), [((4, 3), 2, None), ((3, 4), 2, "V")])
def test_tiny_instances_reach_the_brute_force_optimum(shape, rank, one_hot):
    rng = np.random.default_rng(11)
    for _ in range(3):
        A = (rng.random(shape) < 0.5).astype(np.int8)
        result = solve_bmf(A, rank, one_hot=one_hot, seed=0, settings=NativeSettings(num_reads=4))
        assert result.solutions[0][2] == _brute_force(A, rank, one_hot)


@pytest.mark.parametrize("side", ["U", "V"])
def test_one_hot_rows_stay_one_hot(side):
    A = make_bernoulli(25, 12, 0.5, random_state=2)
    result = solve_bmf(
        A, 3, one_hot=side, seed=0, settings=NativeSettings(num_reads=4, num_solutions=3)
    )
    for U, V, error in result.solutions:
        factor = U if side == "U" else V
        assert (factor.sum(axis=1) == 1).all()
        assert error == squared_error(A, U, V)


def test_rank1_one_hot_is_certified():
    A = make_bernoulli(10, 6, 0.5, random_state=4)
    result = solve_bmf(A, 1, one_hot="V")
    assert result.info["certificate"]["optimal"]
    assert result.solutions[0][2] == _brute_force(A, 1, "V")


def test_same_seed_same_result():
    A = make_bernoulli(30, 30, 0.5, random_state=5)
    settings = NativeSettings(num_reads=3, time_limit=60.0)
    first = solve_bmf(A, 4, seed=9, settings=settings).solutions[0]
    second = solve_bmf(A, 4, seed=9, settings=settings).solutions[0]
    assert first[2] == second[2]
    assert np.array_equal(first[0], second[0]) and np.array_equal(first[1], second[1])


def test_time_limit_is_honoured_roughly():
    A = make_bernoulli(30, 30, 0.5, random_state=6)
    solve_bmf(A, 5, seed=0, settings=NativeSettings(num_reads=1))  # warm the JIT cache
    started = time.perf_counter()
    result = solve_bmf(A, 5, seed=0, settings=NativeSettings(time_limit=0.3, patience=None))
    elapsed = time.perf_counter() - started
    # it searched until the clock stopped it (it skips a restart that would not fit, so the
    # wall time ends up to one restart short of the limit: a floor here was flaky) ...
    assert result.info["stopped_by"] == "time_limit" and result.info["restarts"] >= 1
    assert elapsed < 1.0  # ... and never ran far past it


def test_tall_and_wide_planted_matrices():
    A = make_exact_rank(3000, 20, 3, random_state=8)
    for data in (A, A.T):
        result = solve_bmf(data, 3, seed=1, settings=NativeSettings(time_limit=5.0))
        U, V, error = result.solutions[0]
        assert error == 0 == squared_error(data, U, V)
        assert U.shape == (data.shape[0], 3) and V.shape == (data.shape[1], 3)


def test_warm_start_is_used_and_validated():
    A, U0, V0 = make_exact_rank(20, 15, 3, random_state=3, return_factors=True)
    result = solve_bmf(A, 3, initial_factors=[(U0, V0)], settings=NativeSettings(num_reads=0))
    assert result.solutions[0][2] == 0
    with pytest.raises(InvalidParameterError, match="shapes"):
        solve_bmf(A, 3, initial_factors=[(U0[:5], V0)])


def test_the_backend_takes_num_reads_0_as_the_seeds_only_on_plain_bmf():
    from bmfdsl import factorize

    A = (np.random.default_rng(5).random((40, 25)) < 0.4).astype(np.int8)
    seeds_only = factorize(A, 3, backend="native", random_state=0, num_reads=0)
    one_more = factorize(A, 3, backend="native", random_state=0, num_reads=1)
    assert seeds_only.info["backend_info"]["restarts"] == 0
    assert seeds_only.info["backend_info"]["stopped_by"] == "num_reads"
    assert one_more.info["backend_info"]["restarts"] == 1
    # the same seeds come first, so a restart can only keep or lower the core's error
    assert one_more.info["error_before_als"] <= seeds_only.info["error_before_als"]
    mask = np.ones_like(A)
    mask[0, 0] = 0
    with pytest.raises(InvalidParameterError, match="num_reads"):  # restarted weighted ALS
        factorize(A, 3, mask=mask, backend="native", random_state=0, num_reads=0)


def test_all_zero_matrix_and_bad_settings():
    result = solve_bmf(np.zeros((5, 4), dtype=int), 2, settings=NativeSettings(num_reads=1))
    assert result.solutions[0][2] == 0
    with pytest.raises(InvalidParameterError, match="t_cold"):
        NativeSettings(t_cold=5.0, t_hot=1.0)
    with pytest.raises(InvalidParameterError, match="one_hot"):
        solve_bmf(np.ones((3, 3)), 1, one_hot="W")


def test_sample_bmf_returns_feasible_exact_energies():
    A = make_bernoulli(20, 10, 0.5, random_state=1)
    structure = BMFStructure(A, 3, "V")
    sampleset = NativeSampler().sample_bmf(structure, num_reads=2, num_solutions=2, seed=3)
    assert sampleset.info["backend"] == "native"
    assert list(sampleset.variables) == structure.labels()
    energies = list(sampleset.record.energy)
    assert energies == sorted(energies)
    for row, energy in zip(sampleset.record.sample, energies, strict=True):
        U, V = row[:60].reshape(20, 3), row[60:].reshape(10, 3)
        assert energy == squared_error(A, U, V)
        assert (V.sum(axis=1) == 1).all()
    with pytest.raises(TypeError, match="num_sweps"):
        NativeSampler().sample_bmf(BMFStructure(A, 2), num_sweps=3)


def test_native_passes_the_structured_conformance_kit():
    examples = {
        "time_limit": 0.2,
        "work_limit": 1e8,
        "num_reads": 2,
        "seed": 1,
        "initial_factors": (),
        "sweeps": 20,
        "replicas": 2,
        "t_hot": 2.0,
        "t_cold": 0.1,
        "core_rows": 8,
        "max_solves": 5,
        "max_enumeration": 1000,
        "num_solutions": 2,
        "patience": 3,
        "work_patience": 1e8,
        "flip_sweeps": 1,
    }
    check_structured_sampler(
        NativeSampler(), example_values=examples, sample_params={"num_reads": 3}
    )


def test_native_refuses_a_model_without_a_verified_structure(tmp_path):
    path = tmp_path / "own.py"
    path.write_text(
        "from bmfdsl.modeling import squared_residual\n"
        "NAME = 'formulation1'\n"
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    W = model.binary('W', (model.rank, *model.A.shape))\n"
        "    model.constrain_product(\n"
        "        W, U.T[:, :, None], V.T[:, None, :], group='W', weight='lam')\n"
        "    model.minimize(squared_residual(model.A, W.sum(axis=0)) + 15)\n"
    )
    A = make_exact_rank(6, 5, 2, random_state=1)
    compiled = bmfdsl.compile_model(path, A, 2)
    with pytest.raises(bmfdsl.ModelDefinitionError, match="declares none"):
        bmfdsl.solve(compiled, "native", lam=1.0)
    path.write_text(path.read_text() + "    model.declare_bmf()\n")
    with pytest.raises(
        bmfdsl.ModelDefinitionError,
        match=r"U = V = 0 its energy is (\d+) while the declared objective .* is (?!\1)",
    ):
        bmfdsl.compile_model(path, A, 2)


def test_solve_uses_the_structure_path():
    A = make_exact_rank(12, 10, 2, random_state=4)
    compiled = bmfdsl.compile_model("formulation1", A, 2)
    decoded = bmfdsl.solve(compiled, NativeSampler(), lam=1.0, seed=0)
    assert decoded[0].error == 0 == squared_error(A, decoded[0].U, decoded[0].V)


def test_zero_rows_and_columns_are_dropped_and_restored():
    rng = np.random.default_rng(12)
    A = np.zeros((5, 4), dtype=np.int8)
    A[np.ix_([0, 2, 3], [1, 3])] = rng.random((3, 2)) < 0.7
    A[0, 1] = 1
    for one_hot in (None, "U", "V"):
        result = solve_bmf(A, 2, one_hot=one_hot, seed=0, settings=NativeSettings(num_reads=2))
        U, V, error = result.solutions[0]
        assert U.shape == (5, 2) and V.shape == (4, 2)
        assert error == squared_error(A, U, V) == _brute_force(A, 2, one_hot)


def test_patience_stops_a_stalled_search_early():
    A = make_bernoulli(20, 20, 0.5, random_state=3)
    stalled = solve_bmf(A, 3, seed=0, settings=NativeSettings(time_limit=30.0, patience=2))
    assert stalled.info["stopped_early"]
    assert stalled.info["timings"]["total"] < 30.0
    # the rule: stop at the first restart count k with k - last >= max(patience, last)
    assert stalled.info["restarts"] >= 2
    full = solve_bmf(A, 3, seed=0, settings=NativeSettings(patience=None, num_reads=40))
    assert not full.info["stopped_early"] and full.info["restarts"] == 40
    with pytest.raises(InvalidParameterError, match="patience"):
        NativeSettings(patience=0)


def test_work_patience_stops_a_stalled_search_by_counted_work():
    A = make_bernoulli(40, 30, 0.5, random_state=5)
    settings = NativeSettings(patience=None, work_limit=3e9, work_patience=2e8)
    stalled = solve_bmf(A, 4, seed=0, settings=settings)
    assert stalled.info["stopped_by"] == "work_patience" and stalled.info["stopped_early"]
    units = stalled.info["work"]["units"]
    assert units < 3e9
    # counted, not timed: the same seed stops after the same restarts with the same answer
    again = solve_bmf(A, 4, seed=0, settings=settings)
    assert again.info["work"] == stalled.info["work"]
    assert again.solutions[0][2] == stalled.solutions[0][2]
    assert np.array_equal(again.solutions[0][0], stalled.solutions[0][0])
    # without the rule the same search runs on, through the same restarts first
    whole = solve_bmf(A, 4, seed=0, settings=NativeSettings(patience=None, work_limit=3e9))
    assert whole.info["stopped_by"] == "work_limit"
    assert whole.info["restarts"] > stalled.info["restarts"]
    assert whole.solutions[0][2] <= stalled.solutions[0][2]
    # a larger patience never stops earlier
    later = solve_bmf(A, 4, seed=0, settings=replace(settings, work_patience=6e8))
    assert later.info["restarts"] >= stalled.info["restarts"]
    with pytest.raises(InvalidParameterError, match="work_patience"):
        NativeSettings(work_patience=-1.0)


def test_the_backend_can_ask_for_the_whole_budget():
    structure = BMFStructure(make_bernoulli(20, 20, 0.5, random_state=3), 3)
    sampler = NativeSampler()
    stalled = sampler.sample_bmf(structure, seed=0, num_reads=40, patience=2)
    assert stalled.info["stopped_early"] and stalled.info["restarts"] < 40
    whole = sampler.sample_bmf(structure, seed=0, num_reads=40, patience=math.inf)
    assert not whole.info["stopped_early"] and whole.info["restarts"] == 40
    with pytest.raises(InvalidParameterError, match="patience"):
        sampler.sample_bmf(structure, seed=0, patience=0)


def test_kernels_are_compiled_once_and_outside_the_budget():
    compile_kernels()
    assert compile_kernels() == 0.0
    result = solve_bmf(make_bernoulli(20, 10, 0.5, random_state=1), 2, seed=0)
    assert result.info["timings"]["compile"] == 0.0


_COLD_START = """
import json
import numpy as np
from bmfdsl.backends.da import DASampler
from bmfdsl.solvers.native import NativeSettings, solve_bmf
from bmfdsl.testing import random_integer_bqm

A = (np.random.default_rng(0).random((40, 30)) < 0.5).astype(np.int8)
native = solve_bmf(A, 3, seed=0, settings=NativeSettings(time_limit=0.3))
da = DASampler().sample(random_integer_bqm(50, 1), num_reads=2, time_limit=0.3, seed=0)
print(json.dumps({"native": native.info["timings"], "da": [da.info["timings"]["compile"],
                  da.info["timings"]["anneal"]]}))
"""


def test_a_cold_numba_cache_costs_no_search_time(tmp_path):
    # numba compiles into an empty cache here: seconds that must not come out of the budget
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", _COLD_START], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    timing = json.loads(run.stdout.strip().splitlines()[-1])
    assert timing["native"]["compile"] > 0.3
    assert timing["native"]["total"] < 0.3 + 0.5  # the budget, plus at most one restart
    da_compile, da_anneal = timing["da"]
    assert da_compile > 0.3
    assert 0.2 < da_anneal < 0.8


def test_a_rank_that_covers_a_side_is_solved_exactly_without_any_search():
    # two nonzero columns at rank 3: the baseline seed does not apply to the reduced matrix,
    # and a seeds-only solve (num_reads=0) or a tiny budget must still give an answer
    A = np.zeros((30, 20), np.int8)
    A[:, 3] = 1
    A[::2, 7] = 1
    for B in (A, A.T.copy(), np.zeros((6, 5), np.int8)):
        result = solve_bmf(B, 3, seed=0, settings=NativeSettings(num_reads=0))
        U, V, error = result.solutions[0]
        assert error == 0 == int(((B - U.astype(int) @ V.T) ** 2).sum())
    for budget in ({"work_limit": 1.0}, {"time_limit": 1e-9}):
        assert factorize(A, 3, random_state=0, **budget).error == 0


def test_a_sampled_default_run_narrower_than_the_rank_has_an_answer():
    rng = np.random.default_rng(0)
    dense = np.zeros((40_000, 300), np.int8)
    dense[:, 5] = rng.random(40_000) < 0.3
    dense[:, 9] = rng.random(40_000) < 0.3
    result = factorize(scipy.sparse.csr_array(dense), 3, sample_rows="auto", random_state=0)
    assert result.info["sampled_rows"] is not None and result.error == 0
