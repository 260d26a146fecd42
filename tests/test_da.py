"""The ``da`` sampler: the Digital Annealer's parallel-trial algorithm for any BQM."""

from __future__ import annotations

import time
import unittest

import dimod
import dimod.testing
import numpy as np
import pytest

from bmfdsl.backends._common import round_seeds
from bmfdsl.backends.da import DASampler
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.solvers.da import DASettings, da_anneal, default_temperatures, prepare_bqm, run_da
from bmfdsl.solvers.da import _driver as da_driver
from bmfdsl.solvers.da._kernel import local_fields
from bmfdsl.testing import random_integer_bqm


def test_da_passes_dimod_conformance():
    sampler = DASampler()
    dimod.testing.assert_sampler_api(sampler)

    @dimod.testing.load_sampler_bqm_tests(sampler)
    class Conformance(unittest.TestCase):
        pass

    result = unittest.TextTestRunner(verbosity=0).run(
        unittest.defaultTestLoader.loadTestsFromTestCase(Conformance)
    )
    assert result.wasSuccessful(), result.failures + result.errors


@pytest.mark.parametrize("vartype", ["BINARY", "SPIN"])
@pytest.mark.parametrize("mode", ["anneal", "replica-exchange"])
def test_finds_ground_states_of_small_bqms(vartype, mode):
    for seed in range(4):
        bqm = random_integer_bqm(10, seed, vartype)
        ground = dimod.ExactSolver().sample(bqm).first.energy
        sampleset = DASampler().sample(bqm, num_reads=4, num_sweeps=300, seed=seed, mode=mode)
        assert sampleset.first.energy == pytest.approx(ground)
        assert sampleset.vartype is bqm.vartype


def test_same_seed_same_samples():
    bqm = random_integer_bqm(15, 3)
    first = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42)
    second = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42)
    assert np.array_equal(first.record.sample, second.record.sample)


def test_initial_states_are_warm_starts():
    bqm = random_integer_bqm(12, 5)
    ground = dimod.ExactSolver().sample(bqm).first
    # a single cold iteration cannot leave the ground state: the best state is kept
    sampleset = DASampler().sample(
        bqm, initial_states=ground.sample, num_reads=1, num_sweeps=1, temperature_range=(1e-3, 1e-3)
    )
    assert sampleset.first.energy == pytest.approx(ground.energy)


def test_kernel_energy_and_fields_are_consistent():
    bqm = random_integer_bqm(20, 7)
    h, indptr, indices, data, labels = prepare_bqm(bqm)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=20).astype(np.int8)
    g = local_fields(h, indptr, indices, data, x.astype(np.float64))
    base = bqm.energy(dict(zip(labels, x, strict=True)))
    for i in range(20):  # g gives the exact flip energy
        flipped = x.copy()
        flipped[i] ^= 1
        delta = bqm.energy(dict(zip(labels, flipped, strict=True))) - base
        assert delta == pytest.approx((1 - 2 * x[i]) * g[i])
    states = rng.integers(0, 2, size=(3, 20)).astype(np.int8)
    best = da_anneal(h, indptr, indices, data, states, np.geomspace(5, 0.1, 100), 2, 0.1, 1)
    for state, energy in zip(states, best, strict=True):
        assert energy + bqm.offset == pytest.approx(
            bqm.energy(dict(zip(labels, state, strict=True)))
        )


def test_default_temperatures_are_ordered():
    h, indptr, _, data, _ = prepare_bqm(random_integer_bqm(10, 1))
    hot, cold = default_temperatures(h, indptr, data)
    assert hot > cold > 0


def test_time_limit_is_honoured_roughly():
    bqm = random_integer_bqm(200, 2)
    DASampler().sample(bqm, num_reads=1, num_sweeps=10)  # warm the JIT cache
    started = time.perf_counter()
    sampleset = DASampler().sample(bqm, num_reads=2, time_limit=0.5, seed=0)
    elapsed = time.perf_counter() - started
    assert 0.2 < elapsed < 1.5
    assert sampleset.info["num_sweeps"] >= 1


@pytest.mark.parametrize("device", ["cpu", "numpy", "gpu"])
def test_time_limited_reads_restart_and_keep_their_best(device):
    if device == "gpu" and "gpu" not in DASampler().properties["available_devices"]:
        pytest.skip("device 'gpu' needs a CUDA GPU with CuPy")
    bqm = random_integer_bqm(12, 5)
    ground = dimod.ExactSolver().sample(bqm).first.energy
    DASampler().sample(bqm, num_reads=1, num_sweeps=10, device=device)  # warm-up
    sampleset = DASampler().sample(
        bqm, num_reads=2, time_limit=0.4, num_sweeps=100, seed=3, device=device
    )
    assert sampleset.info["num_anneals_per_read"] > 2
    assert sampleset.info["num_sweeps"] <= 100
    assert sampleset.first.energy == pytest.approx(ground)
    # an anneal that cannot finish in the time follows the clock instead: one anneal
    started = time.perf_counter()
    long = DASampler().sample(
        bqm, num_reads=2, time_limit=0.2, num_sweeps=10**9, seed=3, device=device
    )
    assert time.perf_counter() - started < 1.5
    assert long.info["num_anneals_per_read"] == 1
    assert long.info["num_sweeps"] < 10**9


def test_rounds_start_only_while_one_fits(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(da_driver.time, "perf_counter", lambda: clock[0])
    rounds = da_driver._Rounds(limit=1.0, round_sweeps=1000)
    assert rounds.another()
    rounds.done(500)
    assert rounds.progress() == 0.5  # by iterations
    clock[0] = 0.7
    assert rounds.progress() == pytest.approx(0.7)  # by the clock, which is further along
    assert rounds.chunk(steps=80, interval=1) == 31  # at most 1/32 of a round
    rounds.done(490)
    assert rounds.chunk(steps=80, interval=1) == 10  # never past the round's iterations
    rounds.done(10)
    assert rounds.progress() >= 1.0
    assert not rounds.another()  # 0.3 s left, under half the last round's 0.7 s
    assert rounds.count == 1 and rounds.sweeps_per_anneal() == 1000
    clock[0] = 0.0
    quick = da_driver._Rounds(limit=1.0, round_sweeps=10)
    started = 0
    while quick.another():
        started += 1
        quick.done(10)
        clock[0] += 0.3  # rounds of 0.3 s start at 0, 0.3, 0.6 and (0.1 s left) not at 0.9 s
    assert started == 3
    clock[0] = 0.0
    squeezed = da_driver._Rounds(limit=1.0, round_sweeps=10)
    assert squeezed.another()
    clock[0] = 0.6
    assert squeezed.another()  # 0.4 s left of a 0.6 s round: a last round on the clock
    assert squeezed.progress() == 0.0
    clock[0] = 0.8
    assert squeezed.progress() == pytest.approx(0.5)


@pytest.mark.parametrize("mode", ["anneal", "replica-exchange"])
def test_the_backend_answers_what_the_driver_runs(mode):
    bqm = random_integer_bqm(12, 4)
    h, indptr, indices, data, labels = prepare_bqm(bqm)
    hot, cold = default_temperatures(h, indptr, data)
    settings = DASettings(
        num_reads=3,
        seed=5,
        mode=mode,
        device="cpu",
        num_sweeps=300,
        time_limit=None,
        hot=hot,
        cold=cold,
        interval=1,
        increase=cold,
        replicas=4,
        swap_interval=10,
    )
    starts = np.random.default_rng(5).integers(0, 2, size=(3, len(labels)), dtype=np.int8)
    run = run_da(settings, (h, indptr, indices, data), starts, round_seeds(5, 3))
    assert run.states.shape == (3, len(labels)) and run.sweeps_per_anneal == 300
    assert run.anneals_per_read == 1.0 and run.anneal_seconds > 0
    sampleset = DASampler().sample(
        bqm, num_reads=3, num_sweeps=300, seed=5, mode=mode, num_replicas=4
    )
    columns = [sampleset.variables.index(v) for v in labels]  # the SampleSet sorts labels
    np.testing.assert_array_equal(sampleset.record.sample[:, columns], run.states)


def test_bad_parameters_are_rejected():
    bqm = random_integer_bqm(5, 0)
    with pytest.raises(UnknownNameError, match="num_sweps"):
        DASampler().sample(bqm, num_sweps=10)
    with pytest.raises(InvalidParameterError, match="mode"):
        DASampler().sample(bqm, mode="quantum")
    with pytest.raises(InvalidParameterError, match="temperature_range"):
        DASampler().sample(bqm, temperature_range=(0.1, 1.0))
    with pytest.raises(InvalidParameterError, match="num_replicas"):
        DASampler().sample(bqm, mode="replica-exchange", num_replicas=0)
