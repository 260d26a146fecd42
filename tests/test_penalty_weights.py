"""Sufficient penalty weights: every minimum of the QUBO is feasible (checked by brute force)."""

from __future__ import annotations

import itertools

import dimod
import numpy as np
import pytest

from bmfdsl import compile_model
from bmfdsl.apps._cli import build_parser
from bmfdsl.errors import InvalidParameterError

# (model, shape, rank, one_hot, data); every instance has at most 18 variables
CASES = [
    ("formulation1", (2, 2), 2, None, {}),
    ("formulation1", (2, 2), 2, "V", {}),
    ("formulation1", (2, 2), 2, "U", {}),
    ("formulation2", (2, 2), 1, None, {}),
    ("formulation2", (3, 2), 1, "V", {}),
    ("formulation2-reduced", (2, 3), 2, None, {}),
    ("formulation2-reduced", (3, 2), 2, "U", {}),
    ("masked-bmf", (2, 2), 2, None, {"mask": np.array([[1, 0], [1, 1]])}),
    ("weighted-bmf", (2, 2), 2, None, {"weights": np.array([[0.5, 2.0], [1.0, 3.0]])}),
    ("bicluster", (2, 2), 2, None, {}),
]


def _every_assignment(num_variables: int) -> np.ndarray:
    return np.array(list(itertools.product((0, 1), repeat=num_variables)), dtype=np.int8)


def _minima(compiled, weights: dict) -> list:
    X = _every_assignment(compiled.num_variables)
    energies = compiled.qubo.energies(X, compiled.resolve_weights(**weights))
    lowest = np.flatnonzero(energies <= energies.min() + 1e-9)
    sampleset = dimod.SampleSet.from_samples(
        (X[lowest], compiled.variables), dimod.BINARY, energies[lowest]
    )
    return compiled.decode(sampleset, **weights)


def _optimum(compiled) -> float:
    """The least model error over every feasible (U, V), by enumeration."""
    m, n = compiled.A.shape
    r = compiled.rank
    Us = _every_assignment(m * r).reshape(-1, m, r)
    Vs = _every_assignment(n * r).reshape(-1, n, r)
    X = np.stack([compiled.encode_array(U, V) for U in Us for V in Vs])
    decoded = compiled.decode(dimod.SampleSet.from_samples((X, compiled.variables), "BINARY", 0))
    return min(float(sample.error) for sample in decoded if sample.feasible)


@pytest.mark.parametrize(("name", "shape", "rank", "one_hot", "data"), CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_every_minimum_is_feasible_at_the_sufficient_weights(
    name, shape, rank, one_hot, data, seed
):
    A = (np.random.default_rng(seed).random(shape) < 0.5).astype(np.int8)
    compiled = compile_model(name, A, rank, one_hot=one_hot, data=data)
    assert compiled.num_variables <= 18
    weights = {w: "sufficient" for w in compiled.sufficient_weights()}
    assert set(weights) == set(compiled.group_weights.values())
    minima = _minima(compiled, weights)
    assert minima and all(sample.feasible for sample in minima)
    # the feasible minimum is the model's optimum: the QUBO solves the model exactly
    assert minima[0].energy == pytest.approx(_optimum(compiled), abs=1e-6)


def test_a_weight_below_the_bound_can_leave_an_infeasible_minimum():
    # A = [[1, 1], [1, 0]] at rank 1: optimum 1; W = A with one broken product costs lam
    compiled = compile_model("formulation1", np.array([[1, 1], [1, 0]]), 1)
    assert compiled.sufficient_weights()["lam"] > 0.5
    minima = _minima(compiled, {"lam": 0.5})
    assert not any(sample.feasible for sample in minima)
    assert all(sample.feasible for sample in _minima(compiled, {"lam": "sufficient"}))


def test_formulation1_bound_is_two_r_minus_one_with_unit_data():
    for rank in (1, 2, 4):
        compiled = compile_model("formulation1", np.ones((4, 4), np.int8), rank)
        assert compiled.sufficient_weights()["lam"] == pytest.approx(2 * rank - 1, rel=2e-3)


def test_the_one_hot_weight_follows_the_products_it_touches():
    compiled = compile_model("formulation1", np.eye(4, dtype=np.int8), 2, one_hot="V")
    weights = compiled.sufficient_weights()
    # V[j][k] is in m = 4 products, each with |ab| + |-2bz| = 3 at weight lam
    assert weights["lam_onehot"] == pytest.approx(3 * 4 * weights["lam"], rel=2e-3)


def test_sufficient_values_reach_to_bqm_and_solve():
    compiled = compile_model("formulation1", np.eye(3, dtype=np.int8), 2)
    lam = compiled.sufficient_weights()["lam"]
    assert compiled.to_bqm(lam="sufficient") == compiled.to_bqm(lam=lam)


def test_or_groups_have_no_sufficient_weight():
    compiled = compile_model("boolean-bmf", np.eye(2, dtype=np.int8), 2)
    with pytest.raises(InvalidParameterError, match=r"group 'Y'.*pass weight 'lam'"):
        compiled.sufficient_weights()
    with pytest.raises(InvalidParameterError, match="group 'Y'"):
        compiled.to_bqm(lam="sufficient")


def test_a_string_other_than_sufficient_is_still_an_error():
    compiled = compile_model("formulation1", np.eye(2, dtype=np.int8), 1)
    with pytest.raises(InvalidParameterError, match="must be a number"):
        compiled.to_bqm(lam="large")


def test_cli_accepts_sufficient():
    args = build_parser().parse_args(
        ["factorize", "data.csv", "--rank", "2", "--weight", "lam=sufficient", "--weight", "x=2"]
    )
    assert args.weight == [("lam", "sufficient"), ("x", 2.0)]


def test_an_at_most_k_weight_below_its_bound_can_leave_an_infeasible_minimum(tmp_path):
    # every one of U pays -3, so a row with two ones gains 3 and pays lam (D = 1): lam > 3
    path = tmp_path / "at_most.py"
    path.write_text(
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    model.minimize(-3 * U.sum() + V.sum())\n"
        "    model.constrain_at_most(U, 1, axis=1, group='rows', weight='lam')\n"
    )
    compiled = compile_model(path, np.ones((2, 2)), 2)
    assert compiled.sufficient_weights() == {"lam": pytest.approx(3.003)}
    assert not any(sample.feasible for sample in _minima(compiled, {"lam": 2.9}))
    minima = _minima(compiled, {"lam": "sufficient"})
    assert minima and all(sample.feasible for sample in minima)
    assert minima[0].energy == -6.0  # one 1 per row of U, V empty
