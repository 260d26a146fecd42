"""Issue 26.3: real distributed runs. On a cluster the factors and projectors are scattered to
the workers once per step, never put inside task graphs (which ``distributed`` warns about,
here turned into an error at a tenth of the data), and a user's persisted array is computed
from where it lies, with the answer of the same array in memory."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from bmfdsl import factorize
from bmfdsl.linalg import DaskMatrix
from bmfdsl.solvers import ALSStart, als, als_batch

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

# U (40,000 x 3 int64) is 960 kB; a graph that carried it would pass this.
_THRESHOLD = "100kB"


@pytest.fixture(scope="module")
def client():
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=":0"
    ) as client:
        yield client


def _persisted(m: int, n: int, chunk: int) -> tuple[object, np.ndarray]:
    """A 0/1 dask array made and persisted on the cluster (no numpy data in its graph)."""
    lazy = (da.random.RandomState(0).random_sample((m, n), chunks=(chunk, n)) < 0.3).astype(np.int8)
    persisted = lazy.persist()
    return persisted, np.asarray(persisted.compute())


def test_no_large_graph_and_the_in_memory_answer(client: object) -> None:
    A, dense = _persisted(40_000, 30, 5_000)
    rng = np.random.default_rng(1)
    U = (rng.random((40_000, 3)) < 0.5).astype(np.int8)
    V = (rng.random((30, 3)) < 0.5).astype(np.int8)
    threshold = {"distributed.admin.large-graph-warning-threshold": _THRESHOLD}
    with dask.config.set(threshold), warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*large graph.*")
        result = factorize(A, 3, method="baseline", random_state=0)
        polished = als(A, U, V)
    expected = factorize(dense, 3, method="baseline", sample_rows="auto", random_state=0)
    np.testing.assert_array_equal(result.U, expected.U)
    np.testing.assert_array_equal(result.V, expected.V)
    assert result.error == expected.error
    assert result.lower_bound == expected.lower_bound
    in_memory = als(dense, U, V)
    assert polished.history == in_memory.history


def test_a_persisted_array_is_used_as_it_is(client: object) -> None:
    A, _ = _persisted(8_000, 20, 1_000)
    data = DaskMatrix(A)
    assert data.array is A  # chunks already span the columns: no rechunk, no new graph
    keys = set(A.__dask_keys__() and dict(A.__dask_graph__()))
    assert set(dict(data.array.__dask_graph__())) == keys


def test_candidates_finished_together_on_the_cluster(client: object) -> None:
    """The portfolio's batched finish: one graph per half-step for all candidates, factors
    scattered (no large graph), each candidate's in-memory answer; and the default
    ``factorize`` (whose seeds are finished that way) matches the same array in memory."""
    A, dense = _persisted(40_000, 30, 5_000)
    rng = np.random.default_rng(2)
    starts = [
        ((rng.random((40_000, 3)) < p).astype(np.int8), (rng.random((30, 3)) < p).astype(np.int8))
        for p in (0.2, 0.5, 0.7)
    ]
    threshold = {"distributed.admin.large-graph-warning-threshold": _THRESHOLD}
    with dask.config.set(threshold), warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*large graph.*")
        batch = als_batch(A, [ALSStart(U, V) for U, V in starts])
        result = factorize(A, 3, random_state=0)
    for got, (U, V) in zip(batch, starts, strict=True):
        alone = als(dense, U, V)
        assert got.history == alone.history
        np.testing.assert_array_equal(got.U, alone.U)
        np.testing.assert_array_equal(got.V, alone.V)
    expected = factorize(dense, 3, sample_rows="auto", random_state=0)
    assert result.error == expected.error
    assert result.info["portfolio"]["errors"] == expected.info["portfolio"]["errors"]
    np.testing.assert_array_equal(result.U, expected.U)


@pytest.mark.parametrize("screened", [True, False])
def test_out_of_memory_the_core_is_finished_with_the_seeds(client, monkeypatch, screened):
    """In memory the core's answer is finished first (beside the seeds), then the seeds (on
    large data those that screen well on a sample), then the repair; a dask input's core answer
    is finished in the same passes as those seeds. The answers are the same."""
    from bmfdsl.pipeline import _factorize, _strategy

    if screened:
        monkeypatch.setattr(_strategy, "FULL_POLISH_CELLS", 2**16)
    A, dense = _persisted(20_000, 40, 2_500)
    batches: list[int] = []
    real_finish = _factorize._finish

    def counted(data, starts, *args, **kwargs):
        batches.append(len(starts))
        return real_finish(data, starts, *args, **kwargs)

    monkeypatch.setattr(_factorize, "_finish", counted)
    expected = factorize(dense, 4, sample_rows=200, random_state=3)
    (core, shortlisted, *repair), batches[:] = batches, []
    result = factorize(A, 4, sample_rows=200, random_state=3)
    assert core == 1 and shortlisted >= 1  # seeds worth finishing
    assert batches == [core + shortlisted, *repair]
    assert result.error == expected.error
    assert result.info["portfolio"]["errors"] == expected.info["portfolio"]["errors"]
    np.testing.assert_array_equal(result.U, expected.U)
    np.testing.assert_array_equal(result.V, expected.V)
