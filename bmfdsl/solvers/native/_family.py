"""The BMF family by exact row updates: any product (sum, OR, XOR), mask, entry weights, L1
and row-count limits on the factors.

With ``V`` fixed the objective splits over the rows of ``U``, so each row takes its best code
exactly among the codes its limits allow (all ``2^r``, or those with ``lo <= ones <= hi``). The
cost of every code for every row is one matrix product: for a 0/1 product ``P_c`` (OR, XOR)
``Σ_j w_ij (a_ij - p_cj)² = Σ_j w_ij a_ij + Σ_j w_ij (1 - 2 a_ij) p_cj``, so the costs are
``G Pᵀ`` with ``G = W ∘ (1 - 2A)``; for the integer sum ``[W, -2 W∘A] [P², P]ᵀ``. ``V`` follows
from ``U`` the same way on the transpose. Ranks with too many codes use exact single-bit moves
per row instead (each row takes its best one-bit change, every row at once).

Identical rows (of ``A`` and its weights) are merged first, then identical columns: the
merged weights add up, the L1 term is counted per merged row, and the optimum is unchanged
(copies of a row share one best code given the other factor).

The search (:func:`solve_family`): ASSO-style seeds (association-rule candidates of the
columns and of the rows, at several confidence thresholds, picked by greedy cover) and random
ones, each polished by alternating exact updates; then an iterated local search from the
best: re-draw a few rows (or one rank component) at random, polish, keep it when not worse.
Every step counts its multiply-adds in a :class:`~bmfdsl.timings.WorkBudget`: the same seed
gives the same answer under any load.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import apply_product, check_product, product_squared_error
from bmfdsl.timings import WorkBudget

#: The most codes a row update enumerates; above it rows move by single bits.
MAX_CODES = 4096
#: Default work (multiply-adds of the row updates, plus a fixed charge per update): about
#: 2-5 s on a 2-core machine shared with other jobs.
DEFAULT_FAMILY_WORK = 2e10
#: Confidence thresholds of the association-rule seeds (ASSO's τ).
_THRESHOLDS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
#: Entries of the largest temporary of a row update (rows are updated in chunks).
_CHUNK_ENTRIES = 1 << 22

#: Work units charged per update besides its multiply-adds: the fixed cost of a numpy call
#: sequence (about 40 µs), so that tiny updates are not counted as free.
_UPDATE_OVERHEAD = 4e5

#: Work units a single-bit row update is charged per multiply-add of its own count (its
#: ``r + 1`` passes of about ten small numpy calls each): it ran at 0.6-1.6e9 units a second
#: where an exact update over the codes runs at 2-30e9, so Boolean and XOR models beyond
#: 4,096 codes a row took 12-33 s of a budget meant for 2-5 s (300 x 60 and 500 x 80 at
#: r = 16; with a third of the work their errors were within 0-1.7%).
_BIT_UPDATE_SCALE = 5.0


def _bit_update_work(rows: int, q: int, rank: int) -> float:
    """Work units of one single-bit update of ``rows`` rows against ``q`` others."""
    return _BIT_UPDATE_SCALE * (_UPDATE_OVERHEAD + float(rows) * q * (rank + 1) * 2)


#: The iterated local search accepts states up to this fraction worse than the current one,
#: and goes back to the best after this many perturbations without a new best.
_SLACK = 0.01
_RETURN_AFTER = 50

RowLimits = tuple[int, int]


@dataclass(frozen=True)
class FamilyProblem:
    """One member of the BMF family on a matrix ``A`` (``m x n``, 0/1).

    minimise ``Σ_ij w_ij (a_ij - (U ∘ V)_ij)² + l1_u Σ U + l1_v Σ V`` over 0/1 ``U`` (m x r),
    ``V`` (n x r) whose rows hold between ``lo`` and ``hi`` ones (``limits_u``, ``limits_v``).
    ``weights`` (``w``: mask times entry weights) default to ones.
    """

    A: np.ndarray
    rank: int
    product: str = "sum"
    weights: np.ndarray | None = None
    l1: tuple[float, float] = (0.0, 0.0)
    limits_u: RowLimits | None = None
    limits_v: RowLimits | None = None
    symmetric: bool = False  # one factor: V is U (A square)

    @classmethod
    def of(cls, structure: Any) -> FamilyProblem:
        """The problem of a :class:`~bmfdsl.modeling.BMFStructure` (L1 weights resolved)."""
        return cls(
            A=np.asarray(structure.A),
            rank=int(structure.rank),
            product=structure.product,
            weights=structure.effective_weights,
            l1=structure.l1_values(),
            limits_u=structure.limits("U"),
            limits_v=structure.limits("V"),
            symmetric=bool(getattr(structure, "symmetric", False)),
        )

    def feasible(self, U: np.ndarray, V: np.ndarray) -> bool:
        """Whether the rows of ``U`` and ``V`` hold the ones their limits allow."""
        for factor, limits in ((U, self.limits_u), (V, self.limits_v)):
            ones = np.asarray(factor).sum(axis=1)
            if limits is not None and ((ones < limits[0]) | (ones > limits[1])).any():
                return False
        return True

    def objective(self, U: np.ndarray, V: np.ndarray) -> float:
        """The objective at ``(U, V)``: the loss under the product (in row chunks) plus the
        L1 term (for checks; the solver keeps its own totals)."""
        loss = product_squared_error(self.A, U, V, self.product, self.weights)
        return loss + self.l1[0] * float(np.sum(U)) + self.l1[1] * float(np.sum(V))


def allowed_codes(rank: int, limits: RowLimits | None) -> np.ndarray | None:
    """Every row code with ``lo <= ones <= hi`` (``K x rank``, int8), or ``None`` when there
    are more than :data:`MAX_CODES` (rows then move by single bits).

    >>> allowed_codes(3, (1, 1)).tolist()
    [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    >>> len(allowed_codes(4, None)), len(allowed_codes(4, (0, 2)))
    (16, 11)
    """
    lo, hi = (0, rank) if limits is None else limits
    count = sum(_binomial(rank, ones) for ones in range(lo, min(hi, rank) + 1))
    if count > MAX_CODES:
        return None
    rows = [
        [1 if k in ones else 0 for k in range(rank)]
        for size in range(lo, min(hi, rank) + 1)
        for ones in itertools.combinations(range(rank), size)
    ]
    return np.array(rows, dtype=np.int8).reshape(len(rows), rank)


def _binomial(n: int, k: int) -> int:
    from math import comb

    return comb(n, k)


@dataclass
class _Side:
    """What updating one factor needs: the (merged) data seen from that side."""

    A: np.ndarray  # float64, rows = this factor's rows
    W: np.ndarray  # float64 weights
    G: np.ndarray  # W ∘ (1 - 2A): the cost coefficients of a 0/1 product
    WA2: np.ndarray  # -2 W ∘ A (integer sum only)
    constant: np.ndarray  # Σ_j w_ij a_ij per row
    l1: np.ndarray  # the L1 weight of each (merged) row
    codes: np.ndarray | None
    limits: RowLimits
    buffer: np.ndarray | None = None  # the update's cost matrix, reused
    products: np.ndarray | None = None  # the codes' products with the other factor, reused

    @property
    def codes_float(self) -> np.ndarray:
        assert self.codes is not None
        if self._codes_float is None:
            self._codes_float = self.codes.astype(np.float64)
        return self._codes_float

    _codes_float: np.ndarray | None = None


@dataclass
class FamilyResult:
    """The best ``(U, V)`` (full size), its objective and what the search did."""

    U: np.ndarray
    V: np.ndarray
    objective: float
    info: dict[str, Any] = field(default_factory=dict)


class FamilySolver:
    """Exact row updates, seeds and iterated local search on a merged problem."""

    def __init__(self, problem: FamilyProblem, budget: WorkBudget) -> None:
        self.product = check_product(problem.product)
        self.rank = problem.rank
        self.budget = budget
        A = np.asarray(problem.A, dtype=np.float64)
        W = np.ones_like(A) if problem.weights is None else np.asarray(problem.weights, np.float64)
        # merge identical rows of (A, W), then identical columns: weights add up
        self.row_index, row_counts, A, W = _merge_rows(A, W)
        self.col_index, col_counts, At, Wt = _merge_rows(A.T.copy(), W.T.copy())
        A, W = At.T.copy(), Wt.T.copy()
        self.shape = A.shape
        r = self.rank
        lu = problem.limits_u or (0, r)
        lv = problem.limits_v or (0, r)
        self.u = _side(A, W, problem.l1[0] * row_counts, allowed_codes(r, lu), lu)
        self.v = _side(At, Wt, problem.l1[1] * col_counts, allowed_codes(r, lv), lv)
        self.counts = {"updates": 0, "seeds": 0, "perturbations": 0, "accepted": 0}
        self._candidate_cache: dict[tuple[str, float], np.ndarray] = {}

    # -- one exact update --------------------------------------------------------------------
    def update(
        self, side: _Side, other: np.ndarray, current: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """The best rows of this side's factor given the ``other`` factor, and the objective."""
        self.counts["updates"] += 1
        if side.codes is None:
            return self._bit_update(side, other, current)
        codes = side.codes
        K, q = codes.shape[0], other.shape[0]
        if side.products is None or side.products.shape != (q, K):
            side.products = np.empty((q, K))
        PT = side.products  # q x K: the product of every code with every row of ``other``
        np.matmul(other.astype(np.float64), side.codes_float.T, out=PT)  # exact small integers
        apply_product(PT, self.product, out=PT)
        ones = codes.sum(axis=1).astype(np.float64)
        rows = side.A.shape[0]
        self.budget.spend(
            _UPDATE_OVERHEAD + float(rows) * q * K * (2 if self.product == "sum" else 1)
        )
        best = np.empty(rows, dtype=np.int64)
        total = 0.0
        step = max(1, min(rows, _CHUNK_ENTRIES // max(K, 1)))
        # one reused buffer: a fresh m x K array a call costs page faults (3x the product)
        if side.buffer is None or side.buffer.shape != (step, K):
            side.buffer = np.empty((step, K))
        has_l1 = bool(side.l1.any())
        for start in range(0, rows, step):
            part = slice(start, start + step)
            cost = side.buffer[: min(step, rows - start)]
            if self.product == "sum":
                np.matmul(side.W[part], PT * PT, out=cost)
                cost += side.WA2[part] @ PT
            else:
                np.matmul(side.G[part], PT, out=cost)
            if has_l1:
                cost += side.l1[part, None] * ones[None, :]
            choice = np.argmin(cost, axis=1)
            best[part] = choice
            total += float(cost[np.arange(choice.size), choice].sum())
        return codes[best].copy(), total + float(side.constant.sum()) + self._other_l1(side, other)

    def _bit_update(
        self, side: _Side, other: np.ndarray, current: np.ndarray
    ) -> tuple[np.ndarray, float]:
        """Every row takes its best single-bit change (or none) given ``other``."""
        rows, q = side.A.shape
        # exact small integers by BLAS (numpy's int64 matmul has none: 3x this update's time)
        counts = (current.astype(np.float64) @ other.T.astype(np.float64)).astype(np.int64)
        self.budget.spend(_bit_update_work(rows, q, self.rank))
        ones = current.sum(axis=1)
        base = self._row_costs(side, counts) + side.l1 * ones
        best_cost, best_bit = base.copy(), np.full(rows, -1)
        lo, hi = side.limits
        for t in range(self.rank):
            sign = 1 - 2 * current[:, t].astype(np.int64)
            moved = counts + sign[:, None] * other[None, :, t].astype(np.int64)
            cost = self._row_costs(side, moved) + side.l1 * (ones + sign)
            cost[(ones + sign < lo) | (ones + sign > hi)] = np.inf
            better = cost < best_cost
            best_cost[better], best_bit[better] = cost[better], t
        out = current.copy()
        moved_rows = np.flatnonzero(best_bit >= 0)
        out[moved_rows, best_bit[moved_rows]] ^= 1
        return out, float(best_cost.sum() + side.constant.sum()) + self._other_l1(side, other)

    def _other_l1(self, side: _Side, other: np.ndarray) -> float:
        """The L1 term of the factor held fixed (part of the objective the update reports)."""
        fixed = self.v if side is self.u else self.u
        return float(fixed.l1 @ other.sum(axis=1)) if fixed.l1.any() else 0.0

    def _row_costs(self, side: _Side, counts: np.ndarray) -> np.ndarray:
        P = apply_product(counts, self.product).astype(np.float64)
        if self.product == "sum":
            return np.asarray((side.W * P * P + side.WA2 * P).sum(axis=1))
        return np.asarray((side.G * P).sum(axis=1))

    def alternate(
        self, U: np.ndarray, V: np.ndarray, *, start_with_u: bool = True
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Alternating exact updates until two in a row bring no gain (or the budget ends)."""
        value = np.inf
        stale = 0
        solve_u = start_with_u
        first = True
        while stale < 2 and (first or self.budget.affords(self.update_work, 0.0)):
            if solve_u:
                U, new = self.update(self.u, V, U)
            else:
                V, new = self.update(self.v, U, V)
            if new < value - 1e-9:
                value, stale = new, 0
            else:
                stale += 1
            solve_u = not solve_u
            first = False
        return U, V, value

    @property
    def update_work(self) -> float:
        """Work units of the costlier side's update (what one more update may cost)."""
        rows, q = self.shape
        scale = 2 if self.product == "sum" else 1

        def side_work(codes: np.ndarray | None) -> float:
            if codes is None:  # single-bit moves
                return _bit_update_work(rows, q, self.rank)
            return _UPDATE_OVERHEAD + float(rows * q * len(codes)) * scale

        return max(side_work(self.u.codes), side_work(self.v.codes))

    # -- seeds -------------------------------------------------------------------------------
    def random_factor(self, rng: np.random.Generator, side: _Side) -> np.ndarray:
        rows = side.A.shape[0]
        if side.codes is not None:
            return side.codes[rng.integers(len(side.codes), size=rows)].copy()
        lo, hi = side.limits
        out = np.zeros((rows, self.rank), np.int8)
        for i in range(rows):
            size = int(rng.integers(lo, hi + 1))
            out[i, rng.choice(self.rank, size=size, replace=False)] = 1
        return out

    def association_seeds(self) -> list[tuple[str, np.ndarray]]:
        """ASSO-style starts: for each threshold, ``r`` basis vectors picked by greedy cover
        among the association-rule candidates, as ``("u"|"v", factor)`` to start from."""
        seeds: list[tuple[str, np.ndarray]] = []
        for name, side in (("v", self.u), ("u", self.v)):  # basis over columns: V; over rows: U
            for tau in _THRESHOLDS:
                seeds.append((name, _greedy_cover(side, self.rank, tau)))
        return seeds

    def search(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, float]:
        """Seeds, then iterated local search from the best, until the budget is spent."""
        best: tuple[np.ndarray, np.ndarray, float] | None = None
        starts: list[tuple[str, np.ndarray]] = (
            self.association_seeds() if self.product != "xor" else []
        )
        starts += [("v", self.random_factor(rng, self.v)) for _ in range(4)]
        for name, factor in starts:
            if best is not None and not self.budget.affords(4 * self.update_work, 0.0):
                break
            self.counts["seeds"] += 1
            if name == "v":
                V = _limited(factor, self.v.limits)
                U, V, value = self.alternate(np.zeros((self.shape[0], self.rank), np.int8), V)
            else:
                U = _limited(factor, self.u.limits)
                U, V, value = self.alternate(
                    U, np.zeros((self.shape[1], self.rank), np.int8), start_with_u=False
                )
            if best is None or value < best[2] - 1e-9:
                best = (U, V, value)
        assert best is not None
        current = best
        since_best = 0
        while best[2] > 1e-9 and self.budget.affords(4 * self.update_work, 0.0):
            U, V, on_u = self.perturb(rng, current[0], current[1])
            # the other side first: the perturbed side given the unchanged one is the old one
            U, V, value = self.alternate(U, V, start_with_u=not on_u)
            self.counts["perturbations"] += 1
            since_best += 1
            if value < best[2] - 1e-9:
                best, since_best = (U, V, value), 0
            # a walk: slightly worse states are accepted too, back to the best when stuck
            if value <= current[2] * (1 + _SLACK) + 1e-9:
                self.counts["accepted"] += 1
                current = (U, V, value)
            if since_best and since_best % _RETURN_AFTER == 0:
                current = best
        return best

    def perturb(
        self, rng: np.random.Generator, U: np.ndarray, V: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """A few rows of one factor re-drawn at random, or one rank component re-drawn;
        the factors and whether ``U`` was the one perturbed."""
        U, V = U.copy(), V.copy()
        on_u = bool(rng.integers(2))
        side, factor = (self.u, U) if on_u else (self.v, V)
        rows = factor.shape[0]
        move = rng.random()
        count = min(rows, int(rng.integers(1, max(2, rows // 20) + 1)))
        picked = rng.choice(rows, size=count, replace=False)
        if move < 0.3:  # a few rows re-drawn
            factor[picked] = self.random_factor(rng, side)[picked]
        elif move < 0.6:  # one bit flipped in a few rows (kept within the row limits)
            bits = rng.integers(self.rank, size=count)
            factor[picked, bits] ^= 1
            factor[:] = _limited(factor, side.limits)
        elif move < 0.7:  # one rank component re-drawn
            k = int(rng.integers(self.rank))
            factor[:, k] = rng.random(rows) < rng.uniform(0.05, 0.5)
            factor[:] = _limited(factor, side.limits)
        else:  # one rank component replaced by the association candidate that covers most
            self._refit_component(rng, U, V)
        return U, V, on_u

    def _refit_component(self, rng: np.random.Generator, U: np.ndarray, V: np.ndarray) -> None:
        """Component ``k`` (in place) becomes the association candidate adding the most cover
        to the other components' product (ASSO's step, in either orientation)."""
        k = int(rng.integers(self.rank))
        tau = float(rng.choice(_THRESHOLDS))
        others = [t for t in range(self.rank) if t != k]
        covered = (U[:, others].astype(np.float64) @ V[:, others].T.astype(np.float64)) > 0
        if rng.integers(2):  # a basis over the columns: V's component, used by rows of U
            V[:, k], U[:, k] = _best_candidate(self.u, self._candidates("u", tau), covered)
        else:
            U[:, k], V[:, k] = _best_candidate(self.v, self._candidates("v", tau), covered.T)
        U[:] = _limited(U, self.u.limits)
        V[:] = _limited(V, self.v.limits)

    def _candidates(self, side_name: str, tau: float) -> np.ndarray:
        key = (side_name, tau)
        if key not in self._candidate_cache:
            side = self.u if side_name == "u" else self.v
            self._candidate_cache[key] = _association_candidates(side, tau)
        return self._candidate_cache[key]

    def unmerge(self, U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The factors of the full matrix: each row or column takes its merged row's code."""
        return U[self.row_index].astype(np.int8), V[self.col_index].astype(np.int8)


def _side(A: np.ndarray, W: np.ndarray, l1: np.ndarray, codes: Any, limits: RowLimits) -> _Side:
    WA = W * A
    return _Side(
        A=A,
        W=W,
        G=W - 2 * WA,
        WA2=-2 * WA,
        constant=WA.sum(axis=1),
        l1=np.asarray(l1, dtype=np.float64),
        codes=codes,
        limits=limits,
    )


def _merge_rows(
    A: np.ndarray, W: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Identical rows of ``(A, W)`` merged: ``(index of each row's merged row, counts,
    merged A, merged W with the weights of the copies added)``."""
    keys = np.concatenate([A, W], axis=1)
    _, first, inverse, counts = np.unique(
        keys, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    inverse = inverse.reshape(-1)
    order = np.argsort(first, kind="stable")  # merged rows in order of first appearance
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    index = rank_of[inverse]
    merged_counts = counts[order].astype(np.float64)
    return index, merged_counts, A[first[order]], W[first[order]] * merged_counts[:, None]


def _limited(factor: np.ndarray, limits: RowLimits) -> np.ndarray:
    """Rows with too many ones keep their first ``hi``; rows with too few gain the first zeros."""
    out = np.asarray(factor, dtype=np.int8).copy()
    lo, hi = limits
    ones = out.sum(axis=1)
    for i in np.flatnonzero((ones > hi) | (ones < lo)):
        row = out[i]
        if ones[i] > hi:
            keep = np.flatnonzero(row)[:hi]
            row[:] = 0
            row[keep] = 1
        else:
            row[np.flatnonzero(row == 0)[: lo - int(ones[i])]] = 1
    return out


def _association_candidates(side: _Side, tau: float) -> np.ndarray:
    """ASSO's candidates: row ``j`` holds the columns ``l`` with ``conf(j → l) >= tau`` in
    ``side.A`` (weighted co-occurrence), as a ``q x q`` 0/1 float matrix."""
    A, W = side.A, side.W
    support = (W * A).T @ A  # support[j, l] = Σ_i w_i a_ij a_il
    diagonal = np.diag(support).copy()
    diagonal[diagonal == 0] = 1
    return (support / diagonal[:, None] >= tau).astype(np.float64)


def _best_candidate(
    side: _Side, candidates: np.ndarray, covered: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate that adds the most weighted cover to ``covered`` (rows use it where it
    gains): ``(candidate as 0/1 over the columns, its use as 0/1 over the rows)``."""
    open_gain = np.where(covered, 0.0, -side.G)  # w (2a - 1) where not covered yet
    gains = open_gain @ candidates.T  # rows x candidates
    pick = int(np.argmax(np.maximum(gains, 0).sum(axis=0)))
    return (candidates[pick] > 0).astype(np.int8), (gains[:, pick] > 0).astype(np.int8)


def _greedy_cover(side: _Side, rank: int, tau: float) -> np.ndarray:
    """ASSO's basis: ``rank`` association-rule candidates of the columns of ``side.A``
    (``conf(j → l) >= tau``) picked one at a time by the weighted cover they add. Returns the
    basis as the other factor (``n x rank``)."""
    candidates = _association_candidates(side, tau)
    covered = np.zeros(side.A.shape, dtype=bool)
    basis = np.zeros((side.A.shape[1], rank), np.int8)
    for k in range(rank):
        basis[:, k], uses = _best_candidate(side, candidates, covered)
        covered |= (uses[:, None] > 0) & (basis[None, :, k] > 0)
    return basis


def solve_family(
    problem: FamilyProblem,
    *,
    seed: int | None = None,
    work_limit: float | None = None,
    initial_factors: Any = (),
    time_limit: float | None = None,
) -> FamilyResult:
    """The best ``(U, V)`` found for ``problem`` within ``work_limit`` multiply-adds (and the
    opt-in ``time_limit`` in seconds: then not reproducible).

    >>> A = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.int8)
    >>> result = solve_family(FamilyProblem(A, 2, product="or"), seed=0)
    >>> result.objective, (np.asarray(result.U) @ np.asarray(result.V).T > 0).astype(int).tolist()
    (0.0, [[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    """
    from threadpoolctl import threadpool_limits

    work = DEFAULT_FAMILY_WORK if work_limit is None else float(work_limit)
    budget = WorkBudget(work if time_limit is None or work_limit is not None else None, time_limit)
    if problem.symmetric:
        with threadpool_limits(1, "blas"):
            return SymmetricSolver(problem, budget).solve(
                np.random.default_rng(seed), initial_factors
            )
    solver = FamilySolver(problem, budget)
    rng = np.random.default_rng(seed)
    with threadpool_limits(1, "blas"):  # small products: threads cost more than they give
        U, V, value = solver.search(rng)
    for start_U, start_V in initial_factors:  # warm starts, merged: polished, kept when better
        merged_U = np.asarray(start_U, np.int8)[_first_rows(solver.row_index)]
        merged_V = np.asarray(start_V, np.int8)[_first_rows(solver.col_index)]
        u2, v2, value2 = solver.alternate(
            _limited(merged_U, solver.u.limits), _limited(merged_V, solver.v.limits)
        )
        if value2 < value:
            U, V, value = u2, v2, value2
    full_U, full_V = solver.unmerge(U, V)
    info = {
        "solver": "native-family",
        "product": solver.product,
        "merged_shape": list(solver.shape),
        "row_update": "bits" if solver.u.codes is None or solver.v.codes is None else "codes",
        "work": {**solver.counts, "units": round(budget.work), "limit": budget.work_limit},
    }
    return FamilyResult(full_U, full_V, problem.objective(full_U, full_V), info)


def _first_rows(index: np.ndarray) -> np.ndarray:
    """For each merged row, the first original row mapped to it."""
    first = np.zeros(int(index.max()) + 1, dtype=np.int64)
    first[index[::-1]] = np.arange(index.size)[::-1]
    return first


def polish_family(
    problem: FamilyProblem,
    U: Any,
    V: Any,
    *,
    work_limit: float | None = None,
    deadline: float | None = None,
) -> FamilyResult:
    """Alternating exact row updates from ``(U, V)`` (``U`` first) until two in a row bring
    no gain: the model's own polish (never worse than the start when it is feasible).
    ``deadline`` (a ``time.perf_counter()`` reading, opt-in): no update after it but the first.

    >>> A = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=np.int8)
    >>> problem = FamilyProblem(A, 2, product="or")
    >>> polished = polish_family(problem, np.zeros((3, 2)), [[1, 0], [1, 1], [0, 1]])
    >>> polished.objective, polished.info["updates"]
    (0.0, 3)
    """
    from threadpoolctl import threadpool_limits

    seconds = None if deadline is None else max(deadline - time.perf_counter(), 0.0)
    budget = WorkBudget(None if work_limit is None else float(work_limit), seconds)
    if problem.symmetric:
        symmetric = SymmetricSolver(problem, budget)
        with threadpool_limits(1, "blas"):
            polished_U = symmetric.sweeps(np.asarray(U, np.int8))
        start = np.asarray(U, np.int8)
        value = problem.objective(polished_U, polished_U)
        if problem.feasible(start, start) and problem.objective(start, start) < value:
            polished_U, value = start, problem.objective(start, start)
        info = {"updates": symmetric.counts["updates"], "units": round(budget.work)}
        return FamilyResult(polished_U, polished_U.copy(), value, info)
    solver = FamilySolver(problem, budget)
    merged_U = np.asarray(U, np.int8)[_first_rows(solver.row_index)]
    merged_V = np.asarray(V, np.int8)[_first_rows(solver.col_index)]
    with threadpool_limits(1, "blas"):
        merged_U, merged_V, _ = solver.alternate(merged_U, _limited(merged_V, solver.v.limits))
    full_U, full_V = solver.unmerge(merged_U, merged_V)
    value = problem.objective(full_U, full_V)
    start_U, start_V = np.asarray(U, np.int8), np.asarray(V, np.int8)
    if problem.feasible(start_U, start_V) and problem.objective(start_U, start_V) < value:
        full_U, full_V, value = start_U, start_V, problem.objective(start_U, start_V)
    info = {"updates": solver.counts["updates"], "units": round(budget.work)}
    return FamilyResult(full_U, full_V, value, info)


class SymmetricSolver:
    """``A ≈ U ∘ Uᵀ`` (one factor): rows updated one at a time (Gauss-Seidel), each exactly
    over its allowed codes given the other rows, since row ``i`` enters both row and column
    ``i`` of the product; then an iterated local search like :class:`FamilySolver`'s."""

    def __init__(self, problem: FamilyProblem, budget: WorkBudget) -> None:
        self.problem = problem
        self.product = check_product(problem.product)
        self.budget = budget
        r = problem.rank
        lo_u, hi_u = problem.limits_u or (0, r)
        lo_v, hi_v = problem.limits_v or (0, r)
        self.limits = (max(lo_u, lo_v), min(hi_u, hi_v))  # V is U: both limits hold
        codes = allowed_codes(r, self.limits)
        if codes is None:
            raise InvalidParameterError(
                f"a one-factor model enumerates its row codes; rank {r} allows more than "
                f"{MAX_CODES}: lower the rank or bound the ones per row (at_most=)"
            )
        self.codes = codes
        self.codes_float = codes.astype(np.float64)
        ones = codes.sum(axis=1)
        self.ones = ones.astype(np.float64)
        self.self_product = apply_product(ones.astype(np.float64), self.product)  # p(c, c)
        self.index = {tuple(code): k for k, code in enumerate(codes.tolist())}
        A = np.asarray(problem.A, dtype=np.float64)
        W = np.ones_like(A) if problem.weights is None else np.asarray(problem.weights, float)
        self.diagonal_w = np.diag(W).copy()
        self.diagonal_a = np.diag(A).copy()
        WA = W * A
        self.both_w = W + W.T  # entries (i, j) and (j, i) share the product p(u_i, u_j)
        self.both_wa = WA + WA.T
        self.l1 = float(problem.l1[0] + problem.l1[1])
        self.counts = {"updates": 0, "seeds": 0, "perturbations": 0, "accepted": 0}

    def _products(self, U: np.ndarray) -> np.ndarray:
        return apply_product(self.codes_float @ U.T.astype(np.float64), self.product)

    @property
    def sweep_work(self) -> float:
        """Units of one sweep: its multiply-adds and, per row, half an update's fixed charge
        (each row is a few numpy calls of its own)."""
        m = self.problem.A.shape[0]
        return float(m) * (m * len(self.codes) + _UPDATE_OVERHEAD / 2)

    def sweeps(self, U: np.ndarray) -> np.ndarray:
        """Sweeps of exact row updates until one brings no gain (or the budget ends)."""
        U = U.copy()
        m = U.shape[0]
        P = self._products(U)  # K x m: p(c, u_j)
        diagonal = self.self_product
        first = True
        sweep = self.sweep_work
        while first or self.budget.affords(sweep, 0.0):
            first = False
            self.counts["updates"] += 1
            self.budget.spend(sweep)
            improved = False
            for i in range(m):
                column = P[:, i].copy()
                P[:, i] = 0.0  # j != i: the diagonal entry is p(c, c)
                if self.product == "sum":
                    cost = (P * P) @ self.both_w[i] - 2 * (P @ self.both_wa[i])
                    cost += self.diagonal_w[i] * (
                        diagonal * diagonal - 2 * self.diagonal_a[i] * diagonal
                    )
                else:
                    linear = self.both_w[i] - 2 * self.both_wa[i]
                    cost = P @ linear
                    cost += self.diagonal_w[i] * (1 - 2 * self.diagonal_a[i]) * diagonal
                cost += self.l1 * self.ones
                current = self.index.get(tuple(U[i].tolist()))
                best = int(np.argmin(cost))
                if current is None or cost[best] < cost[current] - 1e-9:
                    U[i] = self.codes[best]
                    improved = True
                    P[:, i] = apply_product(self.codes_float @ self.codes_float[best], self.product)
                else:
                    P[:, i] = column
            if not improved:
                break
        return U

    def solve(self, rng: np.random.Generator, initial_factors: Any = ()) -> FamilyResult:
        problem = self.problem
        m, r = problem.A.shape[0], problem.rank
        starts = [self.codes[rng.integers(len(self.codes), size=m)] for _ in range(4)]
        side = _side(
            np.asarray(problem.A, np.float64),
            np.ones(problem.A.shape) if problem.weights is None else problem.weights,
            np.zeros(m),
            None,
            (0, r),
        )
        starts += [_limited(_greedy_cover(side, r, tau), self.limits) for tau in _THRESHOLDS]
        starts += [_limited(np.asarray(U, np.int8), self.limits) for U, _ in initial_factors]
        best: tuple[np.ndarray, float] | None = None
        for start in starts:
            if best is not None and not self.budget.affords(3 * self.sweep_work, 0.0):
                break
            self.counts["seeds"] += 1
            U = self.sweeps(start)
            value = problem.objective(U, U)
            if best is None or value < best[1] - 1e-9:
                best = (U, value)
        assert best is not None
        current, since_best = best, 0
        while best[1] > 1e-9 and self.budget.affords(3 * self.sweep_work, 0.0):
            U = current[0].copy()
            count = min(m, int(rng.integers(1, max(2, m // 20) + 1)))
            picked = rng.choice(m, size=count, replace=False)
            U[picked] = self.codes[rng.integers(len(self.codes), size=count)]
            U = self.sweeps(U)
            value = problem.objective(U, U)
            self.counts["perturbations"] += 1
            since_best += 1
            if value < best[1] - 1e-9:
                best, since_best = (U, value), 0
            if value <= current[1] * (1 + _SLACK) + 1e-9:
                self.counts["accepted"] += 1
                current = (U, value)
            if since_best and since_best % _RETURN_AFTER == 0:
                current = best
        U, value = best
        info = {
            "solver": "native-family",
            "product": self.product,
            "symmetric": True,
            "work": {
                **self.counts,
                "units": round(self.budget.work),
                "limit": self.budget.work_limit,
            },
        }
        return FamilyResult(U, U.copy(), value, info)
