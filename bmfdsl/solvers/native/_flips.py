"""Flip descent on the short factor: one bit of ``V`` at a time, ``U`` solved exactly.

ALS changes a whole factor at once, each time the best one for the other; an answer where
neither half-step helps can still improve by flipping one bit of ``V`` and re-solving every
row of ``U``: the flip changes the best code of many rows at once, which no single ALS step
sees. With all ``2**r`` codes' errors of every row kept (``m x 2**r`` integers), flipping
``V[j, k]`` changes only column ``j``'s term, and only for the codes that use factor ``k``;
a flip is judged exactly in ``m 2**(r-1)`` steps, and an accepted one costs ``m 2**r r``.
Before that, ``m`` steps bound it from below by each row's best with and without factor
``k`` (kept with the table) and the least change the flip makes to a code: a flip that
cannot help is passed over (on planted 10,000 x 300 data at r = 5 every flip of a sweep,
0.6 s -> 0.05 s; about two thirds at 37% ones), and the flips taken are the same. A flip
the bound leaves open is judged row by row, each row's exact error replacing its bound, and
only rows whose bound is below their best without factor ``k`` (the others' error is that
best exactly); the sum only grows, so it stops once it reaches the total (planted blocks of
30,000 x 300 at 30% ones, r = 7: a sweep without a flip took 10.8·10⁹ units and 3.3 s, now
1.25·10⁹ and 0.55-0.7 s).
The matrix is taken so that ``V`` is the short side's factor (a wide ``A`` is transposed).

As the last step of the default ``factorize`` it lowered 24 of 88 small real-data runs (the
UCI sets and their subsamples, leukemia, melanoma and MNIST slices, noisy Boolean matrices;
none got worse): zoo at k = 10 55 -> 54, apb at k = 5 / 10 695 / 598 -> 693 / 592. At the
end of the native solve it lowered 5 cells of the paper's Tables 2-4 and none rose (Table 3,
m = 2,000, r = 5: mean relative error 0.6583 -> 0.6575).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numba
import numpy as np

from bmfdsl.solvers.native._settings import WORK_PER_SECOND

#: Work units per (row, code) step of the descent (the cost model's units, a third of a
#: nanosecond each on the calibration machine; a step, an add and a compare, took about 2 ns:
#: 400 x 2,000 at r = 8, 1e9 units in 0.62-0.70 s).
FLIP_STEP_WORK = 6.0
#: The largest ``m 2**r`` (rows times codes) whose error table the descent keeps
#: (16 MiB of int32).
MAX_FLIP_TABLE = 2**22


#: Sweeps of a final flip descent (every bit of the short factor judged once) and the largest
#: share of a budget it may add to the work before it (:func:`flip_allowance`).
FLIP_SWEEPS = 2
FLIP_SHARE = 0.2


@dataclass(frozen=True)
class FlipResult:
    """What :func:`flip_descent` returns: the factors, their error, the flips it made and
    the work units it spent."""

    U: np.ndarray
    V: np.ndarray
    error: int
    flips: int
    work: float


def flip_work_per_sweep(shape: tuple[int, int], rank: int) -> float:
    """Work units of one sweep of :func:`flip_descent` that accepts no flip, at most: every
    bit of the short side's factor bounded and judged once.

    >>> flip_work_per_sweep((2000, 30), 3)  # 90 flips of 2,000 rows x (1 + 4 codes), 6 units
    5400000.0
    """
    long_side, short_side = max(shape), min(shape)
    return FLIP_STEP_WORK * short_side * rank * long_side * (1 + 2 ** (rank - 1))


def flip_allowance(
    shape: tuple[int, int],
    rank: int,
    budget: float,
    sweeps: int = FLIP_SWEEPS,
    deadline: float | None = None,
) -> float:
    """Work units of a final :func:`flip_descent`: its table and ``sweeps`` sweeps, at most
    :data:`FLIP_SHARE` of ``budget``; 0 where it does not run (no sweeps, rank below 2, whose
    answers the rank-1 search certifies, or an error table above :data:`MAX_FLIP_TABLE`).
    Under an opt-in ``deadline`` (``time.perf_counter()`` seconds) at most half what the
    clock leaves, at :data:`~bmfdsl.solvers.native.WORK_PER_SECOND`: the descent does not
    look at the clock inside.

    >>> flip_allowance((2000, 30), 3, 3e9)  # the table and two sweeps
    11184000.0
    >>> flip_allowance((2000, 30), 1, 3e9), flip_allowance((2000, 30), 12, 3e9)
    (0.0, 0.0)
    >>> flip_allowance((2000, 30), 3, 3e9, deadline=time.perf_counter() - 1)  # past it
    0.0
    """
    long_side = max(shape)
    if sweeps == 0 or rank < 2 or long_side * 2**rank > MAX_FLIP_TABLE:
        return 0.0
    setup = FLIP_STEP_WORK * long_side * 2**rank * (rank + 1)
    allowance = min(FLIP_SHARE * budget, setup + sweeps * flip_work_per_sweep(shape, rank))
    if deadline is not None:
        allowance = min(allowance, max(0.0, deadline - time.perf_counter()) * WORK_PER_SECOND / 2)
    return float(allowance)


def flip_descent(
    A: np.ndarray, U: np.ndarray, V: np.ndarray, work_limit: float
) -> FlipResult | None:
    """Improve ``(U, V)`` for ``A`` (0/1, ``m x n``) by flips of the short side's factor, each
    with the other factor re-solved exactly, until no flip helps or ``work_limit`` units are
    spent (counted, not timed: the same answer on any machine); ``None`` where the table of
    errors would be too large (:data:`MAX_FLIP_TABLE`) or the rank is 0.

    The answer's factor on the long side is the exact best for the other (a row's first best
    code, in code order), so its error is never above ALS's from the same short factor.

    >>> A = np.array([[1, 1, 0], [1, 1, 0], [0, 1, 1], [0, 1, 1]], dtype=np.int8)
    >>> U = np.array([[1], [1], [1], [1]], dtype=np.int8)
    >>> result = flip_descent(A, U, np.array([[0], [0], [1]], dtype=np.int8), 1e9)
    >>> result.error, result.V.ravel().tolist(), result.flips
    (4, [0, 1, 1], 1)
    """
    m, n = A.shape
    rank = V.shape[1]
    if rank == 0 or max(m, n) * 2**rank > MAX_FLIP_TABLE:
        return None
    transposed = m < n
    # column by column: every flip reads one column of the tall matrix, over all its rows
    columns = np.ascontiguousarray(A if transposed else A.T, dtype=np.int8)
    short = np.ascontiguousarray(U if transposed else V, dtype=np.int8)
    max_steps = int(max(0.0, work_limit) / FLIP_STEP_WORK)
    short, long_factor, error, flips, steps = _descend(columns, short, max_steps)
    U_out, V_out = (short, long_factor) if transposed else (long_factor, short)
    return FlipResult(U_out, V_out, int(error), int(flips), steps * FLIP_STEP_WORK)


@numba.njit(cache=True, nogil=True)
def _refresh(errors: np.ndarray, without: np.ndarray, within: np.ndarray, best: np.ndarray) -> None:
    """Each row's best error over all codes, and (``rank x m``: a flip's bound reads one
    factor's row) over the codes without factor ``k`` and over those with it."""
    m, codes = errors.shape
    rank = without.shape[0]
    for i in range(m):
        lowest = np.iinfo(np.int32).max
        for k in range(rank):
            without[k, i] = lowest
            within[k, i] = lowest
        for c in range(codes):
            e = errors[i, c]
            lowest = min(lowest, e)
            for k in range(rank):
                if (c >> k) & 1:
                    within[k, i] = min(within[k, i], e)
                else:
                    without[k, i] = min(without[k, i], e)
        best[i] = lowest


@numba.njit(cache=True, nogil=True)
def _descend(
    columns: np.ndarray, V: np.ndarray, max_steps: int
) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """The descent on a tall ``A``, given as ``columns = Aᵀ`` (contiguous), with ``V`` its
    short factor: ``(V, U, error, flips, steps)``, ``steps`` counting (row, code) steps."""
    n, m = columns.shape
    rank = V.shape[1]
    codes = 1 << rank
    V = V.copy()
    cross = np.zeros((m, rank), dtype=np.int32)  # A V
    ones = np.zeros(m, dtype=np.int32)
    for j in range(n):
        for i in range(m):
            if columns[j, i]:
                ones[i] += 1
                for k in range(rank):
                    cross[i, k] += V[j, k]
    column_of = np.zeros((codes, n), dtype=np.int32)  # (V c)_j: a code's row of U Vᵀ
    for c in range(codes):
        for k in range(rank):
            if (c >> k) & 1:
                for j in range(n):
                    column_of[c, j] += V[j, k]
    errors = np.empty((m, codes), dtype=np.int32)  # ||a_i - V c||² for every row and code
    for c in range(codes):
        square = 0
        for j in range(n):
            square += column_of[c, j] * column_of[c, j]
        for i in range(m):
            dot = 0
            for k in range(rank):
                if (c >> k) & 1:
                    dot += cross[i, k]
            errors[i, c] = ones[i] - 2 * dot + square
    without = np.empty((rank, m), dtype=np.int32)
    within = np.empty((rank, m), dtype=np.int32)
    best = np.empty(m, dtype=np.int32)
    _refresh(errors, without, within, best)
    total = 0
    for i in range(m):
        total += best[i]
    steps = m * codes * (rank + 1)
    half = codes // 2
    change = np.empty((2, codes), dtype=np.int32)  # a code's change where a_ij = 0 or 1
    least = np.empty(2, dtype=np.int32)  # the least of them over the codes with factor k
    row_bound = np.empty(m, dtype=np.int32)  # each row's bound on its error after a flip
    open_rows_of = np.empty(m, dtype=np.int64)  # rows whose bound is below their best without k
    flips = 0
    improved = True
    while improved and total > 0 and steps < max_steps:
        improved = False
        for j in range(n):
            for k in range(rank):
                if steps >= max_steps or total == 0:
                    break
                bit = 1 << k
                sign = 1 - 2 * V[j, k]  # +1 turns the bit on
                least[:] = np.iinfo(np.int32).max
                for c in range(codes):
                    if c & bit:
                        change[0, c] = 1 + 2 * sign * column_of[c, j]
                        change[1, c] = 1 - 2 * sign + 2 * sign * column_of[c, j]
                        least[0] = min(least[0], change[0, c])
                        least[1] = min(least[1], change[1, c])
                # A row's error after the flip is at least its best without factor k or its
                # best with it plus the least change: when those sum to the total, the flip
                # cannot help, and m steps spare the m 2**(r-1) of judging it (on planted
                # data nearly every flip; the flips accepted are the same)
                bound = 0
                open_rows = 0
                for i in range(m):
                    row_bound[i] = min(without[k, i], within[k, i] + least[columns[j, i]])
                    bound += row_bound[i]
                    if row_bound[i] < without[k, i]:
                        open_rows_of[open_rows] = i
                        open_rows += 1
                steps += m
                if bound >= total:
                    continue
                # Judged row by row, each row's exact error replacing its bound. A row whose
                # bound is its best without factor k has that error exactly (no code can do
                # better than its bound), so only the others are judged; the sum only grows,
                # so once it reaches the total the flip cannot help and the rest are not
                # judged either (the same flips, fewer steps)
                after = bound
                judged = 0
                for index in range(open_rows):
                    i = open_rows_of[index]
                    row_change = change[1] if columns[j, i] else change[0]
                    lowest = without[k, i]
                    for high in range(0, codes, 2 * bit):
                        for low in range(bit):
                            c = high + bit + low
                            lowest = min(lowest, errors[i, c] + row_change[c])
                    after += lowest - row_bound[i]
                    judged += 1
                    if after >= total:
                        break
                steps += judged * half
                if after < total:
                    V[j, k] = 1 - V[j, k]
                    for c in range(codes):
                        if c & bit:
                            column_of[c, j] += sign
                    for i in range(m):
                        row_change = change[1] if columns[j, i] else change[0]
                        for c in range(codes):
                            if c & bit:
                                errors[i, c] += row_change[c]
                    _refresh(errors, without, within, best)
                    total = after
                    flips += 1
                    improved = True
                    steps += m * codes * (rank + 1)
    U = np.zeros((m, rank), dtype=np.int8)
    for i in range(m):
        for c in range(codes):
            if errors[i, c] == best[i]:
                for k in range(rank):
                    U[i, k] = (c >> k) & 1
                break
    return V, U, total, flips, steps
