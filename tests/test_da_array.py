"""The array path of the ``da`` sampler (numpy here; CuPy when a GPU is usable)."""

from __future__ import annotations

import time

import dimod
import numpy as np
import pytest

from bmfdsl.backends.da import DASampler, prepare_bqm
from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.native import da_array
from bmfdsl.native.da_array import ArrayRuns, da_anneal_array, dense_couplings, get_array_module
from bmfdsl.testing import random_integer_bqm


def _dense(bqm: dimod.BQM) -> tuple[np.ndarray, np.ndarray, list]:
    h, indptr, indices, data, labels = prepare_bqm(bqm)
    return h, dense_couplings(indptr, indices, data, len(h)), labels


def _gpu_module():
    try:
        return get_array_module("gpu")
    except BackendUnavailableError:
        return None


@pytest.mark.parametrize("vartype", ["BINARY", "SPIN"])
def test_numpy_path_finds_ground_states(vartype):
    for seed in range(5):
        bqm = random_integer_bqm(12, seed, vartype)
        ground = dimod.ExactSolver().sample(bqm).first.energy
        sampleset = DASampler().sample(bqm, num_reads=8, num_sweeps=300, seed=seed, device="numpy")
        assert sampleset.first.energy == pytest.approx(ground)
        assert sampleset.vartype is bqm.vartype
        assert sampleset.info["device"] == "numpy"


def test_returned_energies_are_those_of_the_returned_states():
    bqm = random_integer_bqm(14, 7)
    h, Q, labels = _dense(bqm)
    states = np.random.default_rng(0).integers(0, 2, size=(6, 14)).astype(np.int8)
    best = da_anneal_array(h, Q, states, np.geomspace(5.0, 0.1, 40), 2, 0.1, seed=3)
    assert best.shape == (6,)
    for state, energy in zip(states, best, strict=True):
        assert energy + bqm.offset == pytest.approx(
            bqm.energy(dict(zip(labels, state, strict=True)))
        )


def test_same_seed_same_samples():
    bqm = random_integer_bqm(15, 3)
    first = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42, device="numpy")
    second = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42, device="numpy")
    assert np.array_equal(first.record.sample, second.record.sample)


def test_one_flip_per_iteration_and_fields_stay_exact():
    bqm = random_integer_bqm(12, 1)
    h, Q, _ = _dense(bqm)
    initial = np.random.default_rng(1).integers(0, 2, size=(64, 12)).astype(np.int8)
    runs = ArrayRuns(h, Q, initial, seed=0, xp=np)
    runs.iterate(np.array([50.0]), 1, 0.1)  # hot: nearly every run flips
    changed = (runs.x != initial).sum(axis=1)
    assert changed.max() == 1
    assert changed.sum() > 32
    assert np.array_equal(runs.offset == 0, changed == 1)
    runs.iterate(np.geomspace(5.0, 0.5, 100), 1, 0.1)
    xf = runs.x.astype(np.float64)
    assert np.allclose(runs.g, h + xf @ Q)
    assert np.allclose(runs.energy, xf @ h + 0.5 * np.einsum("ri,ij,rj->r", xf, Q, xf))


def test_escape_offset_rises_until_a_flip_is_accepted():
    # from x = 0 every flip costs 1; at T = 0.01 the offset must reach 1 before one is taken
    h = np.ones(3)
    Q = np.zeros((3, 3))
    runs = ArrayRuns(h, Q, np.zeros((2, 3), dtype=np.int8), seed=0, xp=np)
    runs.iterate(np.full(4, 0.01), 1, 0.25)
    assert np.array_equal(runs.offset, [1.0, 1.0])
    assert not runs.x.any()
    runs.iterate(np.array([0.01]), 1, 0.25)
    assert np.array_equal(runs.offset, [0.0, 0.0])
    assert np.array_equal(runs.x.sum(axis=1), [1, 1])
    assert np.array_equal(runs.best, [0.0, 0.0])  # the flip made things worse: best kept


def test_time_limit_on_the_array_path():
    bqm = random_integer_bqm(40, 2)
    started = time.perf_counter()
    sampleset = DASampler().sample(bqm, num_reads=4, time_limit=0.3, seed=0, device="numpy")
    elapsed = time.perf_counter() - started
    assert 0.2 < elapsed < 1.5
    assert sampleset.info["num_sweeps"] >= 1
    assert len(sampleset) == 4


def test_gpu_matches_numpy_or_names_the_extra():
    bqm = random_integer_bqm(12, 4)
    cupy = _gpu_module()
    if cupy is None:
        with pytest.raises(BackendUnavailableError, match=r"bmfdsl\[gpu\]"):
            DASampler().sample(bqm, num_reads=2, num_sweeps=10, device="gpu")
        with pytest.raises(ImportError, match=r"bmfdsl\[gpu\]"):
            get_array_module("cupy")
        return
    ground = dimod.ExactSolver().sample(bqm).first.energy
    h, Q, labels = _dense(bqm)
    initial = np.random.default_rng(5).integers(0, 2, size=(16, 12)).astype(np.int8)
    for xp in (np, cupy):
        states = initial.copy()
        best = da_anneal_array(h, Q, states, np.geomspace(5.0, 0.1, 300), 1, 0.1, 0, xp)
        assert isinstance(best, np.ndarray) and isinstance(states, np.ndarray)
        assert best.min() + bqm.offset == pytest.approx(ground)
        energies = [bqm.energy(dict(zip(labels, s, strict=True))) for s in states]
        assert np.allclose(best + bqm.offset, energies)
    sampleset = DASampler().sample(bqm, num_reads=8, num_sweeps=300, seed=0, device="gpu")
    assert sampleset.first.energy == pytest.approx(ground)
    assert sampleset.info["device"] == "gpu"


def test_device_is_validated_and_reported():
    bqm = random_integer_bqm(5, 0)
    with pytest.raises(InvalidParameterError, match="'cpu', 'numpy', 'gpu'"):
        DASampler().sample(bqm, device="tpu")
    with pytest.raises(InvalidParameterError, match="anneal"):
        DASampler().sample(bqm, device="numpy", mode="replica-exchange")
    with pytest.raises(InvalidParameterError, match="numpy"):
        get_array_module("tpu")
    sampler = DASampler()
    assert "device" in sampler.parameters
    assert sampler.properties["device"] == "cpu"
    assert sampler.properties["available_devices"][:2] == ["cpu", "numpy"]
    assert sampler.sample(bqm, num_reads=1, num_sweeps=5).info["device"] == "cpu"


def test_dense_couplings_refuse_oversized_models(monkeypatch):
    monkeypatch.setattr(da_array, "MAX_DENSE_BYTES", 100)
    with pytest.raises(InvalidParameterError, match="device='cpu'"):
        dense_couplings(np.zeros(11, dtype=np.int64), np.zeros(0), np.zeros(0), 10)


def test_the_flip_is_chosen_uniformly_among_accepted_trials():
    # from x = 0 at T = 1 trial i is accepted with p_i = min(1, exp(-h_i)); the flip must be
    # each accepted trial with equal chance, so P(i) = p_i * E[1 / (1 + other acceptances)]
    h = np.array([-0.5, 0.7, 1.5])
    p = np.minimum(1.0, np.exp(-h))
    expected = np.zeros(3)
    for i in range(3):
        j, k = (m for m in range(3) if m != i)
        expected[i] = p[i] * (
            (1 - p[j]) * (1 - p[k]) + (p[j] * (1 - p[k]) + p[k] * (1 - p[j])) / 2 + p[j] * p[k] / 3
        )
    runs = ArrayRuns(h, np.zeros((3, 3)), np.zeros((40_000, 3), dtype=np.int8), seed=1, xp=np)
    runs.iterate(np.array([1.0]), 1, 0.1)
    frequencies = runs.x.mean(axis=0)
    assert np.allclose(frequencies, expected, atol=0.01)
