"""The data layer and its shared kernels (bmfdsl.linalg), and StageTimer."""

from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from bmfdsl.errors import InvalidMatrixError
from bmfdsl.linalg import (
    DaskMatrix,
    InMemoryMatrix,
    Orientation,
    als_loop,
    as_matrix,
    code_table,
    is_dask_array,
    solve_rows_exact,
    squared_error,
)
from bmfdsl.timings import StageTimer


def _random(shape, p=0.5, seed=0):
    return (np.random.default_rng(seed).random(shape) < p).astype(np.int8)


def _brute_force_rows(A, V, one_hot):
    """Per row: the minimal error over every (one-hot) code, by enumeration."""
    rank = V.shape[1]
    codes = [c for c in itertools.product((0, 1), repeat=rank) if not one_hot or sum(c) == 1]
    products = np.array(codes) @ V.T
    return ((A[:, None, :] - products[None]) ** 2).sum(axis=2).min(axis=1)


@pytest.mark.parametrize("one_hot", [False, True])
@pytest.mark.parametrize("keep_ties", [False, True])
def test_exact_bls_kernel_matches_brute_force(one_hot, keep_ties):
    A, V = _random((20, 9), seed=1), _random((9, 3), seed=2)
    U = code_table(3, one_hot)[np.zeros(20, dtype=int)].copy()  # a valid start for both tables
    error = solve_rows_exact(A, V, code_table(3, one_hot), U, keep_ties)
    assert error == _brute_force_rows(A, V, one_hot).sum() == squared_error(A, U, V)
    assert not one_hot or (U.sum(axis=1) == 1).all()


def test_keep_ties_keeps_the_current_row_and_replaces_an_invalid_one():
    A = np.array([[1, 1]], dtype=np.int8)
    V = np.array([[1, 0], [1, 0]], dtype=np.int8)  # column 1 of V is empty: its bit is a tie
    U = np.array([[1, 1]], dtype=np.int8)
    assert solve_rows_exact(A, V, code_table(2, False), U, True) == 0
    assert U.tolist() == [[1, 1]]  # kept: as good as the lowest code [1, 0]
    assert solve_rows_exact(A, V, code_table(2, False), U, False) == 0
    assert U.tolist() == [[1, 0]]  # without keep_ties: the lowest code index
    broken = np.array([[1, 1]], dtype=np.int8)  # not one-hot: replaced although it scores 0
    assert solve_rows_exact(A, V, code_table(2, True), broken, True) == 0
    assert broken.tolist() == [[1, 0]]


def test_als_loop_never_returns_worse_than_its_start_and_reports_true_errors():
    A = _random((15, 8), seed=3)
    for seed in range(5):
        U, V = _random((15, 3), seed=10 + seed), _random((8, 3), seed=20 + seed)
        start = squared_error(A, U, V)
        history = np.zeros(21, dtype=np.int64)
        best_U, best_V, best, solves = als_loop(
            A, np.ascontiguousarray(A.T), U.copy(), V.copy(), code_table(3, False),
            code_table(3, False), 20, 2, False, start, history, False,
        )  # fmt: skip
        assert best <= start and best == squared_error(A, best_U, best_V)
        assert 1 <= solves <= 20 and min(history[1 : solves + 1]) == best


def test_in_memory_matrix_statistics():
    A = _random((13, 5), seed=4)
    data = as_matrix(A, chunk_rows=4)
    assert isinstance(data, InMemoryMatrix) and as_matrix(data) is data
    assert data.total == int(A.sum()) and data.column_norms.tolist() == A.sum(axis=0).tolist()
    U = _random((13, 2), seed=5)
    assert data.transposed_cross(U).tolist() == (A.T.astype(int) @ U).tolist()
    assert data.take_rows([3, 0, 3]).tolist() == A[[3, 0, 3]].tolist()
    assert data.T.A.tolist() == A.T.tolist()
    assert not is_dask_array(A)


def test_dask_matrix_agrees_with_memory():
    da = pytest.importorskip("dask.array")
    A = _random((40, 6), seed=6)
    lazy = da.from_array(A, chunks=(7, 3))
    assert is_dask_array(lazy)
    data = as_matrix(lazy)
    assert isinstance(data, DaskMatrix) and data.num_blocks == 6
    assert data.total == int(A.sum()) and data.column_norms.tolist() == A.sum(axis=0).tolist()
    U = _random((40, 2), seed=7)
    assert data.transposed_cross(U).tolist() == (A.T.astype(int) @ U).tolist()
    assert data.take_rows([39, 0, 39]).tolist() == A[[39, 0, 39]].tolist()
    sums = data.sum_blocks(lambda block: block.sum(axis=0), shape=(6,), dtype=np.int64)
    assert sums.tolist() == A.sum(axis=0).tolist()
    rows = data.map_rows(lambda block: block.sum(axis=1), columns=None, dtype=np.int64)
    assert rows.compute().tolist() == A.sum(axis=1).tolist()
    assert data.T.shape == (6, 40)
    with pytest.raises(InvalidMatrixError, match="only 0 and 1"):
        as_matrix(da.from_array(A * 2, chunks=(7, 3)))


@pytest.mark.parametrize("dtype", [np.float16, np.uint32, np.bool_, np.float64])
def test_dask_matrix_takes_any_0_1_dtype(dtype):
    da = pytest.importorskip("dask.array")
    A = _random((60, 5), seed=11)
    U, V = _random((60, 2), seed=12), _random((5, 2), seed=13)
    for (lazy, dense), with_gram in itertools.product(
        (
            (da.from_array(A.astype(dtype), chunks=(13, 5)), A),
            (da.from_array(A.T.astype(dtype), chunks=(2, 60)), A.T),
        ),
        (False, True),
    ):
        # tall with_gram: the Gram in the check pass; else by a pass of its own when read
        data = DaskMatrix(lazy, with_gram=with_gram)
        assert data.gram.tolist() == (dense.T.astype(int) @ dense).tolist()
        assert data.column_norms.tolist() == dense.sum(axis=0).tolist()
    data = DaskMatrix(da.from_array(A.astype(dtype), chunks=(13, 5)))
    assert data.squared_error(U, V) == int(((A - U.astype(int) @ V.T) ** 2).sum())
    assert data.transposed_cross(U).tolist() == (A.T.astype(int) @ U).tolist()
    if dtype is not np.bool_:
        with pytest.raises(InvalidMatrixError, match="found 1 other"):
            DaskMatrix(
                da.from_array(
                    np.where(np.arange(300).reshape(60, 5) == 7, 2, A).astype(dtype), chunks=(13, 5)
                )
            )


def test_dask_check_pass_holds_one_gram_whatever_the_block_count():
    dask = pytest.importorskip("dask")
    import tracemalloc

    import dask.array as da

    n = 256
    gram_bytes = n * n * 8
    peaks = []
    for blocks in (30, 30, 300):  # the first run loads numba's kernels (not counted)
        A = (np.random.default_rng(blocks).random((blocks * 10, n)) < 0.3).astype(np.int8)
        with dask.config.set(scheduler="sync"):
            lazy = da.from_array(A, chunks=(10, n)).persist()
            tracemalloc.start()
            data = DaskMatrix(lazy, with_gram=True)  # tall, n <= 256: summed in the check
            peaks.append(tracemalloc.get_traced_memory()[1] / gram_bytes)
            tracemalloc.stop()
        assert data.gram.tolist() == (A.T.astype(int) @ A).tolist()
    # one Gram per block held by the client grew by 270 Grams (and its stacked copy by as
    # many) from 30 to 300 blocks; reduced as dask goes, only the graph grows (~9 Grams)
    assert peaks[2] - peaks[1] < 30, peaks
    assert peaks[2] < 64, peaks


def test_a_dask_matrix_sums_its_gram_only_for_a_caller_that_reads_it(monkeypatch):
    dask = pytest.importorskip("dask")
    import dask.array as da

    from bmfdsl import factorize

    passes: list[str] = []
    real_sum_blocks = DaskMatrix.sum_blocks

    def counted(self, func, *args, **kwargs):
        gram_in_check = func.__name__ == "_checked_block_sums" and args[0]
        passes.append("check + gram" if gram_in_check else func.__name__)
        return real_sum_blocks(self, func, *args, **kwargs)

    monkeypatch.setattr(DaskMatrix, "sum_blocks", counted)
    A = _random((4_000, 40), p=0.3, seed=14)
    U, V = _random((4_000, 3), seed=15), _random((40, 3), seed=16)
    with dask.config.set(scheduler="sync"):
        lazy = da.from_array(A, chunks=(1_000, 40))
        assert squared_error(lazy, U, V) == squared_error(A, U, V)
        assert passes == ["_checked_block_sums", "_block_squared_error"]  # no Gram summed
        passes.clear()
        data = as_matrix(lazy, with_gram=True)
        assert passes == ["check + gram"] and "gram" in vars(data)
        assert data.gram.tolist() == (A.T.astype(int) @ A).tolist()
        passes.clear()
        result = factorize(lazy, 3, random_state=0)  # its sampling and bound read the Gram
    assert passes.count("check + gram") == 1 and "dense_gram" not in passes
    expected = factorize(A, 3, sample_rows="auto", random_state=0)
    assert (result.error, result.lower_bound) == (expected.error, expected.lower_bound)


def test_orientation_round_trips():
    A = _random((3, 5), seed=8)
    U, V = _random((3, 2), seed=9), _random((5, 2), seed=10)
    flipped = Orientation(transposed=True)
    solved_U, solved_V = flipped.factors(U, V)  # the factors of Aᵀ ≈ V Uᵀ
    assert squared_error(flipped.matrix(A), solved_U, solved_V) == squared_error(A, U, V)
    assert flipped.factors(solved_U, solved_V) == (U, V)
    assert [flipped.side(s) for s in ("U", "V", None)] == ["V", "U", None]
    same = Orientation(transposed=False)
    assert same.matrix(A) is A and same.side("U") == "U" and same.factors(U, V) == (U, V)


def test_stage_timer_adds_up_repeated_blocks():
    timer = StageTimer()
    with timer("a"):
        summed = sum([1, 2])
    assert summed == 3
    first = timer.timings()["a"]
    with timer("a"):
        time.sleep(0.01)
    timings = timer.timings()
    assert timings["a"] >= first + 0.01 and timings["total"] >= timings["a"]
    with pytest.raises(ZeroDivisionError), timer("b"):
        _ = 1 / 0
    assert "b" in timer.timings()  # a failed stage is still timed


def test_every_matrix_kind_implements_the_binary_matrix_protocol_alike():
    import scipy.sparse

    da = pytest.importorskip("dask.array")
    A = _random((23, 6), seed=8)
    U, V = _random((23, 3), seed=9), _random((6, 3), seed=10)
    kinds = [
        as_matrix(A),
        as_matrix(scipy.sparse.csr_array(A)),
        as_matrix(da.from_array(A, chunks=(5, 6))),
    ]
    expected_error = int(((A.astype(int) - U.astype(int) @ V.T) ** 2).sum())
    for data in kinds:
        assert data.shape == (23, 6) and data.total == int(A.sum())
        assert data.column_norms.tolist() == A.sum(axis=0).tolist()
        assert data.dense().tolist() == A.tolist()
        assert data.take_rows([4, 0, 4]).tolist() == A[[4, 0, 4]].tolist()
        assert data.transposed_cross(U).tolist() == (A.T.astype(int) @ U).tolist()
        assert data.squared_error(U, V) == squared_error(data, U, V) == expected_error
        assert data.T.shape == (6, 23) and data.T.dense().tolist() == A.T.tolist()
    assert [data.in_memory for data in kinds] == [True, True, False]
    assert [data.layout() for data in kinds] == [
        {"storage": "dense"},
        {"storage": "sparse"},
        {"storage": "dask", "dask_blocks": 5},
    ]


def test_dask_take_rows_gathers_slices_and_scattered_rows_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dask.array as da

    from bmfdsl.linalg import _matrix as matrix_module

    rng = np.random.default_rng(5)
    dense = (rng.random((1000, 12)) < 0.3).astype(np.int8)
    data = as_matrix(da.from_array(dense, chunks=(128, 12)))
    consecutive = np.arange(100, 400)  # slices of three blocks
    scattered = np.array([999, 3, 3, 500, 130, 0, 640, 641])  # repeats, any order
    for rows in (consecutive, scattered, np.concatenate([scattered, consecutive])):
        assert np.array_equal(data.take_rows(rows), dense[rows])
    assert data.take_rows(np.array([], dtype=np.int64)).shape == (0, 12)
    monkeypatch.setattr(matrix_module, "_TAKE_MAX_SCATTERED_ROWS", 2)  # dask's fancy indexing
    assert np.array_equal(data.take_rows(scattered), dense[scattered])
    with pytest.raises(IndexError):
        data.take_rows(np.array([1000]))
