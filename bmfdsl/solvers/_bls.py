"""Binary least squares (BLS): the best 0/1 factor for a fixed other factor.

For fixed ``V`` (``n x r``), ``min_U ||A - U Vᵀ||²_F`` splits into one problem per row of ``A``:
``min_c ||a - V c||²`` over ``c ∈ {0,1}^r``. Expanding the square,

    ``||a - V c||² = ||a||² - 2 (a V)·c + cᵀ (VᵀV) c``,

so every row only needs its ``r`` numbers ``a V`` ("cross") and the shared ``r x r`` Gram matrix
``VᵀV``. Up to ``r = 12`` (:data:`MAX_ENUMERATION_RANK`) the exact answer comes from scoring
all ``2^r`` codes at once (one matrix product per chunk of rows, so memory stays bounded for
any ``m``; small problems run one compiled numba loop instead, which avoids per-call
overhead). Beyond that each row is still solved exactly, without a code table, by branch and
bound over the bits that lower its score alone (:func:`bmfdsl.linalg.solve_rows_bounded`, the
same tie rule); a row whose search passes its budget of codes goes to a deterministic local
search from its ``start`` code instead (1- and 2-flips from it, from the best code of its
first 8 columns and from zero: :func:`bmfdsl.linalg.solve_rows_local`; the search's best
code so far where that is better), so no solve worsens a given ``start``. When a
``backend`` is named, each distinct row becomes the paper's QUBO ``VᵀV - 2 diag(a V)``
solved on a dimod sampler instead. The same statistics serve the
transposed problem (solving ``V`` for fixed ``U``), which is what lets ALS run blockwise on a
dask array.

Equal rows of ``A V`` choose equal codes, so where rows repeat (sparse and block-structured
data) each distinct row is scored once. The chunked scoring (``A V``, its product with the
code table, the first minimum per row) is written once against an array module: numpy by
default, CuPy with ``device="gpu"`` (see :mod:`bmfdsl.linalg._device`), in exact integer
arithmetic either way, so every device gives the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from types import ModuleType
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidMatrixError, InvalidParameterError
from bmfdsl.linalg import (
    BRANCH_CODES_PER_RANK,
    LOCAL_MOVES_PER_RANK,
    MAX_BRANCH_RANK,
    BinaryMatrix,
    DaskMatrix,
    DistinctColumns,
    InMemoryMatrix,
    SparseMatrix,
    as_matrix,
    best_codes_from_stats,
    bit_products,
    check_device,
    code_table,
    column_bits,
    distinct_column_product,
    exact_float32_products,
    first_minimum,
    get_array_module,
    integer_statistics,
    row_bits,
    solve_rows_bounded,
    solve_rows_exact,
    solve_rows_local,
    to_host,
)
from bmfdsl.linalg import gram as factor_gram
from bmfdsl.validation import check_binary_matrix

#: Largest rank solved by enumerating all ``2^r`` codes when no backend is given; beyond it
#: rows are solved by branch and bound without a code table
#: (:func:`bmfdsl.linalg.solve_rows_bounded`, a local search where a row passes its budget).
#: The native
#: solver's ``MAX_CODE_RANK`` is the same cut-off (a test holds them equal), so a run beyond
#: it builds no ``2^r`` table anywhere (MNIST 1,000 x 784 at r = 16: 11.8 s -> 1.2 s).
MAX_ENUMERATION_RANK = 12

# Scores of one chunk take at most about this many bytes (bounded memory for any m); a GPU
# takes larger chunks (fewer kernel launches and transfers; the answer is the same).
_CHUNK_BYTES = 32 * 2**20
_DEVICE_CHUNK_BYTES = 256 * 2**20
_FLOAT32_EXACT = 2**24  # integers below this are exact in float32

# Rows of A V are scored once per distinct row (see _distinct_rows) from this many codes
# (r >= 4) and rows on: below, a sort of the rows costs about what it saves.
_DISTINCT_MIN_CODES = 16
_DISTINCT_MIN_ROWS = 4096
# On the CPU, where a row scores only the subsets of its helpful bits, rows are grouped when
# they have this many codes to score on average (below, hashing a row costs more).
_GROUP_MIN_CODES = 64
# Multipliers of the local search's pair hash (any do: the grouping is checked exactly).
_PAIR_HASH_MULTIPLIERS = np.random.default_rng(0x5EED).integers(1, 2**62, size=128)
# The hash table of distinct keys: at most 2^22 int32 slots (16 MiB); odd 64-bit multipliers
# (Fibonacci hashing and two of xxHash's primes), tried in turn.
_HASH_MAX_BITS = 22
_HASH_MULTIPLIERS = (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)
# A dense BLS keeps the statistics A [V_1 … V_k 1] of at most about this many bytes at once.
_GROUP_BYTES = 128 * 2**20
# Row chunks of Aᵀ U on a dask block: float32 copies of about this size (cache-sized: twice
# as fast as one copy of the block).
_TRANSPOSED_CHUNK_BYTES = 8 * 2**20

# Small problems (ALS restarts on paper-sized matrices) go through one compiled loop instead of
# the chunked BLAS route, whose fixed per-call cost dominates there.
_KERNEL_MAX_RANK = 8
_KERNEL_MAX_ENTRIES = 2**18


def fits_compiled_kernel(rank: int, entries: int) -> bool:
    """True when a problem of this rank and ``m * n`` goes through the compiled kernels.

    >>> fits_compiled_kernel(3, 30 * 30), fits_compiled_kernel(12, 30 * 30)
    (True, False)
    """
    return rank <= _KERNEL_MAX_RANK and entries <= _KERNEL_MAX_ENTRIES


def enumerate_codes(rank: int, *, one_hot: bool = False) -> np.ndarray:
    """All candidate rows of a 0/1 factor, in code-index order (ties go to the lowest index).

    Code ``c`` has bit ``k`` (``(c >> k) & 1``) in column ``k``; with ``one_hot`` the codes are
    the rows of the identity.

    Args:
        rank: number of columns ``r`` (at most 30 without ``one_hot``).
        one_hot: only the ``r`` codes with exactly one 1.

    Returns:
        ``int8`` array of shape ``(2^r, r)`` or ``(r, r)``.

    >>> enumerate_codes(2).tolist()
    [[0, 0], [1, 0], [0, 1], [1, 1]]
    >>> enumerate_codes(2, one_hot=True).tolist()
    [[1, 0], [0, 1]]
    """
    if rank < 1:
        raise InvalidParameterError(f"rank must be at least 1; got {rank}")
    if not one_hot and rank > 30:
        raise InvalidParameterError(
            f"cannot enumerate 2^{rank} codes; use a QUBO backend for rank > {MAX_ENUMERATION_RANK}"
        )
    return code_table(int(rank), bool(one_hot)).copy()


def solve_bls(
    A: Any,
    V: Any,
    *,
    one_hot: bool = False,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: Mapping[str, Any] | None = None,
    start: Any = None,
    device: str = "cpu",
) -> np.ndarray:
    """The 0/1 ``U`` minimising ``||A - U Vᵀ||²_F`` for fixed ``V``, row by row.

    Exact by enumeration up to rank 12 (only the ``r`` one-hot codes with ``one_hot``), with
    ties broken towards the lowest code index (see :func:`enumerate_codes`). Beyond rank 12
    still exact by branch and bound, the same tie rule, except a row whose search passes its
    budget: that row gets a local search from its ``start`` row (see the module docstring),
    never worse than it. When
    ``backend`` is given (and the rank exceeds 12 or the problem is not one-hot), each distinct
    row is solved as the QUBO ``VᵀV - 2 diag(a V)`` on that backend (heuristic unless the
    backend is exact). One-hot problems are always enumerated: there are only ``r``
    candidates.

    Args:
        A: ``m x n`` 0/1 matrix (array-like, scipy sparse: solved from ``A V`` without
            densifying, or ``dask.array``: solved blockwise over row blocks, the answer
            gathered as a numpy array).
        V: ``n x r`` 0/1 matrix.
        one_hot: every row of ``U`` must hold exactly one 1.
        chunk_rows: rows scored at a time (default: about 32 MB of scores per chunk).
        backend: a registered backend name (e.g. ``"neal"``) or a ``dimod.Sampler``.
        backend_params: keyword arguments for the sampler's ``sample`` (e.g. ``num_reads``).
        start: ``m x r`` 0/1 codes the local search (rank > 12, rows past the branch and
            bound's budget) starts from and never worsens (default: none); ignored by the
            exact and backend routes.
        device: where the codes are scored (see :data:`bmfdsl.linalg.DEVICES`): ``"cpu"``
            (default), ``"gpu"`` (CuPy, ``bmfdsl[gpu]``: the products ``A V`` and
            ``(A V) Cᵀ`` with the code table ``C``, and the argmin per row, run on the GPU in
            exact integer arithmetic) or ``"numpy"`` (the GPU's array code on the CPU). Every
            device gives the same ``U`` and error. The row solves beyond rank 12 and a
            backend's QUBOs stay on the CPU.

    Returns:
        ``U`` as an ``m x r`` ``int8`` array.

    >>> V = np.array([[1, 0], [1, 1], [0, 1]])
    >>> solve_bls([[1, 1, 0], [0, 1, 1], [1, 1, 1], [0, 0, 0]], V).tolist()
    [[1, 0], [0, 1], [1, 0], [0, 0]]
    """
    return solve_bls_with_error(
        A,
        V,
        one_hot=one_hot,
        chunk_rows=chunk_rows,
        backend=backend,
        backend_params=backend_params,
        start=start,
        device=device,
    )[0]


def solve_bls_with_error(
    A: Any,
    V: Any,
    *,
    one_hot: bool = False,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: Mapping[str, Any] | None = None,
    start: Any = None,
    device: str = "cpu",
) -> tuple[np.ndarray, int]:
    """Like :func:`solve_bls`, and also return ``||A - U Vᵀ||²_F`` of the answer.

    >>> U, error = solve_bls_with_error([[1, 1], [1, 0]], [[1], [1]])
    >>> U.tolist(), error
    ([[1], [0]], 1)
    """
    V = check_binary_matrix(V, name="V")
    data = as_matrix(A)
    m, n = data.shape
    if V.shape[0] != n:
        raise InvalidMatrixError(
            f"V must have one row per column of A: A is {m}x{n} but V has "
            f"{V.shape[0]} rows; pass V of shape ({n}, rank)"
        )
    options = _solve_options(one_hot, chunk_rows, backend, backend_params, device)
    if isinstance(data, DaskMatrix):  # (blocks start from zero: no start per block)
        return _solve_blockwise(data, V, options)
    U, error, _ = _solve_in_memory(data, [V], [_check_start(start, (m, V.shape[1]))], options)[0]
    return U, error


def solve_bls_many(
    data: BinaryMatrix,
    Vs: Sequence[Any],
    *,
    one_hot: bool = False,
    starts: Sequence[Any] | None = None,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: Mapping[str, Any] | None = None,
    device: str = "cpu",
) -> list[tuple[np.ndarray, int, np.ndarray | None]]:
    """:func:`solve_bls_with_error` on a wrapped ``A`` for ``k`` factors ``V_1 … V_k`` (each
    ``n x r``, one rank) in one pass over ``A``: the pass computes ``A [V_1 … V_k]`` and each
    solve reads its own columns, so every answer is bit-identical to its own solve (exact
    integer products, the same tie rule). ``starts`` (one per ``V``, or ``None``) seed the
    local search of rows past the branch and bound's budget beyond rank 12, as ``start``
    does. Returns ``(U_i, error_i, cross_i)`` per
    ``V``: ``cross_i = Aᵀ U_i`` where it comes for free (a dask ``A`` sums it in the same
    pass: ALS's next half-step needs it, and ``U_i`` never travels back to the workers),
    else ``None``.

    >>> from bmfdsl.linalg import as_matrix
    >>> data = as_matrix([[1, 1, 0], [0, 1, 1]])
    >>> [(U.ravel().tolist(), error) for U, error, _ in solve_bls_many(
    ...     data, [[[1], [1], [0]], [[0], [1], [1]]])]
    [([1, 0], 2), ([0, 1], 2)]
    """
    factors = [check_binary_matrix(V, name="V") for V in Vs]
    m, n = data.shape
    ranks = {V.shape[1] for V in factors}
    if not factors or len(ranks) != 1 or any(V.shape[0] != n for V in factors):
        raise InvalidMatrixError(
            f"each V must have one row per column of A ({n}) and all the same rank; got "
            f"shapes {[V.shape for V in factors]}"
        )
    if starts is not None and len(starts) != len(factors):
        raise InvalidParameterError(
            f"starts must give one start (or None) per V: {len(factors)}; got {len(starts)}"
        )
    options = _solve_options(one_hot, chunk_rows, backend, backend_params, device)
    if isinstance(data, DaskMatrix):  # (blocks start from zero: no start per block)
        return _solve_blocks_and_cross(data, factors, options)
    rank = ranks.pop()
    checked = [_check_start(start, (m, rank)) for start in (starts or [None] * len(factors))]
    return _solve_in_memory(data, factors, checked, options)


def _solve_in_memory(
    data: BinaryMatrix,
    Vs: list[np.ndarray],
    starts: list[np.ndarray | None],
    options: dict[str, Any],
) -> list[tuple[np.ndarray, int, np.ndarray | None]]:
    """BLS for each ``V`` of ``Vs`` on an in-memory ``A``, in one pass over it."""
    if isinstance(data, SparseMatrix):
        # The statistics route: A V is an O(nnz r) pass, A itself is never densified. Exact
        # scores with the same tie rule give the same U as the dense routes.
        rank = Vs[0].shape[1]
        cross = distinct_column_product(data.cross, np.concatenate(Vs, axis=1))
        row_norms = data.row_norms
        return [
            (
                *solve_bls_from_stats(
                    cross.columns(slice(index * rank, (index + 1) * rank)),
                    _gram(V),
                    row_norms,
                    start=start,
                    **options,
                ),
                None,
            )
            for index, (V, start) in enumerate(zip(Vs, starts, strict=True))
        ]
    held = data.on_device(options["device"]) if isinstance(data, InMemoryMatrix) else data.dense()
    # on the CPU the wrapper's bit products (A's rows packed once for every pass of an ALS);
    # the "numpy" device keeps the array route (it stands in for the GPU's in the tests)
    products = None
    if isinstance(data, InMemoryMatrix) and options["device"] == "cpu":
        products = data.cross
    return [
        (U, error, None)
        for U, error in _solve_checked(held, Vs, starts=starts, products=products, **options)
    ]


def _gram(V: np.ndarray) -> np.ndarray:
    """``VᵀV`` of a 0/1 ``V`` as exact int64 (the compiled kernel: numpy's integer matmul
    has no BLAS)."""
    return factor_gram(np.ascontiguousarray(V, dtype=np.int8))


def _solve_blocks_and_cross(
    data: DaskMatrix, Vs: list[np.ndarray], options: dict[str, Any]
) -> list[tuple[np.ndarray, int, np.ndarray | None]]:
    """BLS for every ``V`` over the row blocks of a dask ``A``, with each ``Aᵀ U``: one graph
    for all of them (the factors broadcast once, see :meth:`DaskMatrix.per_block`)."""
    rank = Vs[0].shape[1]
    parts = data.per_block(_solve_block_and_cross, np.concatenate(Vs, axis=1), rank, options)
    U = np.ascontiguousarray(np.concatenate([part[0] for part in parts]), dtype=np.int8)
    errors = np.asarray(np.sum([part[1] for part in parts], axis=0), dtype=np.int64)
    cross = np.asarray(np.sum([part[2] for part in parts], axis=0), dtype=np.int64)
    return [
        (
            np.ascontiguousarray(U[:, columns]),
            int(errors[index]),
            np.ascontiguousarray(cross[:, columns]),
        )
        for index, columns in enumerate(_column_groups(len(Vs), rank))
    ]


def _column_groups(count: int, rank: int) -> list[slice]:
    return [slice(index * rank, (index + 1) * rank) for index in range(count)]


def _solve_block_and_cross(
    block: np.ndarray, stacked: np.ndarray, rank: int, options: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A row block's codes for every ``V`` stacked in ``stacked`` (side by side), the error of
    each, and ``blockᵀ [U_1 … U_k]`` (exact: bit counts on the CPU, else float32 sums of
    chunks below 2^24 rows)."""
    block = _dask_block(block)
    codes, errors = _block_codes(block, stacked, rank, options)
    if options["device"] == "cpu":  # 60,000 x 400 block: 53 -> 10 ms, packing included
        return codes, errors, bit_products(column_bits(block), column_bits(codes))
    cross = np.zeros((block.shape[1], codes.shape[1]), dtype=np.int64)
    step = max(1, _TRANSPOSED_CHUNK_BYTES // (4 * block.shape[1]))  # small float32 copies
    for first in range(0, block.shape[0], step):
        rows = slice(first, first + step)
        product = block[rows].T.astype(np.float32) @ codes[rows].astype(np.float32)
        cross += np.rint(product).astype(np.int64)
    return codes, errors, cross


def _block_codes(
    block: np.ndarray, stacked: np.ndarray, rank: int, options: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray]:
    """A checked row block's codes (``rows x kr`` ``int8``) and its error for each of the
    ``k`` factors side by side in ``stacked`` (``k`` int64): one product ``block @ stacked``."""
    if options["device"] == "cpu":  # bit counts (see InMemoryMatrix.cross)
        packed = row_bits(block)
        cross = distinct_column_product(lambda F: bit_products(packed, row_bits(F.T)), stacked)
    else:
        xp = get_array_module(options["device"])
        cross = _cross_products(block, stacked, options.get("chunk_rows"), xp)
    ones = int(block.sum(dtype=np.int64))
    groups = _column_groups(stacked.shape[1] // rank, rank)
    codes = np.empty((block.shape[0], stacked.shape[1]), dtype=np.int8)
    errors = np.empty(len(groups), dtype=np.int64)
    for index, columns in enumerate(groups):
        U, error = solve_bls_from_stats(
            cross.columns(columns), _gram(stacked[:, columns]), **options
        )
        codes[:, columns] = U
        errors[index] = ones + error  # (without row norms the solve's error is Σ scores)
    return codes, errors


def _solve_blockwise(
    data: DaskMatrix, V: np.ndarray, options: dict[str, Any]
) -> tuple[np.ndarray, int]:
    """BLS over the row blocks of a dask ``A``; only the codes and one error are gathered."""
    rank = V.shape[1]
    # One int64 block per row block: the codes and a last column summing to its error.
    solved = data.map_rows(_solve_block, V, options, columns=rank + 1, dtype=np.int64)
    codes, error = data.compute(solved[:, :rank].astype(np.int8), solved[:, rank].sum())
    return np.ascontiguousarray(codes, dtype=np.int8), int(error)


def _dask_block(block: Any) -> np.ndarray:
    """A row block of a :class:`~bmfdsl.linalg.DaskMatrix` as contiguous ``int8``: its values
    were checked when the matrix was wrapped, and a block may hold no rows (a dask array's
    chunks may be empty), which :func:`check_binary_matrix` would reject."""
    return np.ascontiguousarray(block, dtype=np.int8)


def _solve_block(block: np.ndarray, V: np.ndarray, options: dict[str, Any]) -> np.ndarray:
    """A row block's codes and a last column that sums to its error (in the first row)."""
    block = _dask_block(block)
    codes, errors = _block_codes(block, V, V.shape[1], options)
    error_column = np.zeros((block.shape[0], 1), dtype=np.int64)
    if block.shape[0]:  # (a block without rows has no error)
        error_column[0, 0] = errors[0]
    return np.concatenate([codes.astype(np.int64), error_column], axis=1)


def _solve_checked(
    A: Any,
    Vs: list[np.ndarray],
    *,
    one_hot: bool,
    chunk_rows: int | None,
    backend: Any,
    backend_params: Mapping[str, Any] | None,
    starts: list[np.ndarray | None],
    device: str = "cpu",
    products: Callable[..., np.ndarray] | None = None,
) -> list[tuple[np.ndarray, int]]:
    """BLS for validated ``A`` (a numpy array, or on a GPU possibly a device array) and each
    ``V`` of ``Vs`` (one rank), in one pass over ``A``: small problems run the compiled loop;
    otherwise ``A [V_1 … V_k 1]`` is computed group by group of rows on the array module of
    ``device`` (a host chunk of ``A`` is sent as ``int8``), or by ``products(F, rows)`` (the
    wrapper's exact ``A[rows] F``) where given, and each ``V``'s rows are solved from their
    columns by :func:`solve_bls_from_stats` (codes scored on ``device``)."""
    m, n = A.shape
    rank = Vs[0].shape[1]
    enumerated = one_hot or (backend is None and rank <= MAX_ENUMERATION_RANK)
    if enumerated and device == "cpu" and fits_compiled_kernel(rank, m * n):
        codes = code_table(rank, one_hot)
        solved = []
        for V in Vs:
            U = np.empty((m, rank), dtype=np.int8)
            solved.append((U, int(solve_rows_exact(A, V, codes, U, False))))
        return solved
    # one pass: A [V_1 … V_k 1] (the last column: the row norms, 0/1 counts) in row groups
    # of bounded memory, each group's rows solved from their statistics; a backend's QUBOs
    # take all rows at once (each distinct row is sent once)
    ones = np.ones((n, 1), dtype=np.int8)
    stacked = np.concatenate([*Vs, ones], axis=1)
    xp = get_array_module(device)
    grams = [_gram(V) for V in Vs]
    groups = _column_groups(len(Vs), rank)
    step = m if backend is not None and not one_hot else _group_rows(stacked.shape[1])
    Us: list[list[np.ndarray]] = [[] for _ in Vs]
    errors = [0] * len(Vs)
    for first in range(0, m, step):
        rows = slice(first, first + step)
        cross = (
            _cross_products(A[rows], stacked, chunk_rows, xp)
            if products is None
            else distinct_column_product(partial(products, rows=rows), stacked)
        )
        row_norms = cross.columns(slice(-1, None)).ravel()
        for index, (columns, gram, start) in enumerate(zip(groups, grams, starts, strict=True)):
            U, error = solve_bls_from_stats(
                cross.columns(columns),
                gram,
                row_norms,
                one_hot=one_hot,
                chunk_rows=chunk_rows,
                backend=backend,
                backend_params=backend_params,
                start=None if start is None else start[rows],
                device=device,
            )
            Us[index].append(U)
            errors[index] += error
    return [
        (np.ascontiguousarray(np.concatenate(parts), dtype=np.int8), error)
        for parts, error in zip(Us, errors, strict=True)
    ]


def _group_rows(columns: int) -> int:
    """Rows per group of a dense BLS: their ``columns`` int64 statistics take at most about
    :data:`_GROUP_BYTES` (bounded memory for any ``m``)."""
    return max(_DISTINCT_MIN_ROWS, _GROUP_BYTES // (8 * columns))


def solve_bls_from_stats(
    cross: np.ndarray,
    gram: np.ndarray,
    row_norms: np.ndarray | None = None,
    *,
    one_hot: bool = False,
    chunk_rows: int | None = None,
    backend: Any = None,
    backend_params: Mapping[str, Any] | None = None,
    start: np.ndarray | None = None,
    device: str = "cpu",
) -> tuple[np.ndarray, int]:
    """Solve BLS from its sufficient statistics: ``cross = A M`` and ``gram = MᵀM``.

    Row ``i``'s error for code ``c`` is ``row_norms[i] - 2 cross[i]·c + cᵀ gram c``. This is the
    form used for the ``V`` step of ALS on huge or distributed ``A`` (``cross = Aᵀ U`` is a
    blockwise sum).

    Args:
        cross: ``rows x r`` integer array.
        gram: ``r x r`` integer array.
        row_norms: ``||a_i||²`` per row (zeros when omitted: the error is then offset).
        one_hot, chunk_rows, backend, backend_params, start, device: as in
            :func:`solve_bls` (the device scores the codes; the statistics are given).

    Returns:
        ``(codes, error)``: the chosen ``rows x r`` ``int8`` codes and the summed error.

    >>> codes, error = solve_bls_from_stats(np.array([[2], [0]]), np.array([[2]]), np.array([2, 1]))
    >>> codes.ravel().tolist(), error
    ([1, 0], 1)
    """
    cross, gram = integer_statistics("cross", cross), integer_statistics("gram", gram)
    rank = int(gram.shape[0])
    if cross.ndim != 2 or cross.shape[1] != rank or gram.shape != (rank, rank):
        raise InvalidParameterError(
            f"cross must be rows x r and gram r x r; got {cross.shape} and {gram.shape}"
        )
    if row_norms is None:
        row_norms = np.zeros(cross.shape[0], dtype=np.int64)
    chunk_rows = _check_chunk_rows(chunk_rows)
    device = check_device(device)
    xp = get_array_module(device)
    if one_hot or (backend is None and rank <= MAX_ENUMERATION_RANK):
        codes = code_table(rank, one_hot)
        # "numpy" runs the array route of a GPU on the CPU (how that route is tested)
        if device == "cpu" and not one_hot and int(gram.min(initial=0)) >= 0:
            U, scores = _best_codes_pruned(cross, gram, codes)
        else:
            U, scores = _best_codes_scored(cross, gram, codes, chunk_rows, xp)
    elif backend is None:
        U = np.zeros((cross.shape[0], rank), np.int8) if start is None else start.copy()
        U, scores = _solve_rows_beyond_distinct(cross, gram, np.ascontiguousarray(U, dtype=np.int8))
    else:
        U = _solve_rows_on_backend(cross, gram, backend, backend_params)
        scores = _code_scores(cross, gram, U)
    error = int(np.asarray(row_norms, dtype=np.int64).sum() + scores.sum())
    return np.ascontiguousarray(U, dtype=np.int8), error


def _best_codes_scored(
    cross: np.ndarray, gram: np.ndarray, codes: np.ndarray, chunk_rows: int | None, xp: ModuleType
) -> tuple[np.ndarray, np.ndarray]:
    """The array route of exact BLS from statistics (the array devices, one-hot codes, a
    ``gram`` with a negative entry): every code scored by :func:`_best_codes`, each distinct
    row once where that pays."""

    def scored(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        best, scores = _best_codes(rows, gram, codes, chunk_rows, xp)
        return to_host(best), to_host(scores)

    best, scores = _once_per_distinct_row(cross, len(codes) >= _DISTINCT_MIN_CODES, scored)
    return _code_rows(codes, best), scores


def _best_codes_pruned(
    cross: np.ndarray, gram: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The CPU route of exact BLS from statistics (``gram`` of a 0/1 factor): the codes and
    scores of :func:`~bmfdsl.linalg.best_codes_from_stats`, which scores only the subsets of a
    row's helpful bits; each distinct row is solved once where rows have many such bits
    (:func:`_grouping_pays`). The codes and scores of :func:`_best_codes` exactly."""
    best, scores = _once_per_distinct_row(
        cross, _grouping_pays(cross, gram), lambda rows: best_codes_from_stats(rows, gram)
    )
    return _code_rows(codes, best), scores


def _code_rows(codes: np.ndarray, best: np.ndarray) -> np.ndarray:
    """``codes[best]`` (contiguous): ``np.take`` gathers short rows 3-4x faster than fancy
    indexing (5·10⁶ rows at r = 5: 9 ms against 37 ms)."""
    return np.take(codes, best, axis=0)


def _once_per_distinct_row(
    cross: np.ndarray,
    group: bool,
    best_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """``best_of(rows)`` (per row: the best code's index and its score, on the host) for
    every row of ``cross``; with ``group``, each distinct row solved once (equal rows choose
    equal codes) and the answers spread back to its copies."""
    distinct = _distinct_rows(cross) if group else None
    if distinct is None:
        return best_of(cross)
    rows, inverse = distinct
    best, scores = best_of(rows)
    return best[inverse], scores[inverse]


def _grouping_pays(cross: np.ndarray, gram: np.ndarray) -> bool:
    """Whether grouping equal rows (:func:`_distinct_rows`, about 0.1 µs a row) saves more
    than it costs: the rows of an evenly spaced probe have on average at least
    :data:`_GROUP_MIN_CODES` codes to score (``2^K``, ``K`` helpful bits)."""
    count = cross.shape[0]
    if count < _DISTINCT_MIN_ROWS:
        return False
    probe = cross[:: count // _DISTINCT_MIN_ROWS]
    helpful = (gram.diagonal()[None, :] - 2 * probe < 0).sum(axis=1)
    return float(np.mean(np.exp2(helpful))) >= _GROUP_MIN_CODES


def _solve_rows_beyond_distinct(
    cross: np.ndarray, gram: np.ndarray, U: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The row solves beyond the code table, from ``U``: each row's code and score (``cᵀGc -
    2 x·c``). Exact by :func:`~bmfdsl.linalg.solve_rows_bounded` (a row whose branch and
    bound passes :data:`~bmfdsl.linalg.BRANCH_CODES_PER_RANK` codes per unit of rank goes to
    the local search from its ``U`` row), or :func:`~bmfdsl.linalg.solve_rows_local` alone
    where a ``gram`` entry is negative or the rank passes
    :data:`~bmfdsl.linalg.MAX_BRANCH_RANK`. Each distinct pair of a row of ``cross`` and its
    start code is solved once: a row's answer depends on that pair alone, so the codes are
    the ones every row solved gives (sparse 10,000 x 200 at r = 15: 10,000 rows, about 480
    distinct pairs). Pairs are grouped by a 64-bit hash, checked exactly (a collision solves
    every row).

    >>> cross, gram = np.tile([[2, 0, 1], [0, 3, 0]], (5, 1)), 2 * np.eye(3, dtype=np.int64)
    >>> U, scores = _solve_rows_beyond_distinct(cross, gram, np.zeros((10, 3), dtype=np.int8))
    >>> U[:2].tolist(), scores[:2].tolist()
    ([[1, 0, 0], [0, 1, 0]], [-2, -4])
    >>> bool((U[::2] == U[0]).all() and (U[1::2] == U[1]).all())
    True
    """
    rank = gram.shape[0]
    columns = [cross[:, k] for k in range(rank)] + [U[:, k] for k in range(rank)]
    multipliers = _PAIR_HASH_MULTIPLIERS[np.arange(2 * rank) % len(_PAIR_HASH_MULTIPLIERS)]
    keys = np.zeros(len(U), dtype=np.int64)
    for column, multiplier in zip(columns, multipliers, strict=True):  # no rows x 2r temporary
        keys += column.astype(np.int64) * multiplier  # wraps around: a hash, checked below
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    inverse = np.ravel(inverse)
    grouped = 2 * len(first) <= len(keys) and all(
        np.array_equal(column[first][inverse], column) for column in columns
    )
    if not grouped:  # mostly distinct, or a collision: every row solved
        return U, _solve_rows_beyond(np.ascontiguousarray(cross), gram, U)
    distinct = np.ascontiguousarray(U[first])
    scores = _solve_rows_beyond(np.ascontiguousarray(cross[first]), gram, distinct)
    return _code_rows(distinct, inverse), scores[inverse]


def _solve_rows_beyond(cross: np.ndarray, gram: np.ndarray, U: np.ndarray) -> np.ndarray:
    """Every row of ``cross`` solved into ``U`` (see :func:`_solve_rows_beyond_distinct`);
    returns the rows' scores."""
    if not np.array_equal(gram, gram.T):  # the kernels take a symmetric G: cᵀGc doubled is
        return _solve_rows_beyond(2 * cross, gram + gram.T, U) // 2  # cᵀ(G + Gᵀ)c
    rank = gram.shape[0]
    moves = LOCAL_MOVES_PER_RANK * rank
    if rank <= MAX_BRANCH_RANK and int(gram.min(initial=0)) >= 0:
        scores = np.empty(len(U), dtype=np.int64)
        solve_rows_bounded(cross, gram, U, scores, BRANCH_CODES_PER_RANK * rank, moves)
        return scores
    solve_rows_local(cross, gram, U, moves)
    return _code_scores(cross, gram, U)


def _distinct_rows(cross: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The distinct rows of non-negative ``cross`` and each row's index among them, or
    ``None`` where that would not pay: few rows, values too wide to pack a row into one
    int64 key, or mostly distinct rows in a probe of evenly spaced rows.

    Sparse and block-structured data repeat rows of ``A V`` by the thousand (10⁶ x 500
    planted blocks at r = 10: 7,954 distinct rows; 10⁶ x 1,000 sparse planted at r = 5: 409),
    and scoring ``2^r`` codes per row is the cost of a full-data BLS. When the probe holds
    every distinct key, a collision-free hash table of its keys finds each row's (one
    gather); else one sort of the packed keys does.

    >>> rows, inverse = _distinct_rows(np.tile([[2, 0], [1, 3]], (4096, 1)))
    >>> rows.tolist(), inverse[:4].tolist()
    ([[2, 0], [1, 3]], [0, 1, 0, 1])
    """
    count, rank = cross.shape
    if count < _DISTINCT_MIN_ROWS or int(cross.min(initial=0)) < 0:
        return None
    width = max(1, int(cross.max(initial=0)).bit_length())
    if width * rank > 62:
        return None
    shifts = np.arange(rank, dtype=np.int64) * width

    def packed(block: np.ndarray) -> np.ndarray:
        keys = np.zeros(block.shape[0], dtype=np.int64)
        for column in range(rank):  # column by column: no rows x r int64 temporary
            keys |= block[:, column].astype(np.int64) << shifts[column]
        return keys

    sample = cross[:: count // _DISTINCT_MIN_ROWS]
    distinct = np.unique(packed(sample))
    if len(distinct) > len(sample) // 2:
        return None
    keys = packed(cross)
    inverse = None
    for _ in range(2):  # the probe's keys, then those plus the rare keys it missed
        looked = _positions(distinct, keys)
        if looked is None:
            break
        inverse, found = looked
        missed = ~found
        if not missed.any():
            break
        inverse = None
        if np.count_nonzero(missed) > count // 8:  # an unrepresentative probe
            break
        distinct = np.union1d(distinct, keys[missed])  # sorts the missed keys only
    if inverse is None:
        distinct, inverse = np.unique(keys, return_inverse=True)
    rows = (distinct[:, None] >> shifts) & ((1 << width) - 1)
    return rows, np.ravel(inverse)


def _positions(distinct: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each key's index in the sorted ``distinct`` keys and whether it is there, by a
    multiplicative hash that maps them to distinct slots (the first of a few fixed multipliers
    that does); ``None`` when none separates them in a small table.

    >>> positions, found = _positions(np.array([3, 8, 20]), np.array([20, 3, 5, 8]))
    >>> found.tolist(), positions[found].tolist()
    ([True, True, False, True], [2, 0, 1])
    """
    bits = max(1, (2 * len(distinct) ** 2).bit_length())  # slots >= 2 u²: few collisions
    if bits > _HASH_MAX_BITS:
        return None
    shift = np.uint64(64 - bits)
    for multiplier in _HASH_MULTIPLIERS:
        factor = np.uint64(multiplier)
        slots = (distinct.view(np.uint64) * factor) >> shift
        if len(np.unique(slots)) < len(slots):
            continue
        table = np.zeros(1 << bits, dtype=np.int32)
        table[slots] = np.arange(len(distinct), dtype=np.int32)
        positions = table[(keys.view(np.uint64) * factor) >> shift]
        return positions, distinct[positions] == keys
    return None


def _check_start(start: Any, shape: tuple[int, int]) -> np.ndarray | None:
    """``start`` as 0/1 int8 codes of ``shape``, or a clear error."""
    if start is None:
        return None
    codes = check_binary_matrix(start, name="start")
    if codes.shape != shape:
        raise InvalidMatrixError(f"start must be {shape[0]} x {shape[1]}; got {codes.shape}")
    return np.ascontiguousarray(codes, dtype=np.int8)


def _solve_options(
    one_hot: bool, chunk_rows: Any, backend: Any, backend_params: Any, device: Any
) -> dict[str, Any]:
    """The checked keyword arguments every in-memory and blockwise solve passes on."""
    return {
        "one_hot": one_hot,
        "chunk_rows": _check_chunk_rows(chunk_rows),
        "backend": backend,
        "backend_params": backend_params,
        "device": check_device(device),
    }


def _check_chunk_rows(chunk_rows: int | None) -> int | None:
    if chunk_rows is None:
        return None
    if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int | np.integer):
        raise InvalidParameterError(f"chunk_rows must be a positive integer; got {chunk_rows!r}")
    if chunk_rows < 1:
        raise InvalidParameterError(f"chunk_rows must be a positive integer; got {chunk_rows}")
    return int(chunk_rows)


def _chunk_bytes(xp: ModuleType) -> int:
    return _CHUNK_BYTES if xp is np else _DEVICE_CHUNK_BYTES


def _score_dtype(cross_bound: int, quad_bound: int, xp: ModuleType = np) -> type[np.floating]:
    # float32 halves memory traffic and is exact while every score is a small integer (below
    # 2**24, and where the module's float32 products are plain float32: no TF32); float64 is
    # exact below 2**53, far beyond any 0/1 matrix that fits in memory.
    small = 2 * cross_bound + quad_bound < _FLOAT32_EXACT
    return np.float32 if small and exact_float32_products(xp) else np.float64


def _cross_products(
    A: np.ndarray, V: np.ndarray, chunk_rows: int | None, xp: ModuleType = np
) -> DistinctColumns:
    """``A @ V`` as host int64, computed on the array module ``xp`` in chunks so that the
    float copy of ``A`` stays small (each chunk goes to the device as ``int8``), for ``V``'s
    distinct columns only (a batch's factors share most of theirs)."""
    return distinct_column_product(lambda F: _distinct_cross_products(A, F, chunk_rows, xp), V)


def _distinct_cross_products(
    A: np.ndarray, V: np.ndarray, chunk_rows: int | None, xp: ModuleType
) -> np.ndarray:
    m, n = A.shape
    dtype = _score_dtype(n, 0, xp)
    V_float = xp.asarray(V.astype(dtype))
    step = chunk_rows or max(1, _chunk_bytes(xp) // (8 * max(n, 1)))
    cross = xp.empty((m, V.shape[1]), dtype=np.int64)
    for start in range(0, m, step):
        block = xp.asarray(A[start : start + step]).astype(dtype)
        cross[start : start + step] = xp.rint(block @ V_float).astype(np.int64)
    return to_host(cross)


def _best_codes(
    cross: Any,
    gram: np.ndarray,
    codes: np.ndarray,
    chunk_rows: int | None,
    xp: ModuleType = np,
) -> tuple[Any, Any]:
    """Index of the best code per row (first on ties) and its score ``cᵀGc - 2 x·c``, as
    arrays of ``xp``: per chunk of rows one product ``cross Cᵀ`` with the code table ``C``,
    plus ``cᵀGc``, and the first minimum per row. ``cross`` is a numpy or ``xp`` array."""
    rows = cross.shape[0]
    codes_int = codes.astype(np.int64)
    quad = np.einsum("ck,kl,cl->c", codes_int, gram, codes_int)
    cross_bound = int(abs(cross).sum(axis=1).max()) if rows else 0  # where cross lives
    dtype = _score_dtype(cross_bound, int(np.abs(quad).max(initial=0)), xp)
    minus_two_codes_t = xp.asarray((-2 * codes_int.T).astype(dtype))
    quad_f = xp.asarray(quad.astype(dtype))
    step = chunk_rows or max(1, _chunk_bytes(xp) // (4 * len(codes)))
    best = xp.empty(rows, dtype=np.int64)
    best_scores = xp.empty(rows, dtype=np.int64)
    for start in range(0, rows, step):
        scores = xp.asarray(cross[start : start + step]).astype(dtype) @ minus_two_codes_t
        scores += quad_f
        chosen = first_minimum(scores, xp)  # the lowest code index on ties
        best[start : start + step] = chosen
        best_scores[start : start + step] = xp.rint(
            xp.take_along_axis(scores, chosen[:, None], axis=1)[:, 0]
        ).astype(np.int64)
    return best, best_scores


def _code_scores(cross: np.ndarray, gram: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Score ``cᵀGc - 2 x·c`` of a given code per row."""
    codes_int = codes.astype(np.int64)
    return np.einsum("ik,kl,il->i", codes_int, gram, codes_int) - 2 * np.einsum(
        "ik,ik->i", cross, codes_int
    )


def _solve_rows_on_backend(
    cross: np.ndarray, gram: np.ndarray, backend: Any, backend_params: Mapping[str, Any] | None
) -> np.ndarray:
    """Solve each distinct row's QUBO ``gram - 2 diag(cross_i)`` on a dimod sampler."""
    import dimod  # lazy: only this path needs a solver library

    sampler, params = _resolve_sampler(backend, backend_params)
    rank = gram.shape[0]
    # cᵀGc counts G[k, l] and G[l, k]: the upper triangle carries both.
    upper = np.triu(2 * gram, k=1).astype(np.float64)
    unique_rows, inverse = np.unique(cross, axis=0, return_inverse=True)
    solutions = np.empty((len(unique_rows), rank), dtype=np.int8)
    for index, row in enumerate(unique_rows):
        qubo = upper.copy()
        qubo[np.diag_indices(rank)] = np.diag(gram) - 2 * row
        sampleset = sampler.sample(dimod.BinaryQuadraticModel(qubo, "BINARY"), **params)
        best = sampleset.first.sample
        solutions[index] = [best[k] for k in range(rank)]
    return solutions[np.ravel(inverse)]


def _resolve_sampler(
    backend: Any, backend_params: Mapping[str, Any] | None
) -> tuple[Any, dict[str, Any]]:
    from bmfdsl.solvers._registry import (  # lazy: only this path needs a backend
        DEFAULT_BLS_BACKEND,
        DEFAULT_BLS_PARAMETERS,
        resolve_backend,
    )

    params = dict(backend_params or {})
    if backend is None:  # rank > 12 and nothing named: the seeded default
        params = {**DEFAULT_BLS_PARAMETERS, **params}
    return resolve_backend(backend, default=DEFAULT_BLS_BACKEND)[1], params
