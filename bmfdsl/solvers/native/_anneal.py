"""Structure-aware annealing kernels for BMF: ``min ||A - U Vᵀ||²_F`` over 0/1 ``U``, ``V``.

The move is a *heat-bath row update*: given ``V``, the rows of ``U`` are independent, and the
error of row ``i`` with code ``c ∈ {0,1}^r`` is ``|a_i|² - 2 bᵢ·c + cᵀ G c`` with ``bᵢ = Vᵀ aᵢ`` and
``G = VᵀV``. All ``2^r`` codes (only the ``r`` one-hot codes when the factor is one-hot) are
scored in Gray-code order at O(1) each and one is drawn from ``exp(-error / T)``. Single-bit
flips are special cases of this move, so every state visited is feasible (it is the QUBO of
Formulation 1 sampled on its feasible set ``W = U∘V``). At ``T = 0`` the update would be an
exact binary least-squares (BLS) solve, i.e. one half-step of ALS: polishing uses the package's
one compiled ALS (:func:`bmfdsl.linalg.als_loop`) for that.

Everything here is ``numba.njit(cache=True)``; errors are exact integers.
"""

from __future__ import annotations

import numba
import numpy as np

from bmfdsl.linalg import als_loop, bit_cross, code_table, gram, pack_row_bits, solve_rows_exact

# Codes whose weight is below exp(-_CUTOFF) are skipped: they would never be drawn anyway.
_CUTOFF = 30.0
# Gaps below this get their weight from a table filled per call (larger ones are rare).
_GAP_TABLE = 512


def row_codes(rank: int, exactly_one: bool) -> tuple[np.ndarray, np.ndarray]:
    """The candidate rows of a factor and the Gray-code bit flipped to reach each.

    Returns ``(codes, flip_bit)``: ``codes`` is ``K x rank`` int8, a writable copy of
    :func:`bmfdsl.linalg.code_table` in ``"gray"`` order (all ``2**rank`` codes, or the ``rank``
    one-hot codes with ``exactly_one``); ``flip_bit[t]`` is the bit that differs between
    ``codes[t - 1]`` and ``codes[t]`` (``-1`` for the first code, and everywhere for one-hot).

    >>> codes, flips = row_codes(2, exactly_one=False)
    >>> codes.tolist(), flips.tolist()
    ([[0, 0], [1, 0], [1, 1], [0, 1]], [-1, 0, 1, 0])
    >>> row_codes(2, exactly_one=True)[0].tolist()
    [[1, 0], [0, 1]]
    """
    # a writable copy: the kernels were compiled for (and cached with) writable arrays
    codes = code_table(rank, exactly_one, "gray").copy()
    if exactly_one:
        return codes, np.full(rank, -1, dtype=np.int64)
    # Gray step t flips the lowest set bit of t
    flip_bit = [-1] + [(t & -t).bit_length() - 1 for t in range(1, len(codes))]
    return codes, np.array(flip_bit, dtype=np.int64)


@numba.njit(cache=True, nogil=True)
def total_error(A: np.ndarray, U: np.ndarray, V: np.ndarray) -> np.int64:
    """``||A - U Vᵀ||²_F`` as an exact integer."""
    m, n = A.shape
    r = U.shape[1]
    err = np.int64(0)
    for i in range(m):
        for j in range(n):
            s = 0
            for k in range(r):
                s += U[i, k] * V[j, k]
            d = np.int64(A[i, j]) - s
            err += d * d
    return err


@numba.njit(cache=True, nogil=True)
def _resample_rows(
    B: np.ndarray,
    G: np.ndarray,
    X: np.ndarray,
    codes: np.ndarray,
    flip_bit: np.ndarray,
    temperature: float,
) -> np.int64:
    """Redraw every row of ``X`` at ``temperature > 0`` given the other factor; return
    Σ_rows (cᵀGc - 2 b·c).

    ``B`` holds ``bᵢ`` per row (data times the other factor), ``G`` the other factor's Gram
    matrix (symmetric).

    The draws are those of the plain scan (every code's weight ``exp(-gap / T)``, summed in
    code order), bit for bit, with less work: energies are integers, so a weight depends only
    on the integer gap to the row's best code and is computed once per gap and call (the
    ``exp`` had been most of a sweep); ``cᵀGc`` follows the Gray order as the linear term does
    (``O(r)`` a code, not ``O(r²)``); the best code is tracked while scoring, and a row whose
    second-best code is beyond the cutoff (most rows once the run is cold) takes the best
    without weighing the others.
    """
    K, r = codes.shape
    exactly_one = flip_bit[K - 1] < 0
    quad = np.zeros(K, dtype=np.int64)
    if exactly_one:
        for t in range(K):
            q = 0
            for k in range(r):
                if codes[t, k]:
                    for k2 in range(r):
                        q += G[k, k2] * codes[t, k2]
            quad[t] = q
    else:  # Gray order: one bit flips per step, so cᵀGc changes by one row of G
        for t in range(1, K):
            bit = flip_bit[t]
            cross = 0
            for k in range(r):
                if k != bit and codes[t, k]:
                    cross += G[bit, k]
            step = G[bit, bit] + 2 * cross
            quad[t] = quad[t - 1] + step if codes[t, bit] else quad[t - 1] - step
    # weight by integer gap, filled as gaps occur; no wider than the gaps that get one
    size = int(min(float(_GAP_TABLE), _CUTOFF * temperature + 2.0))
    table = np.full(size, -1.0)
    energy = np.zeros(K, dtype=np.int64)
    weights = np.zeros(K, dtype=np.float64)
    total = np.int64(0)
    largest = np.iinfo(np.int64).max
    for i in range(X.shape[0]):
        best = 0
        emin = second = largest  # the lowest energy and the second-lowest (emin on a tie)
        lin = 0
        for t in range(K):
            if exactly_one:  # each one-hot code's own sum
                lin = 0
                for k in range(r):
                    lin += codes[t, k] * B[i, k]
            elif t > 0:  # Gray order: one bit flips per step
                bit = flip_bit[t]
                lin += B[i, bit] if codes[t, bit] else -B[i, bit]
            e = quad[t] - 2 * lin
            energy[t] = e
            if e < emin:
                second, emin, best = emin, e, t
            elif e < second:
                second = e
        if second == largest or (second - emin) / temperature >= _CUTOFF:
            # frozen: every other code's weight is 0, so the scan below would pick the best
            # whatever the draw (which is still taken, for the same stream)
            np.random.random()
            for k in range(r):
                X[i, k] = codes[best, k]
            total += emin
            continue
        norm = 0.0
        for t in range(K):
            gap = energy[t] - emin
            w = table[gap] if gap < size else -1.0
            if w < 0.0:
                scaled = gap / temperature
                w = np.exp(-scaled) if scaled < _CUTOFF else 0.0
                if gap < size:
                    table[gap] = w
            weights[t] = w
            norm += w
        pick = np.random.random() * norm
        chosen = K - 1
        acc = 0.0
        for t in range(K):
            acc += weights[t]
            if pick < acc:
                chosen = t
                break
        while weights[chosen] == 0.0:  # float round-off at the end of the scan
            chosen -= 1
        for k in range(r):
            X[i, k] = codes[chosen, k]
        total += energy[chosen]
    return total


@numba.njit(cache=True, nogil=True)
def _half_sweep_u(A_bits, U, V, codes_u, flips_u, temperature):
    B = bit_cross(A_bits, V)
    return _resample_rows(B, gram(V), U, codes_u, flips_u, temperature)


@numba.njit(cache=True, nogil=True)
def _half_sweep_v(At_bits, U, V, codes_v, flips_v, temperature):
    B = bit_cross(At_bits, U)
    return _resample_rows(B, gram(U), V, codes_v, flips_v, temperature)


@numba.njit(cache=True, nogil=True)
def anneal_replicas(
    A: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    temperatures: np.ndarray,
    swap: bool,
    codes_u: np.ndarray,
    flips_u: np.ndarray,
    codes_v: np.ndarray,
    flips_v: np.ndarray,
    seed: int,
    best_U: np.ndarray,
    best_V: np.ndarray,
    v_scale: float = 1.0,
) -> np.ndarray:
    """Anneal ``R`` replicas for ``S`` sweeps; optionally exchange neighbouring replicas.

    Args:
        A: ``m x n`` int8 data.
        U, V: ``R x m x r`` and ``R x n x r`` int8 states, updated in place.
        temperatures: ``S x R``; row ``s`` gives each replica's temperature at sweep ``s``
            (a decreasing column is simulated annealing; a constant ladder with ``swap`` is
            parallel tempering; replicas are ordered from cold to hot for swaps).
        swap: attempt a replica exchange between neighbours after every sweep.
        codes_u, flips_u, codes_v, flips_v: from :func:`row_codes`.
        seed: seeds numba's generator, so equal seeds give equal runs.
        best_U, best_V: ``m x r`` / ``n x r`` buffers receiving the best state seen.
        v_scale: the rows of ``V`` are drawn at ``v_scale`` times the temperature of the rows
            of ``U`` (their errors span ``m`` entries instead of ``n``, so tall matrices need a
            hotter ``V`` to keep it moving).

    Returns:
        ``R + 1`` int64: final error of each replica, then the best error seen.
    """
    np.random.seed(seed)
    R = U.shape[0]
    S = temperatures.shape[0]
    # A and Aᵀ as bits once per call: each half sweep's cross products are popcounts
    A_bits = pack_row_bits(A)
    At_bits = pack_row_bits(np.ascontiguousarray(A.T))
    norm_a = np.int64(0)
    for i in range(A.shape[0]):
        for j in range(A.shape[1]):
            norm_a += A[i, j]
    errors = np.zeros(R, dtype=np.int64)
    best = np.int64(-1)
    for s in range(S):
        for rep in range(R):
            T = temperatures[s, rep]
            _half_sweep_u(A_bits, U[rep], V[rep], codes_u, flips_u, T)
            errors[rep] = norm_a + _half_sweep_v(
                At_bits, U[rep], V[rep], codes_v, flips_v, T * v_scale
            )
            if best < 0 or errors[rep] < best:
                best = errors[rep]
                best_U[:, :] = U[rep]
                best_V[:, :] = V[rep]
        if swap:
            start = s & 1  # alternate even / odd pairs
            for rep in range(start, R - 1, 2):
                b1 = 1.0 / temperatures[s, rep]
                b2 = 1.0 / temperatures[s, rep + 1]
                x = (b1 - b2) * (errors[rep] - errors[rep + 1])
                if x >= 0.0 or np.random.random() < np.exp(x):
                    tmp_u = U[rep].copy()
                    U[rep][:, :] = U[rep + 1]
                    U[rep + 1][:, :] = tmp_u
                    tmp_v = V[rep].copy()
                    V[rep][:, :] = V[rep + 1]
                    V[rep + 1][:, :] = tmp_v
                    e = errors[rep]
                    errors[rep] = errors[rep + 1]
                    errors[rep + 1] = e
    out = np.zeros(R + 1, dtype=np.int64)
    out[:R] = errors
    out[R] = best
    return out


def als_polish(
    A: np.ndarray,
    U: np.ndarray,
    V: np.ndarray,
    codes_u: np.ndarray,
    flips_u: np.ndarray,
    codes_v: np.ndarray,
    flips_v: np.ndarray,
    max_solves: int,
) -> tuple[np.int64, int]:
    """Alternate exact BLS solves (U, then V, ...) in place until two solves in a row bring no
    improvement or ``max_solves`` is reached; never worsens. Returns ``(error, solves)``.

    ``codes_u``/``codes_v`` come from :func:`row_codes` (the Gray-code flips are not needed by
    exact solves); a row keeps its code on ties. Runs :func:`bmfdsl.linalg.als_loop`.
    """
    history = np.zeros(max_solves + 1, dtype=np.int64)
    start = int(total_error(A, U, V))
    best_U, best_V, error, solves = als_loop(
        A, np.ascontiguousarray(A.T), U, V, codes_u, codes_v, max_solves, 2, True, start, history,
        True,
    )  # fmt: skip
    U[:] = best_U
    V[:] = best_V
    return np.int64(error), int(solves)


@numba.njit(cache=True, nogil=True)
def bls_step(
    A: np.ndarray, At: np.ndarray, U: np.ndarray, V: np.ndarray, codes: np.ndarray, solve_u: bool
) -> np.int64:
    """One exact BLS solve in place (the rows of ``U`` given ``V``, or of ``V`` given ``U``),
    as in :func:`als_polish` (a row keeps its code on ties); returns the new error. ``At`` is
    ``A.T`` (contiguous), ``codes`` those of the solved factor. One call per solve lets a
    caller count solves or watch the clock between them. Runs the shared
    :func:`bmfdsl.linalg.solve_rows_exact`."""
    if solve_u:
        return np.int64(solve_rows_exact(A, V, codes, U, True))
    return np.int64(solve_rows_exact(At, U, codes, V, True))


@numba.njit(cache=True, nogil=True)
def rank1_anneal(
    A: np.ndarray, v: np.ndarray, temperatures: np.ndarray, seed: int
) -> tuple[np.ndarray, np.int64]:
    """Rank 1 over ``v`` alone: the best ``u`` for any ``v`` is ``u_i = [2 aᵢ·v > |v|]``.

    Metropolis single-bit flips of ``v`` (one sweep per temperature) on the exact objective
    ``gain(v) = Σ_i max(0, 2 aᵢ·v - |v|)`` (error = ``|A|² - gain``), in O(m) per trial.
    Returns the best ``v`` seen and its error.
    """
    np.random.seed(seed)
    m, n = A.shape
    At = np.ascontiguousarray(A.T)
    s = np.zeros(m, dtype=np.int64)
    size = np.int64(0)
    for j in range(n):
        if v[j]:
            size += 1
            for i in range(m):
                s[i] += At[j, i]
    gain = np.int64(0)
    for i in range(m):
        if 2 * s[i] > size:
            gain += 2 * s[i] - size
    norm_a = np.int64(0)
    for j in range(n):
        for i in range(m):
            norm_a += At[j, i]
    best_v = v.copy()
    best_gain = gain
    for t in range(temperatures.shape[0]):
        T = temperatures[t]
        for j in range(n):
            d = 1 - 2 * np.int64(v[j])
            new_size = size + d
            new_gain = np.int64(0)
            for i in range(m):
                x = 2 * (s[i] + d * At[j, i]) - new_size
                if x > 0:
                    new_gain += x
            delta = new_gain - gain
            if delta >= 0 or np.random.random() < np.exp(delta / T):
                v[j] = 1 - v[j]
                size = new_size
                gain = new_gain
                for i in range(m):
                    s[i] += d * At[j, i]
                if gain > best_gain:
                    best_gain = gain
                    best_v[:] = v
    return best_v, norm_a - best_gain
