"""compile_model, user model scripts, re-weighting, encode/decode and bad input."""

from __future__ import annotations

import textwrap
import warnings

import dimod
import numpy as np
import pytest

import bmfdsl
import bmfdsl.modeling._compile
from bmfdsl import (
    BmfdslError,
    InvalidMatrixError,
    InvalidParameterError,
    ModelDefinitionError,
    UnknownNameError,
    compile_model,
    list_models,
)

A = np.array([[1, 0, 1], [1, 1, 0], [0, 1, 1], [1, 1, 1]])


def test_registered_models_are_listed_with_descriptions():
    infos = {info.name: info for info in list_models()}
    assert {"formulation1", "formulation2", "formulation2-reduced"} <= set(infos)
    assert all(info.description for info in infos.values())


def test_names_are_normalised():
    assert compile_model("Formulation_1".replace("_", ""), A, 1).model_name == "formulation1"
    assert compile_model("FORMULATION2_REDUCED", A, 2).model_name == "formulation2-reduced"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("formulation1", lambda m, n, r: (m + n + m * n) * r),
        ("formulation2", lambda m, n, r: (m + n) * (r + r * r)),
    ],
)
def test_variable_counts_match_the_paper(model, expected):
    for m, n, r in [(4, 3, 2), (30, 38, 5)]:
        data = np.ones((m, n), dtype=int)
        assert compile_model(model, data, r).num_variables == expected(m, n, r)


def _count_declarations(monkeypatch):
    shapes = []
    original = bmfdsl.modeling._compile._declare

    def counting(module, name, data, *args):
        shapes.append(data.shape)
        return original(module, name, data, *args)

    monkeypatch.setattr(bmfdsl.modeling._compile, "_declare", counting)
    return shapes


def test_reweighting_never_rebuilds(monkeypatch):
    shapes = _count_declarations(monkeypatch)
    compiled = compile_model("formulation1", A, 2, one_hot="V")
    offsets = {compiled.to_bqm(lam=lam).offset for lam in (0.5, 1.0, 2.0, 4.0)}
    assert shapes == [A.shape]
    assert len(offsets) == 4  # the one-hot constant λ n changes with the weight


def test_labels_survive_relabelling_in_chunks():
    from bmfdsl.modeling._qubo import RELABEL_CHUNK

    data = (np.random.default_rng(3).random((30, 40)) < 0.5).astype(np.int8)
    compiled = compile_model("formulation1", data, 5)  # 6,350 variables: more than one chunk
    assert compiled.num_variables > RELABEL_CHUNK
    bqm = compiled.to_bqm(lam=1.0)
    assert list(bqm.variables) == compiled.variables
    X = compiled.encode_array(np.eye(30, 5, dtype=np.int8), np.eye(40, 5, dtype=np.int8))
    labelled = dict(zip(compiled.variables, X.tolist(), strict=True))
    assert bqm.energy(labelled) == pytest.approx(float(compiled.qubo.energies(X, {"lam": 1.0})[0]))


def test_large_instances_are_checked_on_sub_instances_and_built_lazily(monkeypatch):
    shapes = _count_declarations(monkeypatch)
    big = (np.random.default_rng(0).random((150, 140)) < 0.3).astype(np.int8)
    compiled = compile_model("formulation1", big, 5)
    assert compiled.structure_check == "sub-instances" and compiled.structure is not None
    assert shapes and all(shape[0] <= 16 and shape[1] <= 16 for shape in shapes)
    best = bmfdsl.solve(compiled, "native", num_reads=1, seed=0)[0]
    assert best.energy == best.error == int(((big - best.U @ best.V.T) ** 2).sum())
    assert compiled.structure_check == "sub-instances"  # the native path built nothing
    assert compiled.num_variables == (150 + 140 + 150 * 140) * 5  # built now: and checked
    assert compiled.structure_check == "instance" and shapes[-1] == big.shape
    small = compile_model("formulation1", A, 2)
    assert small.structure_check == "instance"


COUNTING_MODEL = textwrap.dedent(
    """
    from bmfdsl.modeling import quadratized_residual

    def build(model):  # a script with a side effect: one line per run
        with open(LOG, "a") as log:
            log.write("%d %d\\n" % model.A.shape)
        quadratized_residual(model)
    """
)


def _counting_script(tmp_path):
    """A model script that logs the shape of A at each ``build(model)``, and its log."""
    log = tmp_path / "builds.log"
    path = tmp_path / "counting_model.py"
    path.write_text(f"LOG = {str(log)!r}\n" + COUNTING_MODEL)
    return path, log


def _builds(log, shape):
    """How many times the script ran on an instance of ``shape``, and its other shapes."""
    shapes = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
    return shapes.count(shape), [s for s in shapes if s != shape]


@pytest.mark.parametrize("large", [False, True], ids=["eager", "large-instance"])
def test_the_script_builds_once_per_compile(tmp_path, monkeypatch, large):
    if large:  # every instance past the eager size: sub-instance probes, a lazy full build
        monkeypatch.setattr(bmfdsl.modeling._compile, "EAGER_CELLS", 1)
    data = (np.random.default_rng(5).random((18, 17)) < 0.5).astype(np.int8)
    script, log = _counting_script(tmp_path)
    compiled = compile_model(script, data, 2)
    on_instance, probes = _builds(log, data.shape)
    assert on_instance == (0 if large else 1)  # a large instance builds when first needed
    assert probes == ([(16, 16)] * 2 if large else [])
    assert compiled.structure is not None
    solved = bmfdsl.solve(compiled, "native", num_reads=1, seed=0)  # structured: no BQM
    for lam in (0.5, 1.0, 3.0):
        compiled.to_bqm(lam=lam)
    compiled.to_bqm(lam="sufficient")
    assert compiled.sufficient_weights() == compiled.sufficient_weights()
    twin = compiled.to_pyqubo().compile().to_bqm(feed_dict={"lam": 2.0})
    assert twin.num_variables == compiled.num_variables
    U, V = solved[0].U, solved[0].V
    sample = dimod.SampleSet.from_samples(
        ([compiled.encode_array(U, V)], compiled.variables), dimod.BINARY, energy=[0.0]
    )
    assert compiled.decode(sample, lam=2.0)[0].error == solved[0].error
    assert list(compiled.encode(U, V).values()) == compiled.encode_array(U, V).tolist()
    bmfdsl.solve(compiled, "neal", num_reads=2, seed=1)
    assert _builds(log, data.shape) == (1, probes)  # once for the instance, whatever was asked
    compile_model(script, data, 2).to_bqm(lam=1.0)  # a new compile is a new build
    assert _builds(log, data.shape)[0] == 2


def test_weights_are_checked_and_defaults_filled():
    compiled = compile_model("formulation1", A, 2, one_hot="V")
    assert compiled.resolve_weights(lam=3) == {"lam": 3.0, "lam_onehot": 3.0}
    assert compiled.resolve_weights(lam=3, lam_onehot=0.5) == {"lam": 3.0, "lam_onehot": 0.5}
    with pytest.raises(UnknownNameError, match="lam_onehot") as info:
        compile_model("formulation1", A, 2).to_bqm(lam=1, lam_onehot=2)
    assert "'lam'" in str(info.value)
    assert compiled.resolve_weights() == {"lam": 1.0, "lam_onehot": 1.0}  # the paper's λ
    for bad in (0, -1.0, float("nan"), "1", True):
        with pytest.raises(InvalidParameterError):
            compiled.to_bqm(lam=bad)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (np.ones(3), "2-D"),
        (np.ones((2, 2, 2)), "2-D"),
        (np.zeros((0, 3)), "empty"),
        (np.array([[0, 2], [1, 1]]), "only 0 and 1"),
        (np.array([[0.5, 1.0]]), "only 0 and 1"),
        (np.array([[np.nan, 1.0]]), "NaN"),
        (np.array([[np.inf, 1.0]]), "NaN or infinite"),
        ([[1, 0], [1]], "rectangular"),
        (np.array([["a", "b"]]), "numeric"),
    ],
)
def test_bad_matrices_raise_one_clear_error(data, message):
    with pytest.raises(InvalidMatrixError, match=message) as info:
        compile_model("formulation1", data, 1)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, BmfdslError)


@pytest.mark.parametrize("rank", [0, -1, 4, 2.5, "2", None])
def test_rank_out_of_range(rank):
    with pytest.raises(InvalidParameterError, match="rank"):
        compile_model("formulation1", A, rank)


def test_unknown_model_lists_known_ones():
    with pytest.raises(UnknownNameError, match=r"formulation1.*formulation2") as info:
        compile_model("formulation3", A, 1)
    assert isinstance(info.value, KeyError)


def test_bad_one_hot_option_and_missing_required_weight(tmp_path):
    with pytest.raises(InvalidParameterError, match="one_hot"):
        compile_model("formulation1", A, 1, one_hot="W")
    path = tmp_path / "required.py"
    path.write_text(
        "def build(model):\n    U, V = model.factors()\n"
        "    model.constrain('g', U[0, 0] - U[0, 0] * V[0, 0], weight=model.weight('mu'))\n"
        "    model.minimize(U.sum())\n"
    )
    with pytest.raises(InvalidParameterError, match="missing weight 'mu'"):
        compile_model(path, A, 1).to_bqm()


USER_MODEL = textwrap.dedent(
    '''
    """A user's model: Formulation 1 written from scratch with the DSL."""
    from bmfdsl.modeling import squared_residual

    def build(model):
        A, r = model.A, model.rank
        m, n = A.shape
        U, V = model.factors()
        W = model.binary("W", (r, m, n))
        lam = model.weight("lam", default=2.0)
        for k in range(r):
            for i in range(m):
                for j in range(n):
                    model.constrain_product(W[k][i][j], U[i][k], V[j][k], group="W", weight=lam)
        model.minimize(
            squared_residual(A, [[sum(W[k][i][j] for k in range(r)) for j in range(n)]
                                 for i in range(m)])
        )
        model.one_hot_constraint()
    '''
)


def test_a_user_script_compiles_to_the_registered_bqm(tmp_path):
    path = tmp_path / "my_model.py"
    path.write_text(USER_MODEL)
    compiled = compile_model(str(path), A, 2, one_hot="V")
    reference = compile_model("formulation1", A, 2, one_hot="V")
    # The script's weight has a default, so no weight is required.
    assert compiled.resolve_weights() == {"lam": 2.0, "lam_onehot": 2.0}
    assert compiled.to_bqm().is_almost_equal(reference.to_bqm(lam=2.0))
    assert compiled.structure is None  # it claimed no structure
    assert reference.structure is not None and reference.structure.one_hot == "V"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x = 1\n", "no function build"),
        ("def build(model:\n", "failed to load"),
        ("def build(model):\n    raise RuntimeError('boom')\n", "boom"),
        ("def build(model):\n    model.factors()\n    return 3\n", "return None"),
        ("def build(model):\n    model.binary('X', (2,))\n", "never declared its factors"),
        (
            "def build(model):\n    U, V = model.factors()\n    model.minimize(U[0][0])\n",
            "does not support one_hot",
        ),
        (
            "def build(model):\n    U, V = model.factors()\n"
            "    model.constrain_product(U[0][0] * 2, U[0][0], V[0][0], group='g', weight='w')\n",
            "single binary variables",
        ),
    ],
)
def test_malformed_scripts_are_reported(tmp_path, body, message):
    path = tmp_path / "bad_model.py"
    path.write_text(body)
    with pytest.raises(ModelDefinitionError, match=message) as info:
        compile_model(str(path), A, 1, one_hot="V" if "one_hot" in message else None)
    assert isinstance(info.value, TypeError)


def test_missing_script_file(tmp_path):
    with pytest.raises(ModelDefinitionError, match="does not exist"):
        compile_model(str(tmp_path / "nope.py"), A, 1)


def test_encode_fills_auxiliaries_and_checks_shapes():
    compiled = compile_model("formulation2", A, 2)
    U = np.array([[1, 0], [1, 1], [0, 1], [1, 1]])
    V = np.array([[1, 1], [0, 1], [1, 0]])
    assignment = compiled.encode(U, V)
    assert assignment["UU[1][0][1]"] == 1 and assignment["UU[0][0][1]"] == 0
    assert assignment["VV[0][1][0]"] == 1 and assignment["VV[2][1][1]"] == 0
    with pytest.raises(InvalidMatrixError, match=r"shape \(4, 2\)"):
        compiled.encode(U[:3], V)
    with pytest.raises(InvalidMatrixError, match="only 0 and 1"):
        compiled.encode(U * 2, V)


def test_decode_orders_best_first_and_counts_broken_constraints():
    compiled = compile_model("formulation1", A, 1, one_hot="V")
    bqm = compiled.to_bqm(lam=1.0)
    good = compiled.encode([[1], [1], [1], [1]], [[1], [1], [1]])
    broken = dict(good)
    broken["W[0][0][0]"] = 0  # violates w = u v once
    broken["V[2][0]"] = 0  # one-hot row 2 now empty; also breaks w for that column
    samples = dimod.SampleSet.from_samples_bqm([broken, good], bqm)
    decoded = compiled.decode(samples, lam=1.0)
    assert decoded[0].feasible and decoded[0].error == int((A == 0).sum())
    assert decoded[1].broken["one_hot_V"] == 1
    assert decoded[1].broken["W"] == 1 + int(A.shape[0])  # W[0][0][0] and the column of V[2]
    assert not decoded[1].feasible


def test_decode_handles_label_order_and_spin_samplesets():
    compiled = compile_model("formulation1", A, 2)
    bqm = compiled.to_bqm(lam=1.0)
    U = np.array([[1, 0], [0, 1], [1, 1], [1, 0]])
    V = np.array([[1, 0], [0, 1], [1, 1]])
    assignment = compiled.encode(U, V)
    shuffled = dict(reversed(list(assignment.items())))
    binary = compiled.decode(dimod.SampleSet.from_samples_bqm(shuffled, bqm), lam=1.0)[0]
    spin_bqm = bqm.change_vartype(dimod.SPIN, inplace=False)
    spins = {label: 2 * value - 1 for label, value in assignment.items()}
    spin = compiled.decode(dimod.SampleSet.from_samples_bqm(spins, spin_bqm), lam=1.0)[0]
    for decoded in (binary, spin):
        np.testing.assert_array_equal(decoded.U, U)
        np.testing.assert_array_equal(decoded.V, V)
        assert decoded.error == int(((A - U @ V.T) ** 2).sum()) == decoded.energy


def test_decode_rejects_foreign_samplesets():
    compiled = compile_model("formulation1", A, 1)
    with pytest.raises(InvalidParameterError, match="lacks"):
        compiled.decode(dimod.SampleSet.from_samples({"x": 1}, dimod.BINARY, energy=0.0))


def test_importing_bmfdsl_is_lazy():
    import subprocess
    import sys

    code = (
        "import sys, bmfdsl; "
        "print(sorted(m for m in ('pyqubo', 'openjij', 'neal', 'dwave.system', 'numba') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_model_data_that_the_model_never_reads_is_warned_about():
    """A misspelt key (``kk`` for ``k``) or data for a model that reads none would be
    ignored in silence: the warning names the keys the model asks for. factorize's own mask
    (which a model may leave to the masked ALS) and data read whole are not warned about."""
    A = np.kron(np.eye(2, dtype=np.int8), np.ones((3, 2), dtype=np.int8))
    with pytest.warns(UserWarning, match=r"never read the data \['kk'\].*'k'"):
        bmfdsl.compile_model("at-most-k-bmf", A, 2, data={"kk": 2})
    with pytest.warns(UserWarning, match="asks for no data"):
        bmfdsl.factorize(A, 2, model_data={"k": 2}, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compiled = bmfdsl.compile_model("at-most-k-bmf", A, 3, data={"k": 2})
        mask = np.ones(A.shape, dtype=np.int8)
        assert bmfdsl.factorize(A, 2, model="formulation2", mask=mask, random_state=0).error == 0
    assert compiled.structure.limits("U") == (0, 2)
