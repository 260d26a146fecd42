"""``dwave-qpu`` through MockDWaveSampler, ``dwave-hybrid`` through a LeapHybridSampler fake."""

from __future__ import annotations

import os
import socket
import warnings

import dimod
import pytest
from dwave.system import LeapHybridSampler
from dwave.system.testing import MockDWaveSampler

from bmfdsl.backends.dwave import DWaveHybridBackend, DWaveQPUBackend
from bmfdsl.errors import (
    InvalidCredentialsError,
    MissingCredentialsError,
    SolverError,
    UnknownNameError,
)
from bmfdsl.solvers import get_backend
from bmfdsl.testing import (
    check_decode,
    check_parameters_honest,
    check_timing_info,
    dimod_test_case,
    small_bqm,
)

SECRET = "DEV-0123456789abcdef-not-a-real-token"


@pytest.fixture
def no_ocean_credentials(monkeypatch, tmp_path):
    """No token anywhere: neither in the environment nor in an Ocean config file."""
    empty = tmp_path / "dwave.conf"
    empty.write_text("")
    monkeypatch.setenv("DWAVE_CONFIG_FILE", str(empty))
    for name in list(os.environ):
        if name.startswith("DWAVE_API_TOKEN") or name == "DWAVE_API_TOKEN":
            monkeypatch.delenv(name)


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the network was touched")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def qpu() -> DWaveQPUBackend:
    return DWaveQPUBackend(child=MockDWaveSampler())


TestDimodConformanceQPU = dimod_test_case(qpu)


class FakeLeapHybridSampler(dimod.Sampler):
    """LeapHybridSampler's interface offline: its properties, min_time_limit and refusals."""

    # the real implementation, applied to our properties
    min_time_limit = LeapHybridSampler.min_time_limit

    def __init__(self):
        self.calls = []

    @property
    def properties(self):
        return {
            "category": "hybrid",
            "supported_problem_types": ["bqm"],
            "minimum_time_limit": [[1, 3.0], [1024, 3.0], [4096, 5.0], [10000, 10.0]],
            "maximum_time_limit_hrs": 24.0,
            "maximum_number_of_variables": 1000000,
            "parameters": {"time_limit": "", "label": ""},
        }

    @property
    def parameters(self):
        return {"time_limit": ["parameters"], "label": []}

    def sample(self, bqm, time_limit=None, label=None):
        minimum = self.min_time_limit(bqm)
        if time_limit is not None and time_limit < minimum:
            raise ValueError(f"time limit must be at least {minimum}")
        self.calls.append({"time_limit": time_limit, "label": label})
        if bqm.num_variables <= 12:
            best = dimod.ExactSolver().sample(bqm).truncate(1)
        else:  # too big to enumerate: any state will do here
            best = dimod.SampleSet.from_samples_bqm(dict.fromkeys(bqm.variables, 0), bqm)
        best.info.update(run_time=1000, charge_time=1000, qpu_access_time=0)
        return best


def hybrid() -> DWaveHybridBackend:
    return DWaveHybridBackend(child=FakeLeapHybridSampler())


TestDimodConformanceHybrid = dimod_test_case(hybrid)


# --- dwave-qpu ----------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*not mocked in MockDWaveSampler")
def test_qpu_parameters_are_honest():
    examples = {
        "num_reads": 5,
        "embedding_seed": 3,
        "chain_strength": 2.0,
        "annealing_time": 20.0,
        "auto_scale": True,
        "label": "bmfdsl test",
        "return_embedding": True,
    }
    check_parameters_honest(qpu(), examples)


def test_qpu_returns_num_reads_samples_with_exact_energies_and_timing():
    bqm = small_bqm()
    sampleset = qpu().sample(bqm, num_reads=7, embedding_seed=1, return_embedding=True)
    assert sum(sampleset.record.num_occurrences) == 7
    for sample, energy in sampleset.data(["sample", "energy"]):
        assert energy == pytest.approx(bqm.energy(sample))
    assert "embedding_context" in sampleset.info
    check_timing_info(qpu())


def test_qpu_decodes_a_compiled_model():
    check_decode(qpu(), num_reads=10, embedding_seed=2)


def test_qpu_takes_no_seed_because_it_cannot_honour_one():
    with pytest.raises(UnknownNameError, match="embedding_seed"):
        qpu().sample(small_bqm(), seed=1)


def test_qpu_without_token_names_the_variable(no_ocean_credentials, no_network):
    with pytest.raises(MissingCredentialsError, match="DWAVE_API_TOKEN"):
        get_backend("dwave-qpu")
    with pytest.raises(MissingCredentialsError, match="DWAVE_API_TOKEN"):
        get_backend("dwave-hybrid")


def test_constructing_with_a_token_touches_no_network(
    no_ocean_credentials, no_network, monkeypatch
):
    monkeypatch.setenv("DWAVE_API_TOKEN", SECRET)
    for name in ("dwave-qpu", "dwave-hybrid"):
        backend = get_backend(name)
        assert SECRET not in repr(backend)
        assert SECRET not in str(backend.properties)


def test_tokens_never_show(no_network):
    for backend in (DWaveQPUBackend(token=SECRET), DWaveHybridBackend(token=SECRET)):
        assert SECRET not in repr(backend)
        assert SECRET not in str(backend.properties) + str(backend.parameters)


def test_explicit_token_is_passed_to_ocean(monkeypatch):
    seen = {}

    def fake_dwave_sampler(**options):
        seen.update(options)
        return MockDWaveSampler()

    import dwave.system

    monkeypatch.setattr(dwave.system, "DWaveSampler", fake_dwave_sampler)
    backend = DWaveQPUBackend(token=SECRET, solver="Advantage_system4.1")
    backend.sample(small_bqm(), num_reads=2)
    assert seen == {"token": SECRET, "solver": "Advantage_system4.1"}


# --- dwave-hybrid -------------------------------------------------------------------------


def test_hybrid_uses_the_minimum_time_limit_by_default():
    fake = FakeLeapHybridSampler()
    sampleset = DWaveHybridBackend(child=fake).sample(small_bqm())
    assert fake.calls == [{"time_limit": 3.0, "label": None}]
    assert sampleset.info["time_limit_s"] == 3.0
    assert sampleset.info["minimum_time_limit_s"] == 3.0


def test_hybrid_raises_a_too_short_time_limit_to_the_minimum_with_a_warning():
    fake = FakeLeapHybridSampler()
    big = dimod.BinaryQuadraticModel({i: 1.0 for i in range(2560)}, {}, 0.0, "BINARY")
    expected = 3.0 + (2560 - 1024) / (4096 - 1024) * 2.0  # piecewise linear: 4.0 s
    backend = DWaveHybridBackend(child=fake)
    with pytest.warns(UserWarning, match="below the hybrid solver's minimum"):
        sampleset = backend.sample(big, time_limit=1.0, label="sweep")
    assert fake.calls[-1] == {"time_limit": pytest.approx(expected), "label": "sweep"}
    assert sampleset.info["time_limit_s"] == pytest.approx(expected)


def test_hybrid_keeps_a_long_enough_time_limit():
    fake = FakeLeapHybridSampler()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DWaveHybridBackend(child=fake).sample(small_bqm(), time_limit=7.5)
    assert fake.calls == [{"time_limit": 7.5, "label": None}]


def test_hybrid_parameters_are_honest():
    check_parameters_honest(hybrid(), {"time_limit": 4.0, "label": "x"})


def test_hybrid_decodes_a_compiled_model():
    check_decode(hybrid())


# --- real cloud (opt-in) -----------------------------------------------------------------


@pytest.mark.cloud
def test_real_leap_qpu_solves_a_tiny_model():
    sampleset = get_backend("dwave-qpu").sample(small_bqm(), num_reads=20)
    ground = dimod.ExactSolver().sample(small_bqm()).first.energy
    assert sampleset.first.energy == pytest.approx(ground)


@pytest.mark.cloud
def test_real_leap_hybrid_solves_a_tiny_model():
    sampleset = get_backend("dwave-hybrid").sample(small_bqm())
    ground = dimod.ExactSolver().sample(small_bqm()).first.energy
    assert sampleset.first.energy == pytest.approx(ground)


# --- token hygiene ---------------------------------------------------------------------------


def fake_ocean(monkeypatch, seen: dict, error: Exception | None = None) -> None:
    def fake_dwave_sampler(**options):
        seen.update(options)
        if error is not None:
            raise error
        return MockDWaveSampler()

    import dwave.system

    monkeypatch.setattr(dwave.system, "DWaveSampler", fake_dwave_sampler)


def test_an_environment_token_with_a_newline_is_stripped(monkeypatch, no_ocean_credentials):
    monkeypatch.setenv("DWAVE_API_TOKEN", SECRET + "\n")
    seen: dict = {}
    fake_ocean(monkeypatch, seen)
    get_backend("dwave-qpu").sample(small_bqm(), num_reads=2)
    assert seen["token"] == SECRET


@pytest.mark.parametrize("token", ["DEV-12\n34-abc", "DEV-12\x1b34-abc"])
def test_a_token_with_control_characters_names_the_variable_not_the_value(
    monkeypatch, no_ocean_credentials, no_network, token
):
    monkeypatch.setenv("DWAVE_API_TOKEN", token)
    with pytest.raises(InvalidCredentialsError, match="DWAVE_API_TOKEN") as caught:
        get_backend("dwave-qpu")
    assert "DEV-12" not in str(caught.value) and "34-abc" not in str(caught.value)
    with pytest.raises(InvalidCredentialsError, match="token") as caught:
        DWaveHybridBackend(token=token)
    assert "DEV-12" not in str(caught.value)


def test_an_ocean_error_quoting_the_token_is_scrubbed(monkeypatch):
    from requests.exceptions import InvalidHeader

    seen: dict = {}
    fake_ocean(monkeypatch, seen, InvalidHeader(f"Invalid header value {SECRET!r}"))
    with pytest.raises(SolverError) as caught:
        DWaveQPUBackend(token=SECRET).sample(small_bqm(), num_reads=2)
    assert SECRET not in str(caught.value) and "InvalidHeader" in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_item8_an_ocean_error_with_control_characters_is_shown_escaped(monkeypatch):
    seen: dict = {}
    forged = RuntimeError("SAPI said: bad\r\nbmfdsl: all good, exit 0\x1b[2J")
    fake_ocean(monkeypatch, seen, forged)
    with pytest.raises(SolverError) as caught:
        DWaveQPUBackend(token=SECRET).sample(small_bqm(), num_reads=2)
    text = str(caught.value)
    assert text.isprintable() and "all good" in text and "\\x1b[2J" in text
