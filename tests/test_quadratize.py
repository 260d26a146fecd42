"""The literal quartic objective ``Σ (a - Σ_k u v)²`` and its two quadratizations."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from bmfdsl import compile_model
from bmfdsl.errors import ModelDefinitionError
from bmfdsl.modeling import ModelBuilder

QUARTIC = str(Path(__file__).resolve().parents[1] / "examples" / "quartic_model.py")
HAND_SUBSTITUTED = str(Path(__file__).resolve().parents[1] / "examples" / "my_model.py")
RNG = np.random.default_rng(7)


def _relabelled_like(compiled, reference):
    """``compiled``'s BQM with each auxiliary renamed after the reference's auxiliary that
    stands for the same product of variables."""

    def products(model):
        builder = model.declaration
        labels = builder.space.labels()
        named = {}
        for group in builder.groups.values():
            if group.kind == "product":
                for z, a, b in zip(*group.product_indices, strict=True):
                    named[frozenset((labels[a], labels[b]))] = labels[z]
        return named

    ours, theirs = products(compiled), products(reference)
    assert set(ours) == set(theirs)
    mapping = {ours[key]: theirs[key] for key in ours}
    return compiled.to_bqm(lam=1.7).relabel_variables(mapping, inplace=False)


@pytest.mark.parametrize(
    ("how", "registered"), [("products", "formulation1"), ("pairs", "formulation2-reduced")]
)
@pytest.mark.parametrize("one_hot", [None, "U", "V"])
def test_the_quartic_objective_gives_the_registered_formulation(how, registered, one_hot):
    for m, n, r in [(3, 4, 2), (5, 3, 3), (4, 4, 1)]:
        A = RNG.integers(0, 2, (m, n))
        compiled = compile_model(QUARTIC, A, r, one_hot=one_hot, data={"quadratize": how})
        reference = compile_model(registered, A, r, one_hot=one_hot)
        assert compiled.structure_check == "instance"
        assert _relabelled_like(compiled, reference) == reference.to_bqm(lam=1.7)


@pytest.mark.parametrize("how", ["products", "pairs"])
def test_a_masked_quartic_objective_gives_masked_bmf(how):
    A = RNG.integers(0, 2, (4, 5))
    mask = RNG.integers(0, 2, (4, 5))
    compiled = compile_model(QUARTIC, A, 2, data={"quadratize": how, "mask": mask})
    assert compiled.structure is not None and compiled.structure.mask is not None
    if how == "products":
        reference = compile_model("masked-bmf", A, 2, data={"mask": mask})
        assert _relabelled_like(compiled, reference) == reference.to_bqm(lam=1.7)
    U, V = RNG.integers(0, 2, (4, 2)), RNG.integers(0, 2, (5, 2))
    energy = compiled.qubo.energies(compiled.encode_array(U, V)[None], {"lam": 1.0})[0]
    assert energy == pytest.approx((mask * (A - U @ V.T) ** 2).sum())


@pytest.mark.parametrize("how", ["products", "pairs"])
def test_the_pyqubo_twin_of_the_quartic_script(how):
    A = RNG.integers(0, 2, (3, 4))
    compiled = compile_model(QUARTIC, A, 3, data={"quadratize": how})
    twin = compiled.to_pyqubo().compile()
    for lam in (0.5, 2.0):
        ours, theirs = compiled.to_bqm(lam=lam), twin.to_bqm(feed_dict={"lam": lam})
        assert set(ours.variables) == set(theirs.variables)
        assert ours.is_almost_equal(theirs)


def _declared_first(how, declared_ranks=None):
    """A script that declares the auxiliaries of ``how`` (``factor_products``/``factor_pairs``;
    with ``declared_ranks``, ``W`` only for those columns k) and then writes the quartic."""
    import types

    from bmfdsl.modeling import factor_products
    from bmfdsl.modeling._building_blocks import factor_pairs

    def build(model):
        if declared_ranks is None:
            declare = factor_products if how == "products" else factor_pairs
            U, V = declare(model)[:2]
        else:
            U, V = model.factors()
            ks = np.asarray(declared_ranks)
            W = model.binary("W", (ks.size, *model.A.shape))
            model.constrain_product(
                W, U.T[ks, :, None], V.T[ks, None, :], group="W", weight=model.weight("lam", 1.0)
            )
        model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize=how)
        model.one_hot_constraint()
        model.declare_bmf()

    script = types.ModuleType("declared_first")
    script.build = build
    return script


@pytest.mark.parametrize(
    ("how", "registered"), [("products", "formulation1"), ("pairs", "formulation2-reduced")]
)
def test_declared_auxiliaries_stand_in_for_their_products(how, registered):
    """Declaring the auxiliaries first gives the registered model itself, labels and all:
    the paper's formulations are two quadratizations of the one quartic declaration."""
    for m, n, r, one_hot in [(3, 4, 2, None), (5, 3, 3, "V"), (4, 4, 1, "U"), (6, 2, 2, None)]:
        A = RNG.integers(0, 2, (m, n))
        compiled = compile_model(_declared_first(how), A, r, one_hot=one_hot)
        reference = compile_model(registered, A, r, one_hot=one_hot)
        assert compiled.variables == reference.variables  # no P[t] / Q[t]: W or UU, VV reused
        for lam in (0.5, 1.7):
            assert compiled.to_bqm(lam=lam) == reference.to_bqm(lam=lam)


def test_the_substitution_written_by_hand_gives_the_same_qubo():
    # examples/my_model.py minimizes squared_residual(A, W.sum(axis=0)): quadratic already
    for one_hot in (None, "U", "V"):
        A = RNG.integers(0, 2, (4, 5))
        ours = compile_model(HAND_SUBSTITUTED, A, 2, one_hot=one_hot).to_bqm(lam=1.7)
        reference = compile_model("formulation1", A, 2, one_hot=one_hot).to_bqm(lam=1.7)
        assert ours == reference


def test_products_nobody_declared_get_new_auxiliaries():
    A = RNG.integers(0, 2, (4, 5))
    compiled = compile_model(_declared_first("products", declared_ranks=[1]), A, 3)
    assert compiled.declaration.arrays["W"] == (1, 4, 5)
    assert compiled.declaration.arrays["P"] == (2 * 4 * 5,)  # columns 0 and 2 of U V
    assert compiled.structure_check == "instance"  # feasible energy == ||A - UVᵀ||², verified
    reference = compile_model("formulation1", A, 3)
    assert _relabelled_like(compiled, reference) == reference.to_bqm(lam=1.7)


def _squares_model(residual_of, how, scale=1.0):
    """A 2x3 model minimizing Σ scale · residual_of(U, V)² (quadratized)."""
    model = ModelBuilder(np.array([[1, 0, 1], [0, 1, 1]]), rank=2)
    U, V = model.factors()
    model.minimize((residual_of(U, V) ** 2 * scale).sum(), quadratize=how)
    return model


def _energies_match(model, residual_of, scale=1.0):
    """At every feasible point the energy equals Σ scale · residual² computed with numpy."""
    from bmfdsl.modeling._compiled import Lowered  # the lowered arrays of a bare declaration

    lowered = Lowered(model.declaration())
    for u in itertools.product((0, 1), repeat=4):
        U = np.array(u).reshape(1, 2, 2)
        for v in itertools.product((0, 1), repeat=6):
            V = np.array(v).reshape(1, 3, 2)
            X = lowered.fill(U, V)[:, lowered.positions]
            energy = lowered.terms.energies(X, {"lam": 1.0})[0]
            expected = (scale * residual_of(U[0], V[0]) ** 2).sum()
            assert energy == pytest.approx(expected)


def test_products_handle_any_quadratic_residual():
    # linear terms, a constant and products sharing variables
    def residual(U, V):
        return 2 - U @ V.T + 3 * U[:, :1] - 0.5 * (U[:, :1] * U[:, 1:]) + V[:, 0]

    scale = np.array([[1.0, 2.0, 0.5], [3.0, 1.0, 1.0]])
    _energies_match(_squares_model(residual, "products", scale), residual, scale)


def test_pairs_handle_shared_factors():
    # both products of an element share U[i][0]: one factor of each quartic term is a variable
    def residual(U, V):
        return 1 - U[:, :1] * V[:, 0] - 2 * U[:, :1] * V[:, 1]

    _energies_match(_squares_model(residual, "pairs"), residual)


def test_quartic_objective_errors_say_how_to_fix_them():
    model = ModelBuilder(np.eye(2), rank=2)
    U, V = model.factors()
    squares = ((model.A - U @ V.T) ** 2).sum()
    with pytest.raises(ModelDefinitionError, match=r"quadratize=.*'products', 'pairs'.*auxiliary"):
        model.minimize(squares)
    with pytest.raises(ModelDefinitionError, match="got 'cubes'"):
        model.minimize(squares, quadratize="cubes")
    with pytest.raises(ModelDefinitionError, match="drop quadratize="):
        model.minimize(U.sum(), quadratize="products")
    with pytest.raises(ModelDefinitionError, match="without linear terms"):
        model.minimize(((U @ V.T + U[:, :1]) ** 2).sum(), quadratize="pairs")
    with pytest.raises(ModelDefinitionError, match="combine with nothing else"):
        squares + U.sum()
    with pytest.raises(ModelDefinitionError, match="summed whole"):
        ((model.A - U @ V.T) ** 2).sum(axis=0)
    with pytest.raises(ModelDefinitionError, match="data only"):
        squares * U[0, 0]
    with pytest.raises(ModelDefinitionError, match="degree"):
        (U @ V.T) ** 3


def test_merge_terms_keeps_the_values_and_leaves_one_term_per_monomial():
    from bmfdsl.modeling._expr import VariableSpace
    from bmfdsl.modeling._quadratize import merge_terms

    rng = np.random.default_rng(3)
    space = VariableSpace()
    x = space.allocate("x", (6,))
    expression = 0
    for _ in range(40):  # random products and linear terms, many repeated or cancelling
        i, j, e = rng.integers(0, 6), rng.integers(0, 6), rng.integers(0, 3)
        term = x[[i]] * x[[j]] if rng.random() < 0.7 else x[[i]]
        expression = expression + float(rng.integers(-2, 3)) * (term * np.eye(3)[e])
    merged = merge_terms(expression)
    _, elem, var, coef = merged.terms
    assert (coef != 0).all() and (var[:, 1] != var[:, 0]).all()
    keys = {(int(e), int(a), int(b)) for e, (a, b) in zip(elem, var, strict=True)}
    assert len(keys) == elem.size  # every monomial of an element once
    X = rng.integers(0, 2, (16, space.size))
    np.testing.assert_allclose(merged.evaluate(X), expression.evaluate(X))


def test_groups_count_the_terms_their_penalties_lower_to():
    """The size guard counts, at declaration, the terms each group's penalties will hold."""
    for declare in ("one_hot", "product"):
        model = ModelBuilder(np.ones((4, 5)), rank=3)
        U, _ = model.factors()
        before = model.space.held_terms
        if declare == "one_hot":
            model.constrain_one_hot(U, axis=1, group="g", weight="lam")
        else:
            Z = model.binary("Z", (4, 3))
            model.constrain_product(Z, U, U[:, ::-1], group="g", weight="lam")
        assert model.space.held_terms - before == model.groups["g"].penalties.num_terms


def test_the_quadratization_declares_its_weight_only_for_auxiliaries_of_its_own():
    import types

    from bmfdsl.modeling import quadratized_residual

    A = RNG.integers(0, 2, (3, 4))
    script = types.ModuleType("renamed_weight")
    for how in ("products", "pairs"):
        script.build = lambda model, q=how: quadratized_residual(model, quadratize=q, weight="mu")
        assert compile_model(script, A, 2).weight_names == ("mu",)  # no unused 'lam'
    partial = compile_model(_declared_first("products", declared_ranks=[0]), A, 2)
    assert partial.weight_names == ("lam",)  # W and the new P share the one weight


def test_a_second_quartic_objective_needs_its_own_auxiliary_array():
    model = ModelBuilder(np.array([[1, 0, 1], [0, 1, 1]]), rank=2)
    U, V = model.factors()
    model.minimize(((model.A - U @ V.T) ** 2).sum(), quadratize="products")
    same = ((1 - U @ V[:1].T) ** 2).sum()  # products U[i][k] V[0][k]: all in P already
    model.minimize(same, quadratize="products")
    assert model.arrays["P"] == (2 * 3 * 2,)
    new = ((1 - U[:1] @ U[1:].T) ** 2).sum()  # U[0][k] U[1][k]: products P does not hold
    with pytest.raises(ModelDefinitionError, match=r"'P' exists already.*aux="):
        model.minimize(new, quadratize="products")
    model.minimize(new, quadratize="products", aux="P2")
    assert model.arrays["P2"] == (2,) and sorted(model.groups) == ["P", "P2"]
