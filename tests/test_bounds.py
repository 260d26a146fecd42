"""Lower bounds: valid against brute force, attached to every factorization, sound gaps; the
exact engine (CP-SAT) proves known optima, certify= improves or raises; the cpsat backend."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys

import dimod
import numpy as np
import pytest

from bmfdsl import factorize, make_bernoulli, make_exact_rank
from bmfdsl.apps import _cli as cli
from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.linalg import squared_error
from bmfdsl.pipeline._bounds import (
    LowerBound,
    cheap_lower_bound,
    observed_blocks_bound,
    prove,
    rank1_bound,
    spectral_bound,
)
from bmfdsl.result import Factorization, gap
from bmfdsl.solvers import get_backend, list_backends
from bmfdsl.testing import check_sampler, dimod_test_case, random_integer_bqm

needs_ortools = pytest.mark.skipif(
    importlib.util.find_spec("ortools") is None, reason="OR-Tools is not installed: bmfdsl[exact]"
)


def brute_force_optimum(
    A: np.ndarray, rank: int, one_hot: str | None = None, mask: np.ndarray | None = None
) -> int:
    """The exact optimum by enumerating every V and the best U for it, row by row (with a
    ``mask``: counting observed entries only)."""
    n = A.shape[1]
    weights = np.ones_like(A) if mask is None else mask
    codes = np.array(list(itertools.product([0, 1], repeat=rank)), dtype=np.int64)
    one_hot_codes = codes[codes.sum(axis=1) == 1]
    u_codes = one_hot_codes if one_hot == "U" else codes
    v_codes = one_hot_codes if one_hot == "V" else codes
    best = None
    for choice in itertools.product(range(len(v_codes)), repeat=n):
        V = v_codes[list(choice)]
        products = u_codes @ V.T  # every candidate row of U Vᵀ
        errors = ((A[:, None, :] - products[None, :, :]) ** 2 * weights[:, None, :]).sum(axis=2)
        total = int(errors.min(axis=1).sum())
        best = total if best is None else min(best, total)
    assert best is not None
    return best


def tiny_instances(count: int = 12):
    rng = np.random.default_rng(7)
    for index in range(count):
        m, n = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        density = (0.3, 0.5, 0.7)[index % 3]
        yield (rng.random((m, n)) < density).astype(np.int8)


@pytest.mark.parametrize("rank", [1, 2])
def test_cheap_bounds_never_exceed_the_brute_force_optimum(rank):
    tight = 0
    for A in tiny_instances():
        if rank > min(A.shape):
            continue
        optimum = brute_force_optimum(A, rank)
        assert spectral_bound(A, rank) <= optimum
        rank1 = rank1_bound(A, rank)
        assert rank1 is None or rank1 <= optimum
        bound = cheap_lower_bound(A, rank)
        assert bound.value <= optimum
        tight += bound.value == optimum
    assert tight > 0  # the bounds are not trivially 0 either


@pytest.mark.parametrize("rank", [1, 2])
def test_observed_blocks_bound_never_exceeds_the_masked_optimum(rank):
    rng = np.random.default_rng(11)
    positive = tight = 0
    for _ in range(16):
        m, n = int(rng.integers(3, 7)), int(rng.integers(3, 6))
        A = (rng.random((m, n)) < 0.5).astype(np.int8)
        mask = (rng.random((m, n)) < 0.85).astype(np.int8)
        optimum = brute_force_optimum(A, rank, mask=mask)
        bound = observed_blocks_bound(A, mask, rank)
        assert 0 <= bound <= optimum
        assert bound <= observed_blocks_bound(A, np.ones_like(A), rank)  # less seen, less proven
        positive += bound > 0
        tight += bound == optimum > 0
    assert positive >= 4 and tight >= 1  # the bound is not trivially 0


def test_a_masked_factorization_is_bounded_and_reports_like_an_unmasked_one():
    A = make_bernoulli(12, 10, 0.5, random_state=3)
    mask = (np.random.default_rng(5).random(A.shape) < 0.8).astype(np.int8)
    masked = factorize(A, 2, mask=mask, random_state=0)
    plain = factorize(A, 2, random_state=0)
    # the seed portfolio and the flip descent after it serve the unmasked default objective only
    portfolio_only = {"portfolio", "flip_descent"}
    assert set(masked.info) == (set(plain.info) - portfolio_only) | {"observed"}
    assert set(masked.info["timings"]) == set(plain.info["timings"]) - {"seeds"}
    assert masked.info["lower_bound"]["source"] in ("zero", "observed-blocks")
    assert masked.lower_bound == observed_blocks_bound(A, mask, 2) > 0
    assert masked.lower_bound <= masked.error
    with pytest.raises(InvalidParameterError, match="mask"):
        prove(A, 2, masked.U, masked.V, masked.error, mask=mask, certify=1.0)


def test_bounds_are_valid_under_one_hot_constraints():
    for A in tiny_instances(9):
        for side in ("U", "V"):
            optimum = brute_force_optimum(A, 2, one_hot=side)
            assert cheap_lower_bound(A, 2).value <= optimum


def test_row_limited_and_l1_models_report_integer_bmfs_bounds_boolean_ones_none():
    """at-most-k-bmf and sparse-bmf report the residual of the integer product, which no
    rank-r product brings below the spectral bound; Boolean and XOR products are not integer
    products of rank r, so they keep the bound 0."""
    A = make_bernoulli(40, 12, 0.4, random_state=2)
    plain_bound = cheap_lower_bound(A, 2).value
    assert plain_bound > 0
    for model in ("at-most-k-bmf", "sparse-bmf"):
        result = factorize(A, 2, model=model, random_state=0)
        assert result.lower_bound == plain_bound <= result.error
        assert result.info["lower_bound"]["source"] in ("spectral", "rank-1")
        with pytest.raises(InvalidParameterError, match="certify"):
            factorize(A, 2, model=model, random_state=0, certify=1.0)
    for model in ("boolean-bmf", "xor-bmf"):
        assert factorize(A, 2, model=model, random_state=0).lower_bound == 0


def test_spectral_bound_against_exhaustive_search_and_the_svd():
    rng = np.random.default_rng(3)
    for _ in range(6):
        A = (rng.random((3, 4)) < 0.5).astype(np.int8)
        singular = np.linalg.svd(A.astype(float), compute_uv=False)
        for rank in (1, 2):
            tail = float(np.sum(singular[rank:] ** 2))
            bound = spectral_bound(A, rank)
            # the ceiling of the tail, rounded safely: never above it by a whole unit
            assert bound <= np.ceil(tail - 1e-9) and bound >= np.ceil(tail - 1e-9) - 1
            assert bound <= brute_force_optimum(A, rank)


def test_blocked_spectral_bound_is_weaker_but_valid():
    A = make_bernoulli(400, 300, 0.5, random_state=1)
    full = spectral_bound(A, 1)
    # under 400·300²/64 = 562,500 bit counts (and 9M pairs of ones): no exact Gram, blocks
    # of 2 rows (each 400 x 450 work units)
    blocked = spectral_bound(A, 1, max_flops=2 * 400 * 450)
    assert 0 < blocked <= full
    assert spectral_bound(A, 1, max_flops=400 * 450 - 1) == 0  # blocks too thin: no bound
    # the blocked bound is still a bound: below what any factorization reaches
    assert blocked <= factorize(A, 1, random_state=0).error
    small = next(iter(tiny_instances()))
    assert spectral_bound(small, 1, max_flops=1) <= brute_force_optimum(small, 1)


def test_spectral_bound_of_a_dask_array_matches_numpy():
    da = pytest.importorskip("dask.array")
    A = make_bernoulli(120, 20, 0.4, random_state=2)
    assert spectral_bound(da.from_array(A, chunks=(50, 20)), 4) == spectral_bound(A, 4)
    assert spectral_bound(da.from_array(A.T, chunks=(20, 50)), 4) == spectral_bound(A, 4)


def test_rank1_bound_is_the_rank1_optimum_and_skips_when_it_cannot_help():
    for A in tiny_instances(6):
        assert rank1_bound(A, 1) == brute_force_optimum(A, 1)
    A = np.eye(4, dtype=np.int8)
    # E₁ = 3 and ||A||² = 4: 3·3 - 2·4 = 1, which is the rank-3 optimum of I₄
    assert rank1_bound(A, 3, rank1_upper=3) == 1 == brute_force_optimum(A, 3)
    assert rank1_bound(A, 3, rank1_upper=3, to_beat=1) is None  # it cannot beat 1: skipped


def test_gap_and_certified_optimal():
    U = np.zeros((2, 1), dtype=np.int8)
    result = Factorization(U, U, 8, 1.0, lower_bound=6)
    assert result.gap == pytest.approx(0.25) and not result.certified_optimal
    exact = Factorization(U, U, 0, 0.0)
    assert exact.gap == 0.0 and exact.certified_optimal
    assert gap(5, 5) == 0.0 and gap(5, 0) == 1.0
    summary = result.to_dict()
    assert summary["lower_bound"] == 6 and summary["certified_optimal"] is False
    bound = LowerBound(3, "spectral", {"spectral": 3}).raised(2, "rank-1")
    assert bound.value == 3 and bound.to_info() == {
        "value": 3,
        "source": "spectral",
        "spectral": 3,
        "rank-1": 2,
    }


@pytest.mark.parametrize("method", ["qubo", "baseline", "thresholded", "penalized"])
def test_every_method_carries_a_valid_cheap_bound(method):
    A = make_bernoulli(30, 30, 0.5, random_state=4)
    result = factorize(A, 3, method=method, random_state=0)
    assert 0 < result.lower_bound <= result.error
    assert result.info["lower_bound"]["value"] == result.lower_bound
    assert result.gap == pytest.approx((result.error - result.lower_bound) / result.error)
    assert "bounds" in result.info["timings"]


def test_bounds_with_sampling_and_transposed_inputs_stay_valid():
    A = make_bernoulli(60, 400, 0.3, random_state=5)
    result = factorize(A, 2, sample_rows=40, random_state=0)
    assert 0 < result.lower_bound <= result.error
    assert result.lower_bound >= spectral_bound(A.T, 2) == spectral_bound(A, 2)


def test_exact_rank_and_rank1_answers_are_certified():
    A = make_exact_rank(30, 30, 3, random_state=2)
    result = factorize(A, 3, random_state=0)
    assert result.error == 0 and result.certified_optimal and result.gap == 0.0
    sparse = make_bernoulli(30, 30, 0.2, random_state=0)
    rank1 = factorize(sparse, 1, random_state=0)
    # the native solver's rank-1 certificate (or the rank-1 bound) proves it
    assert rank1.certified_optimal and rank1.lower_bound == rank1.error > 0
    assert rank1.info["lower_bound"]["source"] in ("certificate", "rank-1")


def test_prove_keeps_the_answer_and_times_the_bounds():
    A = make_bernoulli(20, 12, 0.5, random_state=8)
    result = factorize(A, 2, random_state=0)
    proof = prove(A, 2, result.U, result.V, result.error)
    assert proof.error == result.error == squared_error(A, proof.U, proof.V)
    assert proof.bound.value == result.lower_bound
    assert set(proof.timings) == {"bounds"} and proof.info == {}


# ------------------------------------------------------------------ the exact engine


@needs_ortools
def test_cpsat_proves_brute_force_optima_on_tiny_instances():
    for A in tiny_instances(8):
        for rank in (1, 2):
            if rank > min(A.shape):
                continue
            exact = _solve_exact(A, rank, seconds=5, seed=0)
            assert exact.optimal and exact.U is not None and exact.V is not None
            assert exact.error == exact.lower_bound == brute_force_optimum(A, rank)
            assert squared_error(A, exact.U, exact.V) == exact.error


@needs_ortools
@pytest.mark.parametrize("side", ["U", "V"])
def test_cpsat_respects_one_hot_and_its_optimum(side):
    for A in tiny_instances(6):
        exact = _solve_exact(A, 2, seconds=5, one_hot=side, seed=1)
        factor = exact.U if side == "U" else exact.V
        assert exact.optimal and factor is not None
        assert (factor.sum(axis=1) == 1).all()
        assert exact.error == brute_force_optimum(A, 2, one_hot=side)


@needs_ortools
@pytest.mark.parametrize("rank", [2, 4])
def test_cpsat_proves_exact_rank_30x30_from_a_poor_hint(rank):
    A = make_exact_rank(30, 30, rank, random_state=3)
    poor = (np.zeros((30, rank), np.int8), np.zeros((30, rank), np.int8))
    exact = _solve_exact(A, rank, seconds=10, hint=poor, seed=0)
    assert exact.optimal and exact.error == 0 and exact.lower_bound == 0
    assert exact.U is not None and exact.V is not None
    assert squared_error(A, exact.U, exact.V) == 0


@needs_ortools
def test_cpsat_is_deterministic_for_a_seed():
    A = make_bernoulli(12, 10, 0.5, random_state=1)
    # stopped by the deterministic limit, not proven: the same seed must still agree
    zeros = (np.zeros((12, 3), np.int8), np.zeros((10, 3), np.int8))
    runs = [_solve_exact(A, 3, seconds=0.3, hint=zeros, seed=5) for _ in range(2)]
    assert not runs[0].optimal and runs[0].info["status"] == "FEASIBLE"
    assert runs[0].error == runs[1].error and runs[0].lower_bound == runs[1].lower_bound
    assert np.array_equal(runs[0].U, runs[1].U) and np.array_equal(runs[0].V, runs[1].V)


@needs_ortools
def test_certify_proves_optimum_and_replaces_a_worse_answer():
    A = make_bernoulli(6, 5, 0.5, random_state=2)
    optimum = brute_force_optimum(A, 2)
    # a deliberately poor heuristic answer: no polish, almost no search
    plain = factorize(A, 2, method="baseline", als=False, random_state=0)
    certified = factorize(A, 2, method="baseline", als=False, random_state=0, certify=10)
    assert certified.certified_optimal and certified.error == certified.lower_bound == optimum
    assert certified.error <= plain.error
    assert certified.lower_bound > spectral_bound(A, 2)  # the engine raised the bound
    assert certified.info["lower_bound"]["source"] in ("cp-sat", "rank-1", "spectral")
    assert "certify" in certified.info["timings"]
    assert certified.info["certify"]["status"] == "OPTIMAL"
    report = certified.info["certify"]
    assert report["heuristic_error"] == plain.error  # the baseline is deterministic
    assert report["improved"] is (certified.error < plain.error)


@needs_ortools
def test_certify_raises_the_bound_without_a_proof():
    A = make_bernoulli(16, 14, 0.5, random_state=1)
    cheap = factorize(A, 2, random_state=0)
    certified = factorize(A, 2, random_state=0, certify=0.2)
    assert certified.error <= cheap.error
    assert cheap.lower_bound <= certified.lower_bound <= certified.error
    assert certified.info["lower_bound"]["cp-sat"] <= certified.error


@needs_ortools
def test_certify_input_errors(monkeypatch):
    A = make_exact_rank(6, 6, 2, random_state=0)
    for bad in (-1, 0, "10", True, float("inf")):
        with pytest.raises(InvalidParameterError, match="certify"):
            factorize(A, 2, certify=bad)
    da = pytest.importorskip("dask.array")
    with pytest.raises(InvalidParameterError, match="in-memory"):
        factorize(da.from_array(np.tile(A, (400, 1)), chunks=(600, 6)), 2, certify=1)
    monkeypatch.setitem(sys.modules, "ortools.sat.python.cp_model", None)
    monkeypatch.setitem(sys.modules, "ortools.sat.python", None)
    with pytest.raises(BackendUnavailableError, match=r"bmfdsl\[exact\]"):
        factorize(A, 2, certify=1)


@needs_ortools
def test_cli_certify_writes_the_bound(tmp_path, capsys):
    A = make_exact_rank(10, 8, 2, random_state=1)
    path = tmp_path / "a.csv"
    np.savetxt(path, A, fmt="%d", delimiter=",")
    out = tmp_path / "out"
    args = ["factorize", str(path), "--rank", "2", "--seed", "0", "--certify", "5"]
    assert cli.main([*args, "--out", str(out)]) == 0
    assert "proven optimal" in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["certified_optimal"] is True and report["lower_bound"] == report["error"] == 0
    assert cli.main([*args[:-1], "-2", "--out", str(out)]) == cli.EXIT_DATA_ERROR
    assert "certify must be a positive, finite number" in capsys.readouterr().err


# ------------------------------------------------------------------ the cpsat backend

EXAMPLES = {
    "deterministic_time": 1.0,
    "time_limit": 5.0,
    "seed": 3,
    "num_workers": 2,
    "search": "core",
    "initial_states": None,
}

TestDimodConformanceCpSat = needs_ortools(dimod_test_case(lambda: get_backend("cpsat")))


@needs_ortools
def test_cpsat_backend_is_registered_and_conforms():
    info = {b.name: b for b in list_backends()}["cpsat"]
    assert info.available and info.extra == "exact"
    check_sampler(
        get_backend("cpsat"),
        example_values=EXAMPLES,
        sample_params={"deterministic_time": 1.0},
        run_dimod_tests=False,  # collected above as their own tests
    )


@needs_ortools
@pytest.mark.parametrize("vartype", ["BINARY", "SPIN"])
def test_cpsat_backend_finds_the_ground_state(vartype):
    sampler = get_backend("cpsat")
    for seed in range(4):
        bqm = random_integer_bqm(10, seed=seed, vartype=vartype)
        ground = dimod.ExactSolver().sample(bqm).first.energy
        sampleset = sampler.sample(bqm, seed=0)
        assert sampleset.info["optimal"] and sampleset.info["exact"]
        assert sampleset.first.energy == pytest.approx(ground)
        assert sampleset.info["lower_bound"] == pytest.approx(ground)
        assert sampleset.vartype is bqm.vartype


@needs_ortools
def test_cpsat_backend_scales_fractional_biases():
    bqm = dimod.BinaryQuadraticModel({"a": 0.3, "b": -0.7}, {("a", "b"): 0.1 / 3}, 0.0, "BINARY")
    sampleset = get_backend("cpsat").sample(bqm)
    assert not sampleset.info["exact"]
    assert sampleset.first.energy == pytest.approx(dimod.ExactSolver().sample(bqm).first.energy)
    dyadic = dimod.BinaryQuadraticModel({"a": 0.25, "b": -0.5}, {("a", "b"): -0.125}, 1, "BINARY")
    assert get_backend("cpsat").sample(dyadic).info["exact"]


@needs_ortools
def test_cpsat_backend_rejects_bad_parameters():
    sampler = get_backend("cpsat")
    bqm = random_integer_bqm(4, seed=0)
    with pytest.raises(InvalidParameterError):
        sampler.sample(bqm, num_workers=0)
    with pytest.raises(InvalidParameterError):
        sampler.sample(bqm, deterministic_time=-1)
    with pytest.raises(InvalidParameterError, match="'core', 'portfolio'"):
        sampler.sample(bqm, search="lp")


@needs_ortools
def test_cpsat_backend_core_search_proves_the_ground_state():
    bqm = random_integer_bqm(10, seed=4)
    ground = dimod.ExactSolver().sample(bqm).first.energy
    sampleset = get_backend("cpsat").sample(bqm, search="core", seed=0)
    assert sampleset.first.energy == ground and sampleset.info["optimal"]
    assert sampleset.info["search"] == "core" and sampleset.info["num_workers"] == 1


def _solve_exact(*args, **kwargs):
    from bmfdsl.solvers import solve_exact

    return solve_exact(*args, **kwargs)


@pytest.mark.parametrize("kind", ["sparse", "dense", "wide dense", "few columns"])
def test_the_background_bound_equals_the_bound_summed_in_the_caller(kind: str) -> None:
    import scipy.sparse

    from bmfdsl import make_sparse_planted
    from bmfdsl.linalg import as_matrix
    from bmfdsl.pipeline._bounds import BACKGROUND_BOUND_CELLS, BoundJob, start_bound

    columns = 200 if kind == "few columns" else 400  # 200: eigenvalues in the caller
    A = make_sparse_planted(BACKGROUND_BOUND_CELLS // columns + 77, columns, 3, random_state=0)
    if kind != "sparse":
        A = A.toarray()
    if kind == "wide dense":
        A = np.ascontiguousarray(A.T)
    job = start_bound(as_matrix(A), 3)
    assert job is not None
    expected = spectral_bound(scipy.sparse.csr_array(A) if kind == "sparse" else A, 3)
    assert job.result() == expected > 0
    assert not job.alive()
    tall = as_matrix(A) if kind != "wide dense" else as_matrix(A).T
    assert BoundJob(tall, 3, eigenvalues=False).result() == expected  # eigenvalues here
    assert start_bound(as_matrix(np.eye(40, dtype=np.int8)), 3) is None  # small


@pytest.mark.parametrize("kind", ["sparse", "dense"])
def test_the_background_gram_is_split_over_all_cpus_but_one(monkeypatch, kind: str) -> None:
    import scipy.sparse

    from bmfdsl import make_sparse_planted
    from bmfdsl.linalg import _kernels, _matrix, as_matrix
    from bmfdsl.pipeline import _bounds as bounds_module

    monkeypatch.setattr(bounds_module, "default_threads", lambda: 6)
    assert bounds_module._background_threads() == 5
    monkeypatch.setattr(_matrix, "_BIT_GRAM_CHUNK_ROWS", 4096)  # dense: 8 chunks to share
    splits = []
    in_threads = _kernels._in_threads

    def counted(function, ranges):
        splits.append(len(ranges))
        return in_threads(function, ranges)

    monkeypatch.setattr(_kernels, "_in_threads", counted)
    A = make_sparse_planted(30_000, 400, 3, random_state=2)
    job = bounds_module.start_bound(as_matrix(A if kind == "sparse" else A.toarray()), 3)
    assert job is not None
    bound = job.result()
    assert splits[0] == 5  # the Gram's rows over five threads (the caller's stages get one)
    assert bound == spectral_bound(scipy.sparse.csr_array(A.toarray()), 3) > 0


def test_the_background_bound_does_not_depend_on_blas_threads() -> None:
    from threadpoolctl import threadpool_limits

    from bmfdsl import make_sparse_planted
    from bmfdsl.linalg import as_matrix
    from bmfdsl.pipeline._bounds import BoundJob, _blas_spares_the_caller
    from bmfdsl.pipeline._spectrum import top_eigenpairs

    A = make_sparse_planted(6000, 600, 4, random_state=1).toarray()
    results, pairs = [], []
    for threads in (1, 2, 4):
        with threadpool_limits(threads, user_api="blas"):  # as the caller's stages set it
            results.append(BoundJob(as_matrix(A), 4).result())
            gram = as_matrix(A).gram  # a fresh array: no cached Lanczos answer
            values, vectors = top_eigenpairs(gram, 4)
            pairs.append(values.tobytes() + vectors.tobytes())
    assert results[0] > 0 and len(set(results)) == 1
    assert len(set(pairs)) == 1  # bit for bit
    with threadpool_limits(1, user_api="blas"):  # its BLAS calls cannot spin beside the solve
        assert _blas_spares_the_caller()


def test_a_held_blas_lets_the_background_bound_compute_its_eigenvalues(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fewer than 4 CPUs and BLAS on two threads: with ``hold_blas`` the caller keeps BLAS on
    one thread until ``result()`` and Lanczos runs in the job's thread; without, in the
    caller's. The same bound either way."""
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    from bmfdsl import make_sparse_planted
    from bmfdsl.linalg import as_matrix
    from bmfdsl.pipeline import _bounds as bounds_module

    A = make_sparse_planted(6000, 600, 4, random_state=1).toarray()
    expected = spectral_bound(A, 4)
    monkeypatch.setattr(bounds_module, "_blas_spares_the_caller", lambda: False)
    where: list[str] = []
    real = bounds_module.top_eigenvalue_sum_bound

    def recorded(gram, rank):
        where.append(threading.current_thread().name)
        return real(gram, rank)

    monkeypatch.setattr(bounds_module, "top_eigenvalue_sum_bound", recorded)

    def blas_threads() -> set[int]:
        return {entry["num_threads"] for entry in threadpool_info() if entry["user_api"] == "blas"}

    with threadpool_limits(2, user_api="blas"):
        job = bounds_module.start_bound(as_matrix(A), 4, hold_blas=True)
        assert job is not None and blas_threads() == {1}  # held while the job runs
        assert job.result() == expected > 0
        assert blas_threads() == {2}  # given back by result()
        job.cancel()  # a second release does nothing
        assert blas_threads() == {2} and where == ["bmfdsl-bound"]
        unheld = bounds_module.start_bound(as_matrix(A), 4)
        assert unheld is not None and blas_threads() == {2}
        assert unheld.result() == expected
    assert where == ["bmfdsl-bound", threading.current_thread().name]


def test_a_failing_factorize_leaves_no_background_bound_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from threadpoolctl import threadpool_info, threadpool_limits

    from bmfdsl import make_sparse_planted
    from bmfdsl.pipeline import _bounds as bounds_module
    from bmfdsl.pipeline import _factorize
    from bmfdsl.pipeline._bounds import start_bound

    started = []

    def start(*args, **kwargs):
        job = start_bound(*args, **kwargs)
        started.append(job)
        return job

    def fail(*args, **kwargs):
        raise RuntimeError("the full-data solve failed")

    monkeypatch.setattr(_factorize, "start_bound", start)
    monkeypatch.setattr(_factorize, "_extend_and_polish", fail)
    # fewer than 4 CPUs, BLAS on two threads: the job holds BLAS to one thread (hold_blas)
    monkeypatch.setattr(bounds_module, "_blas_spares_the_caller", lambda: False)
    A = make_sparse_planted(2**20 // 300 + 1, 300, 3, random_state=0)
    with threadpool_limits(2, user_api="blas"):
        with pytest.raises(RuntimeError, match="full-data solve failed"):
            factorize(A, 3, sample_rows="auto", random_state=0)
        blas = {entry["num_threads"] for entry in threadpool_info() if entry["user_api"] == "blas"}
    assert blas == {2}  # the hold was given back
    assert started and started[0] is not None and not started[0].alive()
    assert not [thread for thread in threading.enumerate() if thread.name == "bmfdsl-bound"]


@pytest.mark.parametrize("layout", ["sparse", "dense"])
def test_a_cancelled_bound_job_stops_between_row_chunks(
    monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    import threading
    import time

    import scipy.sparse

    from bmfdsl.linalg import _kernels as kernels_module
    from bmfdsl.linalg import _matrix as matrix_module
    from bmfdsl.linalg import as_matrix
    from bmfdsl.pipeline import _bounds as bounds_module

    entered, chunks = threading.Event(), []
    check = bounds_module.BoundJob._check

    def slow_check(job):
        chunks.append(1)
        entered.set()
        time.sleep(0.02)
        check(job)

    monkeypatch.setattr(bounds_module.BoundJob, "_check", slow_check)
    if layout == "sparse":  # the pattern kernel's chunks: 100 of 10 rows
        monkeypatch.setattr(kernels_module, "_UINT16_ROWS", 10)
        A = scipy.sparse.eye(1000, 300, format="csr")
    else:  # dense_gram's chunks
        monkeypatch.setattr(matrix_module, "_BIT_GRAM_CHUNK_ROWS", 10)
        A = np.eye(1000, 300, dtype=np.int8)
    job = bounds_module.BoundJob(as_matrix(A), 2)
    assert entered.wait(10)
    job.cancel()
    assert not job.alive() and len(chunks) < 100  # stopped long before its 100 chunks
    with pytest.raises(RuntimeError, match="cancelled"):
        job.result()


def test_factorize_gets_the_same_bound_with_the_background_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bmfdsl import make_sparse_planted
    from bmfdsl.pipeline import _factorize

    A = make_sparse_planted(2**20 // 300 + 1, 300, 3, random_state=0)
    background = factorize(A, 3, sample_rows="auto", random_state=0)
    monkeypatch.setattr(_factorize, "start_bound", lambda *args, **kwargs: None)
    in_the_caller = factorize(A, 3, sample_rows="auto", random_state=0)
    assert background.lower_bound == in_the_caller.lower_bound > 0
    assert background.error == in_the_caller.error
    assert background.info["lower_bound"] == in_the_caller.info["lower_bound"]
