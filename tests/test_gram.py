"""The exact Gram matrix ``AᵀA`` (issue 26.2): the upper-triangle uint16 kernel of a CSR
pattern and the dense float32 route give the exact integer counts of the plain product,
whatever the thread count; the bound built on them stays below brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse

from bmfdsl.linalg import _kernels as kernels
from bmfdsl.linalg import as_matrix, dense_gram, exact_gram
from bmfdsl.pipeline._bounds import spectral_bound


def _random_csr(rng: np.random.Generator, m: int, n: int, density: float) -> scipy.sparse.csr_array:
    return scipy.sparse.csr_array((rng.random((m, n)) < density).astype(np.int8))


def _reference(A: np.ndarray) -> np.ndarray:
    dense = np.asarray(A, dtype=np.int64)
    return (dense.T @ dense).astype(np.float64)


@pytest.mark.parametrize(
    ("m", "n", "density"),
    [(1, 1, 1.0), (50, 1, 0.5), (40, 7, 0.0), (200, 30, 0.05), (300, 64, 0.3), (64, 90, 0.9)],
)
def test_the_pattern_and_dense_grams_equal_the_integer_product(
    m: int, n: int, density: float
) -> None:
    rng = np.random.default_rng(m * 1000 + n)
    dense = (rng.random((m, n)) < density).astype(np.int8)
    dense[:2] = 0  # empty rows (and, for small m, an empty matrix)
    A = scipy.sparse.csr_array(dense)
    expected = _reference(A.toarray())
    assert np.array_equal(exact_gram(A), expected)
    assert np.array_equal(dense_gram(A.toarray()), expected)
    assert np.array_equal(exact_gram(A, rows=True), _reference(A.toarray().T))
    assert exact_gram(A).dtype == np.float64


def test_unsorted_indices_and_duplicate_entries_count_each_position_once() -> None:
    A = _random_csr(np.random.default_rng(1), 60, 12, 0.4)
    expected = _reference(A.toarray())
    # the same rows with their indices reversed (unsorted), then with a duplicate entry
    indices = np.concatenate(
        [A.indices[A.indptr[i] : A.indptr[i + 1]][::-1] for i in range(A.shape[0])]
    )
    unsorted = scipy.sparse.csr_array((A.data, indices, A.indptr), shape=A.shape)
    unsorted.has_sorted_indices = False
    assert np.array_equal(exact_gram(unsorted), expected)
    row = int(np.flatnonzero(np.diff(A.indptr))[0])
    column = int(A.indices[A.indptr[row]])
    duplicated = scipy.sparse.csr_array(
        (
            np.concatenate([A.data, [1]]),
            np.insert(A.indices, A.indptr[row], column),
            A.indptr + (np.arange(A.shape[0] + 1) > row),
        ),
        shape=A.shape,
    )
    assert not duplicated.has_canonical_format
    before = duplicated.indices.copy()
    assert np.array_equal(exact_gram(duplicated), expected)
    assert np.array_equal(duplicated.indices, before)  # the caller's matrix is left alone


@pytest.mark.parametrize("tile", [1, 7, 64, 1024])
def test_the_tiled_pair_count_is_exact_for_sorted_and_unsorted_rows(
    monkeypatch: pytest.MonkeyPatch, tile: int
) -> None:
    """Patterns wider than the tile count their pairs tile pair by tile pair (sorted rows;
    others the row's pairs at once): the same counts for any tile width, columns at the
    tiles' edges and past the last full tile included."""
    monkeypatch.setattr(kernels, "_GRAM_TILE", tile)
    monkeypatch.setattr(kernels, "_HOT_FACTOR", np.inf)  # no hot columns: no pattern lookups
    routes: list[bool] = []  # whether each chunk was counted tile by tile
    count_chunk = kernels._add_upper_pairs

    def recorded(indptr, indices, first, stop, counts, upper, width):
        sorted_rows = kernels._rows_sorted(indptr, indices, first, stop)
        routes.append(bool(upper.shape[0] > width and sorted_rows))
        return count_chunk(indptr, indices, first, stop, counts, upper, width)

    monkeypatch.setattr(kernels, "_add_upper_pairs", recorded)
    rng = np.random.default_rng(tile)
    shapes = [(40, 1100, 0.02), (30, 150, 0.3), (3, 1025, 0.5), (80, 9, 0.6)]
    for m, n, density in shapes:
        dense = (rng.random((m, n)) < density).astype(np.int8)
        dense[::2, [0, n - 1]] = 1  # the first and last column (tile edges), in half the rows
        A = scipy.sparse.csr_array(dense)
        expected = _reference(A.toarray())
        assert np.array_equal(kernels.pattern_gram(A.indptr, A.indices, n, threads=1), expected)
        reversed_rows = np.concatenate(
            [A.indices[A.indptr[i] : A.indptr[i + 1]][::-1] for i in range(m)]
        )
        unsorted = kernels.pattern_gram(A.indptr, reversed_rows, n, threads=1)
        assert np.array_equal(unsorted, expected)
    assert routes == [route for _, n, _ in shapes for route in (n > tile, False)]


def test_counts_past_the_uint16_range_stay_exact() -> None:
    """More rows than a uint16 count holds: the partial counts are flushed in time."""
    m = 2**16 + 300
    A = scipy.sparse.csr_array(np.ones((m, 2), dtype=np.int8))
    assert exact_gram(A).tolist() == [[m, m], [m, m]]


def _counted_splits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ranges of every threaded pass from now on, counted (the passes run as before)."""
    splits: list[int] = []
    in_threads = kernels._in_threads

    def counted(function: object, ranges: list[tuple[int, int]]) -> list[object]:
        splits.append(len(ranges))
        return in_threads(function, ranges)  # type: ignore[arg-type]

    monkeypatch.setattr(kernels, "_in_threads", counted)
    return splits


@pytest.mark.parametrize("threads", [2, 3])
def test_the_threaded_kernels_do_not_depend_on_the_thread_count(
    monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    A = _random_csr(np.random.default_rng(threads), 4000, 60, 0.3)
    expected = _reference(A.toarray())
    projector = np.random.default_rng(0).standard_normal((A.shape[1], 3))
    monkeypatch.setattr(kernels, "PARALLEL_MIN_WORK", 1)  # split even these small ones
    splits = _counted_splits(monkeypatch)
    one = kernels.pattern_gram(A.indptr, A.indices, A.shape[1], threads=1)
    many = kernels.pattern_gram(A.indptr, A.indices, A.shape[1], threads=threads)
    assert np.array_equal(one, expected) and np.array_equal(many, expected)
    crosses = [
        kernels.pattern_cross(A.indptr, A.indices, projector, threads=count)
        for count in (1, threads)
    ]
    assert splits == [1, threads, 1, threads]  # the rows really were split
    # every row is summed by one thread in index order: scipy's sums, bit for bit
    assert all(np.array_equal(cross, A @ projector) for cross in crosses)
    counts = kernels.pattern_cross(A.indptr, A.indices, np.ones((60, 2), dtype=np.int64))
    assert counts.dtype == np.int64 and counts[:, 0].tolist() == np.diff(A.indptr).tolist()
    U = np.random.default_rng(1).integers(0, 2, (A.shape[0], 4)).astype(np.int8)
    splits.clear()
    transposed = [
        kernels.pattern_transposed_cross(A.indptr, A.indices, U, A.shape[1], threads=count)
        for count in (1, threads)
    ]
    assert splits == [1, threads]
    assert all(np.array_equal(cross, A.T.toarray() @ U.astype(np.int64)) for cross in transposed)


def test_the_row_solves_split_over_threads_give_the_same_codes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(7)
    V = (rng.random((40, 6)) < 0.3).astype(np.int64)
    A = (rng.random((3000, 40)) < 0.3).astype(np.int64)
    cross, gram = A @ V, V.T @ V
    monkeypatch.setattr(kernels, "PARALLEL_MIN_WORK", 1)
    monkeypatch.setattr(kernels, "default_threads", lambda: 1)
    one = kernels.best_codes_from_stats(cross, gram)
    splits = _counted_splits(monkeypatch)
    monkeypatch.setattr(kernels, "default_threads", lambda: 3)
    many = kernels.best_codes_from_stats(cross, gram)
    assert splits == [3]
    assert np.array_equal(one[0], many[0]) and np.array_equal(one[1], many[1])
    codes = kernels.code_table(6, False)
    scores = codes @ gram @ codes.T  # every code's cᵀGc, then minus 2 x·c per row
    brute = np.diagonal(scores)[None, :] - 2 * cross @ codes.T
    assert np.array_equal(many[1], brute.min(axis=1))
    assert np.array_equal(many[0], brute.argmin(axis=1))  # the lowest index on ties


def test_a_threaded_pass_raises_the_first_range_error_and_leaves_no_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whichever thread fails first, the error of the lowest failing range is raised (as one
    thread would raise it), and no helper thread outlives the call, even when starting one
    fails."""
    import threading
    import time

    def fails_late_then_early(first: int, stop: int) -> int:
        if first == 1:
            time.sleep(0.05)  # range 1 fails after range 2 has failed
            raise KeyError("range 1")
        if first == 2:
            raise ValueError("range 2")
        return stop - first

    with pytest.raises(KeyError, match="range 1"):
        kernels._in_threads(fails_late_then_early, [(0, 1), (1, 2), (2, 3)])

    before = threading.active_count()
    starts = 0
    real_start = threading.Thread.start

    def start_once(thread: threading.Thread) -> None:
        nonlocal starts
        starts += 1
        if starts > 1:
            raise RuntimeError("can't start new thread")
        real_start(thread)

    monkeypatch.setattr(threading.Thread, "start", start_once)
    with pytest.raises(RuntimeError, match="start new thread"):
        kernels._in_threads(lambda first, stop: time.sleep(0.05), [(0, 1), (1, 2), (2, 3)])
    assert threading.active_count() == before  # the helper that started was joined


@pytest.mark.parametrize(("rows", "rank"), [(1, 3), (40, 3), (200, 5), (20000, 12), (300, 17)])
def test_the_factor_gram_is_the_integer_product_on_both_routes(rows: int, rank: int) -> None:
    from bmfdsl.linalg import gram

    rng = np.random.default_rng(rows + rank)
    for density in (0.0, 0.2, 0.7, 1.0):
        factor = (rng.random((rows, rank)) < density).astype(np.int8)
        # (40, 3), (200, 5) and (20000, 12) count codes; the others sum rows
        expected = factor.T.astype(np.int64) @ factor.astype(np.int64)
        assert np.array_equal(gram(factor), expected)


def test_the_bound_from_the_new_gram_never_beats_brute_force() -> None:
    rng = np.random.default_rng(3)
    for _ in range(4):
        A = (rng.random((6, 4)) < 0.5).astype(np.int8)
        rank = 2
        optimum = min(
            _best_error(A, U, rank) for U in itertools.product((0, 1), repeat=A.shape[0] * rank)
        )
        sparse = as_matrix(scipy.sparse.csr_array(A))
        assert spectral_bound(sparse, rank) <= optimum
        assert spectral_bound(A, rank) == spectral_bound(sparse, rank)


def _best_error(A: np.ndarray, flat_u: tuple[int, ...], rank: int) -> int:
    """The least error of ``A ≈ U Vᵀ`` for this ``U`` (best ``V`` column by column)."""
    U = np.asarray(flat_u, dtype=np.int64).reshape(A.shape[0], rank)
    codes = np.array(list(itertools.product((0, 1), repeat=rank)), dtype=np.int64)
    columns = U @ codes.T  # m x 2^r: every candidate column of U Vᵀ
    errors = ((A[:, :, None] - columns[:, None, :]) ** 2).sum(axis=0)  # n x 2^r
    return int(errors.min(axis=1).sum())


def test_the_bit_counted_gram_is_exact_across_words_and_chunks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bmfdsl.linalg import _matrix, bit_gram

    rng = np.random.default_rng(3)
    A = (rng.random((1000, 37)) < 0.4).astype(np.int8)  # 1,000 rows: 15 full words and a part
    expected = _reference(A)
    assert np.array_equal(bit_gram(A), expected)
    assert np.array_equal(bit_gram(A.astype(bool)), expected)
    assert np.array_equal(bit_gram(np.asfortranarray(A)), expected)
    monkeypatch.setattr(_matrix, "_BIT_GRAM_CHUNK_ROWS", 130)  # chunks that split words
    assert np.array_equal(dense_gram(A), expected)
    gram = np.ones((37, 37))
    assert np.array_equal(bit_gram(A, gram), expected + 1)  # added into a given array


def test_a_dask_matrix_sums_its_gram_in_the_pass_that_checks_it() -> None:
    import dask
    import dask.array as da

    rng = np.random.default_rng(3)
    dense = (rng.random((1000, 30)) < 0.1).astype(np.int8)
    tall = as_matrix(da.from_array(dense, chunks=(128, 30)), with_gram=True)
    assert "gram" in vars(tall)  # filled by the check's pass
    assert np.array_equal(tall.gram, _reference(dense))
    assert np.array_equal(tall.column_norms, dense.sum(axis=0))
    assert "gram" not in vars(as_matrix(da.from_array(dense, chunks=(128, 30))))  # not asked
    wide = as_matrix(da.from_array(dense.T.copy(), chunks=(30, 128)), with_gram=True)
    assert "gram" not in vars(wide)  # a wide one is sampled as its transpose: not summed
    assert "gram" in vars(wide.T)  # ... which sums it in its own check
    with dask.config.set(scheduler="sync"):
        assert np.array_equal(wide.T.gram, _reference(dense))
    bad = dense.astype(np.float64)
    bad[5, 5], bad[7, 1] = 2.0, np.nan
    with pytest.raises(Exception, match="found 2 other value"):
        as_matrix(da.from_array(bad, chunks=(128, 30)))


def _repeated_patterns(rng: np.random.Generator, m: int, n: int) -> scipy.sparse.csr_array:
    """Rows that repeat one of a few patterns on the first 20 columns, plus sparse noise."""
    patterns = (rng.random((4, 20)) < 0.5).astype(np.int8)
    dense = (rng.random((m, n)) < 0.01).astype(np.int8)
    dense[:, :20] |= patterns[rng.integers(0, 4, m)]
    dense[rng.random(m) < 0.3, :20] = 0  # rows without a pattern
    return scipy.sparse.csr_array(dense)


def test_rows_that_repeat_a_hot_pattern_are_counted_once_per_pattern_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(11)
    A = _repeated_patterns(rng, 3000, 120)
    expected = _reference(A.toarray())
    assert kernels._hot_columns(A.indptr, A.indices, 0, 3000, 120)[:20].all()
    assert np.array_equal(kernels.pattern_gram(A.indptr, A.indices, 120, threads=1), expected)
    assert np.array_equal(kernels.pattern_gram(A.indptr, A.indices, 120, threads=3), expected)
    shuffled = A.copy()  # unsorted rows: the same set in another order is another pattern
    for i in range(0, 3000, 2):
        start, stop = shuffled.indptr[i], shuffled.indptr[i + 1]
        shuffled.indices[start:stop] = shuffled.indices[start:stop][::-1].copy()
    assert np.array_equal(exact_gram(shuffled), expected)
    # a full table (new patterns counted directly), and the lookups given up after a chunk
    monkeypatch.setattr(kernels, "_MAX_PATTERNS", 2)
    monkeypatch.setattr(kernels, "_MAX_PATTERN_ONES", 15)
    assert np.array_equal(kernels.pattern_gram(A.indptr, A.indices, 120, threads=1), expected)
    monkeypatch.setattr(kernels, "_UINT16_ROWS", 100)
    monkeypatch.setattr(kernels, "_MIN_HIT_RATE", 1.1)  # no lookup pays: stop after one chunk
    assert np.array_equal(kernels.pattern_gram(A.indptr, A.indices, 120, threads=1), expected)


def test_the_pattern_table_pays_only_when_lookups_find_their_pattern() -> None:
    rng = np.random.default_rng(12)
    repeated = _repeated_patterns(rng, 2000, 60)
    table = kernels._PatternTable.empty()
    hot = kernels._hot_columns(repeated.indptr, repeated.indices, 0, 2000, 60)
    counts, upper = np.zeros((60, 60), np.uint16), np.zeros((60, 60))
    kernels._add_split_pairs(
        repeated.indptr, repeated.indices, 0, 2000, counts, upper, hot, *table.arrays()
    )
    assert table.pays() and table.used[0] < 50 < 1000 < table.used[3]  # 4 patterns, and noise
    dense = np.eye(2000, 60, dtype=np.int8)
    dense[:, :16] = np.random.default_rng(1).random((2000, 16)) < 0.5  # random hot parts
    distinct = scipy.sparse.csr_array(dense)
    table = kernels._PatternTable.empty()
    hot = np.zeros(60, dtype=bool)
    hot[:16] = True
    kernels._add_split_pairs(
        distinct.indptr, distinct.indices, 0, 2000, counts, upper, hot, *table.arrays()
    )
    assert not table.pays()  # 2^16 possible hot parts among 2,000 rows: mostly misses


def test_a_row_with_more_stored_entries_than_columns_is_counted_entry_by_entry() -> None:
    # pattern_gram counts stored entries (exact_gram canonicalizes first); a row longer than
    # the matrix is wide must not overrun the split kernel's buffers
    indptr = np.array([0, 10, 12, 14, 16])  # 8 columns; row 0 stores 10 entries
    indices = np.array([0, 1] * 5 + [0, 1, 0, 1, 2, 3])
    expected = np.zeros((8, 8))
    for i in range(4):
        row = indices[indptr[i] : indptr[i + 1]]
        for p, q in itertools.combinations_with_replacement(range(row.size), 2):
            j, k = sorted((row[p], row[q]))
            expected[j, k] += 1
    expected = np.triu(expected) + np.triu(expected, 1).T
    assert kernels._hot_columns(indptr, indices, 0, 4, 8)[:2].all()  # the split kernel runs
    assert np.array_equal(kernels.pattern_gram(indptr, indices, 8, threads=1), expected)


def test_lookups_that_miss_in_the_probe_rows_stop_there_and_the_counts_stay_exact(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(13)
    dense = (rng.random((3000, 60)) < 0.02).astype(np.int8)
    dense[:, :16] |= rng.random((3000, 16)) < 0.5  # hot parts that rarely repeat
    distinct = scipy.sparse.csr_array(dense)
    repeated = _repeated_patterns(rng, 3000, 60)
    monkeypatch.setattr(kernels, "_PROBE_ROWS", 200)
    monkeypatch.setattr(kernels, "_UINT16_ROWS", 500)
    looked_up: list[tuple[int, int]] = []
    split_pairs = kernels._add_split_pairs

    def recorded(indptr: np.ndarray, indices: np.ndarray, first: int, stop: int, *rest: object):
        looked_up.append((first, stop))
        return split_pairs(indptr, indices, first, stop, *rest)

    monkeypatch.setattr(kernels, "_add_split_pairs", recorded)
    chunks = [(start, min(3000, start + 500)) for start in range(200, 3000, 500)]
    for A, expected_ranges in [(distinct, [(0, 200)]), (repeated, [(0, 200), *chunks])]:
        looked_up.clear()
        gram = kernels.pattern_gram(A.indptr, A.indices, 60, threads=1)
        assert np.array_equal(gram, _reference(A.toarray()))
        assert looked_up == expected_ranges


def test_pattern_cross_into_sums_like_pattern_cross_and_refuses_wrong_shapes() -> None:
    """The single-thread kernel other compiled loops call gives pattern_cross's sums, and a
    wrong ``out`` or a column index beyond the factor raises before any read (it would read
    past the arrays' ends otherwise)."""
    from bmfdsl.linalg import pattern_cross_into

    rng = np.random.default_rng(8)
    csr = scipy.sparse.csr_array((rng.random((30, 20)) < 0.2).astype(np.int8))
    factor = rng.random((20, 3))
    out = np.empty((30, 3))
    pattern_cross_into(csr.indptr, csr.indices, factor, out)
    assert out.tobytes() == kernels.pattern_cross(csr.indptr, csr.indices, factor).tobytes()
    with pytest.raises(ValueError, match="rows x r"):
        pattern_cross_into(csr.indptr, csr.indices, factor, np.empty((31, 3)))
    with pytest.raises(ValueError, match="beyond the factor"):
        pattern_cross_into(csr.indptr, csr.indices, factor[:5], out)


@pytest.mark.parametrize(("m", "n", "rank"), [(3, 5, 1), (130, 64, 3), (257, 129, 7)])
def test_the_bit_products_are_the_integer_products_across_words(m: int, n: int, rank: int) -> None:
    rng = np.random.default_rng(m + n)
    A = (rng.random((m, n)) < 0.4).astype(np.int8)
    U = (rng.random((m, rank)) < 0.5).astype(np.int8)
    V = (rng.random((n, rank)) < 0.5).astype(np.int8)
    wide = A.astype(np.int64)
    assert kernels.row_bits(A).shape == (m, -(-n // 64))
    assert kernels.column_bits(A).shape == (n, -(-m // 64))
    np.testing.assert_array_equal(kernels.column_bits(A), kernels.row_bits(A.T))
    product = kernels.bit_products(kernels.row_bits(A), kernels.row_bits(V.T))
    assert product.dtype == np.int64
    np.testing.assert_array_equal(product, wide @ V)
    np.testing.assert_array_equal(kernels.pack_row_bits(A), kernels.row_bits(A))
    crossed = kernels.bit_cross(kernels.pack_row_bits(A), V)  # the annealing's half sweeps
    assert crossed.dtype == np.int64
    np.testing.assert_array_equal(crossed, wide @ V)
    np.testing.assert_array_equal(crossed, kernels.dense_cross(A, V))
    data = as_matrix(A)
    np.testing.assert_array_equal(data.cross(V), wide @ V)
    np.testing.assert_array_equal(data.cross(V, rows=slice(1, m)), wide[1:] @ V)
    np.testing.assert_array_equal(data.transposed_cross(U), wide.T @ U)


def test_the_bit_products_split_over_threads_give_the_same_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    A = (rng.random((300, 100)) < 0.5).astype(np.int8)
    V = (rng.random((100, 6)) < 0.5).astype(np.int8)
    one = kernels.bit_products(kernels.row_bits(A), kernels.row_bits(V.T))
    monkeypatch.setattr(kernels, "PARALLEL_MIN_WORK", 1)
    monkeypatch.setattr(kernels, "default_threads", lambda: 3)
    splits = _counted_splits(monkeypatch)
    many = kernels.bit_products(kernels.row_bits(A), kernels.row_bits(V.T))
    assert splits == [3]
    np.testing.assert_array_equal(one, many)


def test_the_wrapper_products_take_other_factors_as_sparse_ones_do_and_refuse_bad_shapes() -> None:
    from bmfdsl.errors import InvalidParameterError

    A = (np.random.default_rng(2).random((70, 70)) < 0.5).astype(np.int8)
    data = as_matrix(A)
    counts = np.full((70, 2), 2)
    weights = np.full((70, 1), 0.999)  # not 0/1: multiplied as it is, never truncated
    np.testing.assert_array_equal(data.cross(counts), A.astype(np.int64) @ counts)
    np.testing.assert_allclose(data.cross(weights), A @ weights)
    sparse = as_matrix(scipy.sparse.csr_array(A))
    np.testing.assert_array_equal(data.cross(counts), sparse.cross(counts))
    with pytest.raises(InvalidParameterError, match="70 rows"):
        data.cross(np.ones((100, 1), dtype=np.int8))  # the same number of 64-bit words
    with pytest.raises(InvalidParameterError, match="70 rows"):
        data.transposed_cross(np.ones((128, 1), dtype=np.int8))
    with pytest.raises(InvalidParameterError, match="only 0 and 1"):
        data.transposed_cross(np.full((70, 1), 0.5))
    with pytest.raises(InvalidParameterError, match="one width"):
        kernels.bit_products(np.zeros((2, 1), np.uint64), np.zeros((2, 2), np.uint64))


@pytest.mark.parametrize(("n", "dtype"), [(64, np.int8), (61, np.int8), (16, np.float64)])
def test_the_dense_pattern_lists_every_one_in_order(n: int, dtype: type) -> None:
    # 64 int8 columns: read by words; 61 columns or float64: entry by entry
    rng = np.random.default_rng(n)
    A = (rng.random((90, n)) < 0.2).astype(dtype)
    A[3] = 1  # a full row, and an empty one
    A[4] = 0
    indptr, indices = kernels.dense_pattern(A)
    expected = scipy.sparse.csr_array(A != 0)
    assert indptr.dtype == indices.dtype == np.int64
    np.testing.assert_array_equal(indptr, expected.indptr)
    np.testing.assert_array_equal(indices, expected.indices)


def test_the_chunked_bit_gram_does_not_depend_on_its_threads() -> None:
    from bmfdsl.linalg._kernels import bit_gram, chunked_bit_gram

    rng = np.random.default_rng(4)
    block = (rng.random((1000, 130)) < 0.3).astype(np.int8)
    expected = block.T.astype(np.int64) @ block.astype(np.int64)

    def rows(start: int, stop: int) -> np.ndarray:
        return block[start:stop]

    for threads in (1, 2, 3, 7):
        assert np.array_equal(chunked_bit_gram(block.shape, rows, 97, threads=threads), expected)
    assert np.array_equal(bit_gram(block), expected)
    assert chunked_bit_gram((0, 130), rows, 97, threads=4).shape == (130, 130)
