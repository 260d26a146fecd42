"""Scale: dask input (blockwise sampling, BLS, ALS) and bounded memory for tall numpy input."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

dask = pytest.importorskip(
    "dask", reason="the dask extra is not installed: pip install bmfdsl[dask]"
)
da = pytest.importorskip("dask.array")
Callback = pytest.importorskip("dask.callbacks").Callback

from bmfdsl import factorize  # noqa: E402
from bmfdsl.apps import make_bernoulli, make_exact_rank  # noqa: E402
from bmfdsl.linalg import relative_error, squared_error  # noqa: E402
from bmfdsl.pipeline import leverage_scores, sample_rows  # noqa: E402

FAST_NEAL = {"backend": "neal", "num_reads": 4, "num_sweeps": 200}


def direct_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    """``||A - UVᵀ||²_F`` the obvious way (independent of the chunked code)."""
    residual = A.astype(np.int64) - U.astype(np.int64) @ V.astype(np.int64).T
    return int((residual**2).sum())


class LargestResult(Callback):
    """Records the largest array any task of a local dask scheduler produced."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def _posttask(self, key, result, dsk, state, worker_id) -> None:
        self.largest = max(self.largest, int(getattr(result, "nbytes", 0)))


def generated_dask_matrix(m: int, n: int, rows_per_block: int, seed: int):
    """A Bernoulli(0.5) dask array whose blocks are generated on demand (no array in the graph),
    and the same matrix in numpy."""
    starts = list(range(0, m, rows_per_block))
    blocks = [
        make_bernoulli(min(rows_per_block, m - start), n, 0.5, random_state=seed + index)
        for index, start in enumerate(starts)
    ]
    lazy = [
        da.from_delayed(
            dask.delayed(make_bernoulli)(block.shape[0], n, 0.5, random_state=seed + index),
            shape=block.shape,
            dtype=block.dtype,
        )
        for index, block in enumerate(blocks)
    ]
    return da.concatenate(lazy, axis=0), np.concatenate(blocks, axis=0)


@pytest.mark.parametrize(
    ("method", "params"),
    [("qubo", FAST_NEAL), ("baseline", {}), ("thresholded", {})],
)
@pytest.mark.parametrize("kind", ["planted", "bernoulli"])
def test_dask_input_gives_the_numpy_result(method, params, kind):
    A = (
        make_exact_rank(5000, 30, 4, random_state=1)
        if kind == "planted"
        else make_bernoulli(5000, 30, 0.5, random_state=1)
    )
    expected = factorize(A, 4, method=method, sample_rows="auto", random_state=9, **params)
    # Uneven row blocks and split columns: the pipeline must widen the blocks itself.
    lazy = da.from_array(A, chunks=(700, 12))
    with dask.config.set(scheduler="synchronous"):
        result = factorize(lazy, 4, method=method, random_state=9, **params)  # None = "auto"
    assert result.info["sampled_rows"] == expected.info["sampled_rows"] == 30
    np.testing.assert_array_equal(result.U, expected.U)
    np.testing.assert_array_equal(result.V, expected.V)
    assert result.error == expected.error == direct_error(A, result.U, result.V)
    assert result.relative_error == expected.relative_error
    assert result.info["error_before_als"] == expected.info["error_before_als"]
    assert {"sampling", "solve", "bls", "als"} <= set(result.info["timings"])


def test_dask_on_a_local_distributed_cluster():
    distributed = pytest.importorskip("dask.distributed")
    A = make_exact_rank(4000, 30, 3, random_state=4)
    expected = factorize(A, 3, sample_rows=40, random_state=2, **FAST_NEAL)
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address="127.0.0.1:0"
    ):
        result = factorize(
            da.from_array(A, chunks=(1000, 30)), 3, sample_rows=40, random_state=2, **FAST_NEAL
        )
    np.testing.assert_array_equal(result.U, expected.U)
    np.testing.assert_array_equal(result.V, expected.V)
    assert result.error == direct_error(A, result.U, result.V) == expected.error
    assert result.info["dask_blocks"] == 4


def test_dask_pipeline_never_holds_the_whole_matrix():
    lazy, A = generated_dask_matrix(6000, 30, 750, seed=3)
    with dask.config.set(scheduler="synchronous"), LargestResult() as tracker:
        result = factorize(lazy, 5, method="baseline", random_state=0)
    # Blocks are 1/8 of A; the largest gathered results are the m scores and the m x r codes.
    assert 0 < tracker.largest < A.nbytes / 2
    expected = factorize(A, 5, method="baseline", sample_rows="auto", random_state=0)
    np.testing.assert_array_equal(result.U, expected.U)
    assert result.error == direct_error(A, result.U, result.V)


def test_wide_dask_input_is_sampled_on_its_long_side():
    A = make_exact_rank(2500, 30, 2, random_state=6).T.copy()
    with dask.config.set(scheduler="synchronous"):
        result = factorize(da.from_array(A, chunks=(10, 600)), 2, method="baseline")
    assert result.info["transposed"] is True
    assert result.U.shape == (30, 2) and result.V.shape == (2500, 2)
    assert result.error == direct_error(A, result.U, result.V)


def test_small_dask_input_is_factorized_in_memory_like_numpy():
    A = make_exact_rank(60, 20, 3, random_state=2)
    with dask.config.set(scheduler="synchronous"):
        result = factorize(da.from_array(A, chunks=(25, 20)), 3, **FAST_NEAL, random_state=1)
    expected = factorize(A, 3, **FAST_NEAL, random_state=1)
    assert "sampled_rows" not in result.info
    np.testing.assert_array_equal(result.U, expected.U)
    assert result.error == expected.error == direct_error(A, result.U, result.V)


def test_blockwise_leverage_scores_and_draws_match_numpy():
    rng = np.random.default_rng(8)
    A = (rng.random((900, 12)) < 0.4).astype(np.int8)
    A[:, 11] = A[:, 3]  # rank-deficient: the Gram route must drop the null direction
    lazy = da.from_array(A, chunks=(200, 5))
    with dask.config.set(scheduler="synchronous"):
        scores = leverage_scores(lazy)
        indices, probabilities = sample_rows(lazy, 50, random_state=5)
    np.testing.assert_allclose(scores, leverage_scores(A), atol=1e-9)
    assert scores.sum() == pytest.approx(np.linalg.matrix_rank(A))
    expected_indices, expected_probabilities = sample_rows(A, 50, random_state=5)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_allclose(probabilities, expected_probabilities, atol=1e-12)


def test_chunked_squared_error_matches_the_direct_formula(monkeypatch):
    from bmfdsl.linalg import _matrix as matrix_module

    rng = np.random.default_rng(0)
    A = (rng.random((101, 7)) < 0.5).astype(np.int8)
    U = (rng.random((101, 3)) < 0.5).astype(np.int8)
    V = (rng.random((7, 3)) < 0.5).astype(np.int8)
    expected = direct_error(A, U, V)
    assert squared_error(A, U, V) == expected
    monkeypatch.setattr(matrix_module, "_ERROR_CHUNK_ENTRIES", 20)  # chunks of 2 rows
    assert squared_error(A, U, V) == expected
    with dask.config.set(scheduler="synchronous"):
        assert squared_error(da.from_array(A, chunks=(30, 4)), U, V) == expected
    large = np.full((3, 2), 2**20)  # sums of squares beyond 2^53: the exact int64 route
    assert squared_error(large, np.ones((3, 1), int), np.zeros((2, 1), int)) == 6 * 2**40
    assert relative_error(expected, int(np.count_nonzero(A))) == relative_error(expected, A)


def test_tall_numpy_matrix_runs_in_bounded_memory():
    A = make_bernoulli(200_000, 30, 0.5, random_state=0)  # 6 MB as int8
    factorize(A[:3000], 5, method="baseline", sample_rows="auto")  # warm the compiled kernels
    tracemalloc.start()
    try:
        result = factorize(A, 5, method="baseline", sample_rows="auto", random_state=0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # One int64 copy of A alone is 8 x A.nbytes, an m x 2^r float64 score table 8.5 x; the
    # pipeline may hold validation masks (2 bytes per entry) and fixed-size chunk buffers.
    assert peak < 3 * A.nbytes + 24 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert result.U.shape == (200_000, 5)
    assert result.error == direct_error(A, result.U, result.V)
    assert result.error <= result.info["error_before_als"]
