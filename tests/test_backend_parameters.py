"""Every built-in BQM backend: ``parameters`` and their descriptions come from one signature,
and warm starts are read by dimod's own ``Initialized`` with bmfdsl's errors."""

from __future__ import annotations

import inspect
import re

import dimod
import numpy as np
import pytest

from bmfdsl.backends._common import BackendSampler, Initialized, keyword_defaults
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.modeling import StructuredSampler
from bmfdsl.solvers import get_backend, list_backends
from bmfdsl.testing import small_bqm

# constructor options that let a cloud backend be built offline (it is never asked to sample)
OFFLINE = {
    "dwave-qpu": lambda: {"child": _mock_dwave()},
    "dwave-hybrid": lambda: {"child": _mock_dwave()},
    "fujitsu-da": lambda: {"url": "http://127.0.0.1:1", "api_key": "offline-test-key-7f3a"},
}
BUILTINS = [info.name for info in list_backends() if info.target.startswith("bmfdsl.backends.")]


def _mock_dwave():
    from dwave.system.testing import MockDWaveSampler

    return MockDWaveSampler()


@pytest.fixture(params=BUILTINS)
def sampler(request):
    info = {b.name: b for b in list_backends()}[request.param]
    if not info.available:
        pytest.skip(f"{request.param}: {info.reason}")
    return get_backend(request.param, **OFFLINE.get(request.param, dict)())


def test_every_builtin_is_a_backend_sampler_or_a_structured_one(sampler):
    assert isinstance(sampler, BackendSampler | StructuredSampler), sampler


def test_parameters_are_the_keyword_only_parameters_of_the_signature(sampler):
    if isinstance(sampler, StructuredSampler):
        function, positional = sampler.sample_bmf, ["structure"]
    else:
        function, positional = sampler._sample, ["bqm"]
    signature = inspect.signature(function).parameters.values()
    # nothing hidden behind **kwargs or extra positionals: the signature is the whole truth
    assert [p.name for p in signature if p.kind is not p.KEYWORD_ONLY] == positional
    assert list(sampler.parameters) == [p.name for p in signature if p.kind is p.KEYWORD_ONLY]


def test_descriptions_cover_exactly_the_parameters(sampler):
    described = sampler.properties["parameter_descriptions"]
    assert set(described) == set(sampler.parameters)
    assert all(isinstance(text, str) and text for text in described.values())
    if isinstance(sampler, BackendSampler):
        assert set(type(sampler).descriptions) == set(sampler.parameters)


def test_a_default_is_written_once_in_the_signature(sampler):
    if not isinstance(sampler, BackendSampler):
        pytest.skip("a structured sampler describes its settings itself")
    raw = type(sampler).descriptions
    published = sampler.properties["parameter_descriptions"]
    for name, default in keyword_defaults(sampler._sample).items():
        # prose never restates a default: the signature's is appended to it
        assert "default" not in raw[name].lower(), (name, raw[name])
        if default is None:
            assert published[name] == raw[name]
        else:
            assert published[name] == f"{raw[name]} (default: {default!r})"


def test_an_unknown_keyword_lists_the_known_ones(sampler):
    if isinstance(sampler, StructuredSampler):
        pytest.skip("see test_native")
    with pytest.raises(UnknownNameError) as caught:
        sampler.sample(small_bqm(), num_sweps=10)
    assert caught.value.known == sorted(sampler.parameters)
    for name in sampler.parameters:
        assert repr(name) in str(caught.value)


def test_none_is_the_signature_default():
    sampler = get_backend("da")
    default = keyword_defaults(sampler._sample)["num_reads"]
    sampleset = sampler.sample(small_bqm(), num_reads=None, seed=1, num_sweeps=20)
    assert len(sampleset) == default == sampleset.info["work"]["reads"]
    assert sampler.properties["device"] == keyword_defaults(sampler._sample)["device"]


# --- warm starts through dimod's Initialized -------------------------------------------------

WARM = ["neal", "tabu", "steepest", "openjij-sa", "openjij-sqa", "da", "cpsat"]


@pytest.fixture(params=WARM)
def warm_sampler(request):
    info = {b.name: b for b in list_backends()}[request.param]
    if not info.available:
        pytest.skip(f"{request.param}: {info.reason}")
    return get_backend(request.param)


def test_warm_start_backends_are_dimod_initialized(warm_sampler):
    assert isinstance(warm_sampler, dimod.Initialized)
    assert "initial_states" in warm_sampler.parameters


LABELS = list(small_bqm().variables)


@pytest.mark.parametrize(
    ("states", "message"),
    [
        ({"a": 0}, "every variable of the model exactly; missing e.g. ["),
        ({**dict.fromkeys(LABELS, 0), "z": 0}, "unknown e.g. ['z']"),
        (dict.fromkeys(LABELS, 2), "values must be all 0/1 or all -1/+1"),
        ([[0, 1], [1]], "not readable as samples"),
    ],
)
def test_unusable_warm_starts_are_bmfdsl_errors(warm_sampler, states, message):
    with pytest.raises(InvalidParameterError, match=re.escape(message)):
        warm_sampler.sample(small_bqm(), initial_states=states)


def test_given_states_follow_the_model_order_and_vartype():
    bqm = dimod.BinaryQuadraticModel({"a": 1, "b": 1, "c": 1}, {}, 0, "BINARY")
    parse = Initialized().given_states
    assert parse(bqm, [{"c": 1, "b": 0, "a": 1}]).tolist() == [[1, 0, 1]]
    # dimod's rule: ±1 states are converted to a BINARY model's 0/1 (and back)
    assert parse(bqm, {"a": -1, "b": 1, "c": -1}).tolist() == [[0, 1, 0]]
    spin = bqm.change_vartype("SPIN", inplace=False)
    assert parse(spin, (np.array([[0, 1, 1]]), "abc")).tolist() == [[-1, 1, 1]]
    assert parse(bqm, [dict.fromkeys("abc", 1)] * 3).dtype == np.int8
    with pytest.raises(InvalidParameterError, match="holds no state"):
        parse(bqm, (np.empty((0, 3), dtype=np.int8), "abc"))
