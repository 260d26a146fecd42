"""Inequalities: slack encodings, brute force at the sufficient weights, broken counts, errors."""

from __future__ import annotations

import itertools

import dimod
import numpy as np
import pytest

from bmfdsl import InvalidParameterError, ModelDefinitionError, compile_model
from bmfdsl.modeling import ModelBuilder
from bmfdsl.modeling._inequalities import slack_bits, slack_coefficients
from bmfdsl.modeling._penalty_weights import sufficient_weights

A = np.ones((2, 3))


@pytest.mark.parametrize("encoding", ["binary", "unary"])
def test_every_slack_value_has_one_encoding_and_none_exceeds_the_range(encoding):
    spans = np.arange(41)
    coefficients = slack_coefficients(spans, encoding)
    if encoding == "binary":  # log-encoded: bit length of the span
        assert ((coefficients > 0).sum(axis=1) == [int(s).bit_length() for s in spans]).all()
    assert (coefficients.sum(axis=1) == spans).all()  # the most the slack can be is its span
    for span in spans:
        values = np.arange(span + 1)
        bits = slack_bits(np.tile(values[:, None], (1, spans.size)), coefficients)[:, span]
        assert ((bits * coefficients[span]).sum(axis=1) == values).all()
        assert (bits[:, coefficients[span] == 0] == 0).all()


# (constraint lines, the predicate on (U, V) they mean); U and V are 2x2, the weights separate
CONSTRAINTS = {
    "at most one per row": (
        ["model.constrain_at_most(U, 1, axis=1, group='rows', weight='lam', slack=SLACK)"],
        lambda U, V: (U.sum(axis=1) <= 1).all(),
    ),
    "at least one per column, at most one in total": (
        [
            "model.constrain_at_least(V, 1, axis=0, group='cols', weight='lam', slack=SLACK)",
            "model.constrain_at_most(U, 1, axis=None, group='total', weight='nu', slack=SLACK)",
        ],
        lambda U, V: (V.sum(axis=0) >= 1).all() and U.sum() <= 1,
    ),
    "differences with <= and >=": (
        [
            "model.constrain('order', U[:, 0] - U[:, 1] >= 0, weight='lam', slack=SLACK)",
            "model.constrain('cap', 1 + V[0] - V[1] <= 1, weight='nu', slack=SLACK)",
        ],
        lambda U, V: (U[:, 0] >= U[:, 1]).all() and (V[0] <= V[1]).all(),
    ),
}


def _script(tmp_path, lines, slack, seed):
    path = tmp_path / f"ineq_{seed}_{slack}.py"
    body = "\n".join(f"    {line}" for line in lines)
    path.write_text(
        "import numpy as np\n"
        f"SLACK = {slack!r}\n"
        "def build(model):\n"
        "    U, V = model.factors()\n"
        "    model.weight('nu', default=1.0)\n"
        f"    c = np.random.default_rng({seed}).integers(-3, 2, (2, 2, 2))\n"
        "    model.minimize((c[0] * U).sum() + (c[1] * V).sum() - 2 * U[0, 0] * V[1, 1])\n"
        f"{body}\n"
    )
    return path


def _factors():
    for u in itertools.product((0, 1), repeat=4):
        for v in itertools.product((0, 1), repeat=4):
            yield np.reshape(u, (2, 2)), np.reshape(v, (2, 2))


@pytest.mark.parametrize("slack", ["binary", "unary"])
@pytest.mark.parametrize("name", CONSTRAINTS)
@pytest.mark.parametrize("seed", [0, 1])
def test_at_the_sufficient_weights_every_minimum_is_feasible_and_optimal(
    tmp_path, name, slack, seed
):
    lines, holds = CONSTRAINTS[name]
    compiled = compile_model(_script(tmp_path, lines, slack, seed), A[:2, :2], 2)
    c = np.random.default_rng(seed).integers(-3, 2, (2, 2, 2))

    def objective(U, V):
        return (c[0] * U).sum() + (c[1] * V).sum() - 2 * U[0, 0] * V[1, 1]

    optimum = min(objective(U, V) for U, V in _factors() if holds(U, V))
    weights = compiled.sufficient_weights()
    bqm = compiled.to_bqm(**weights)
    lowest = dimod.ExactSolver().sample(bqm).lowest(atol=1e-9)
    assert lowest.first.energy == pytest.approx(optimum)
    for decoded in compiled.decode(lowest, **weights):
        assert decoded.feasible and holds(decoded.U, decoded.V)
    twin = compiled.to_pyqubo().compile().to_bqm(feed_dict=weights)
    twin.add_linear_from(dict.fromkeys(set(bqm.variables) - set(twin.variables), 0.0))
    assert bqm.is_almost_equal(twin)


def test_broken_counts_and_slack_filling(tmp_path):
    path = _script(tmp_path, CONSTRAINTS["at most one per row"][0], "binary", 0)
    compiled = compile_model(path, A[:2, :2], 2)
    ok, over = np.array([[1, 0], [0, 0]]), np.array([[1, 1], [1, 1]])
    V = np.zeros((2, 2))
    bqm = compiled.to_bqm(lam=2.0)
    filled = compiled.encode(ok, V)
    assert (filled["rows_slack[0][0]"], filled["rows_slack[1][0]"]) == (0, 1)
    samples = dimod.SampleSet.from_samples_bqm([compiled.encode(over, V), filled], bqm)
    decoded = compiled.decode(samples, lam=2.0)
    assert [d.broken for d in decoded] == [{"rows": 0}, {"rows": 2}]
    assert bqm.energy(filled) == decoded[0].error  # feasible: energy is the objective


def test_coefficients_other_than_one_are_exact_but_have_no_sufficient_weight():
    model = ModelBuilder(A[:1, :1], 1)
    x = model.binary("x", (3,))
    model.factors()
    model.constrain("weighted", 2 * x[0] - 3 * x[1] + x[2] <= 1, weight=model.weight("lam"))
    model.minimize(-x.sum())
    with pytest.raises(InvalidParameterError, match="not ±1"):
        sufficient_weights(model.declaration())
    # over every assignment: the penalty is 0 for some slack exactly when the inequality holds,
    # and at least 1 otherwise
    size = model.space.size
    X = np.array(list(itertools.product((0, 1), repeat=size)), dtype=np.int8)
    penalty = model.groups["weighted"].penalties.evaluate(X)[:, 0]
    holds = 2 * X[:, 0] - 3 * X[:, 1] + X[:, 2] <= 1
    best = {}
    for row, value in zip(map(tuple, X[:, :3]), penalty, strict=True):
        best[row] = min(best.get(row, np.inf), value)
    for row, value in best.items():
        assert (value == 0) == (2 * row[0] - 3 * row[1] + row[2] <= 1)
    assert (penalty[~holds] >= 1).all() and (penalty >= 0).all()


@pytest.mark.parametrize(
    ("line", "error", "message"),
    [
        (lambda U: U[:, 0] * U[:, 1] <= 0, ModelDefinitionError, "linear expressions"),
        (lambda U: 0.5 * U[:, 0] <= 1, ModelDefinitionError, "integer coefficients"),
        (lambda U: U.sum(axis=1) >= 3, ModelDefinitionError, "can never hold"),
    ],
)
def test_bad_inequalities_say_what_to_change(line, error, message):
    model = ModelBuilder(A, 2)
    U = model.factors()[0]
    with pytest.raises(error, match=message):
        model.constrain("g", line(U), weight="lam")


def test_inequalities_have_no_truth_value_and_slack_names_are_checked():
    model = ModelBuilder(A, 2)
    U = model.factors()[0]
    with pytest.raises(ModelDefinitionError, match="two constraints"):
        0 <= U.sum() <= 2  # noqa: B015 - a chained comparison asks for bool()
    with pytest.raises(InvalidParameterError, match=r"\['binary', 'unary'\]"):
        model.constrain_at_most(U, 1, group="g", weight="lam", slack="log")
    model.constrain_at_most(U, 2, group="always", weight="lam")  # always holds: no penalty
    model.constrain_at_most(U, 0, axis=0, group="none", weight="lam")  # no slack: (Σ x)²
    assert "always_slack" not in model.arrays and "none_slack" not in model.arrays
    assert model.groups["none"].penalties.size == 2
    assert (np.ones(2) >= U[0]).expression.shape == (2,)  # ndarray on the left works too
