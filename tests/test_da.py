"""The ``da`` sampler: the Digital Annealer's parallel-trial algorithm for any BQM."""

from __future__ import annotations

import time
import unittest

import dimod
import dimod.testing
import numpy as np
import pytest

from bmfdsl.backends.da import DASampler, default_temperatures, prepare_bqm
from bmfdsl.errors import InvalidParameterError, UnknownNameError
from bmfdsl.native.da_kernel import da_anneal, local_fields
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
