"""Single-factor models (A ≈ U Uᵀ): no V variables, decoded V is U, brute force and twin."""

from __future__ import annotations

import itertools

import dimod
import numpy as np
import pytest

from bmfdsl import InvalidMatrixError, ModelDefinitionError, compile_model, solve

SYMMETRIC = """
def build(model):
    U = model.factor()
    model.minimize(((model.A - U @ U.T) ** 2).sum(), quadratize="{how}")
"""


def _script(tmp_path, how="products"):
    path = tmp_path / f"symmetric_{how}.py"
    path.write_text(SYMMETRIC.format(how=how))
    return path


def _symmetric(size, seed):
    upper = np.triu(np.random.default_rng(seed).integers(0, 2, (size, size)))
    return upper | upper.T


@pytest.mark.parametrize(("size", "rank", "seed"), [(3, 1, 0), (3, 2, 1), (4, 1, 2)])
def test_the_minimum_is_the_best_symmetric_factorization(tmp_path, size, rank, seed):
    A = _symmetric(size, seed)
    compiled = compile_model(_script(tmp_path), A, rank)
    assert compiled.single_factor
    assert not any(label.startswith("V") for label in compiled.variables)
    codes = itertools.product((0, 1), repeat=size * rank)
    optimum = min(
        int(((A - U @ U.T) ** 2).sum()) for U in (np.reshape(c, (size, rank)) for c in codes)
    )
    result = solve(compiled, "exact", lam=3.0 * rank)
    assert result[0].feasible and result[0].error == optimum
    assert all(np.array_equal(s.U, s.V) for s in result)  # V is U, never random bits


def test_encode_decode_and_the_pyqubo_twin(tmp_path):
    A = _symmetric(3, 5)
    compiled = compile_model(_script(tmp_path), A, 2)
    U = np.array([[1, 0], [1, 1], [0, 1]])
    bqm = compiled.to_bqm(lam=2.0)
    assert bqm.energy(compiled.encode(U)) == ((A - U @ U.T) ** 2).sum()
    assert compiled.encode(U, U) == compiled.encode(U)
    with pytest.raises(InvalidMatrixError, match="one factor"):
        compiled.encode(U, 1 - U)
    # a structure-aware answer over U alone decodes with its auxiliaries filled in
    labels = [f"U[{i}][{k}]" for i in range(3) for k in range(2)]
    only_u = dimod.SampleSet.from_samples((U.reshape(1, -1), labels), dimod.BINARY, 0.0)
    decoded = compiled.decode(only_u, lam=2.0)[0]
    assert decoded.feasible and np.array_equal(decoded.V, U)
    assert decoded.energy == ((A - U @ U.T) ** 2).sum()
    twin = compiled.to_pyqubo().compile().to_bqm(feed_dict={"lam": 2.0})
    assert bqm.is_almost_equal(twin)


def test_a_single_factor_needs_a_square_matrix_and_one_declaration(tmp_path):
    with pytest.raises(ModelDefinitionError, match="must be square"):
        compile_model(_script(tmp_path), np.ones((2, 3)), 1)
    twice = tmp_path / "twice.py"
    twice.write_text("def build(model):\n    model.factor()\n    model.factors()\n")
    with pytest.raises(ModelDefinitionError, match="declared twice"):
        compile_model(twice, np.ones((2, 2)), 1)


def test_a_single_factor_model_claims_the_symmetric_structure(tmp_path):
    path = tmp_path / "claim.py"
    path.write_text(SYMMETRIC.format(how="products") + "    model.declare_bmf()\n")
    A = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    structure = compile_model(path, A, 2).structure
    assert structure is not None and structure.symmetric
