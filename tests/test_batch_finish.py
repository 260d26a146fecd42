"""Issue 26 items 1 and 3: the portfolio's candidates are finished in shared passes over ``A``.

:func:`solve_bls_many` and :func:`als_batch` take ``k`` candidates at once (one product
``A [V_1 … V_k]`` per U half-step, one ``Aᵀ [U_1 … U_k]`` per V half-step) and must give every
candidate exactly what finishing it alone gives: the same U, V, error, solves and history, on
dense, sparse and dask input, at ranks 1-13 (13: the local search beyond enumeration), with
ties (repeated columns and rows) and with candidates that stop at different solves. The BLS
row solves score each distinct row of ``A V`` once and a dense ``A`` in row groups: both must
give what scoring every row of the whole matrix gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from bmfdsl.linalg import SparseMatrix, as_matrix
from bmfdsl.solvers import ALSStart, als, als_batch, solve_bls_many, solve_bls_with_error

da = pytest.importorskip("dask.array")


def _tied(seed: int, m: int, n: int, r: int) -> np.ndarray:
    """A planted 0/1 matrix with repeated rows and columns and 5% noise (many tied codes)."""
    rng = np.random.default_rng(seed)
    U = (rng.random((m // 2, r)) < 0.35).astype(np.int64)
    V = (rng.random((n // 2, r)) < 0.35).astype(np.int64)
    core = np.minimum(U @ V.T, 1) ^ (rng.random((m // 2, n // 2)) < 0.05)
    return np.repeat(np.repeat(core, 2, axis=0), 2, axis=1).astype(np.int8)[:m, :n]


def _inputs(A: np.ndarray, kind: str) -> object:
    if kind == "sparse":
        return scipy.sparse.csr_array(A)
    if kind == "dask":
        return da.from_array(A, chunks=(A.shape[0] // 3 + 1, A.shape[1]))
    return A


def _candidates(seed: int, m: int, n: int, r: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Starts that differ: random ones, one with repeated columns (ties between codes), one
    with all-zero V (ties everywhere) and a repeat of the first."""
    rng = np.random.default_rng(seed)
    starts = [
        ((rng.random((m, r)) < p).astype(np.int8), (rng.random((n, r)) < p).astype(np.int8))
        for p in (0.2, 0.5)
    ]
    U, V = starts[0]
    starts.append((U, np.repeat(V[:, :1], r, axis=1)))
    starts.append((np.zeros((m, r), np.int8), np.zeros((n, r), np.int8)))
    starts.append(starts[0])
    return starts


def _same(got: object, expected: object) -> None:
    assert got.history == expected.history  # type: ignore[attr-defined]
    assert got.solves == expected.solves and got.error == expected.error  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got.U, expected.U)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(got.V, expected.V)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["dense", "sparse", "dask"])
@pytest.mark.parametrize("rank", [1, 3, 8, 12, 13])
def test_bls_of_many_factors_equals_each_solve(
    monkeypatch: pytest.MonkeyPatch, kind: str, rank: int
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    monkeypatch.setattr(bls_module, "_TRANSPOSED_CHUNK_BYTES", 2000)  # dask: Aᵀ U in chunks
    A = _tied(rank, 90, 40, 4)
    Vs = [V for _, V in _candidates(rank + 100, 90, 40, rank)]
    starts = [U for U, _ in _candidates(rank + 100, 90, 40, rank)]
    data = as_matrix(_inputs(A, kind))
    solved = solve_bls_many(data, Vs, starts=starts)
    assert len(solved) == len(Vs)
    for (U, error, cross), V, start in zip(solved, Vs, starts, strict=True):
        alone_U, alone_error = solve_bls_with_error(
            _inputs(A, kind), V, start=None if kind == "dask" else start
        )
        np.testing.assert_array_equal(U, alone_U)
        assert error == alone_error == int(((A - U.astype(int) @ V.T) ** 2).sum())
        if kind == "dask":  # summed in the same pass
            np.testing.assert_array_equal(cross, A.T.astype(np.int64) @ U)
        else:
            assert cross is None


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("kind", ["dense", "numpy", "sparse", "dask"])
@pytest.mark.parametrize("rank", [1, 2, 5, 9, 13])
def test_als_of_many_starts_equals_each_als(
    monkeypatch: pytest.MonkeyPatch, kind: str, rank: int, threads: int
) -> None:
    from bmfdsl.solvers import _als as als_module

    monkeypatch.setattr(als_module, "THREADED_MIN_ENTRIES", 0)  # side by side even here
    A = _tied(rank + 7, 80, 36, 5)
    device = "numpy" if kind == "numpy" else "cpu"  # numpy: the array path, not the kernel
    data = _inputs(A, "dense" if kind == "numpy" else kind)
    starts = _candidates(rank + 200, 80, 36, rank)
    planted = als(A, *starts[1], max_solves=20)  # a start that is already a fixed point
    starts.append((planted.U, planted.V))
    batch = als_batch(
        data, [ALSStart(U, V) for U, V in starts], device=device, max_solves=9, threads=threads
    )
    assert len({result.solves for result in batch}) > 1  # runs leave the batch at different times
    for result, (U, V) in zip(batch, starts, strict=True):
        _same(result, als(data, U, V, device=device, max_solves=9))


@pytest.mark.parametrize("failing", [0, 1])  # the batch waited for first, or a later one
def test_a_failing_batch_stops_the_others_and_leaves_no_thread(
    monkeypatch: pytest.MonkeyPatch, failing: int
) -> None:
    import threading
    import time

    from bmfdsl.solvers import _als as als_module
    from bmfdsl.solvers import _bls as bls_module

    monkeypatch.setattr(als_module, "THREADED_MIN_ENTRIES", 0)
    monkeypatch.setattr(bls_module, "_KERNEL_MAX_ENTRIES", 0)  # half-steps, not one kernel
    A = _tied(3, 70, 30, 3)
    starts = _candidates(5, 70, 30, 3)[:2]  # two batches of one start each
    step_V = als_module._step_V
    calls: list[str] = []

    def step_or_fail(runs, data, one_hot, solve_options):  # type: ignore[no-untyped-def]
        if any(np.array_equal(run.V, starts[failing][1]) for run in runs):
            raise ValueError("a solve failed")
        calls.append(threading.current_thread().name)
        time.sleep(0.05)  # the other batch is still running when the failure arrives
        return step_V(runs, data, one_hot, solve_options)

    monkeypatch.setattr(als_module, "_step_V", step_or_fail)
    with pytest.raises(ValueError, match="a solve failed"):
        als_batch(A, [ALSStart(U, V) for U, V in starts], threads=2, max_solves=20)
    assert len(calls) <= 2  # stopped at its next half-step, not after its whole ALS
    assert not [t for t in threading.enumerate() if t.name.startswith("bmfdsl-als")]


def test_known_errors_and_crosses_give_the_same_runs() -> None:
    A = _tied(3, 70, 30, 3)
    starts = _candidates(5, 70, 30, 3)
    known = [
        ALSStart(U, V, int(((A - U.astype(int) @ V.T) ** 2).sum()), A.T.astype(np.int64) @ U)
        for U, V in starts
    ]
    for result, (U, V) in zip(als_batch(A, known, device="numpy"), starts, strict=True):
        _same(result, als(A, U, V, device="numpy"))


def test_one_pass_over_A_per_half_step_for_all_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    A = scipy.sparse.csr_array(_tied(11, 120, 50, 4))
    starts = _candidates(12, 120, 50, 4)
    passes = {"A V": 0, "Aᵀ U": 0}
    cross, transposed_cross = SparseMatrix.cross, SparseMatrix.transposed_cross

    def counted_cross(self: SparseMatrix, factor: np.ndarray) -> np.ndarray:
        passes["A V"] += 1
        return cross(self, factor)

    def counted_transposed(self: SparseMatrix, U: np.ndarray, device: str = "cpu") -> np.ndarray:
        passes["Aᵀ U"] += 1
        return transposed_cross(self, U, device)

    monkeypatch.setattr(SparseMatrix, "cross", counted_cross)
    monkeypatch.setattr(SparseMatrix, "transposed_cross", counted_transposed)
    results = als_batch(A, [ALSStart(U, V) for U, V in starts])
    longest = max(result.solves for result in results)
    # V first: solves 1, 3, 5, ... are V steps, each after one Aᵀ U pass (the first one's is
    # the start's error); solves 2, 4, ... are U steps, one A V pass each
    assert passes == {"A V": longest // 2, "Aᵀ U": (longest + 1) // 2}
    assert sum(result.solves for result in results) > longest  # fewer passes than alone


def test_mixed_ranks_and_wrong_shapes_are_refused() -> None:
    from bmfdsl.errors import InvalidMatrixError, InvalidParameterError

    A = _tied(1, 20, 10, 2)
    with pytest.raises(InvalidMatrixError, match="same rank"):
        als_batch(
            A,
            [
                ALSStart(np.zeros((20, 2)), np.zeros((10, 2))),
                ALSStart(np.zeros((20, 3)), np.zeros((10, 3))),
            ],
        )
    with pytest.raises(InvalidMatrixError, match="same rank"):
        solve_bls_many(as_matrix(A), [np.zeros((10, 2)), np.zeros((10, 3))])
    with pytest.raises(InvalidParameterError, match="one start"):
        solve_bls_many(as_matrix(A), [np.zeros((10, 2))], starts=[None, None])
    assert als_batch(A, []) == []
    with pytest.raises(InvalidParameterError, match="threads must be an integer >= 1"):
        als_batch(A, [ALSStart(np.zeros((20, 2)), np.zeros((10, 2)))], threads=0)


@pytest.mark.parametrize("kind", ["dense", "numpy", "sparse"])
@pytest.mark.parametrize("rank", [4, 7])
def test_repeated_rows_are_scored_once_with_the_same_answer(
    monkeypatch: pytest.MonkeyPatch, kind: str, rank: int
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    rng = np.random.default_rng(rank)
    A = np.tile(_tied(rank, 40, 30, 3), (240, 1))[rng.permutation(9600)]  # 40 kinds of row
    V = np.repeat((rng.random((30, (rank + 1) // 2)) < 0.4).astype(np.int8), 2, axis=1)[:, :rank]
    device = "numpy" if kind == "numpy" else "cpu"
    data = scipy.sparse.csr_array(A) if kind == "sparse" else A
    cross = A.astype(np.int64) @ V
    distinct = bls_module._distinct_rows(cross)
    assert distinct is not None and len(distinct[0]) == len(np.unique(cross, axis=0)) <= 40
    np.testing.assert_array_equal(distinct[0][distinct[1]], cross)
    shared = solve_bls_with_error(data, V, device=device)
    monkeypatch.setattr(bls_module, "_DISTINCT_MIN_CODES", 2**31)  # every row scored
    every_row = solve_bls_with_error(data, V, device=device)
    np.testing.assert_array_equal(shared[0], every_row[0])  # ties (repeated columns) alike
    assert shared[1] == every_row[1] == int(((A - shared[0].astype(int) @ V.T) ** 2).sum())


def test_mostly_distinct_wide_negative_or_few_rows_are_scored_row_by_row() -> None:
    from bmfdsl.solvers._bls import _distinct_rows

    rng = np.random.default_rng(0)
    assert _distinct_rows(rng.integers(0, 50, (8192, 8))) is None  # the probe: mostly distinct
    assert _distinct_rows(np.full((8192, 7), 2**8)) is None  # 9 bits x 7 columns > 62 bits
    rows, inverse = _distinct_rows(np.full((8192, 6), 2**9))  # 10 bits x 6 columns: packed
    assert rows.tolist() == [[2**9] * 6] and inverse.tolist() == [0] * 8192
    assert _distinct_rows(np.full((8192, 3), -1)) is None
    assert _distinct_rows(np.ones((100, 7), dtype=np.int64)) is None


@pytest.mark.parametrize(("rank", "one_hot"), [(5, False), (13, False), (4, True)])
def test_dense_rows_in_groups_give_the_whole_matrix_answer(
    monkeypatch: pytest.MonkeyPatch, rank: int, one_hot: bool
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    A = np.tile(_tied(rank, 60, 40, 3), (120, 1))  # 7,200 x 40: past the compiled kernel
    (start, V), (_, V2) = _candidates(rank, 7200, 40, rank)[:2]
    whole = solve_bls_many(as_matrix(A), [V, V2], one_hot=one_hot, starts=[start, None])
    monkeypatch.setattr(bls_module, "_GROUP_BYTES", 1)  # groups of _DISTINCT_MIN_ROWS rows
    grouped = solve_bls_many(as_matrix(A), [V, V2], one_hot=one_hot, starts=[start, None])
    for (U_whole, error_whole, _), (U_grouped, error_grouped, _), factor in zip(
        whole, grouped, [V, V2], strict=True
    ):
        np.testing.assert_array_equal(U_whole, U_grouped)
        assert (
            error_whole == error_grouped == int(((A - U_whole.astype(int) @ factor.T) ** 2).sum())
        )
        assert not one_hot or (U_whole.sum(axis=1) == 1).all()


@pytest.mark.parametrize(
    ("layout", "multipliers", "max_bits"),
    [
        ("shuffled", None, None),
        ("rare", None, None),  # keys the evenly spaced probe misses: added, then hashed again
        ("mostly rare", None, None),  # a fifth of the rows missed by the probe: one sort
        ("shuffled", (0, 0x9E3779B97F4A7C15), None),  # 0 maps every key to one slot: next one
        ("shuffled", (0,), None),  # no multiplier separates the keys: one sort
        ("shuffled", None, 0),  # no table small enough: one sort
    ],
)
def test_distinct_rows_equal_numpys_unique_rows(
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
    multipliers: tuple[int, ...] | None,
    max_bits: int | None,
) -> None:
    from bmfdsl.solvers import _bls as bls_module

    if multipliers is not None:
        monkeypatch.setattr(bls_module, "_HASH_MULTIPLIERS", multipliers)
    if max_bits is not None:
        monkeypatch.setattr(bls_module, "_HASH_MAX_BITS", max_bits)
    rng = np.random.default_rng(3)
    kinds = rng.integers(0, 9, (100_000, 5))
    picks = rng.integers(0, 60, 50_000)  # 60 common kinds
    if layout == "rare":
        picks[rng.choice(50_000, 30, replace=False)] = rng.integers(60, 300, 30)
    if layout == "mostly rare":
        picks[rng.choice(50_000, 10_000, replace=False)] = rng.integers(60, 100_000, 10_000)
    cross = kinds[picks]
    rows, inverse = bls_module._distinct_rows(cross)
    expected = np.unique(cross, axis=0)
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, expected.tolist()))
    np.testing.assert_array_equal(rows[inverse], cross)
    assert len(set(inverse.tolist())) == len(rows)  # every distinct row is used
