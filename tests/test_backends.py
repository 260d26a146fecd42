"""The conformance kit applied to every local backend, and tests of the kit itself."""

from __future__ import annotations

import importlib.util
import time
import unittest

import dimod
import numpy as np
import pytest

from bmfdsl.errors import InvalidParameterError, ModelTooLargeError, UnknownNameError
from bmfdsl.solvers import get_backend
from bmfdsl.testing import (
    ConformanceError,
    check_decode,
    check_parameters_honest,
    check_seed_reproducible,
    check_time_limit,
    check_timing_info,
    check_warm_start,
    dimod_test_case,
    small_bqm,
    two_minima_chain,
)

# name -> (example value per parameter, companions, freeze_params, fast sample params)
CASES = {
    "exact": ({}, {}, None, {}),
    "neal": (
        {
            "num_reads": 3,
            "seed": 5,
            "time_limit": 0.05,
            "initial_states": None,
            "initial_states_generator": "random",
            "num_sweeps": 20,
            "num_sweeps_per_beta": 2,
            "beta_range": [0.1, 4.0],
            "beta_schedule_type": "linear",
            "beta_schedule": [0.1, 1.0, 3.0],
            "randomize_order": True,
            "proposal_acceptance_criteria": "Gibbs",
        },
        {"beta_schedule": {"beta_schedule_type": "custom"}},
        {"num_sweeps": 0},
        {"num_reads": 4, "num_sweeps": 100},
    ),
    "tabu": (
        {
            "num_reads": 2,
            "seed": 5,
            "time_limit": 0.02,
            "initial_states": None,
            "initial_states_generator": "random",
            "tenure": 1,
            "num_restarts": 3,
            "energy_threshold": -100.0,
        },
        {},
        None,
        {"num_reads": 2, "time_limit": 0.02},
    ),
    "steepest": (
        {
            "num_reads": 3,
            "seed": 5,
            "initial_states": None,
            "initial_states_generator": "random",
            "large_sparse_opt": True,
        },
        {},
        {"num_reads": 1},
        {"num_reads": 4},
    ),
    "openjij-sa": (
        {
            "num_reads": 2,
            "seed": 5,
            "time_limit": 0.05,
            "initial_states": None,
            "num_sweeps": 20,
            "beta_min": 0.1,
            "beta_max": 5.0,
        },
        {},
        {"beta_min": 1000.0, "beta_max": 1000.0, "num_sweeps": 5},
        {"num_reads": 4, "num_sweeps": 100},
    ),
    "openjij-sqa": (
        {
            "num_reads": 2,
            "seed": 5,
            "time_limit": 0.05,
            "initial_states": None,
            "num_sweeps": 20,
            "beta": 5.0,
            "gamma": 1.0,
            "trotter": 2,
        },
        {},
        {"beta": 1000.0, "gamma": 1e-6, "num_sweeps": 5},
        {"num_reads": 4, "num_sweeps": 100},
    ),
}
OPTIONAL = {"da": "bmfdsl.backends.da"}  # native is a StructuredSampler: see test_native
# example values for the common parameters of the optional numba backends
COMMON_EXAMPLES = {
    "num_reads": 2,
    "seed": 5,
    "time_limit": 0.05,
    "initial_states": None,
    "num_sweeps": 20,
    "temperature_range": (5.0, 0.1),
    "temperature_interval": 2,
    "offset_increase": 0.1,
    "mode": "replica-exchange",
    "num_replicas": 2,
    "swap_interval": 5,
    "device": "numpy",
}


def _optional_missing(name: str) -> str:
    if importlib.util.find_spec(OPTIONAL[name]) is None:
        return f"{OPTIONAL[name]} is not written yet"
    return ""


# dimod's 32 small-BQM tests for each backend, collected by pytest as unittest classes
for _name in [*CASES, *OPTIONAL]:
    if _name in OPTIONAL and _optional_missing(_name):
        _case = unittest.skip(_optional_missing(_name))(type("Skipped", (unittest.TestCase,), {}))
        _case.test_dimod_conformance = lambda self: None  # a visible, skipped test
    else:
        _case = dimod_test_case(lambda _name=_name: get_backend(_name))
    globals()[f"TestDimodConformance_{_name.replace('-', '_')}"] = _case
del _name, _case


@pytest.fixture(params=[*CASES, *OPTIONAL])
def backend_case(request):
    name = request.param
    if name in OPTIONAL:
        if _optional_missing(name):
            pytest.skip(_optional_missing(name))
        sampler = get_backend(name)
        unknown = sorted(set(sampler.parameters) - set(COMMON_EXAMPLES))
        examples = {k: v for k, v in COMMON_EXAMPLES.items() if k in sampler.parameters}
        # cold, with a negligible escape offset: a local minimum cannot be left
        freeze = {"temperature_range": (1e-3, 1e-3), "offset_increase": 1e-9, "num_sweeps": 5}
        freeze = {k: v for k, v in freeze.items() if k in sampler.parameters} or None
        return name, sampler, (examples, {}, freeze, {"num_sweeps": 50}), unknown
    return name, get_backend(name), CASES[name], []


def test_parameters_are_honest(backend_case):
    name, sampler, (examples, companions, _, _), unknown = backend_case
    for parameter, value in examples.items():
        sampleset = sampler.sample(
            small_bqm(), **{parameter: value}, **companions.get(parameter, {})
        )
        assert isinstance(sampleset, dimod.SampleSet)
    if unknown:
        pytest.skip(f"{name}: no example values for {unknown}; unknown-name check only")
    check_parameters_honest(
        _CompanionSampler(sampler, companions) if companions else sampler, examples
    )


def test_unknown_parameter_is_an_unknown_name_error_listing_valid_ones(backend_case):
    name, sampler, *_ = backend_case
    with pytest.raises(UnknownNameError) as caught:
        sampler.sample(small_bqm(), num_sweps=10)
    for parameter in sampler.parameters:
        assert repr(parameter) in str(caught.value), (name, parameter)


def test_same_seed_same_samples(backend_case):
    name, sampler, (_, _, _, params), _ = backend_case
    if "seed" not in sampler.parameters:
        pytest.skip(f"{name} takes no seed")
    check_seed_reproducible(sampler, **params)


def test_warm_starts_are_honoured(backend_case):
    name, sampler, (_, _, freeze, params), _ = backend_case
    if "initial_states" not in sampler.parameters:
        pytest.skip(f"{name} takes no initial_states")
    check_warm_start(sampler, freeze, **params)


def test_timing_in_info(backend_case):
    check_timing_info(backend_case[1])


def test_decode_of_a_compiled_model(backend_case):
    _, sampler, (_, _, _, params), _ = backend_case
    check_decode(sampler, **params)


def test_time_limit_returns_in_time(backend_case):
    name, sampler, (_, _, _, params), _ = backend_case
    if "time_limit" not in sampler.parameters:
        pytest.skip(f"{name} takes no time_limit")
    params = {k: v for k, v in params.items() if k != "time_limit"}
    check_time_limit(sampler, time_limit=0.2, slack=1.5, **params)


class _CompanionSampler(dimod.Sampler):
    """Adds the parameters some examples need alongside (e.g. a custom beta schedule)."""

    def __init__(self, inner, companions):
        self.inner, self.companions = inner, companions

    @property
    def parameters(self):
        return self.inner.parameters

    @property
    def properties(self):
        return self.inner.properties

    def sample(self, bqm, **params):
        for name in list(params):
            for key, value in self.companions.get(name, {}).items():
                params.setdefault(key, value)
        return self.inner.sample(bqm, **params)


# --- behaviour the kit does not cover -----------------------------------------------------


@pytest.mark.parametrize("name", ["neal", "openjij-sa", "openjij-sqa"])
def test_time_limit_keeps_sampling_until_spent(name):
    sampler = get_backend(name)
    start = time.perf_counter()
    sampleset = sampler.sample(small_bqm(), time_limit=0.3, num_reads=2, num_sweeps=50, seed=1)
    elapsed = time.perf_counter() - start
    mean_round = elapsed / sampleset.info["num_rounds"]
    # it stops only when the next round would not fit in the time left
    assert 0.3 - mean_round <= elapsed <= 0.3 + 1.0
    assert len(sampleset) == 2  # the best num_reads of all rounds
    assert sampleset.info["total_reads"] > 2 and sampleset.info["num_rounds"] >= 2
    ground = dimod.ExactSolver().sample(small_bqm()).first.energy
    assert sampleset.first.energy == pytest.approx(ground)


@pytest.mark.parametrize(
    ("options", "sweeps"),
    [
        ({}, 1000),
        ({"num_sweeps": 40, "num_sweeps_per_beta": 4}, 40),
        ({"beta_schedule_type": "custom", "beta_schedule": [0.1, 1.0, 3.0]}, 3),
        (
            {"beta_schedule_type": "custom", "beta_schedule": [0.1, 3.0], "num_sweeps_per_beta": 5},
            10,
        ),
    ],
)
def test_neal_reports_the_sweeps_it_ran(options, sweeps):
    sampleset = get_backend("neal").sample(small_bqm(), num_reads=1, seed=3, **options)
    assert sampleset.info["num_sweeps"] == sweeps


def test_exact_refuses_more_than_twenty_variables():
    bqm = dimod.BinaryQuadraticModel({i: 1.0 for i in range(21)}, {}, 0.0, "BINARY")
    with pytest.raises(InvalidParameterError, match="21 > 20"):
        get_backend("exact").sample(bqm)


def test_exact_returns_every_state_lowest_first():
    bqm = small_bqm("SPIN")
    sampleset = get_backend("exact").sample(bqm)
    assert len(sampleset) == 2**6
    energies = sampleset.record.energy
    assert np.all(np.diff(energies) >= 0)
    brute = min(
        bqm.energy(dict(zip(bqm.variables, [(s >> i & 1) * 2 - 1 for i in range(6)], strict=True)))
        for s in range(64)
    )
    assert energies[0] == pytest.approx(brute)


@pytest.mark.parametrize("name", ["openjij-sa", "openjij-sqa"])
def test_openjij_keeps_original_labels_and_recomputes_energies(name):
    bqm = small_bqm("SPIN")
    sampleset = get_backend(name).sample(bqm, num_reads=3, seed=2, num_sweeps=50)
    assert set(sampleset.variables) == set(bqm.variables)
    for sample, energy in sampleset.data(["sample", "energy"]):
        assert energy == pytest.approx(bqm.energy(sample))


@pytest.mark.parametrize("name", ["openjij-sa", "neal", "steepest"])
def test_several_warm_starts_are_all_used(name):
    bqm = two_minima_chain()
    zeros = dict.fromkeys(bqm.variables, 0)
    ones = dict.fromkeys(bqm.variables, 1)
    settings = {**CASES[name][2], "num_reads": 2}
    sampleset = get_backend(name).sample(bqm, initial_states=[zeros, ones], **settings)
    rows = {tuple(sample[v] for v in bqm.variables) for sample in sampleset.samples()}
    assert rows == {(0,) * len(zeros), (1,) * len(ones)}


def test_initial_states_must_cover_every_variable():
    with pytest.raises(InvalidParameterError, match="every variable"):
        get_backend("openjij-sa").sample(small_bqm(), initial_states={"a": 0})


@pytest.mark.parametrize(
    ("parameter", "value"), [("num_reads", 0), ("seed", -1), ("time_limit", 0.0)]
)
def test_bad_common_values_are_refused(parameter, value):
    with pytest.raises(InvalidParameterError, match=parameter):
        get_backend("openjij-sa").sample(small_bqm(), **{parameter: value})


# --- the kit catches broken backends ------------------------------------------------------


class _Sloppy(dimod.Sampler):
    """Breaks the rules in configurable ways."""

    def __init__(self, lists_extra=False, accepts_anything=False, ignores_seed=False):
        self.lists_extra = lists_extra
        self.accepts_anything = accepts_anything
        self.ignores_seed = ignores_seed
        self.calls = 0

    @property
    def parameters(self):
        names = {"seed": [], "initial_states": []}
        if self.lists_extra:
            names["num_sweeps"] = []
        return names

    @property
    def properties(self):
        return {}

    def sample(self, bqm, seed=None, initial_states=None, **extra):
        if extra and not self.accepts_anything:
            raise TypeError(f"unknown {sorted(extra)}; valid: seed, initial_states")
        self.calls += 1
        rng = np.random.default_rng(self.calls if self.ignores_seed or seed is None else seed)
        values = [0, 1] if bqm.vartype is dimod.BINARY else [-1, 1]
        sample = {
            v: values[int(x)]
            for v, x in zip(bqm.variables, rng.integers(2, size=len(bqm.variables)), strict=True)
        }
        return dimod.SampleSet.from_samples_bqm(sample, bqm)


def test_kit_flags_a_listed_parameter_that_is_refused():
    with pytest.raises(ConformanceError, match="num_sweeps"):
        check_parameters_honest(
            _Sloppy(lists_extra=True), {"seed": 1, "initial_states": None, "num_sweeps": 3}
        )


def test_kit_flags_an_unknown_parameter_that_is_accepted():
    with pytest.raises(ConformanceError, match="silently accepted"):
        check_parameters_honest(_Sloppy(accepts_anything=True), {"seed": 1, "initial_states": None})


def test_kit_flags_missing_example_values():
    with pytest.raises(ConformanceError, match="example value"):
        check_parameters_honest(_Sloppy(), {"seed": 1})


def test_kit_flags_irreproducible_seeds():
    check_seed_reproducible(_Sloppy())  # honest seeds pass
    with pytest.raises(ConformanceError, match="same seed"):
        check_seed_reproducible(_Sloppy(ignores_seed=True), bqm=two_minima_chain(12))


def test_kit_flags_ignored_warm_starts():
    with pytest.raises(ConformanceError, match=r"warm start|worse than"):
        check_warm_start(_Sloppy(), freeze_params={"seed": 3})


def test_kit_flags_missing_timing():
    with pytest.raises(ConformanceError, match="timing"):
        check_timing_info(_Sloppy())


def test_tabu_refuses_a_model_whose_dense_copy_passes_the_limit():
    """TabuSampler copies a model into a dense N x N matrix: 17,000 variables would take
    2.2 GiB, refused up front with what to do instead, not numpy's allocation error."""
    bqm = dimod.BinaryQuadraticModel({v: 1.0 for v in range(17_000)}, {}, 0.0, "BINARY")
    with pytest.raises(ModelTooLargeError, match="sample_rows"):
        get_backend("tabu").sample(bqm, num_reads=1)
    small = dimod.BinaryQuadraticModel({v: 1.0 for v in range(50)}, {}, 0.0, "BINARY")
    assert get_backend("tabu").sample(small, num_reads=1, seed=0).first.energy == 0.0
    tight = type(get_backend("tabu"))(max_dense_bytes=8 * 49**2)  # the limit is the caller's
    assert tight.properties["max_dense_bytes"] == 8 * 49**2
    with pytest.raises(ModelTooLargeError, match="max_dense_bytes"):
        tight.sample(small, num_reads=1)
