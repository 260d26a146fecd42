"""solve() and sweep_weights() on compiled models, checked against brute force."""

from __future__ import annotations

import itertools
import json

import dimod
import numpy as np
import pytest

from bmfdsl import SolveResult, SweepResult, solve, sweep_weights
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.linalg import squared_error
from bmfdsl.modeling import StructuredSampler, compile_model
from bmfdsl.result import DecodedSample

A_SMALL = np.array([[1, 1, 0], [1, 0, 1]], dtype=np.int8)


def brute_force_bmf(A: np.ndarray, rank: int, one_hot: str | None = None) -> int:
    """min ||A - UVᵀ||² over every 0/1 U, V (tiny inputs only)."""
    m, n = A.shape
    best = None
    for u_bits in itertools.product((0, 1), repeat=m * rank):
        U = np.array(u_bits).reshape(m, rank)
        for v_bits in itertools.product((0, 1), repeat=n * rank):
            V = np.array(v_bits).reshape(n, rank)
            if one_hot == "V" and not (V.sum(axis=1) == 1).all():
                continue
            error = squared_error(A, U, V)
            best = error if best is None else min(best, error)
    return int(best)


def brute_force_ground_energy(bqm: dimod.BinaryQuadraticModel) -> float:
    labels = list(bqm.variables)
    states = np.array(list(itertools.product((0, 1), repeat=len(labels))), dtype=np.int8)
    return float(np.min(bqm.energies((states, labels))))


def test_exact_solve_finds_the_brute_force_optimum():
    compiled = compile_model("formulation1", A_SMALL, 1)
    result = solve(compiled, "exact", lam=3.0)
    assert isinstance(result, SolveResult) and isinstance(result[0], DecodedSample)
    best = result[0]
    assert best.feasible
    assert best.error == brute_force_bmf(A_SMALL, 1)
    assert best.error == squared_error(A_SMALL, best.U, best.V)
    assert best.energy == pytest.approx(best.error)
    assert result.info["backend"] == "exact"
    assert result.info["weights"] == {"lam": 3.0}
    assert result.info["timings"]["solve"] >= 0
    assert result.info["backend_info"]["timings"]["total"] >= 0


def test_weights_and_parameters_are_split_by_the_model_weight_names():
    compiled = compile_model("formulation1", A_SMALL, 1)
    result = solve(compiled, "neal", lam=2.5, num_reads=3, seed=4, num_sweeps=200)
    assert result.info["weights"] == {"lam": 2.5}
    assert sum(s.num_occurrences for s in result) == 3
    again = solve(compiled, "neal", lam=2.5, num_reads=3, seed=4, num_sweeps=200)
    assert [(s.U.tolist(), s.V.tolist()) for s in result] == [
        (s.U.tolist(), s.V.tolist()) for s in again
    ]


def test_unknown_backend_parameter_is_refused():
    compiled = compile_model("formulation1", A_SMALL, 1)
    with pytest.raises(UnknownNameError, match="num_sweeps"):
        solve(compiled, "neal", lam=2.0, num_sweps=10)


@pytest.mark.parametrize("backend", ["neal", "exact", "native"])
def test_a_weight_typo_names_the_model_weights(backend):
    compiled = compile_model("formulation1", A_SMALL, 1, one_hot="V")
    with pytest.raises(UnknownNameError) as caught:
        solve(compiled, backend, lamm=2.0)
    message = str(caught.value)
    assert "unknown keyword 'lamm'" in message
    assert "declares the weights ['lam', 'lam_onehot'] (did you mean 'lam'?)" in message
    assert f"backend {backend!r} takes the parameters" in message
    with pytest.raises(UnknownNameError, match="declares the weights"):
        sweep_weights(compiled, "exact", lam=[1.0], lam_onehott=2.0)


def test_a_missing_required_weight_is_reported(tmp_path):
    path = tmp_path / "required.py"
    path.write_text(
        "from bmfdsl.modeling import squared_residual\n"
        "def build(model):\n    U, V = model.factors()\n    W = model.binary('W', U.shape)\n"
        "    model.constrain_product(W, U, V[:1], group='W', weight=model.weight('mu'))\n"
        "    model.minimize(W.sum())\n"
    )
    compiled = compile_model(path, A_SMALL, 1)
    with pytest.raises(InvalidParameterError, match="mu"):
        solve(compiled, "neal", num_reads=1)
    assert solve(compiled, "exact", mu=2.0)[0].feasible


def test_a_warm_start_from_encode_comes_back_decoded():
    compiled = compile_model("formulation1", A_SMALL, 2)
    U = np.array([[1, 0], [0, 1]])
    V = np.array([[1, 1], [1, 0], [0, 1]])
    start = compiled.encode(U, V)
    result = solve(compiled, "neal", lam=2.0, initial_states=start, num_sweeps=0)
    assert result[0].U.tolist() == U.tolist() and result[0].V.tolist() == V.tolist()
    assert result[0].error == squared_error(A_SMALL, U, V) == 0


def test_a_sampler_instance_can_be_passed():
    from bmfdsl.backends.exact import ExactBackend

    compiled = compile_model("formulation1", A_SMALL, 1)
    result = solve(compiled, ExactBackend(), lam=3.0)
    assert result[0].error == brute_force_bmf(A_SMALL, 1)
    assert result.info["backend"] == "exact"


class StructureSolver(StructuredSampler):
    """A structure-aware fake: records what it was given, answers U = V = 1."""

    name = "fake"
    parameters: dict = {"seed": []}  # noqa: RUF012

    def __init__(self):
        self.seen = []

    def sample_bmf(self, structure, **params):
        self.seen.append((structure, params))
        m, n = structure.shape
        U = np.ones((m, structure.rank), dtype=np.int8)
        V = np.ones((n, structure.rank), dtype=np.int8)
        return structure.sampleset([(U, V)], certificate="none")


def test_structure_aware_backends_get_the_structure_not_a_bqm():
    compiled = compile_model("formulation1", A_SMALL, 1)
    solver = StructureSolver()
    result = solve(compiled, solver, lam=2.0, seed=7)
    ((structure, params),) = solver.seen
    assert structure is compiled.structure and params == {"seed": 7}
    assert result.info["backend_info"] == {"certificate": "none"}
    assert result[0].error == squared_error(A_SMALL, np.ones((2, 1)), np.ones((3, 1)))
    # the energy is the BQM's, recomputed on the feasible completion
    bqm = compiled.to_bqm(lam=2.0)
    assert result[0].energy == bqm.energy(compiled.encode(result[0].U, result[0].V))
    with pytest.raises(UnknownNameError, match="num_reads"):
        solve(compiled, solver, num_reads=3)


class OneHotRecorder(dimod.Sampler):
    """Records the one_hot_groups it is given and answers with ExactSolver's best state."""

    parameters: dict = {"one_hot_groups": []}  # noqa: RUF012
    properties: dict = {}  # noqa: RUF012

    def __init__(self):
        self.groups = None

    def sample(self, bqm, one_hot_groups=None):
        self.groups = one_hot_groups
        return dimod.ExactSolver().sample(bqm).truncate(1)


def test_native_one_hot_passes_the_v_rows_as_groups():
    A = np.array([[1, 0], [0, 1]], dtype=np.int8)
    compiled = compile_model("formulation1", A, 2, one_hot="V")
    recorder = OneHotRecorder()
    result = solve(compiled, recorder, lam=3.0, native_one_hot=True)
    expected = sorted(sorted(f"V[{j}][{k}]" for k in range(2)) for j in range(2))
    assert sorted(sorted(group) for group in recorder.groups) == expected
    assert result[0].error == brute_force_bmf(A, 2, one_hot="V") == 0


def test_native_one_hot_needs_a_backend_that_takes_groups():
    compiled = compile_model("formulation1", A_SMALL, 1, one_hot="V")
    with pytest.raises(InvalidParameterError, match="one_hot_groups"):
        solve(compiled, "neal", lam=2.0, native_one_hot=True)


def test_sweep_reports_each_setting_against_brute_force():
    compiled = compile_model("formulation1", A_SMALL, 1)
    lams = [0.1, 0.5, 3.0]
    result = sweep_weights(compiled, "exact", lam=lams)
    assert isinstance(result, SweepResult)
    assert [s.weights["lam"] for s in result.settings] == lams
    optimum = brute_force_bmf(A_SMALL, 1)
    for setting in result.settings:
        ground = brute_force_ground_energy(compiled.to_bqm(**setting.weights))
        assert setting.energy == pytest.approx(ground)
        assert setting.best_feasible_error == optimum  # exact returns every state
        assert setting.feasible == (not any(setting.broken.values()))
        assert setting.timings["solve"] >= 0
    # a tiny penalty lets the ground state break the product constraints
    assert not result.settings[0].feasible
    assert result.settings[-1].feasible and result.settings[-1].error == optimum
    assert result.best is not None and result.best.error == optimum
    assert result.best.weights["lam"] in (0.5, 3.0)
    encoded = json.loads(json.dumps(result.to_dict()))
    assert encoded["best"]["error"] == optimum
    assert len(encoded["settings"]) == 3


def test_sweep_over_lam_and_lam_onehot_is_a_grid():
    A = np.array([[1, 0], [0, 1]], dtype=np.int8)
    compiled = compile_model("formulation1", A, 2, one_hot="V")
    result = sweep_weights(compiled, "neal", lam=[1.0, 2.0], lam_onehot=[0.5, 4.0], seed=1)
    pairs = [(s.weights["lam"], s.weights["lam_onehot"]) for s in result.settings]
    assert pairs == [(1.0, 0.5), (1.0, 4.0), (2.0, 0.5), (2.0, 4.0)]
    default = sweep_weights(compiled, "neal", lam=[2.0], seed=1)
    assert default.settings[0].weights == {"lam": 2.0, "lam_onehot": 2.0}


def test_best_is_none_when_no_setting_is_feasible():
    compiled = compile_model("formulation1", A_SMALL, 1)
    result = sweep_weights(compiled, "exact", lam=[0.05])
    assert not result.settings[0].feasible
    assert result.best is None and result.to_dict()["best"] is None


@pytest.mark.parametrize("lam", [[], [0.0], [-1.0], [float("nan")], ["big"]])
def test_bad_sweep_values_are_refused(lam):
    compiled = compile_model("formulation1", A_SMALL, 1)
    with pytest.raises(InvalidParameterError):
        sweep_weights(compiled, "exact", lam=lam)


def test_wrong_objects_and_weight_values_get_typed_errors():
    compiled = compile_model("formulation1", A_SMALL, 1)
    for call in (lambda: solve(None, "exact"), lambda: sweep_weights(None, "exact", lam=[1.0])):
        with pytest.raises(InvalidParameterError, match="compile_model"):
            call()
    with pytest.raises(InvalidParameterError, match="lam must be a positive number"):
        sweep_weights(compiled, "exact", lam=None)
    with pytest.raises(InvalidParameterError, match="backend must be a registered name"):
        solve(compiled, 42)
    result = sweep_weights(compiled, "exact", lam=np.int64(2))  # numpy numbers are numbers
    assert [s.weights["lam"] for s in result.settings] == [2.0]
