"""The array DSL: numpy semantics, the model library against brute force, claims, guards."""

from __future__ import annotations

import itertools
from pathlib import Path

import dimod
import numpy as np
import pytest

import bmfdsl
from bmfdsl import (
    InvalidParameterError,
    ModelDefinitionError,
    ModelTooLargeError,
    compile_model,
    solve,
)
from bmfdsl.modeling import einsum
from bmfdsl.modeling._expr import Squares, VariableSpace, stack

RNG = np.random.default_rng(7)


# -- PolyArray is numpy on symbols ------------------------------------------------------------


def _space():
    space = VariableSpace()
    U = space.allocate("U", (4, 3))
    V = space.allocate("V", (5, 3))
    x = space.allocate("x", (3,))
    return space, U, V, x


EXPRESSIONS = {
    "index": lambda U, V, x, np_: U[1],
    "fancy": lambda U, V, x, np_: U[[0, 2, 2]][:, ::-1],
    "transpose": lambda U, V, x, np_: (2 * U.T - 1)[1:],
    "broadcast product": lambda U, V, x, np_: U[:, None, :] * V[None, :, :],
    "sum axis": lambda U, V, x, np_: (U[:, None, :] * V[None, :, :]).sum(axis=(0, 2)),
    "matmul": lambda U, V, x, np_: U @ V.T - 0.5,
    "einsum": lambda U, V, x, np_: einsum("ik,jk->ji", U, V),
    "data weighted": lambda U, V, x, np_: (np_.arange(12.0).reshape(4, 3) * U).sum(axis=1),
    "square": lambda U, V, x, np_: (U.sum(axis=1) - 1) ** 2,
    "reshape": lambda U, V, x, np_: (V - x).reshape(3, 5),
    "scalar chain": lambda U, V, x, np_: sum(U[i][k] * x[k] for i in range(4) for k in range(3)),
    "negation": lambda U, V, x, np_: -(x * x) + x[0] * (1 - x[1]),
}


@pytest.mark.parametrize("name", EXPRESSIONS)
def test_poly_arrays_follow_numpy_semantics(name):
    space, U, V, x = _space()
    expression = EXPRESSIONS[name](U, V, x, np)
    samples = RNG.integers(0, 2, (25, space.size)).astype(np.int8)
    values = expression.evaluate(samples)
    for s, row in enumerate(samples):
        u, v, y = row[:12].reshape(4, 3), row[12:27].reshape(5, 3), row[27:]
        expected = EXPRESSIONS[name](u.astype(float), v.astype(float), y.astype(float), np)
        np.testing.assert_allclose(values[s], expected)


def test_stack_and_nested_lists():
    space, U, _, x = _space()
    stacked = stack([[U[0, 0], 1], [x[1], U[0, 0] * x[2]]])
    samples = RNG.integers(0, 2, (10, space.size)).astype(np.int8)
    values = stacked.evaluate(samples)
    np.testing.assert_allclose(values[:, 0, 1], 1)
    np.testing.assert_allclose(values[:, 1, 1], samples[:, 0] * samples[:, 29])


def test_degree_three_is_refused_naming_the_term():
    _, U, V, _ = _space()
    with pytest.raises(ModelDefinitionError, match=r"U\[0\]\[0\] \* U\[0\]\[1\] \* V\[0\]\[1\]"):
        (U @ V.T)[0, 0] * U[0, 0]
    # the square of a quadratic is kept aside until model.minimize(..., quadratize=...)
    assert isinstance(((U @ V.T) ** 2).sum(), Squares)


def test_bad_axes_shapes_and_data_are_clear_errors():
    _, U, V, _ = _space()
    with pytest.raises(ModelDefinitionError, match="axis 2 is out of range"):
        U.sum(axis=2)
    with pytest.raises(ModelDefinitionError, match="do not broadcast"):
        U + V
    with pytest.raises(ModelDefinitionError, match="out of range"):
        U[9]
    with pytest.raises(InvalidParameterError, match="finite"):
        U * np.nan
    with pytest.raises(ModelDefinitionError, match="no truth value"):
        bool(U[0, 0])


# -- the model library: QUBO minimizers are optimal factorizations ---------------------------


def _ground_states(bqm: dimod.BinaryQuadraticModel) -> tuple[float, dimod.SampleSet]:
    exact = dimod.ExactSolver().sample(bqm)
    energy = exact.first.energy
    return energy, exact.lowest(atol=1e-6)


def _all_factors(rows: int, rank: int, one_hot: bool):
    codes = [c for c in itertools.product((0, 1), repeat=rank) if not one_hot or sum(c) == 1]
    for choice in itertools.product(codes, repeat=rows):
        yield np.array(choice, dtype=np.int64).reshape(rows, rank)


def _brute_force(error, m, n, r, one_hot_u=False, one_hot_v=False):
    return min(
        error(U, V) for U in _all_factors(m, r, one_hot_u) for V in _all_factors(n, r, one_hot_v)
    )


def _plain(A):
    return lambda U, V: int(((A - U @ V.T) ** 2).sum())


CASES = {
    "masked-bmf": (
        lambda A, C: {"mask": C},
        lambda A, C: lambda U, V: int((C * (A - U @ V.T) ** 2).sum()),
        {},
    ),
    "weighted-bmf": (
        lambda A, C: {"weights": C * 2.5 + 0.5},
        lambda A, C: lambda U, V: float(((C * 2.5 + 0.5) * (A - U @ V.T) ** 2).sum()),
        {},
    ),
    "boolean-bmf": (
        lambda A, C: {},
        lambda A, C: lambda U, V: int(((U @ V.T > 0) != A).sum()),
        {},
    ),
    "bicluster": (
        lambda A, C: {},
        lambda A, C: _plain(A),
        {"one_hot_u": True, "one_hot_v": True},
    ),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("shape", [(2, 2, 2), (3, 2, 1)])
def test_library_minimizers_are_optimal(name, shape):
    m, n, r = shape
    data_of, error_of, sides = CASES[name]
    for _ in range(2):
        A = RNG.integers(0, 2, (m, n))
        C = RNG.integers(0, 2, (m, n))
        C[0, 0] = 1
        data = data_of(A, C)
        compiled = compile_model(name, A * (C if name == "masked-bmf" else 1), r, data=data)
        big = 4 * r * (m * n * 3 + 1)  # far beyond any objective gain: minimizers feasible
        weights = dict.fromkeys(compiled.weight_names, float(big))
        bqm = compiled.to_bqm(**weights)
        assert bqm.num_variables <= 20
        energy, lowest = _ground_states(bqm)
        optimum = _brute_force(
            error_of(A * (C if name == "masked-bmf" else 1), C), m, n, r, **sides
        )
        assert energy == pytest.approx(optimum)
        for decoded in compiled.decode(lowest, **weights):
            assert decoded.feasible
            assert decoded.error == pytest.approx(optimum)


EXAMPLE_SCRIPT = str(Path(__file__).resolve().parents[1] / "examples" / "my_model.py")


@pytest.mark.parametrize("name", [*CASES, "formulation1", "formulation2-reduced", EXAMPLE_SCRIPT])
def test_every_model_equals_its_pyqubo_twin(name):
    data_of = CASES[name][0] if name in CASES else (lambda A, C: {})
    for m, n, r in [(2, 3, 1), (3, 4, 3)]:
        A = RNG.integers(0, 2, (m, n))
        C = RNG.integers(0, 2, (m, n))
        compiled = compile_model(name, A, r, data=data_of(A, C))
        twin = compiled.to_pyqubo().compile()
        for lam in (0.5, 3.0):
            weights = dict.fromkeys(compiled.weight_names, lam)
            ours = compiled.to_bqm(**weights)
            theirs = twin.to_bqm(feed_dict=weights)
            assert set(ours.variables) == set(theirs.variables)
            assert ours.is_almost_equal(theirs)


def test_the_native_solver_handles_masks_optimally():
    for seed in range(3):
        rng = np.random.default_rng(seed)
        A = rng.integers(0, 2, (4, 3))
        C = rng.integers(0, 2, (4, 3))
        C[0] = 1
        compiled = compile_model("masked-bmf", A * C, 2, data={"mask": C})
        best = solve(compiled, "native", seed=0)[0]

        def masked(U, V, A=A, C=C):
            return int((C * (A * C - U @ V.T) ** 2).sum())

        optimum = _brute_force(masked, 4, 3, 2)
        assert best.error == optimum == best.energy


# -- claims, data, ordering --------------------------------------------------------------


def test_a_copy_named_like_a_registered_model_gets_its_own_bqm(tmp_path):
    path = tmp_path / "copy.py"
    path.write_text(
        "from bmfdsl.modeling import squared_residual\n"
        "NAME = 'formulation1'\n"
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    W = model.binary('W', (model.rank, *model.A.shape))\n"
        "    model.constrain_product(\n"
        "        W, U.T[:, :, None], V.T[:, None, :], group='W', weight=model.weight('lam', 1.0))\n"
        "    model.minimize(squared_residual(model.A, W.sum(axis=0)) + 15 * U[0, 0])\n"
    )
    A = np.array([[1, 1], [1, 1]])
    compiled = compile_model(path, A, 1)
    exact = compiled.encode([[1], [1]], [[1], [1]])
    assert compiled.to_bqm().energy(exact) == 15.0
    assert compile_model("formulation1", A, 1).to_bqm().energy(exact) == 0.0


def test_data_reaches_the_script_and_decode_ranks_by_the_model_error(tmp_path):
    A = np.array([[1, 0, 1], [1, 1, 0]])
    mask = np.array([[1, 1, 0], [1, 0, 1]])
    compiled = compile_model("masked-bmf", A * mask, 1, data={"mask": mask})
    good = compiled.encode([[1], [1]], [[1], [0], [0]])  # masked error 0
    worse = compiled.encode([[1], [1]], [[1], [1], [1]])  # masked error 2
    bqm = compiled.to_bqm(lam=1.0)
    decoded = compiled.decode(dimod.SampleSet.from_samples_bqm([worse, good], bqm), lam=1.0)
    assert [d.error for d in decoded] == [0, 2]
    assert [d.energy for d in decoded] == [0.0, 2.0]
    with pytest.raises(ModelDefinitionError, match="mask"):
        compile_model("masked-bmf", A, 1)
    with pytest.raises(InvalidParameterError, match="shape"):
        compile_model("masked-bmf", A, 1, data={"mask": mask[:1]})
    with pytest.raises(InvalidParameterError, match="dict"):
        compile_model("masked-bmf", A, 1, data=[mask])


def test_or_and_custom_groups_report_broken(tmp_path):
    path = tmp_path / "groups.py"
    path.write_text(
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    Y = model.binary('Y', (model.A.shape[0],))\n"
        "    model.constrain_or(Y, U, axis=1, group='any', weight='lam')\n"
        "    model.constrain('atmost', U[:, 0] * U[:, 1], weight='lam')\n"
        "    model.minimize(-Y.sum() + V.sum())\n"
    )
    A = np.ones((3, 2))
    compiled = compile_model(path, A, 2)
    U = np.array([[1, 1], [0, 1], [0, 0]])
    assignment = compiled.encode(U, np.zeros((2, 2)))
    assert [assignment[f"Y[{i}]"] for i in range(3)] == [1, 1, 0]
    bqm = compiled.to_bqm(lam=1.0)
    broken = dict(assignment, **{"Y[2]": 1})
    decoded = compiled.decode(dimod.SampleSet.from_samples_bqm([broken], bqm), lam=1.0)[0]
    assert decoded.broken == {"any": 1, "atmost": 1}
    assert decoded.energy == bqm.energy(broken)


def test_declared_variables_no_term_uses_stay_out_of_the_bqm(tmp_path):
    path = tmp_path / "spare.py"
    path.write_text(
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    S = model.binary('S', (4,))\n"  # S[1] and S[3] appear in no term
        "    model.constrain('pick', S[0] * U[:, 0].sum() + S[2] * V[0, 1], weight='lam')\n"
        "    model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize='products')\n"
    )
    A = np.array([[1, 0, 1], [0, 1, 1]])
    compiled = compile_model(path, A, 2)
    assert "S[0]" in compiled.variables and "S[1]" not in compiled.variables
    assert "S[3]" not in compiled.variables
    twin = compiled.to_pyqubo().compile()
    for lam in (0.5, 2.0):
        ours, theirs = compiled.to_bqm(lam=lam), twin.to_bqm(feed_dict={"lam": lam})
        assert list(ours.variables) == compiled.variables
        assert set(ours.variables) == set(theirs.variables) and ours.is_almost_equal(theirs)
        X = np.random.default_rng(1).integers(0, 2, (6, compiled.num_variables))
        expected = ours.energies((X, compiled.variables))
        np.testing.assert_allclose(compiled.qubo.energies(X, {"lam": lam}), expected)


def test_or_over_many_inputs_chains_auxiliaries():
    compiled = compile_model("boolean-bmf", np.ones((2, 2)), 2)
    assert "Y_chain" not in "".join(compiled.variables)
    compiled = compile_model("boolean-bmf", np.eye(3), 3)
    assert any(label.startswith("Y_chain") for label in compiled.variables)
    U = np.eye(3, dtype=int)
    bqm = compiled.to_bqm(lam=5.0)
    assert bqm.energy(compiled.encode(U, U)) == 0.0


def test_the_size_guard_says_how_big_and_what_to_do():
    A = (RNG.random((40, 30)) < 0.5).astype(np.int8)  # built at once: refused at once
    with pytest.raises(ModelTooLargeError, match=r"GiB.*sample rows.*native.*rank") as info:
        compile_model("formulation1", A, 8, memory_limit=2**18)
    assert isinstance(info.value, MemoryError)
    big = compile_model("formulation1", np.ones((5000, 200), dtype=np.int8), 8)
    assert big.memory_estimate > 2**30  # known before anything is built
    with pytest.raises(ModelTooLargeError, match=r"5000x200 .* rank 8 .* 9,000,000 variables"):
        big.to_bqm()  # refused at once, not after minutes of building
    compiled = compile_model("formulation1", A, 8)
    assert compiled.num_variables == (40 + 30 + 40 * 30) * 8
    assert compiled.num_interactions == compiled.to_bqm().num_interactions
    lazy = compile_model("formulation1", (RNG.random((150, 140)) < 0.5).astype(np.int8), 5)
    before = lazy.memory_estimate  # extrapolated from the sub-instances
    lazy.to_bqm()
    assert 0.5 < before / lazy.memory_estimate < 2.0


def test_every_declared_weight_is_tunable_everywhere():
    A = np.array([[1, 0], [0, 1]])
    compiled = compile_model("bicluster", A, 2)
    sweep = bmfdsl.sweep_weights(compiled, "exact", lam_onehot=[0.1, 4.0])
    assert [s.weights for s in sweep.settings] == [
        {"lam": 1.0, "lam_onehot": 0.1},
        {"lam": 1.0, "lam_onehot": 4.0},
    ]
    assert sweep.settings[-1].feasible and sweep.settings[-1].error == 0
    result = bmfdsl.factorize(A, 2, model="bicluster", backend="exact", weights={"lam": 3.0})
    assert result.info["weights"] == {"lam": 3.0, "lam_onehot": 3.0}
    with pytest.raises(bmfdsl.UnknownNameError, match=r"unknown weight 'mu'.*'lam'"):
        bmfdsl.factorize(A, 2, backend="neal", weights={"mu": 1.0})
    with pytest.raises(InvalidParameterError, match="at least one weight"):
        bmfdsl.sweep_weights(compiled, "exact", seed=0)


def test_factorize_with_a_mask_and_masked_arrays():
    A = bmfdsl.make_exact_rank(30, 20, 2, random_state=3)
    mask = (np.random.default_rng(1).random(A.shape) < 0.75).astype(np.int8)
    result = bmfdsl.factorize(A, 2, mask=mask, random_state=0)
    assert result.error == int((mask * (A - result.reconstruct()) ** 2).sum())
    again = bmfdsl.factorize(np.ma.masked_array(A, mask=mask == 0), 2, random_state=0)
    assert again.error == result.error and np.array_equal(again.U, result.U)
    for bad, message in ((mask[:3], "shape"), (mask * 2, "only 0 and 1"), (0 * mask, "no entry")):
        with pytest.raises(InvalidParameterError, match=message):
            bmfdsl.factorize(A, 2, mask=bad)
    with pytest.raises(InvalidParameterError, match="sample_rows"):
        bmfdsl.factorize(A, 2, mask=mask, sample_rows=10)


@pytest.mark.parametrize("quadratize", ["products", "pairs"])
def test_one_residual_two_quadratizations(quadratize):
    """Formulations 1 and 2-reduced are two quadratizations of one declaration, and with
    entry weights both still have the weighted residual as their feasible energy and optimum."""
    import types

    from bmfdsl.modeling import quadratized_residual

    reference = {"products": "formulation1", "pairs": "formulation2-reduced"}[quadratize]
    for m, n, r, one_hot in [(4, 5, 2, None), (5, 3, 3, "V"), (3, 4, 1, None)]:
        A = RNG.integers(0, 2, (m, n))
        script = types.ModuleType("quadratized")
        script.build = lambda model, q=quadratize: quadratized_residual(model, quadratize=q)
        ours = compile_model(script, A, r, one_hot=one_hot).to_bqm(lam=1.7)
        assert ours.is_almost_equal(compile_model(reference, A, r, one_hot=one_hot).to_bqm(lam=1.7))
    A = RNG.integers(0, 2, (2, 3))
    C = RNG.integers(0, 3, (2, 3)).astype(float)
    script = types.ModuleType("weighted")
    script.build = lambda model: quadratized_residual(model, quadratize=quadratize, entry_weights=C)
    compiled = compile_model(script, A, 2)  # the structure claim is verified here
    bqm = compiled.to_bqm(lam=30.0)
    energy, lowest = _ground_states(bqm)
    optimum = _brute_force(lambda U, V: float((C * (A - U @ V.T) ** 2).sum()), 2, 3, 2)
    assert energy == pytest.approx(optimum)
    assert all(
        d.feasible and d.error == pytest.approx(optimum) for d in compiled.decode(lowest, lam=30.0)
    )
    with pytest.raises(InvalidParameterError, match="quadratize must be one of"):
        script.build = lambda model: quadratized_residual(model, quadratize="cubes")
        compile_model(script, A, 2)


def test_exact_coefficients_are_stored_narrow_and_weights_applied_in_float64():
    compiled = compile_model("formulation1", np.eye(3, dtype=np.int8), 2)
    assert compiled.qubo.quadratic["lam"].dtype == np.float16  # small integers: exact
    bqm = compiled.to_bqm(lam=0.1)
    assert bqm.quadratic[("W[0][0][0]", "U[0][0]")] == -2 * 0.1  # not float32(0.1) * -2
    objective = float(compiled.qubo.linear[""][compiled.variables.index("W[0][0][0]")])
    assert bqm.linear["W[0][0][0]"] == objective + 3 * 0.1
    weights = np.full((3, 3), 0.1)  # 0.1 is not a float32: the objective stays float64
    weighted = compile_model("weighted-bmf", np.eye(3, dtype=np.int8), 2, data={"weights": weights})
    assert weighted.qubo.quadratic[""].dtype == np.float64
    eye = np.eye(3, dtype=np.int8)
    halves = compile_model("weighted-bmf", eye, 2, data={"weights": weights * 5})
    assert halves.qubo.quadratic[""].dtype == np.float16  # 0.5 and its multiples: exact
    large = compile_model("weighted-bmf", eye, 2, data={"weights": weights * 1e6})
    assert large.qubo.quadratic[""].dtype == np.float32  # 100,000 x 2: past float16's range


def test_entry_weights_keep_their_old_keyword_with_a_deprecation_warning():
    from bmfdsl.modeling import ModelBuilder, quadratized_residual, squared_residual

    A = np.array([[1, 0], [1, 1]])
    C = np.array([[2.0, 0.5], [1.0, 3.0]])
    new = ModelBuilder(A, rank=1)
    new.factors()
    new.declare_bmf(entry_weights=C)
    old = ModelBuilder(A, rank=1)
    old.factors()
    with pytest.warns(DeprecationWarning, match="entry_weights="):
        old.declare_bmf(weights=C)
    assert old.claim.entry_weights is not None and old.claim.entry_weights.tolist() == C.tolist()
    with pytest.warns(DeprecationWarning, match=r"squared_residual\(weights=\.\.\.\)"):
        assert squared_residual(A, [[0, 0], [0, 0]], weights=C) == 6.0
    assert squared_residual(A, [[0, 0], [0, 0]], entry_weights=C) == 6.0
    with pytest.warns(DeprecationWarning, match="quadratized_residual"):
        quadratized_residual(ModelBuilder(A, rank=1), weights=C)
    with pytest.raises(InvalidParameterError, match="entry_weights= only"):
        new.declare_bmf(entry_weights=C, weights=C)
    structure = compile_model("weighted-bmf", A, 1, data={"weights": C}).structure
    assert structure is not None and structure.entry_weights.tolist() == C.tolist()
    assert structure.effective_weights.tolist() == C.tolist()


# -- custom penalties must stay >= 0 -----------------------------------------------------------


def test_a_custom_penalty_that_can_go_negative_is_refused_at_compile_time(tmp_path):
    path = tmp_path / "negative.py"
    path.write_text(
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    model.constrain('pick', U[:, 0] + U[:, 1] - 1, weight='lam')\n"
        "    model.minimize(V.sum())\n"
    )
    with pytest.raises(ModelDefinitionError, match=r"'pick'.*-1 at U\[0\]\[0\]=0, U\[0\]\[1\]=0"):
        compile_model(path, np.ones((2, 2)), 2)


def test_the_sign_check_agrees_with_brute_force():
    from bmfdsl.modeling._nonnegativity import check_non_negative

    rng = np.random.default_rng(3)
    outcomes = set()
    for _ in range(60):
        space = VariableSpace()
        x = space.allocate("x", (4,))
        c, q = rng.integers(-2, 3, 4), rng.integers(-1, 3, (4, 4))
        penalty = (
            int(rng.integers(0, 3))
            + (c * x).sum()
            + sum(int(q[i, j]) * x[i] * x[j] for i in range(4) for j in range(i + 1, 4))
        )
        X = np.array(list(itertools.product((0, 1), repeat=4)))
        negative = penalty.evaluate(X).min() < 0
        outcomes.add(negative)
        if negative:
            with pytest.raises(ModelDefinitionError, match="enumerating its"):
                check_non_negative(penalty, "g", space.label)
        else:
            check_non_negative(penalty, "g", space.label)
    assert outcomes == {True, False}


def test_large_penalties_are_searched_when_they_cannot_be_enumerated():
    from bmfdsl.modeling._nonnegativity import MAX_ENUMERATED, check_non_negative

    space = VariableSpace()
    x = space.allocate("x", (3, MAX_ENUMERATED + 6))
    check_non_negative((x.sum(axis=1) - 1) ** 2, "rows", space.label)  # >= 0: accepted
    with pytest.raises(ModelDefinitionError, match=r"-2 at x\[0\]\[0\]=1, x\[0\]\[1\]=1 .*descent"):
        check_non_negative((x.sum(axis=1) - 1) ** 2 - 3 * x[:, 0] * x[:, 1], "rows", space.label)


# -- numpy functions on symbolic arrays ----------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "advice"),
    [
        (lambda U: np.sum(U), r"numpy.sum .*use expr.sum\(axis=...\)"),
        (lambda U: np.transpose(U), r"use expr.T"),
        (lambda U: np.einsum("ik,jk->ij", U, U), r"bmfdsl.modeling.einsum"),
        (lambda U: np.exp(U), r"numpy.exp .*operators \+ - \* @ \*\*"),
        (lambda U: np.sum((1 - U @ U.T) ** 2), r"numpy.sum does not apply to a Squares"),
    ],
)
def test_numpy_functions_say_which_method_to_use(call, advice):
    _, U, _, _ = _space()
    with pytest.raises(ModelDefinitionError, match=advice):
        call(U)


def test_numpy_arithmetic_with_an_array_on_the_left_still_works():
    space, U, _, _ = _space()
    data = np.arange(12.0).reshape(4, 3)
    samples = RNG.integers(0, 2, (5, space.size)).astype(np.int8)
    u = samples[:, :12].reshape(5, 4, 3)
    for expression, expected in [
        (data - U, data - u),
        (data * U + np.float64(2.0), data * u + 2),
        (np.add(data, U), data + u),
        (np.ones((2, 4)) @ U, np.ones((2, 4)) @ u),
    ]:
        np.testing.assert_allclose(expression.evaluate(samples), expected)
    scaled = np.full((4, 4), 2.0) * ((1 - U @ U.T) ** 2)  # squares scaled by data on the left
    assert isinstance(scaled, Squares) and (scaled.scale == 2.0).all()


_SKIPS_FULL_ROWS = """
import numpy as np
from bmfdsl.modeling import squared_residual


def build(model):
    U, V = model.factors()
    A = np.asarray(model.A)
    kept = np.ones(A.shape)
    kept[A.sum(axis=1) == A.shape[1]] = 0  # all-ones rows left out of the objective ...
    model.minimize(squared_residual(model.A, U @ V.T, mask=kept), quadratize="products")
    model.declare_bmf()  # ... but claimed as plain BMF
"""


def test_a_scripts_claim_is_checked_on_the_instance_where_built_in_models_use_sub_instances(
    tmp_path,
):
    from bmfdsl.modeling._compile import BUILT_IN_EAGER_CELLS, EAGER_CELLS

    script = tmp_path / "skips_full_rows.py"
    script.write_text(_SKIPS_FULL_ROWS)
    A = (np.random.default_rng(1).random((60, 60)) < 0.4).astype(np.int8)
    A[10] = 1  # the claim is wrong on this row only, which no 16 x 16 sub-instance may hold
    assert BUILT_IN_EAGER_CELLS < 60 * 60 * 5 <= EAGER_CELLS
    with pytest.raises(ModelDefinitionError):
        compile_model(script, A, 5)
    named = tmp_path / "named_as_built_in.py"  # a script naming itself as the package's
    named.write_text('__name__ = "bmfdsl.models.skips_full_rows"\n' + _SKIPS_FULL_ROWS)
    with pytest.raises(ModelDefinitionError):
        compile_model(named, A, 5)
    assert compile_model("formulation1", A, 5).structure_check == "sub-instances"
    assert compile_model("formulation1", A[:20, :20], 5).structure_check == "instance"


@pytest.mark.parametrize(
    ("model", "name", "value", "message"),
    [
        ("masked-bmf", "mask", 2.0, "only 0 and 1"),
        ("weighted-bmf", "weights", -1.0, "non-negative"),
        ("weighted-bmf", "weights", np.nan, "finite"),
    ],
)
def test_data_arrays_are_checked_whole_where_the_model_is_checked_on_sub_instances(
    model, name, value, message
):
    A = (np.random.default_rng(1).random((60, 60)) < 0.4).astype(np.int8)
    array = np.ones(A.shape)
    array[10, 10] = value  # one bad entry, which a 16 x 16 sub-instance may not hold
    with pytest.raises(InvalidParameterError, match=message):
        compile_model(model, A, 5, data={name: array})
    array[10, 10] = 1.0
    assert compile_model(model, A, 5, data={name: array}).structure_check == "sub-instances"
