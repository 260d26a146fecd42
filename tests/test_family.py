"""The BMF family: products, exact row updates against brute force, the claim, the models,
and factorize's error and polish for models beyond integer BMF."""

from __future__ import annotations

import itertools
from pathlib import Path

import dimod
import numpy as np
import pytest

from bmfdsl import compile_model, factorize
from bmfdsl.errors import InvalidParameterError, ModelDefinitionError
from bmfdsl.linalg import factor_product, product_squared_error
from bmfdsl.modeling import BMFStructure
from bmfdsl.pipeline import solve
from bmfdsl.solvers.native import FamilyProblem, polish_family, solve_family

RNG = np.random.default_rng(23)
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci-binary"


def _codes(rank: int, limits: tuple[int, int] | None = None) -> list[np.ndarray]:
    lo, hi = (0, rank) if limits is None else limits
    return [
        np.array(c, dtype=np.int64)
        for c in itertools.product((0, 1), repeat=rank)
        if lo <= sum(c) <= hi
    ]


def _brute_force(problem: FamilyProblem) -> float:
    """The smallest objective over every feasible (U, V)."""
    (m, n), r = problem.A.shape, problem.rank
    rows_u, rows_v = _codes(r, problem.limits_u), _codes(r, problem.limits_v)
    best = np.inf
    for us in itertools.product(rows_u, repeat=m):
        U = np.array(us)
        for vs in itertools.product(rows_v, repeat=n):
            best = min(best, problem.objective(U, np.array(vs)))
    return float(best)


def _naive_product(U: np.ndarray, V: np.ndarray, product: str) -> np.ndarray:
    out = np.zeros((U.shape[0], V.shape[0]), dtype=np.int64)
    for i, j in itertools.product(range(U.shape[0]), range(V.shape[0])):
        terms = [int(U[i, k] * V[j, k]) for k in range(U.shape[1])]
        out[i, j] = {"sum": sum(terms), "or": max(terms, default=0), "xor": sum(terms) % 2}[product]
    return out


@pytest.mark.parametrize("product", ["sum", "or", "xor"])
def test_products_and_their_weighted_error_match_the_definition(product):
    for _ in range(5):
        U = RNG.integers(0, 2, (4, 3))
        V = RNG.integers(0, 2, (5, 3))
        A = RNG.integers(0, 2, (4, 5))
        W = RNG.random((4, 5))
        expected = _naive_product(U, V, product)
        np.testing.assert_array_equal(factor_product(U, V, product), expected)
        assert product_squared_error(A, U, V, product) == ((A - expected) ** 2).sum()
        assert product_squared_error(A, U, V, product, W) == pytest.approx(
            (W * (A - expected) ** 2).sum()
        )
    with pytest.raises(InvalidParameterError, match=r"\['sum', 'or', 'xor'\]"):
        factor_product(U, V, "and")


FAMILY_CASES = [
    {"product": "or"},
    {"product": "xor"},
    {"product": "sum"},
    {"product": "or", "mask": True},
    {"product": "xor", "weights": True},
    {"product": "or", "l1": (0.7, 0.2)},
    {"product": "sum", "l1": (0.4, 0.4), "limits_u": (0, 1)},
    {"product": "or", "limits_u": (1, 1)},
    {"product": "xor", "limits_v": (1, 2)},
]


@pytest.mark.parametrize("case", FAMILY_CASES, ids=lambda c: "-".join(map(str, c)))
def test_solve_family_reaches_the_brute_force_optimum(case):
    for trial in range(2):
        A = RNG.integers(0, 2, (3, 3)).astype(np.int8)
        weights = None
        if case.get("mask"):
            weights = RNG.integers(0, 2, (3, 3)).astype(float)
        if case.get("weights"):
            weights = RNG.random((3, 3)) * 2
        problem = FamilyProblem(
            A,
            2,
            product=case["product"],
            weights=weights,
            l1=case.get("l1", (0.0, 0.0)),
            limits_u=case.get("limits_u"),
            limits_v=case.get("limits_v"),
        )
        result = solve_family(problem, seed=trial, work_limit=2e8)
        assert problem.feasible(result.U, result.V)
        assert result.objective == pytest.approx(problem.objective(result.U, result.V))
        assert result.objective == pytest.approx(_brute_force(problem)), (case, trial)


def test_identical_rows_and_columns_are_merged_exactly():
    block = RNG.integers(0, 2, (4, 3)).astype(np.int8)
    A = np.repeat(np.repeat(block, 3, axis=0), 2, axis=1)  # every row x3, every column x2
    result = solve_family(FamilyProblem(A, 2, product="or"), seed=0, work_limit=2e8)
    assert result.info["merged_shape"] == list(np.unique(block, axis=0).shape) or (
        result.info["merged_shape"][0] <= 4 and result.info["merged_shape"][1] <= 3
    )
    small = solve_family(FamilyProblem(block, 2, product="or"), seed=0, work_limit=2e8)
    assert result.objective == 6 * small.objective  # each entry counts 3 x 2 times
    assert result.U.shape == (12, 2) and result.V.shape == (6, 2)


def test_the_same_seed_gives_the_same_answer_and_work_is_counted():
    A = RNG.integers(0, 2, (30, 12)).astype(np.int8)
    problem = FamilyProblem(A, 4, product="or")
    first = solve_family(problem, seed=5, work_limit=5e8)
    second = solve_family(problem, seed=5, work_limit=5e8)
    np.testing.assert_array_equal(first.U, second.U)
    np.testing.assert_array_equal(first.V, second.V)
    assert first.info["work"] == second.info["work"]
    assert first.info["work"]["units"] <= 5e8


def test_large_ranks_move_by_single_bits_and_never_worsen():
    A = RNG.integers(0, 2, (20, 14)).astype(np.int8)
    problem = FamilyProblem(A, 13, product="or")  # 8192 codes: over the enumeration cap
    start_U = RNG.integers(0, 2, (20, 13)).astype(np.int8)
    start_V = RNG.integers(0, 2, (14, 13)).astype(np.int8)
    polished = polish_family(problem, start_U, start_V)
    assert polished.objective <= problem.objective(start_U, start_V)
    result = solve_family(problem, seed=0, work_limit=2e8)
    assert result.info["row_update"] == "bits"
    assert result.objective == problem.objective(result.U, result.V)


def test_boolean_bmf_claims_the_or_product_and_honours_the_mask():
    A = RNG.integers(0, 2, (4, 5)).astype(np.int8)
    mask = np.ones_like(A)
    mask[0, 1] = mask[2, 3] = 0
    plain = compile_model("boolean-bmf", A, 2)
    masked = compile_model("boolean-bmf", A, 2, data={"mask": mask})
    assert plain.structure.product == "or" and masked.structure.mask is not None
    assert not plain.to_bqm(lam=2.0).is_almost_equal(masked.to_bqm(lam=2.0))
    twin = masked.to_pyqubo().compile().to_bqm(feed_dict={"lam": 2.0})
    assert masked.to_bqm(lam=2.0).is_almost_equal(twin)
    U = RNG.integers(0, 2, (4, 2))
    V = RNG.integers(0, 2, (5, 2))
    bqm = masked.to_bqm(lam=2.0)
    boolean = (U @ V.T > 0).astype(int)
    assert bqm.energy(masked.encode(U, V)) == (mask * (A - boolean) ** 2).sum()


def test_boolean_bmf_energy_minimum_is_the_brute_force_optimum():
    for _ in range(2):
        A = RNG.integers(0, 2, (2, 2)).astype(np.int8)
        compiled = compile_model("boolean-bmf", A, 2)
        bqm = compiled.to_bqm(lam=6.0)
        assert bqm.num_variables <= 20
        lowest = _lowest_energy(bqm)
        problem = FamilyProblem(A, 2, product="or")
        assert lowest == pytest.approx(_brute_force(problem))


def test_a_wrong_claim_is_refused_with_what_to_fix(tmp_path):
    eye = np.eye(3, dtype=np.int8)
    with pytest.raises(ModelDefinitionError, match=r"Boolean OR.*product="):
        compile_model(_script("model.declare_bmf(product='or')", tmp_path), eye, 2)
    with pytest.raises(ModelDefinitionError, match=r"names no declared weight.*model.weight"):
        compile_model(_script("model.declare_bmf(l1='mu')", tmp_path), eye, 2)
    with pytest.raises(ModelDefinitionError, match="at least 2 and at most 1"):
        compile_model(_script("model.declare_bmf(at_least=2, at_most=1)", tmp_path), eye, 2)


def _script(claim: str, folder: Path) -> str:
    """A formulation-1 model script (integer product) with another claim (or none), as a
    path in ``folder``."""
    text = (
        "from bmfdsl.modeling import quadratized_residual\n"
        "def build(model):\n"
        "    quadratized_residual(model)\n"
        "    model.claim = None\n"
        f"    {claim}\n"
    )
    path = folder / f"model_{abs(hash(claim))}.py"
    path.write_text(text)
    return str(path)


def test_native_solves_boolean_bmf_and_reports_the_boolean_error():
    A = RNG.integers(0, 2, (12, 9)).astype(np.int8)
    result = factorize(A, 3, model="boolean-bmf", random_state=0, work_limit=3e8)
    assert result.info["backend"] == "native"
    assert result.error == int(((result.U @ result.V.T > 0) != A).sum())
    assert "row updates" in result.info["polish"] and "or" in result.info["polish"]
    assert result.lower_bound == 0  # integer BMF's bounds do not hold for the Boolean error
    problem = FamilyProblem(A, 3, product="or")
    assert result.error <= problem.objective(*_integer_answer(A, 3))


def _integer_answer(A: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    plain = factorize(A, rank, random_state=0)
    return plain.U, plain.V


def test_masked_boolean_error_counts_observed_entries_only():
    A = RNG.integers(0, 2, (10, 8)).astype(np.int8)
    mask = (RNG.random(A.shape) > 0.2).astype(np.int8)
    result = factorize(A, 2, model="boolean-bmf", mask=mask, random_state=0, work_limit=3e8)
    wrong = (result.U @ result.V.T > 0) != A
    assert result.error == int((wrong & (mask > 0)).sum())


def test_a_model_outside_the_family_is_never_polished_by_integer_als():
    A = RNG.integers(0, 2, (5, 4)).astype(np.int8)
    result = factorize(A, 2, model="bicluster", backend="neal", random_state=0, num_reads=5)
    assert result.info["polish"].startswith("none")
    U, V = result.U, result.V
    assert result.error == int(((A - U @ V.T) ** 2).sum())  # bicluster's declared error


def test_an_infeasible_sample_is_scored_at_its_decoded_factors(tmp_path):
    A = np.array([[1, 0], [0, 1]], dtype=np.int8)
    compiled = compile_model(_script("pass", tmp_path), A, 1)  # no claim, no error function
    assert compiled.structure is None
    U, V = np.array([[1], [0]]), np.array([[1], [0]])
    sample = compiled.encode(U, V)
    sample = {k: (1 - v if k.startswith("W") else v) for k, v in sample.items()}  # broken
    decoded = compiled.decode(
        dimod.SampleSet.from_samples(sample, dimod.BINARY, energy=[0.0]), lam=1.0
    )[0]
    assert not decoded.feasible
    assert decoded.error == 1  # ||A - U Vᵀ||² at the decoded U, V, not at the broken W


def test_structure_objective_adds_the_l1_term_and_needs_resolved_weights():
    A = np.eye(2, dtype=np.int8)
    structure = BMFStructure(A, 1, product="or", l1=("mu", 0.5))
    with pytest.raises(InvalidParameterError, match="resolved"):
        structure.objective(np.ones((2, 1)), np.ones((2, 1)))
    resolved = structure.resolved({"mu": 2.0})
    assert resolved.error(np.ones((2, 1)), np.ones((2, 1))) == 2
    assert resolved.objective(np.ones((2, 1)), np.ones((2, 1))) == 2 + 2 * 2 + 0.5 * 2


@pytest.mark.skipif(not (DATA / "zoo.txt").exists(), reason=f"{DATA} absent (shared data)")
def test_zoo_rank_2_reaches_the_best_published_boolean_error():
    A = np.loadtxt(DATA / "zoo.txt", dtype=np.int8)
    result = solve_family(FamilyProblem(A, 2, product="or"), seed=0, work_limit=2e9)
    assert result.objective <= 271  # CIP's published error; seen 271 here


def _lowest_energy(bqm: dimod.BinaryQuadraticModel) -> float:
    """The minimum of a BQM of at most 24 variables, by enumeration: every assignment of the
    first half against every one of the second, the cross terms by one matrix product."""
    variables = list(bqm.variables)
    count = len(variables)
    assert count <= 24
    linear, (rows, cols, biases), offset = bqm.to_numpy_vectors(variable_order=variables)
    Q = np.zeros((count, count))
    np.add.at(Q, (np.minimum(rows, cols), np.maximum(rows, cols)), biases)
    half = count // 2

    def states(size: int) -> np.ndarray:
        codes = np.arange(2**size, dtype=np.int64)
        return ((codes[:, None] >> np.arange(size)) & 1).astype(np.float64)

    low, high = states(half), states(count - half)
    own_low = low @ linear[:half] + ((low @ Q[:half, :half]) * low).sum(axis=1)
    own_high = high @ linear[half:] + ((high @ Q[half:, half:]) * high).sum(axis=1)
    cross = (low @ Q[:half, half:]) @ high.T
    return float((own_low[:, None] + own_high[None, :] + cross).min()) + offset


MODEL_CASES = [  # (model, shape, rank, data, weights)
    ("xor-bmf", (2, 2), 2, {}, {"lam": 8.0}),
    ("xor-bmf", (2, 2), 1, {"mask": np.array([[1, 0], [1, 1]])}, {"lam": 8.0}),
    ("sparse-bmf", (2, 2), 2, {}, {"lam": 8.0, "mu": 0.3}),
    ("sparse-bmf", (2, 2), 2, {}, {"lam": 8.0, "mu": 1.7}),
    ("at-most-k-bmf", (2, 2), 2, {"k": 1}, {"lam": 8.0}),
]


@pytest.mark.parametrize(("name", "shape", "rank", "data", "weights"), MODEL_CASES)
def test_family_models_minimum_twin_and_native_agree_with_brute_force(
    name, shape, rank, data, weights
):
    for trial in range(2):
        A = RNG.integers(0, 2, shape).astype(np.int8)
        compiled = compile_model(name, A, rank, data=data)
        bqm = compiled.to_bqm(**weights)
        twin = compiled.to_pyqubo().compile().to_bqm(feed_dict=compiled.resolve_weights(**weights))
        assert bqm.is_almost_equal(twin)
        structure = compiled.structure.resolved(compiled.resolve_weights(**weights))
        optimum = _brute_force(FamilyProblem.of(structure))
        assert _lowest_energy(bqm) == pytest.approx(optimum), (name, trial)
        best = solve(compiled, "native", seed=trial, work_limit=1e8, **weights)[0]
        assert best.feasible and best.energy == pytest.approx(optimum)


def test_symmetric_bmf_has_one_factor_and_native_reaches_the_brute_force_optimum():
    A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=np.int8)
    A[0, 2] = A[2, 0] = RNG.integers(0, 2)
    compiled = compile_model("symmetric-bmf", A, 2)
    assert compiled.single_factor and compiled.structure.symmetric
    bqm = compiled.to_bqm(lam=8.0)
    assert bqm.is_almost_equal(compiled.to_pyqubo().compile().to_bqm(feed_dict={"lam": 8.0}))
    rows = [np.array(c) for c in itertools.product((0, 1), repeat=2)]
    optimum = min(
        int(((A - np.array(U) @ np.array(U).T) ** 2).sum())
        for U in itertools.product(rows, repeat=3)
    )
    assert _lowest_energy(bqm) == pytest.approx(optimum)
    best = solve(compiled, "native", seed=0, work_limit=1e8)[0]
    np.testing.assert_array_equal(best.U, best.V)
    assert best.error == optimum
    result = factorize(A, 2, model="symmetric-bmf", random_state=0, work_limit=1e8)
    np.testing.assert_array_equal(result.U, result.V)
    assert result.error == int(((A - result.U @ result.U.T) ** 2).sum()) == optimum


@pytest.mark.parametrize("product", ["sum", "or", "xor"])
def test_one_factor_row_updates_reach_the_brute_force_optimum(product):
    for trial in range(3):
        A = RNG.integers(0, 2, (4, 4)).astype(np.int8)
        problem = FamilyProblem(A, 2, product=product, l1=(0.3, 0.1), symmetric=True)
        result = solve_family(problem, seed=trial, work_limit=5e7)
        np.testing.assert_array_equal(result.U, result.V)
        rows = [np.array(c) for c in itertools.product((0, 1), repeat=2)]
        optimum = min(
            problem.objective(np.array(U), np.array(U)) for U in itertools.product(rows, repeat=4)
        )
        assert result.objective == pytest.approx(optimum)


def test_sparse_bmf_reads_mu_at_solve_time_and_reports_the_residual():
    A = RNG.integers(0, 2, (6, 5)).astype(np.int8)
    compiled = compile_model("sparse-bmf", A, 2)
    light = solve(compiled, "native", seed=0, mu=0.01, work_limit=2e8)[0]
    heavy = solve(compiled, "native", seed=0, mu=50.0, work_limit=2e8)[0]
    assert heavy.U.sum() + heavy.V.sum() == 0  # any 1 costs more than it can gain
    assert heavy.error == int(A.sum())  # the residual alone, not the L1 term
    assert light.error <= heavy.error
    assert light.energy == pytest.approx(light.error + 0.01 * (light.U.sum() + light.V.sum()))


def test_the_estimator_scores_and_transforms_under_the_models_product():
    from bmfdsl.apps import BinaryMatrixFactorization

    A = RNG.integers(0, 2, (15, 8)).astype(np.int8)
    estimator = BinaryMatrixFactorization(
        n_components=3, model="boolean-bmf", random_state=0, backend_params={"work_limit": 2e8}
    )
    W = estimator.fit_transform(A)
    H = estimator.components_
    assert estimator.factorization_.error == int(((W @ H > 0) != A).sum())
    assert estimator.score(A) == -int(((estimator.transform(A) @ H > 0) != A).sum())
    assert estimator.score(A) >= -estimator.factorization_.error  # the exact row update
    np.testing.assert_array_equal(estimator.inverse_transform(W), (W @ H > 0).astype(int))


def test_factorize_passes_model_data_to_the_model():
    A = np.array(
        [[1, 1, 1, 0], [1, 1, 1, 1], [0, 1, 1, 1], [1, 0, 0, 1], [1, 1, 1, 1]], dtype=np.int8
    )
    for k in (1, 2):
        result = factorize(A, 3, model="at-most-k-bmf", model_data={"k": k}, random_state=0)
        assert result.U.sum(axis=1).max() <= k
    one = factorize(A, 3, model="at-most-k-bmf", model_data={"k": 1}, random_state=0)
    two = factorize(A, 3, model="at-most-k-bmf", model_data={"k": 2}, random_state=0)
    assert two.error <= one.error  # a looser limit never fits worse


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"model_data": [("k", 2)]}, "model_data must be a dict"),
        ({"model_data": {"k": 2}, "method": "baseline"}, "reads no model data"),
        ({"model_data": {"k": 2}, "sample_rows": 3}, "pass sample_rows=None"),
        ({"model_data": {"mask": np.ones((5, 4))}}, "mask="),
    ],
)
def test_factorize_refuses_model_data_it_cannot_pass(options, match):
    A = np.eye(5, 4, dtype=np.int8)
    with pytest.raises(InvalidParameterError, match=match):
        factorize(A, 2, random_state=0, **options)


def test_an_entry_weighted_model_is_scored_and_polished_with_its_weights():
    A = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 1, 1, 1], [1, 0, 1, 1]], dtype=np.int8)
    C = np.arange(1, 17, dtype=float).reshape(4, 4) / 4
    result = factorize(A, 2, model="weighted-bmf", model_data={"weights": C}, random_state=0)
    weighted = float((C * (A - result.U.astype(int) @ result.V.T.astype(int)) ** 2).sum())
    assert result.error == round(weighted)
    assert result.lower_bound == 0  # integer BMF's bounds do not hold for weighted errors
    assert "row updates" in result.info["polish"]


def test_a_wide_sampled_matrix_refuses_a_claim_on_one_factor():
    A = (np.random.default_rng(0).random((12, 40)) < 0.4).astype(np.int8)
    with pytest.raises(InvalidParameterError, match="limits U and V differently"):
        factorize(A, 3, model="at-most-k-bmf", sample_rows=8, random_state=0)


def test_at_most_rank_ones_per_row_limit_nothing():
    A = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.int8)
    structure = compile_model("at-most-k-bmf", A, 2, data={"k": 2}).structure
    assert structure is not None and structure.row_limits == (None, None)
    assert structure.is_integer_bmf


def test_native_family_checks_its_budget_keywords():
    A = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.int8)  # Boolean rank 2
    compiled = compile_model("boolean-bmf", A, 2)
    with pytest.raises(InvalidParameterError, match="num_reads"):
        solve(compiled, "native", num_reads=3)
    with pytest.raises(InvalidParameterError, match="work_limit"):
        solve(compiled, "native", work_limit=float("nan"))
    timed = solve(compiled, "native", time_limit=5, seed=0)  # a deadline is accepted
    assert timed[0].error == 0
