"""Weights in the objective (``mu * U.sum()``), as PyQUBO Placeholders: brute force and twin."""

from __future__ import annotations

import itertools
import types

import dimod
import numpy as np
import pytest

import bmfdsl.modeling._compile
from bmfdsl import InvalidParameterError, ModelDefinitionError, compile_model, solve, sweep_weights
from bmfdsl.modeling import ModelBuilder

A = np.array([[1, 0, 1], [1, 1, 0]])

# each objective, written with the weight in a different place, and the function it means
OBJECTIVES = {
    "weight times sum": (
        "model.minimize(mu * U.sum())",
        lambda U, V, mu, nu: mu * U.sum(),
    ),
    "sum times weight, scaled": (
        "model.minimize(V.sum() * mu * 0.5 - 2 * (nu * U[0]).sum())",
        lambda U, V, mu, nu: 0.5 * mu * V.sum() - 2 * nu * U[0].sum(),
    ),
    "sum of weighted terms and a constant": (
        "model.minimize(sum(mu * U[i, 0] for i in range(2)) + nu * (U @ V.T).sum() + 3)",
        lambda U, V, mu, nu: mu * U[:, 0].sum() + nu * (U @ V.T).sum() + 3,
    ),
    "data times weight times variables": (
        "model.minimize((np.arange(6.0).reshape(2, 3) * (mu * (U @ V.T))).sum() - nu)",
        lambda U, V, mu, nu: (np.arange(6.0).reshape(2, 3) * mu * (U @ V.T)).sum() - nu,
    ),
    "a weighted quartic objective": (
        "model.minimize(mu * ((model.A - U @ V.T) ** 2).sum() + nu * V.sum(), "
        "quadratize='products')",
        lambda U, V, mu, nu: mu * ((A - U @ V.T) ** 2).sum() + nu * V.sum(),
    ),
}


def _script(tmp_path, line):
    path = tmp_path / "weighted.py"
    path.write_text(
        "import numpy as np\n"
        "from bmfdsl.modeling import squared_residual\n"
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    mu, nu = model.weight('mu'), model.weight('nu', default=0.5)\n"
        f"    {line}\n"
    )
    return path


def _factor_pairs(m, n, r):
    for u in itertools.product((0, 1), repeat=m * r):
        for v in itertools.product((0, 1), repeat=n * r):
            yield np.reshape(u, (m, r)), np.reshape(v, (n, r))


@pytest.mark.parametrize("name", OBJECTIVES)
def test_a_weight_multiplies_any_objective_term(tmp_path, name):
    line, meaning = OBJECTIVES[name]
    compiled = compile_model(_script(tmp_path, line), A, 1)
    assert set(compiled.objective_weights) == {w for w in ("mu", "nu") if w in line}
    twin = compiled.to_pyqubo().compile()
    for mu, nu in [(0.0, 1.0), (1.5, 0.0), (2.0, 0.25)]:
        weights = {"mu": mu, "nu": nu, **({"lam": 2.0} if "lam" in compiled.weights else {})}
        bqm = compiled.to_bqm(**weights)
        for U, V in _factor_pairs(2, 3, 1):  # feasible points: energy == the objective
            assert bqm.energy(compiled.encode(U, V)) == pytest.approx(meaning(U, V, mu, nu))
        theirs = twin.to_bqm(feed_dict=weights)
        theirs.add_linear_from(dict.fromkeys(set(bqm.variables) - set(theirs.variables), 0.0))
        assert bqm.is_almost_equal(theirs)  # PyQUBO leaves out variables in no term


def test_reweighting_an_objective_weight_never_recompiles(tmp_path, monkeypatch):
    calls = []
    original = bmfdsl.modeling._compile._declare
    monkeypatch.setattr(
        bmfdsl.modeling._compile, "_declare", lambda *a: calls.append(1) or original(*a)
    )
    compiled = compile_model(_script(tmp_path, OBJECTIVES["weight times sum"][0]), A, 1)
    offsets = {
        compiled.to_bqm(mu=mu).energy(compiled.encode([[1], [1]], np.zeros((3, 1))))
        for mu in (0.0, 1.0, 2.0)
    }
    assert offsets == {0.0, 2.0, 4.0} and calls == [1]


def test_the_best_decoded_sample_is_the_lowest_energy_one_and_sweeps_find_it():
    # the case: an L1 term through a constraint group made every 1 "broken"
    compiled = compile_model(_l1_module(), A, 1)
    for value in (0.0, 0.4, 3.0):
        bqm = compiled.to_bqm(mu=value, lam=4.0)
        exact = dimod.ExactSolver().sample(bqm)
        best = solve(compiled, "exact", mu=value, lam=4.0)[0]
        assert best.feasible and best.energy == pytest.approx(exact.first.energy)
        expected = min(
            ((A - U @ V.T) ** 2).sum() + value * (U.sum() + V.sum())
            for U, V in _factor_pairs(2, 3, 1)
        )
        assert best.error == pytest.approx(expected)
    sweep = sweep_weights(compiled, "exact", mu=[0.0, 3.0], lam=4.0)
    assert sweep.best is not None and all(s.feasible for s in sweep.settings)
    assert sweep.best.weights["mu"] == 0.0 and sweep.best.error == 2


def _l1_module():
    """BMF plus ``mu`` times the ones of U and V, as a module for compile_model."""
    module = types.ModuleType("weighted_l1")

    def build(model):
        U, V = model.factors()
        mu = model.weight("mu")
        model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize="products")
        model.minimize(mu * (U.sum() + V.sum()))

    module.build = build
    return module


def test_weight_rules_zero_for_objective_weights_only(tmp_path):
    compiled = compile_model(
        _script(
            tmp_path,
            "model.minimize(mu * U.sum() + "
            "((model.A - U @ V.T) ** 2).sum(), quadratize='products')",
        ),
        A,
        1,
    )
    assert compiled.resolve_weights(mu=0)["mu"] == 0.0
    with pytest.raises(InvalidParameterError, match=r"positive.*only weights of objective"):
        compiled.to_bqm(mu=1.0, lam=0)
    with pytest.raises(InvalidParameterError, match="non-negative"):
        compiled.to_bqm(mu=-1.0)
    with pytest.raises(InvalidParameterError, match="missing weight 'mu'"):
        compiled.to_bqm()
    # the sufficient penalty weight takes the objective weight's value into account
    low = compiled.sufficient_weights(mu=0.0)["lam"]
    assert compiled.resolve_weights(mu=0.0, lam="sufficient")["lam"] == low
    with pytest.raises(InvalidParameterError, match="missing weight 'mu'"):
        compiled.sufficient_weights()


def test_products_of_weights_and_foreign_weights_are_refused():
    model = ModelBuilder(A, 1)
    U, V = model.factors()
    mu, nu = model.weight("mu"), model.weight("nu")
    with pytest.raises(ModelDefinitionError, match=r"not linear in the weights.*'mu_nu'"):
        (mu * U.sum()) * (nu * V.sum())
    with pytest.raises(ModelDefinitionError, match="not linear in the weights"):
        (mu * U.sum()) ** 2
    other = ModelBuilder(A, 1).weight("rho")
    with pytest.raises(ModelDefinitionError, match=r"'rho'.*declared: \['mu', 'nu'\]"):
        model.minimize(other * U.sum())
    model.minimize(U.sum() * (mu + 1) - (nu - 2) * V.sum())  # weights combine linearly
    assert sorted(model.weighted_objective) == ["mu", "nu"]
    X = np.ones((1, model.space.size))
    assert float(model.weighted_objective["nu"].evaluate(X)[0]) == -3.0
    assert float(model.objective.evaluate(X)[0]) == 2.0 + 6.0
