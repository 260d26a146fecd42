"""device= for full-data BLS and ALS: the array path (numpy here, CuPy on a GPU) gives the CPU
path's U, V and error, ties included; "gpu" without CuPy names the extra; unknown devices are
listed.

No GPU in CI: the array path runs with numpy (``device="numpy"``), and the GPU's own branches
(the explicit tie rule, transfers, the TF32 fallback) run through ``device="gpu"`` with a
stand-in module that is numpy's functions under another module object (:func:`fake_gpu`).
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
import scipy.sparse

from bmfdsl import factorize
from bmfdsl.apps import BinaryMatrixFactorization, main
from bmfdsl.errors import BackendUnavailableError, UnknownNameError
from bmfdsl.linalg import _device as device_module
from bmfdsl.linalg import as_matrix, first_minimum, get_array_module
from bmfdsl.solvers import MAX_ENUMERATION_RANK, als, solve_bls_with_error
from bmfdsl.solvers._bls import solve_bls_from_stats


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """``device="gpu"`` resolved to numpy's functions in a module that is not numpy."""
    fake = types.ModuleType("fake_cupy")
    for name in dir(np):
        if not name.startswith("__"):
            setattr(fake, name, getattr(np, name))
    fake.asarray = lambda array, dtype=None: np.array(array, dtype=dtype)  # a copy: "sent"
    fake.free_bytes = 2**40  # what memGetInfo reports free
    fake.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(memGetInfo=lambda: (fake.free_bytes, 2**41))
    )
    monkeypatch.setattr(device_module, "_load_cupy", lambda device: fake)
    return fake


def _random(rng: np.random.Generator, shape: tuple[int, int], p: float) -> np.ndarray:
    return (rng.random(shape) < p).astype(np.int8)


def _planted(rng: np.random.Generator, m: int, n: int, r: int) -> np.ndarray:
    """``min(1, U Vᵀ)`` of sparse random factors with 2% of the entries flipped."""
    product = _random(rng, (m, r), 0.3).astype(int) @ _random(rng, (n, r), 0.3).T
    return (np.minimum(product, 1) ^ (rng.random((m, n)) < 0.02)).astype(np.int8)


def _brute_force_error(A: np.ndarray, V: np.ndarray) -> int:
    """min over every code of each row's error, from the definition."""
    r = V.shape[1]
    codes = ((np.arange(2**r)[:, None] >> np.arange(r)) & 1).astype(np.int64)
    residual = A[:, None, :].astype(np.int64) - (codes @ V.T.astype(np.int64))[None]
    return int((residual**2).sum(axis=2).min(axis=1).sum())


@pytest.mark.parametrize("rank", range(1, 14))
@pytest.mark.parametrize("kind", ["random", "planted"])
def test_bls_on_the_array_path_equals_the_cpu_path(rank, kind):
    rng = np.random.default_rng(rank)
    A = _random(rng, (120, 24), 0.4) if kind == "random" else _planted(rng, 120, 24, rank)
    V = _random(rng, (24, rank), 0.4)
    U_cpu, error_cpu = solve_bls_with_error(A, V)
    for data in (A, scipy.sparse.csr_array(A)):
        U, error = solve_bls_with_error(data, V, device="numpy")
        assert np.array_equal(U, U_cpu) and error == error_cpu
        U, error = solve_bls_with_error(data, V, device="numpy", chunk_rows=7)
        assert np.array_equal(U, U_cpu) and error == error_cpu
    if rank <= 8:  # exact up to rank 12; the brute force stays cheap to rank 8
        assert error_cpu == _brute_force_error(A, V)


@pytest.mark.parametrize("rank", [2, 5, 10, 13])
def test_als_on_the_array_path_equals_the_cpu_path(rank):
    rng = np.random.default_rng(10 + rank)
    A = _planted(rng, 150, 30, rank)
    U, V = _random(rng, (150, rank), 0.3), _random(rng, (30, rank), 0.3)
    for data in (A, scipy.sparse.csr_array(A)):
        cpu = als(data, U, V)
        array = als(data, U, V, device="numpy")
        assert array.history == cpu.history and array.solves == cpu.solves
        assert np.array_equal(array.U, cpu.U) and np.array_equal(array.V, cpu.V)
        assert array.error == cpu.error == as_matrix(A).squared_error(cpu.U, cpu.V)


@pytest.mark.parametrize("one_hot", ["U", "V"])
def test_one_hot_als_on_the_array_path_equals_the_cpu_path(one_hot):
    rng = np.random.default_rng(3)
    A = _planted(rng, 80, 20, 4)
    U = np.eye(4, dtype=np.int8)[rng.integers(4, size=80)]
    V = np.eye(4, dtype=np.int8)[rng.integers(4, size=20)]
    cpu = als(A, U, V, one_hot=one_hot)
    array = als(A, U, V, one_hot=one_hot, device="numpy")
    assert array.history == cpu.history
    assert np.array_equal(array.U, cpu.U) and np.array_equal(array.V, cpu.V)


def test_ties_go_to_the_lowest_code_on_every_device(fake_gpu):
    # Two equal columns of V: codes 1 (01) and 2 (10) always score the same, so a row whose
    # best is one of them must get code 1; a zero row ties nothing (code 0 is exact).
    V = np.array([[1, 1], [1, 1], [0, 0]], dtype=np.int8)
    A = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=np.int8)
    expected = solve_bls_with_error(A, V)
    assert expected[0].tolist() == [[1, 0], [0, 0], [0, 0], [1, 0]]
    for device in ("numpy", "gpu"):
        U, error = solve_bls_with_error(A, V, device=device)
        assert U.tolist() == expected[0].tolist() and error == expected[1]


def test_the_explicit_tie_rule_takes_the_first_minimum():
    scores = np.array([[3.0, 1.0, 1.0, 2.0], [0.0, 0.0, 0.0, 0.0], [5.0, 4.0, 3.0, 3.0]])
    fake = types.ModuleType("other")
    fake.arange, fake.where, fake.int64 = np.arange, np.where, np.int64
    assert first_minimum(scores, fake).tolist() == [1, 0, 2] == np.argmin(scores, 1).tolist()


@pytest.mark.parametrize("rank", [3, 9, 13])
def test_the_gpu_branches_give_the_cpu_answer(fake_gpu, rank):
    rng = np.random.default_rng(rank)
    A = _planted(rng, 100, 25, rank)
    U, V = _random(rng, (100, rank), 0.3), _random(rng, (25, rank), 0.3)
    assert np.array_equal(
        solve_bls_with_error(A, V, device="gpu")[0], solve_bls_with_error(A, V)[0]
    )
    cpu, gpu = als(A, U, V), als(A, U, V, device="gpu")
    assert gpu.history == cpu.history and np.array_equal(gpu.V, cpu.V)


def test_factorize_on_the_gpu_branches_equals_the_cpu(fake_gpu):
    A = _planted(np.random.default_rng(6), 300, 20, 3)
    cpu = factorize(A, 3, random_state=1)
    gpu = factorize(A, 3, random_state=1, device="gpu")
    assert np.array_equal(gpu.U, cpu.U) and np.array_equal(gpu.V, cpu.V)
    assert gpu.error == cpu.error and gpu.info["device"] == "gpu"


@pytest.mark.parametrize("free_bytes", [2**40, 1000])
def test_a_is_sent_once_while_it_fits_on_the_device(fake_gpu, free_bytes):
    fake_gpu.free_bytes = free_bytes  # 1000 bytes: A (2,000 bytes) stays on the host
    rng = np.random.default_rng(8)
    A = _planted(rng, 100, 20, 4)
    U, V = _random(rng, (100, 4), 0.3), _random(rng, (20, 4), 0.3)
    data = as_matrix(A)
    cpu, gpu = als(A, U, V), als(data, U, V, device="gpu")
    assert gpu.history == cpu.history and np.array_equal(gpu.U, cpu.U)
    held = data.on_device("gpu")
    assert np.array_equal(held, A) and (held is data.A) == (free_bytes == 1000)
    assert data.on_device("gpu") is held and data.on_device("numpy") is data.A


def test_tf32_products_fall_back_to_float64(fake_gpu, monkeypatch):
    from bmfdsl.solvers._bls import _score_dtype

    assert _score_dtype(10, 10, fake_gpu) is np.float32
    monkeypatch.setenv("CUPY_TF32", "1")  # cuBLAS may round float32 inputs to TF32
    assert _score_dtype(10, 10, fake_gpu) is np.float64
    assert _score_dtype(10, 10, np) is np.float32  # numpy never uses TF32
    rng = np.random.default_rng(0)
    A, V = _planted(rng, 60, 20, 5), _random(rng, (20, 5), 0.4)
    assert solve_bls_with_error(A, V, device="gpu")[1] == solve_bls_with_error(A, V)[1]


def test_scores_beyond_float32_stay_exact():
    # cross values near 2**24 (a statistics-only solve): float32 would merge neighbours
    big = 2**23
    cross = np.array([[big, big + 1], [big + 1, big]], dtype=np.int64)
    gram = np.array([[big, big], [big, big]], dtype=np.int64)
    U_cpu, error_cpu = solve_bls_from_stats(cross, gram)
    U, error = solve_bls_from_stats(cross, gram, device="numpy")
    assert U.tolist() == U_cpu.tolist() == [[0, 1], [1, 0]] and error == error_cpu == -2 * big - 4


def test_factorize_on_the_array_path_equals_the_cpu_path():
    rng = np.random.default_rng(5)
    A = _planted(rng, 2500, 30, 3)  # sampled: BLS extends the core's V, then ALS, then seeds
    cpu = factorize(A, 3, sample_rows=40, random_state=0)
    array = factorize(A, 3, sample_rows=40, random_state=0, device="numpy")
    assert np.array_equal(array.U, cpu.U) and np.array_equal(array.V, cpu.V)
    assert array.error == cpu.error and array.info["device"] == "numpy"
    assert cpu.info["device"] == "cpu"
    assert array.info["error_before_als"] == cpu.info["error_before_als"]
    assert array.info["portfolio"]["errors"] == cpu.info["portfolio"]["errors"]
    again = factorize(A, 3, sample_rows=40, random_state=0, device="numpy")
    assert np.array_equal(again.U, array.U) and again.error == array.error


def test_the_estimator_and_the_cli_take_the_device(tmp_path, capsys):
    rng = np.random.default_rng(2)
    X = _planted(rng, 60, 12, 2)
    cpu = BinaryMatrixFactorization(2, random_state=0).fit(X)
    array = BinaryMatrixFactorization(2, random_state=0, device="numpy").fit(X)
    assert np.array_equal(array.components_, cpu.components_)
    assert np.array_equal(array.transform(X), cpu.transform(X))
    assert array.factorization_.info["device"] == "numpy"
    path = tmp_path / "a.csv"
    np.savetxt(path, X, fmt="%d", delimiter=",")
    args = ["factorize", str(path), "-r", "2", "--seed", "0", "--quiet", "--device", "numpy"]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args[:-1], "tpu"]) == 2  # argparse lists the choices
    refused = capsys.readouterr().err
    assert "tpu" in refused and all(name in refused for name in ("cpu", "numpy", "gpu"))


def test_a_backend_with_devices_gets_the_device_too():
    A = _planted(np.random.default_rng(4), 40, 10, 2)
    result = factorize(
        A, 2, backend="da", device="numpy", num_reads=2, num_sweeps=50, random_state=0
    )
    assert result.info["backend_info"]["device"] == "numpy"
    assert result.info["device"] == "numpy"


def test_gpu_without_cupy_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy now raises ImportError
    A = np.eye(4, dtype=np.int8)
    V = np.eye(4, 2, dtype=np.int8)
    calls = [
        lambda: solve_bls_with_error(A, V, device="gpu"),
        lambda: als(A, np.eye(4, 2, dtype=np.int8), V, device="gpu"),
        lambda: factorize(A, 2, random_state=0, device="gpu"),
        lambda: BinaryMatrixFactorization(2, device="gpu").fit(A),
    ]
    for call in calls:
        with pytest.raises(BackendUnavailableError, match=r'pip install "bmfdsl\[gpu\]"'):
            call()


def test_an_unknown_device_lists_the_valid_ones():
    A = np.eye(3, dtype=np.int8)
    for call in (
        lambda: solve_bls_with_error(A, np.eye(3, 1, dtype=np.int8), device="cuda"),
        lambda: als(A, np.eye(3, 1, dtype=np.int8), np.eye(3, 1, dtype=np.int8), device=1),
        lambda: factorize(A, 1, device="tpu"),
    ):
        with pytest.raises(UnknownNameError, match="known devices: 'cpu', 'gpu', 'numpy'"):
            call()


def _cuda_gpu() -> bool:
    """Whether CuPy and a CUDA device are here (never in CI: these tests run on a GPU machine)."""
    try:
        get_array_module("gpu")
    except BackendUnavailableError:
        return False
    return True


needs_cuda = pytest.mark.skipif(
    not _cuda_gpu(), reason='needs CuPy and a CUDA GPU (pip install "bmfdsl[gpu]")'
)


@needs_cuda
@pytest.mark.parametrize("rank", [3, 9, 13])
def test_a_real_gpu_gives_the_cpu_answer(rank):
    rng = np.random.default_rng(rank)
    A = _planted(rng, 3000, 60, rank)
    U, V = _random(rng, (3000, rank), 0.3), _random(rng, (60, rank), 0.3)
    U_gpu, error_gpu = solve_bls_with_error(A, V, device="gpu")
    U_cpu, error_cpu = solve_bls_with_error(A, V)
    assert np.array_equal(U_gpu, U_cpu) and error_gpu == error_cpu
    if rank <= MAX_ENUMERATION_RANK:  # beyond it the row solves are a search, not exact
        assert error_cpu == _brute_force_error(A, V)
    cpu, gpu = als(A, U, V), als(A, U, V, device="gpu")
    assert gpu.history == cpu.history and np.array_equal(gpu.V, cpu.V)
    assert np.array_equal(gpu.U, cpu.U)


@needs_cuda
def test_factorize_on_a_real_gpu_equals_the_cpu():
    A = _planted(np.random.default_rng(7), 4000, 40, 4)
    sparse = scipy.sparse.csr_matrix(A)
    for data in (A, sparse):
        cpu = factorize(data, 4, sample_rows=60, random_state=2)
        gpu = factorize(data, 4, sample_rows=60, random_state=2, device="gpu")
        assert np.array_equal(gpu.U, cpu.U) and np.array_equal(gpu.V, cpu.V)
        assert gpu.error == cpu.error and gpu.info["device"] == "gpu"
