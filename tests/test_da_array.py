"""The array path of the ``da`` sampler: numpy always; on a CUDA GPU with CuPy also the
whole-array operations there and the fused kernel (those cases skip, with the reason, without
one). The kernel source is compiled with nvcc where nvcc is installed, GPU or not."""

from __future__ import annotations

import shutil
import subprocess
import time

import dimod
import numpy as np
import pytest
import scipy.sparse

from bmfdsl.backends.da import DASampler
from bmfdsl.errors import BackendUnavailableError, InvalidParameterError
from bmfdsl.solvers.da import ArrayRuns, get_array_module, prepare_bqm
from bmfdsl.solvers.da import _array as da_array
from bmfdsl.solvers.da._array import da_anneal_array, dense_couplings
from bmfdsl.solvers.da._cuda import FUSED_KERNEL_SOURCE, fused_iterate
from bmfdsl.testing import random_integer_bqm

# implementation name -> (device of get_array_module, fused)
IMPLEMENTATIONS = {
    "numpy": ("numpy", False),
    "gpu-array": ("gpu", False),
    "gpu-fused": ("gpu", True),
}


def _dense(bqm: dimod.BQM) -> tuple[np.ndarray, np.ndarray, list]:
    h, indptr, indices, data, labels = prepare_bqm(bqm)
    return h, dense_couplings(indptr, indices, data, len(h)), labels


def _gpu_module():
    try:
        return get_array_module("gpu")
    except BackendUnavailableError:
        return None


@pytest.fixture(params=list(IMPLEMENTATIONS))
def engine(request):
    """``(xp, fused)`` of one implementation; the GPU ones skip without a usable GPU."""
    device, fused = IMPLEMENTATIONS[request.param]
    try:
        return get_array_module(device), fused
    except BackendUnavailableError as exc:
        pytest.skip(f"{request.param} needs a CUDA GPU with CuPy: {exc}")


def _host(array) -> np.ndarray:
    return np.asarray(array.get() if hasattr(array, "get") else array)


@pytest.mark.parametrize("device", ["numpy", "gpu"])
@pytest.mark.parametrize("vartype", ["BINARY", "SPIN"])
def test_array_devices_find_ground_states(vartype, device):
    if device == "gpu" and _gpu_module() is None:
        pytest.skip("device 'gpu' needs a CUDA GPU with CuPy")
    for seed in range(5):
        bqm = random_integer_bqm(12, seed, vartype)
        ground = dimod.ExactSolver().sample(bqm).first.energy
        sampleset = DASampler().sample(bqm, num_reads=8, num_sweeps=300, seed=seed, device=device)
        assert sampleset.first.energy == pytest.approx(ground)
        assert sampleset.vartype is bqm.vartype
        assert sampleset.info["device"] == device


def test_returned_energies_are_those_of_the_returned_states(engine):
    xp, fused = engine
    bqm = random_integer_bqm(14, 7)
    h, Q, labels = _dense(bqm)
    states = np.random.default_rng(0).integers(0, 2, size=(6, 14)).astype(np.int8)
    best = da_anneal_array(h, Q, states, np.geomspace(5.0, 0.1, 40), 2, 0.1, 3, xp, fused)
    assert isinstance(best, np.ndarray) and isinstance(states, np.ndarray)
    assert best.shape == (6,)
    for state, energy in zip(states, best, strict=True):
        assert energy + bqm.offset == pytest.approx(
            bqm.energy(dict(zip(labels, state, strict=True)))
        )


@pytest.mark.parametrize("device", ["numpy", "gpu"])
def test_same_seed_same_samples(device):
    if device == "gpu" and _gpu_module() is None:
        pytest.skip("device 'gpu' needs a CUDA GPU with CuPy")
    bqm = random_integer_bqm(15, 3)
    first = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42, device=device)
    second = DASampler().sample(bqm, num_reads=3, num_sweeps=50, seed=42, device=device)
    assert np.array_equal(first.record.sample, second.record.sample)


def test_one_flip_per_iteration_and_fields_stay_exact(engine):
    xp, fused = engine
    bqm = random_integer_bqm(12, 1)
    h, Q, _ = _dense(bqm)
    initial = np.random.default_rng(1).integers(0, 2, size=(64, 12)).astype(np.int8)
    runs = ArrayRuns(h, Q, initial, seed=0, xp=xp, fused=fused)
    runs.iterate(np.array([50.0]), 1, 0.1)  # hot: nearly every run flips
    changed = (_host(runs.x) != initial).sum(axis=1)
    assert changed.max() == 1
    assert changed.sum() > 32
    assert np.array_equal(_host(runs.offset) == 0, changed == 1)
    runs.iterate(np.geomspace(5.0, 0.5, 100), 1, 0.1)
    xf = _host(runs.x).astype(np.float64)
    assert np.allclose(_host(runs.g), h + xf @ Q)
    energies = xf @ h + 0.5 * np.einsum("ri,ij,rj->r", xf, Q, xf)
    assert np.allclose(_host(runs.energy), energies)
    best_x = _host(runs.best_x).astype(np.float64)
    best = best_x @ h + 0.5 * np.einsum("ri,ij,rj->r", best_x, Q, best_x)
    assert np.allclose(_host(runs.best), best)
    assert np.all(best <= energies + 1e-9)


def test_a_restarted_run_equals_a_fresh_one(engine):
    xp, fused = engine
    bqm = random_integer_bqm(16, 9)
    h, Q, _ = _dense(bqm)
    rng = np.random.default_rng(3)
    first, second = (rng.integers(0, 2, size=(6, 16)).astype(np.int8) for _ in range(2))
    schedule = np.geomspace(4.0, 0.2, 30)
    restarted = ArrayRuns(h, Q, first, seed=1, xp=xp, fused=fused)
    restarted.iterate(schedule, 1, 0.1)
    restarted.restart(second[:4], seed=5)  # fewer runs than before
    restarted.iterate(schedule, 1, 0.1)
    fresh = ArrayRuns(h, Q, second[:4], seed=5, xp=xp, fused=fused)
    fresh.iterate(schedule, 1, 0.1)
    for name in ("x", "g", "best_x", "best", "energy", "offset"):
        assert np.array_equal(_host(getattr(restarted, name)), _host(getattr(fresh, name))), name
    with pytest.raises(InvalidParameterError, match="R x 16"):
        restarted.restart(second[:, :5], seed=0)


def test_escape_offset_rises_until_a_flip_is_accepted(engine):
    xp, fused = engine
    # from x = 0 every flip costs 1; at T = 0.01 the offset must reach 1 before one is taken
    h = np.ones(3)
    Q = np.zeros((3, 3))
    runs = ArrayRuns(h, Q, np.zeros((2, 3), dtype=np.int8), seed=0, xp=xp, fused=fused)
    runs.iterate(np.full(4, 0.01), 1, 0.25)
    assert np.array_equal(_host(runs.offset), [1.0, 1.0])
    assert not _host(runs.x).any()
    runs.iterate(np.array([0.01]), 1, 0.25)
    assert np.array_equal(_host(runs.offset), [0.0, 0.0])
    assert np.array_equal(_host(runs.x).sum(axis=1), [1, 1])
    assert np.array_equal(_host(runs.best), [0.0, 0.0])  # the flip made things worse: best kept


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
    for xp, fused in ((np, False), (cupy, False), (cupy, True)):
        states = initial.copy()
        best = da_anneal_array(h, Q, states, np.geomspace(5.0, 0.1, 300), 1, 0.1, 0, xp, fused)
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
    bqm = random_integer_bqm(10, 0)
    with pytest.raises(InvalidParameterError, match="sparse couplings"):
        DASampler().sample(bqm, num_reads=2, num_sweeps=5, device="numpy")


def test_sparse_and_dense_couplings_give_the_same_runs(engine):
    xp, fused = engine
    bqm = random_integer_bqm(20, 8)
    h, indptr, indices, data, _ = prepare_bqm(bqm)
    sparse = scipy.sparse.csr_matrix((data, indices, indptr), shape=(20, 20))
    initial = np.random.default_rng(4).integers(0, 2, size=(5, 20)).astype(np.int8)
    finals = []
    for couplings in (sparse, sparse.toarray()):
        states = initial.copy()
        best = da_anneal_array(
            h, couplings, states, np.geomspace(4.0, 0.2, 60), 1, 0.1, 2, xp, fused
        )
        finals.append((states, best))
    assert np.array_equal(finals[0][0], finals[1][0])
    assert np.array_equal(finals[0][1], finals[1][1])


def test_the_gpu_kernel_has_no_dense_size_limit(monkeypatch):
    if _gpu_module() is None:
        pytest.skip("device 'gpu' needs a CUDA GPU with CuPy")
    monkeypatch.setattr(da_array, "MAX_DENSE_BYTES", 100)
    bqm = random_integer_bqm(12, 2)
    ground = dimod.ExactSolver().sample(bqm).first.energy
    sampleset = DASampler().sample(bqm, num_reads=8, num_sweeps=300, seed=1, device="gpu")
    assert sampleset.first.energy == pytest.approx(ground)


def test_the_flip_is_chosen_uniformly_among_accepted_trials(engine):
    xp, fused = engine
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
    start = np.zeros((40_000, 3), dtype=np.int8)
    runs = ArrayRuns(h, np.zeros((3, 3)), start, seed=1, xp=xp, fused=fused)
    runs.iterate(np.array([1.0]), 1, 0.1)
    frequencies = _host(runs.x).mean(axis=0)
    assert np.allclose(frequencies, expected, atol=0.01)


def test_the_fused_kernel_needs_a_gpu():
    bqm = random_integer_bqm(5, 0)
    h, Q, _ = _dense(bqm)
    with pytest.raises(InvalidParameterError, match="GPU"):
        ArrayRuns(h, Q, np.zeros((2, 5), dtype=np.int8), seed=0, xp=np, fused=True)


def test_the_fused_kernel_refuses_arrays_it_would_misread():
    state = {
        "x": np.zeros((2, 3), dtype=np.int8),
        "g": np.asfortranarray(np.zeros((2, 3))),
        "best_x": np.zeros((2, 3), dtype=np.int8),
    }
    with pytest.raises(ValueError, match=r"state\['g'\] must be a C-contiguous 2 x 3"):
        fused_iterate(np, state, np.ones(1), 1, 0.1, 0)


def test_fused_kernel_source_compiles(tmp_path):
    # catches a broken kernel on machines without a GPU, where CuPy never compiles it
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: the CUDA toolkit is needed to compile the kernel source")
    source = tmp_path / "da_fused.cu"
    source.write_text(FUSED_KERNEL_SOURCE)
    built = subprocess.run(
        [nvcc, "-cubin", "-o", str(tmp_path / "da_fused.cubin"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "da_fused.cubin").stat().st_size > 0


def test_fused_runs_do_not_depend_on_how_iterations_are_split():
    # the kernel's random numbers are a hash of (seed, run, iteration, variable)
    cupy = _gpu_module()
    if cupy is None:
        pytest.skip("the fused kernel needs a CUDA GPU with CuPy")
    bqm = random_integer_bqm(40, 6)
    h, Q, _ = _dense(bqm)
    initial = np.random.default_rng(2).integers(0, 2, size=(8, 40)).astype(np.int8)
    schedule = np.geomspace(5.0, 0.1, 120)
    whole = ArrayRuns(h, Q, initial, seed=9, xp=cupy)
    whole.iterate(schedule, 2, 0.1)
    split = ArrayRuns(h, Q, initial, seed=9, xp=cupy)
    for part in np.array_split(schedule, 7):
        split.iterate(part, 2, 0.1)
    other_seed = ArrayRuns(h, Q, initial, seed=10, xp=cupy)
    other_seed.iterate(schedule, 2, 0.1)
    assert np.array_equal(_host(whole.x), _host(split.x))
    assert np.array_equal(_host(whole.best_x), _host(split.best_x))
    assert not np.array_equal(_host(whole.x), _host(other_seed.x))
