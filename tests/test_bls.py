"""BLS: exact enumeration against brute force, one-hot codes, chunking, the QUBO path."""

from __future__ import annotations

import itertools

import dimod
import numpy as np
import pytest

from bmfdsl.errors import BmfdslError, InvalidMatrixError, InvalidParameterError
from bmfdsl.solvers import _bls as bls_module
from bmfdsl.solvers import solve_bls, solve_bls_with_error
from bmfdsl.solvers._bls import enumerate_codes, solve_bls_from_stats


@pytest.fixture(params=["compiled", "blas"])
def route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test through the compiled small-problem loop and through the chunked BLAS route."""
    if request.param == "blas":
        monkeypatch.setattr(bls_module, "_KERNEL_MAX_ENTRIES", 0)
    return str(request.param)


def _random_binary(rng: np.random.Generator, shape: tuple[int, int], p: float = 0.5) -> np.ndarray:
    return (rng.random(shape) < p).astype(np.int8)


def _error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> int:
    residual = A.astype(np.int64) - U.astype(np.int64) @ V.T.astype(np.int64)
    return int((residual**2).sum())


def _brute_force_best(A: np.ndarray, V: np.ndarray, one_hot: bool = False) -> int:
    """Minimum error over every U (all 2^(m r) matrices), independent of the row split."""
    m, r = A.shape[0], V.shape[1]
    rows = [c for c in itertools.product([0, 1], repeat=r) if not one_hot or sum(c) == 1]
    best = None
    for choice in itertools.product(rows, repeat=m):
        error = _error(A, np.array(choice, dtype=np.int8).reshape(m, r), V)
        best = error if best is None else min(best, error)
    assert best is not None
    return best


def test_codes_cover_every_binary_vector_once() -> None:
    codes = enumerate_codes(4)
    assert codes.shape == (16, 4)
    assert len({tuple(c) for c in codes}) == 16
    assert codes[0].sum() == 0


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("one_hot", [False, True])
def test_enumeration_equals_brute_force_over_all_u(seed: int, one_hot: bool, route: str) -> None:
    rng = np.random.default_rng(seed)
    m, n, r = 3, 4, 2 + seed % 2
    A = _random_binary(rng, (m, n))
    V = _random_binary(rng, (n, r))
    U, error = solve_bls_with_error(A, V, one_hot=one_hot)
    assert error == _error(A, U, V)
    assert error == _brute_force_best(A, V, one_hot=one_hot)
    if one_hot:
        assert (U.sum(axis=1) == 1).all()


def test_ties_go_to_lowest_code_index(route: str) -> None:
    # Row [1, 1, 1] costs 1 with codes [1, 0], [0, 1] and [1, 1]: the lowest index, [1, 0], wins.
    V = np.array([[1, 0], [1, 1], [0, 1]])
    assert solve_bls([[1, 1, 1]], V).tolist() == [[1, 0]]
    # With V = 0 every code is equally good: all-zero code wins.
    assert solve_bls([[1, 0, 1]], np.zeros((3, 2), dtype=int)).tolist() == [[0, 0]]
    assert solve_bls([[1, 0, 1]], np.zeros((3, 2), dtype=int), one_hot=True).tolist() == [[1, 0]]


@pytest.mark.parametrize("chunk_rows", [1, 7, 64])
def test_chunking_gives_the_same_answer(chunk_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    A = _random_binary(rng, (150, 12))
    V = _random_binary(rng, (12, 6))
    expected = solve_bls_with_error(A, V)  # compiled loop
    monkeypatch.setattr(bls_module, "_KERNEL_MAX_ENTRIES", 0)
    got = solve_bls_with_error(A, V, chunk_rows=chunk_rows)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def test_each_row_is_optimal_among_all_codes_rank_8(route: str) -> None:
    rng = np.random.default_rng(4)
    A = _random_binary(rng, (40, 20))
    V = _random_binary(rng, (20, 8), p=0.3)
    U = solve_bls(A, V)
    codes = enumerate_codes(8).astype(np.int64)
    per_code = ((A[:, None, :] - (codes @ V.T)[None, :, :]) ** 2).sum(axis=2)  # rows x codes
    chosen = ((A - U.astype(np.int64) @ V.T) ** 2).sum(axis=1)
    np.testing.assert_array_equal(chosen, per_code.min(axis=1))
    np.testing.assert_array_equal(U, codes[per_code.argmin(axis=1)])


def test_rank_16_is_enumerated_exactly() -> None:
    rng = np.random.default_rng(5)
    A = _random_binary(rng, (5, 20))
    V = np.zeros((20, 16), dtype=np.int8)
    V[:16] = np.eye(16, dtype=np.int8)  # U row = A row's first 16 entries is optimal
    U, error = solve_bls_with_error(A, V)
    np.testing.assert_array_equal(U, A[:, :16])
    assert error == int(A[:, 16:].sum())


def test_stats_form_matches_matrix_form() -> None:
    rng = np.random.default_rng(6)
    A = _random_binary(rng, (30, 9))
    V = _random_binary(rng, (9, 3))
    U, error = solve_bls_with_error(A, V)
    wide_V = V.astype(np.int64)
    codes, error_from_stats = solve_bls_from_stats(
        A.astype(np.int64) @ wide_V, wide_V.T @ wide_V, A.sum(axis=1)
    )
    np.testing.assert_array_equal(codes, U)
    assert error_from_stats == error


def test_qubo_path_on_exact_backend_matches_enumeration() -> None:
    rng = np.random.default_rng(7)
    A = _random_binary(rng, (12, 10))
    V = _random_binary(rng, (10, 4))
    U_qubo, error_qubo = solve_bls_with_error(A, V, backend=dimod.ExactSolver())
    _, error_enumerated = solve_bls_with_error(A, V)
    assert error_qubo == error_enumerated == _error(A, U_qubo, V)


def test_rank_above_16_is_solved_by_local_search() -> None:
    # V = [I_17; 0]: each row's problem is separable, so 1-flips find the optimum U = A[:, :17].
    rng = np.random.default_rng(8)
    A = _random_binary(rng, (3, 18))
    V = np.zeros((18, 17), dtype=np.int8)
    V[:17] = np.eye(17, dtype=np.int8)
    U, error = solve_bls_with_error(A, V)
    np.testing.assert_array_equal(U, A[:, :17])
    assert error == int(A[:, 17].sum())


def test_bad_inputs_raise_typed_errors() -> None:
    with pytest.raises(InvalidMatrixError, match="one row per column"):
        solve_bls(np.ones((2, 3)), np.ones((4, 1)))
    with pytest.raises(InvalidMatrixError):
        solve_bls(np.ones((2, 3)), np.full((3, 1), 2))
    with pytest.raises(InvalidParameterError, match="chunk_rows"):
        solve_bls(np.ones((2, 3)), np.ones((3, 1)), chunk_rows=0)
    with pytest.raises(BmfdslError, match=r"dimod\.Sampler"):
        solve_bls(np.ones((2, 3)), np.ones((3, 1)), backend=42)


def test_dask_input_is_solved_blockwise() -> None:
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(9)
    A = _random_binary(rng, (70, 11))
    V = _random_binary(rng, (11, 3))
    expected = solve_bls_with_error(A, V, one_hot=True)
    got = solve_bls_with_error(da.from_array(A, chunks=(16, 5)), V, one_hot=True)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]


def test_dask_row_blocks_without_rows_are_solved_like_the_others() -> None:
    # dask arrays may hold empty chunks (after filtering, or chunks=(700, 0, 1300)); they were
    # already checked with the whole matrix, so each block pass must accept zero rows
    da = pytest.importorskip("dask.array")
    from bmfdsl.linalg import as_matrix
    from bmfdsl.solvers import solve_bls_many

    rng = np.random.default_rng(10)
    A = _random_binary(rng, (60, 9))
    Vs = [_random_binary(rng, (9, 2)), _random_binary(rng, (9, 2))]
    chunked = da.from_array(A, chunks=((20, 0, 40, 0), (9,)))
    expected = solve_bls_with_error(A, Vs[0])
    got = solve_bls_with_error(chunked, Vs[0])
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1]
    for (U, error, _), V in zip(solve_bls_many(as_matrix(chunked), Vs), Vs, strict=True):
        want_U, want_error = solve_bls_with_error(A, V)
        np.testing.assert_array_equal(U, want_U)
        assert error == want_error


@pytest.mark.parametrize("sparse", [False, True])
def test_a_batch_multiplies_each_distinct_column_once(sparse: bool, monkeypatch) -> None:
    """Starts that share columns (the repair's swaps share all but one) cost one product
    column each, and every start still gets its own solve's answer."""
    import scipy.sparse

    from bmfdsl.linalg import InMemoryMatrix, SparseMatrix, as_matrix
    from bmfdsl.solvers import solve_bls_many

    rng = np.random.default_rng(21)
    A = _random_binary(rng, (500, 40), 0.3)
    base = _random_binary(rng, (40, 4), 0.3)
    Vs = [base]
    for k in range(4):
        swapped = base.copy()
        swapped[:, k] = _random_binary(rng, (40, 1), 0.3)[:, 0]
        Vs.append(swapped)
    widths: list[int] = []
    if sparse:
        real_cross = SparseMatrix.cross

        def counted_cross(self, factor):
            widths.append(factor.shape[1])
            return real_cross(self, factor)

        monkeypatch.setattr(SparseMatrix, "cross", counted_cross)
        data = as_matrix(scipy.sparse.csr_array(A))
    else:
        real_products = InMemoryMatrix.cross

        def counted_products(self, factor, rows=slice(None)):
            widths.append(factor.shape[1])
            return real_products(self, factor, rows)

        monkeypatch.setattr(InMemoryMatrix, "cross", counted_products)
        monkeypatch.setattr(bls_module, "fits_compiled_kernel", lambda rank, cells: False)
        data = as_matrix(A)
    solved = solve_bls_many(data, Vs)
    distinct = len({column.tobytes() for V in Vs for column in V.T})
    assert widths == [distinct + (not sparse)]  # (dense: and the row norms' column of ones)
    for (U, error, _), V in zip(solved, Vs, strict=True):
        want_U, want_error = solve_bls_with_error(A, V)
        np.testing.assert_array_equal(U, want_U)
        assert error == want_error


@pytest.mark.parametrize("hash_collides", [False, True])
def test_row_solves_beyond_the_table_solve_each_distinct_row_once_with_every_rows_answer(
    hash_collides, monkeypatch
):
    from bmfdsl.linalg import BRANCH_CODES_PER_RANK, solve_rows_bounded

    rank = bls_module.MAX_ENUMERATION_RANK + 2  # beyond the code table: branch and bound
    rng = np.random.default_rng(5)
    V = (rng.random((40, rank)) < 0.3).astype(np.int64)
    patterns = (rng.random((30, 40)) < 0.3).astype(np.int64)
    A = patterns[rng.integers(0, 30, size=3000)]  # rows repeat by the hundred
    cross, gram = A @ V, V.T @ V
    starts = (rng.random((3, rank)) < 0.2).astype(np.int8)
    start = starts[rng.integers(0, 3, size=3000)]  # equal rows of cross, different starts
    expected = start.copy()
    moves = bls_module.LOCAL_MOVES_PER_RANK * rank
    scores = np.empty(3000, dtype=np.int64)
    solve_rows_bounded(cross, gram, expected, scores, BRANCH_CODES_PER_RANK * rank, moves)
    solved = []
    real = bls_module.solve_rows_bounded

    def counted(cross, gram, out, scores, max_codes, moves):
        solved.append(len(out))
        return real(cross, gram, out, scores, max_codes, moves)

    monkeypatch.setattr(bls_module, "solve_rows_bounded", counted)
    if hash_collides:  # every key equal: the exact check must send every row to the search
        monkeypatch.setattr(bls_module, "_PAIR_HASH_MULTIPLIERS", np.zeros(128, dtype=np.int64))
    codes, error = solve_bls_from_stats(cross, gram, (A * A).sum(axis=1), start=start)
    assert np.array_equal(codes, expected)
    assert error == int(((A - expected.astype(np.int64) @ V.T) ** 2).sum())
    assert solved == ([3000] if hash_collides else [len(np.unique(np.c_[cross, start], axis=0))])
    assert hash_collides or solved[0] < 300


def test_row_solves_beyond_the_table_are_exact_and_fall_back_to_the_local_search() -> None:
    """Rank 14: every row's code is the exact best (lowest index on ties, as the table's
    scoring breaks them); with a negative Gram entry, the local search from the start."""
    from bmfdsl.linalg import solve_rows_local

    rank = bls_module.MAX_ENUMERATION_RANK + 2
    rng = np.random.default_rng(8)
    V = (rng.random((30, rank)) < 0.25).astype(np.int64)
    V[:, 3] = V[:, 2]  # equal columns: ties between codes
    A = (rng.random((200, 30)) < 0.4).astype(np.int64)
    cross, gram = A @ V, V.T @ V
    codes = enumerate_codes(rank).astype(np.int64)  # index order
    scores = np.einsum("ck,kl,cl->c", codes, gram, codes)[None, :] - 2 * cross @ codes.T
    U, error = solve_bls_from_stats(cross, gram, (A * A).sum(axis=1))
    np.testing.assert_array_equal(U, codes[np.argmin(scores, axis=1)])
    assert error == int(((A - U.astype(np.int64) @ V.T) ** 2).sum())
    lopsided = gram + np.triu(rng.integers(0, 3, size=(rank, rank)), 1)  # not symmetric
    scores = np.einsum("ck,kl,cl->c", codes, lopsided, codes)[None, :] - 2 * cross @ codes.T
    U, error = solve_bls_from_stats(cross, lopsided, (A * A).sum(axis=1))
    np.testing.assert_array_equal(U, codes[np.argmin(scores, axis=1)])
    assert error == int((A * A).sum() + scores.min(axis=1).sum())
    signed = gram.copy()
    signed[0, 1] = signed[1, 0] = -1  # no 0/1 factor's Gram: the local search alone
    start = (rng.random((200, rank)) < 0.2).astype(np.int8)
    expected = start.copy()
    solve_rows_local(cross, signed, expected, bls_module.LOCAL_MOVES_PER_RANK * rank)
    np.testing.assert_array_equal(solve_bls_from_stats(cross, signed, start=start)[0], expected)


@pytest.mark.parametrize("rows", [300, 5000])  # 5,000: the probe may group equal rows
@pytest.mark.parametrize("density", [0.05, 0.5])
def test_pruned_scoring_equals_scoring_every_code(rows: int, density: float) -> None:
    """The CPU route (only a row's helpful bits) gives the codes and scores of the array
    route (every code scored, lowest index on ties), repeated rows and ties included."""
    from bmfdsl.linalg import best_codes_from_stats, code_table

    rng = np.random.default_rng(rows)
    for rank in (1, 4, 9):
        V = _random_binary(rng, (30, rank), 0.3).astype(np.int64)
        A = _random_binary(rng, (rows // 10, 30), density).astype(np.int64)
        cross = np.tile(A @ V, (10, 1))  # each row ten times
        gram = V.T @ V
        codes = code_table(rank, False)
        pruned_U, pruned_scores = bls_module._best_codes_pruned(cross, gram, codes)
        all_U, all_scores = bls_module._best_codes_scored(cross, gram, codes, None, np)
        assert np.array_equal(pruned_U, all_U) and np.array_equal(pruned_scores, all_scores)
        index, scores = best_codes_from_stats(cross[:50], gram)
        every = (codes @ gram * codes).sum(axis=1)[None, :] - 2 * cross[:50] @ codes.T
        assert index.tolist() == np.argmin(every, axis=1).tolist()
        assert scores.tolist() == every.min(axis=1).tolist()


@pytest.mark.parametrize("rank", [0, 1, 2, 5, 8, 12])
def test_pruned_scoring_is_exact_for_any_nonnegative_gram(rank: int) -> None:
    """The pruning needs only G >= 0 entrywise: a non-symmetric G, zeros on its diagonal and
    small entries (many ties) still give the lowest-index best code of brute force."""
    from bmfdsl.linalg import best_codes_from_stats, code_table

    rng = np.random.default_rng(rank)
    codes = code_table(rank, False).astype(np.int64)
    for _ in range(5):
        gram = rng.integers(0, 3, size=(rank, rank))
        gram[rng.random(rank) < 0.3, :] = 0  # zero rows, zero diagonal entries among them
        cross = rng.integers(-2, 4, size=(40, rank))
        index, scores = best_codes_from_stats(cross, gram)
        every = np.einsum("ck,kl,cl->c", codes, gram, codes)[None, :] - 2 * cross @ codes.T
        assert index.tolist() == np.argmin(every, axis=1).tolist()
        assert scores.tolist() == every.min(axis=1).tolist()


@pytest.mark.parametrize("rank", [5, 8, 10, 12])
def test_branch_and_bound_rows_equal_brute_force(rank: int) -> None:
    """Rows with more than GRAY_WALK_BITS helpful bits go by branch and bound: on dense rows
    (most bits helpful), planted rows, duplicated factor columns (ties between codes) and a
    non-symmetric G, every row's code and score are brute force's, lowest index on ties."""
    from bmfdsl.linalg import best_codes_from_stats, code_table
    from bmfdsl.linalg._kernels import GRAY_WALK_BITS

    rng = np.random.default_rng(100 + rank)
    codes = code_table(rank, False).astype(np.int64)
    branched = 0
    for case in range(8):
        V = _random_binary(rng, (40, rank), rng.uniform(0.1, 0.6)).astype(np.int64)
        if case % 2:
            V[:, rank - 1] = V[:, 0]  # two equal columns: equal scores, the index decides
        A = _random_binary(rng, (200, 40), rng.uniform(0.3, 0.9)).astype(np.int64)
        if case == 2:  # rows made of the columns: a planted answer
            A = (_random_binary(rng, (200, rank), 0.4).astype(np.int64) @ V.T > 0).astype(int)
        cross, gram = A @ V, V.T @ V
        if case == 3:
            gram = gram + np.triu(rng.integers(0, 3, size=(rank, rank)), 1)  # not symmetric
        branched += int(((np.diag(gram)[None, :] - 2 * cross < 0).sum(axis=1) > 4).sum())
        index, scores = best_codes_from_stats(cross, gram)
        every = np.einsum("ck,kl,cl->c", codes, gram, codes)[None, :] - 2 * cross @ codes.T
        assert index.tolist() == np.argmin(every, axis=1).tolist()
        assert scores.tolist() == every.min(axis=1).tolist()
    assert GRAY_WALK_BITS == 4 and branched > 100  # the branch and bound was exercised


@pytest.mark.parametrize(
    ("cross", "gram", "message"),
    [
        (np.zeros((1, 2), dtype=np.int64), -np.eye(2, dtype=np.int64), "negative"),
        (np.ones((1, 2)), np.array([[1, 0.9], [0.9, 1]]), "must hold integers"),
        (np.array([[0.6]]), np.array([[1]]), "cross must hold integers"),
        (np.zeros((1, 30), dtype=np.int64), np.eye(30, dtype=np.int64), "at most 24"),
        (np.zeros((1, 2), dtype=object), np.eye(2, dtype=np.int64), "integer array"),
        (np.array([[np.inf, 0]]), np.eye(2, dtype=np.int64), "below 2"),  # wrapped to -2^63
        (np.array([[2**63, 0]], dtype=np.uint64), np.eye(2, dtype=np.int64), "below 2"),
        (np.array([[np.nan, 0]]), np.eye(2, dtype=np.int64), "must hold integers"),
    ],
)
def test_pruned_scoring_refuses_what_it_cannot_score_exactly(cross, gram, message) -> None:
    """A float entry would be truncated by the integer cast (0.9 -> 0, a wrong code), and
    2^30 codes do not fit the table: clear errors instead (solve_bls_from_stats answers a
    negative Gram by scoring every code and rank 30 by its local search)."""
    from bmfdsl.linalg import best_codes_from_stats

    with pytest.raises(InvalidParameterError, match=message):
        best_codes_from_stats(cross, gram)
    if "integer" in message or "below" in message:  # solve_bls_from_stats checks alike
        with pytest.raises(InvalidParameterError, match=message):
            solve_bls_from_stats(cross, gram)


@pytest.mark.parametrize("order", ["index", "gray", "lexicographic", "shuffled"])
@pytest.mark.parametrize("keep_ties", [False, True])
def test_compiled_row_solve_takes_the_first_best_code_of_any_table_order(
    order: str, keep_ties: bool
) -> None:
    """solve_rows_exact scores only a row's helpful bits, yet picks what scanning the whole
    table does: the first code of the lowest error in the table's order (a kept row's code
    where it ties), on data with many ties (small 0/1 blocks, repeated rows and columns of
    the factor, a zero column); ranks 8-10 on dense rows take the branch and bound."""
    from bmfdsl.linalg import code_table, solve_rows_exact

    rng = np.random.default_rng(len(order) + keep_ties)
    for rank in (1, 3, 6, 8, 10):
        codes = code_table(rank, False, "index" if order == "shuffled" else order)  # type: ignore[arg-type]
        if order == "shuffled":
            codes = np.ascontiguousarray(codes[rng.permutation(len(codes))])
        A = _random_binary(rng, (40, 12), 0.3 if rank <= 6 else 0.7)
        V = _random_binary(rng, (12, rank), 0.3)
        V[6:] = V[:6]  # equal rows: fewer distinct scores, more ties between codes
        if rank > 1:
            V[:, 1] = V[:, 0]  # equal columns: codes that swap them tie
        if rank > 3:
            V[:, 3] = 0  # a zero column: its bit never changes the error
        start = _random_binary(rng, (40, rank), 0.5)
        out = start.copy()
        error = solve_rows_exact(A, V, codes, out, keep_ties)
        expected = start.copy()
        for i in range(40):
            errors = [_error(A[i : i + 1], code[None, :], V) for code in codes]
            best = int(np.argmin(errors))  # the first of the least
            kept = _error(A[i : i + 1], start[i : i + 1], V)
            if not (keep_ties and kept <= errors[best]):
                expected[i] = codes[best]
        assert np.array_equal(out, expected)
        assert error == _error(A, expected, V)


def test_the_numpy_device_keeps_the_array_route_and_the_cpu_takes_the_bit_route(monkeypatch):
    """ "numpy" stands in for the GPU in the tests: its products must stay the array ones."""
    from bmfdsl.linalg import InMemoryMatrix, as_matrix
    from bmfdsl.solvers import als

    rng = np.random.default_rng(4)
    A = _random_binary(rng, (3000, 100), 0.3)  # past the compiled loop's 2^18 entries
    U0, V0 = _random_binary(rng, (3000, 4), 0.4), _random_binary(rng, (100, 4), 0.4)
    routes: list[str] = []
    array_products = bls_module._distinct_cross_products
    bit_products = InMemoryMatrix.cross
    monkeypatch.setattr(
        bls_module,
        "_distinct_cross_products",
        lambda *args: routes.append("array") or array_products(*args),
    )
    monkeypatch.setattr(
        InMemoryMatrix,
        "cross",
        lambda self, F, rows=slice(None): routes.append("bits") or bit_products(self, F, rows),
    )
    answers = {}
    for device in ("cpu", "numpy"):
        routes.clear()
        answers[device] = als(as_matrix(A), U0, V0, device=device)
        assert set(routes) == {"bits" if device == "cpu" else "array"}
    assert answers["cpu"].error == answers["numpy"].error
    np.testing.assert_array_equal(answers["cpu"].U, answers["numpy"].U)


def test_threads_asking_for_the_packed_matrix_at_once_pack_it_once(monkeypatch):
    import threading

    from bmfdsl.linalg import _kernels as kernels
    from bmfdsl.linalg import as_matrix

    packed: list[int] = []
    real = kernels.row_bits
    started = threading.Barrier(4)

    def slow_row_bits(block):
        packed.append(block.shape[0])
        return real(block)

    monkeypatch.setattr(kernels, "row_bits", slow_row_bits)
    data = as_matrix(_random_binary(np.random.default_rng(5), (300, 70), 0.5))
    V = _random_binary(np.random.default_rng(6), (70, 3), 0.5)
    results = []

    def ask():
        started.wait()
        results.append(data.cross(V))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert packed.count(300) == 1  # A's rows packed once (V's columns once per call)
    assert all(np.array_equal(result, data.A.astype(np.int64) @ V) for result in results)
