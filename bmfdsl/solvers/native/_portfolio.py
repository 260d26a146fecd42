"""The native BMF solver: a work-budgeted portfolio of seeds, annealing and ALS polish.

Strategy (one set of defaults for every input):

1. Certificates first: rank 1 is solved exactly by enumeration when the smaller side is small,
   else by a budgeted branch and bound (:func:`bmfdsl.solvers.native._certify.exact_rank1`); error 0
   is optimal by definition.
2. Seeds: the caller's ``initial_factors``, the greedy densest row/column cover (the
   paper's baseline, S1 Algorithm 2) and the structure seeds of ``_seeds.py`` (NMF-threshold,
   row and column clusters), each polished by ALS (ALS never worsens a start; on sparse
   block data these seeds are hard to beat).
3. Restarts until the work budget is spent, cycling through simulated annealing from random
   states, parallel tempering, and annealing re-heated from the best state so far, each over
   heat-bath row moves (``_anneal.py``) and finished by ALS on the full matrix.
   Tall matrices are annealed on a uniform sample of rows (alternately ``n`` rows, like the
   paper's square core, and ``core_rows`` rows); the full ``U`` then follows by exact BLS and
   ALS.

Budgets count work, never time, so equal seeds give bit-identical answers under any machine
load: the settings, the cost model of the kernels and the default budget are in
:mod:`bmfdsl.solvers.native._settings`, the moves that spend it (polish, restarts) in
:mod:`bmfdsl.solvers.native._solver`. ``info["work"]`` records the work done. A wall-clock
limit (``time_limit``) is opt-in and makes the answer depend on machine speed and load.

All-zero rows and columns are dropped (their factor rows are zero in every optimum, unless
that factor is one-hot) and wide inputs are transposed internally so that ``m >= n``.

The numba kernels are compiled (or loaded from numba's on-disk cache) once per process by
:func:`compile_kernels` before the first solve starts its clock, so a time limit goes to the
search: with a cold cache the first solve of a 2,000 x 30 matrix at rank 3 used to lose about
9 s of its 1 s budget to compilation and ran one restart (relative error 0.767 instead of
0.740), and with a warm cache loading the kernels still took 0.3 s of it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from bmfdsl.linalg import Orientation
from bmfdsl.solvers.methods import baseline
from bmfdsl.solvers.native._beyond import (
    MAX_CODE_RANK,
    local_als,
    polish_beyond,
    polish_one_hot_beyond,
)
from bmfdsl.solvers.native._certify import exact_rank1
from bmfdsl.solvers.native._flips import flip_allowance, flip_descent
from bmfdsl.solvers.native._seeds import (
    EXACT_PROBE_ROWS,
    exact_rank_probes,
    nmf_threshold_work,
    seed_work,
    structure_seeds,
)
from bmfdsl.solvers.native._settings import (
    NativeSettings,
    auto_work_limit,
    check_warm_starts,
    solve_budget,
)
from bmfdsl.solvers.native._solver import PortfolioSolver
from bmfdsl.validation import check_binary_matrix, check_one_hot, check_random_state, check_rank


@dataclass
class NativeResult:
    """Solutions best first as ``(U, V, error)`` plus an info dict (timings, certificate)."""

    solutions: list[tuple[np.ndarray, np.ndarray, int]]
    info: dict[str, Any] = field(default_factory=dict)


# Not exactly factorizable at rank 2, so the warm-up solves below run every restart mode.
_WARM_UP_MATRIX = np.array(
    [[1, 1, 0, 0, 1], [1, 1, 0, 1, 0], [0, 0, 1, 1, 1], [0, 1, 1, 1, 0], [1, 0, 1, 0, 1],
     [1, 1, 1, 0, 0]],
    dtype=np.int8,
)  # fmt: skip
_kernels_ready = False


def compile_kernels() -> float:
    """Compile the solver's numba kernels, or load them from numba's cache, once per process.

    Runs the solver on a tiny matrix in every mode (rank 1 with and without its certificate,
    rank 2, one-hot) and the local-search ALS of ranks beyond enumeration. :func:`solve_bmf`
    calls it before starting its clock. Returns the seconds it took (0 once done).

    >>> seconds = compile_kernels()
    >>> compile_kernels()
    0.0
    """
    global _kernels_ready
    if _kernels_ready:
        return 0.0
    _kernels_ready = True  # first: the warm-up solves call solve_bmf, which calls this
    started = time.perf_counter()
    bounded = NativeSettings(num_reads=4, patience=None)
    solve_bmf(_WARM_UP_MATRIX, 1, seed=0, settings=bounded)  # the exact rank-1 search
    no_certificate = NativeSettings(num_reads=4, patience=None, max_enumeration=0)
    solve_bmf(_WARM_UP_MATRIX, 1, seed=0, settings=no_certificate)  # rank-1 annealing
    solve_bmf(_WARM_UP_MATRIX, 2, seed=0, settings=bounded)
    solve_bmf(_WARM_UP_MATRIX, 2, one_hot="V", seed=0, settings=bounded)
    start_u, start_v = np.ones((6, 2), np.int8), np.ones((5, 2), np.int8)
    local_als(_WARM_UP_MATRIX, start_u, start_v, solve_budget(bounded, (6, 5), started), 2)
    return time.perf_counter() - started


def solve_bmf(
    A: Any,
    rank: int,
    *,
    one_hot: str | None = None,
    initial_factors: Any = (),
    seed: Any = None,
    settings: NativeSettings | None = None,
) -> NativeResult:
    """Minimise ``||A - U Vᵀ||²_F`` over 0/1 ``U`` (``m x rank``) and ``V`` (``n x rank``).

    Args:
        A: 0/1 matrix (array-like or scipy sparse).
        rank: number of columns of ``U`` and ``V``.
        one_hot: ``"V"`` (or ``"U"``) to require exactly one 1 in every row of that factor.
        initial_factors: warm starts, an iterable of ``(U, V)`` pairs.
        seed: ``None``, an int or a numpy Generator; equal seeds give bit-identical results
            (in any process, under any load) unless ``settings.time_limit`` is set.
        settings: :class:`NativeSettings` (defaults when ``None``).

    Returns:
        :class:`NativeResult` with solutions best first and ``info`` holding the timings,
        the strategy counts, ``certificate`` (``{"optimal": bool, "reason": str | None}``),
        ``work`` (``restarts``, replica ``sweeps``, ``als_solves``, ``units`` of the cost model
        and their ``limit``) and ``stopped_by`` (why the restarts ended).

    >>> A = np.kron(np.eye(2, dtype=int), np.ones((2, 3), dtype=int))
    >>> result = solve_bmf(A, 2, seed=0)
    >>> U, V, error = result.solutions[0]
    >>> error, result.info["certificate"]["optimal"]
    (0, True)
    """
    compile_seconds = compile_kernels()  # before the clock: the budget is for the search
    started = time.perf_counter()
    settings = settings or NativeSettings()
    A = check_binary_matrix(A)
    rank = check_rank(rank, A.shape)
    one_hot = check_one_hot(one_hot)
    rng = check_random_state(seed)
    warm = check_warm_starts(initial_factors, A.shape, rank)
    if rank > MAX_CODE_RANK:  # no 2**rank code tables (_beyond.py)
        return _solve_beyond(A, rank, one_hot, warm, rng, settings, compile_seconds, started)
    budget = solve_budget(settings, A.shape, started)
    problem = _Problem.reduce(A, one_hot, warm)
    solver = PortfolioSolver(problem.A, rank, problem.one_hot, settings, rng, budget)
    certificate = _certify(solver, settings)
    seeded = time.perf_counter()
    certified_first = bool(certificate["optimal"])
    if certified_first:
        search = _SearchOutcome(restarts=0, stopped_by="optimal")
    else:
        _polish_seeds(solver, problem.warm)
        clusters = (solver.one_hot_u or solver.one_hot_v) and rank > 1
        # a one-hot model keeps a share of the budget for k-means++ after the annealing
        reserve = CLUSTERS_SHARE * solver.budget.remaining() if clusters else 0.0
        search = _search(solver, reserve if math.isfinite(reserve) else 0.0)
        if clusters:  # what the model asks for: k-means++ (_beyond.kmeans_restarts)
            solver.cluster_restarts()
        else:
            _flip_polish(solver)
    if solver.pool.best_error == 0:
        certificate = {"optimal": True, "reason": "zero error"}
    if certified_first:  # warm starts are kept among the answers even when certified
        for U, V in problem.warm:  # (otherwise they were polished as seeds)
            solver.polish(U, V, within_work_limit=False)
    solutions = [(*problem.expand(U, V), error) for error, U, V in solver.pool.items]
    finished = time.perf_counter()
    timings = {
        "compile": compile_seconds,
        "certificate_and_setup": seeded - started,
        "search": finished - seeded,
        "total": finished - started,
    }
    info = _info(solver, problem, certificate, search, timings)
    return NativeResult(solutions=solutions, info=info)


def _solve_beyond(
    A: np.ndarray,
    rank: int,
    one_hot: str | None,
    warm: list[tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
    settings: NativeSettings,
    compile_seconds: float,
    started: float,
) -> NativeResult:
    """Rank beyond :data:`MAX_CODE_RANK`: the portfolio at that rank, extended and polished
    by local-search ALS, or for a ``one_hot`` model by adding clusters and exact one-hot ALS
    (see ``_beyond.py``), within one work budget: the portfolio gets three quarters of it
    (and of a time limit), the polish what is left (at least its first two solves run)."""
    limit = settings.work_limit
    if limit is None and settings.time_limit is None:
        limit = auto_work_limit(A.shape)
    sub_time = None if settings.time_limit is None else 0.75 * settings.time_limit
    sub_work = None if limit is None else 0.75 * limit
    sub_settings = replace(settings, work_limit=sub_work, time_limit=sub_time)
    sub_warm = [(U[:, :MAX_CODE_RANK], V[:, :MAX_CODE_RANK]) for U, V in warm]
    sub = solve_bmf(
        A,
        MAX_CODE_RANK,
        one_hot=one_hot,
        initial_factors=sub_warm,
        seed=rng,
        settings=sub_settings,
    )
    A = np.ascontiguousarray(A, dtype=np.int8)
    left = None if limit is None else max(limit - sub.info["work"]["units"], 0.0)
    budget = solve_budget(replace(settings, work_limit=left), A.shape, started)  # one clock
    warm8 = [(np.asarray(U, np.int8), np.asarray(V, np.int8)) for U, V in warm]
    if one_hot is None:
        candidates, done = polish_beyond(A, rank, sub.solutions[0], warm8, settings, budget)
    else:
        candidates, done = polish_one_hot_beyond(
            A, rank, one_hot, sub.solutions[0], warm8, settings, budget, rng
        )
    info = dict(sub.info)
    if candidates[0][0] == 0:
        info["certificate"] = {"optimal": True, "reason": "zero error"}
    info["work"] = {
        **sub.info["work"],
        "units": sub.info["work"]["units"] + round(budget.work),
        "limit": None if limit is None else round(limit),
        "local_als_solves": done["local_als_solves"],
    }
    info["beyond_enumeration"] = {**done, "sub_rank_error": int(sub.solutions[0][2])}
    info["timings"] = {
        **sub.info["timings"],
        "compile": compile_seconds,
        "total": time.perf_counter() - started,
    }
    solutions: list[tuple[np.ndarray, np.ndarray, int]] = []
    seen: set[bytes] = set()
    for error, U, V in candidates:  # distinct answers, best first
        key = U.tobytes() + V.tobytes()
        if key not in seen and len(solutions) < settings.num_solutions:
            seen.add(key)
            solutions.append((U, V, error))
    return NativeResult(solutions=solutions, info=info)


@dataclass(frozen=True)
class _Problem:
    """The problem as the solver sees it: all-zero rows and columns dropped (their factor
    rows are zero in every optimum, unless that factor is one-hot) and a wide matrix
    transposed, so that ``m >= n``; :meth:`expand` maps a solution back.

    The swap is :class:`~bmfdsl.linalg.Orientation`, as in :func:`bmfdsl.factorize`, which
    transposes only a sampled wide ``A``: this one stays, since ``solve_bmf`` takes any
    shape (a sampled core can be wide again, and zero lines are dropped first).
    """

    A: np.ndarray
    one_hot: str | None
    warm: list[tuple[np.ndarray, np.ndarray]]
    keep_rows: np.ndarray
    keep_cols: np.ndarray
    orientation: Orientation

    @classmethod
    def reduce(
        cls, A: np.ndarray, one_hot: str | None, warm: list[tuple[np.ndarray, np.ndarray]]
    ) -> _Problem:
        keep_rows = np.asarray(A.any(axis=1) | (one_hot == "U"))
        keep_cols = np.asarray(A.any(axis=0) | (one_hot == "V"))
        if not keep_rows.any() or not keep_cols.any():
            keep_rows[:1] = keep_cols[:1] = True  # solve a 1x1 zero problem instead of nothing
        if not (keep_rows.all() and keep_cols.all()):  # (a copy of a big A costs time)
            A = np.ascontiguousarray(A[np.ix_(keep_rows, keep_cols)])
        orientation = Orientation(transposed=A.shape[1] > A.shape[0])
        return cls(
            A=np.ascontiguousarray(orientation.matrix(A)),
            one_hot=orientation.side(one_hot),
            warm=[orientation.factors(U[keep_rows], V[keep_cols]) for U, V in warm],
            keep_rows=keep_rows,
            keep_cols=keep_cols,
            orientation=orientation,
        )

    def expand(self, U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The factors of the full, untransposed matrix for the solver's ``(U, V)``."""
        U, V = self.orientation.factors(U, V)
        full_U = np.zeros((len(self.keep_rows), U.shape[1]), dtype=np.int8)
        full_V = np.zeros((len(self.keep_cols), V.shape[1]), dtype=np.int8)
        full_U[self.keep_rows], full_V[self.keep_cols] = U, V
        return full_U, full_V


def _certify(solver: PortfolioSolver, settings: NativeSettings) -> dict[str, Any]:
    """Rank 1 solved exactly where it is cheap: the certificate (not optimal otherwise)."""
    A = solver.A
    if solver.rank == 1 and not (solver.one_hot_u or solver.one_hot_v):
        exact = exact_rank1(A, max_enumeration=settings.max_enumeration)
        if exact is not None:
            solver.pool.add(exact[2], exact[0], exact[1])
            return {"optimal": True, "reason": "rank-1 exact search"}
    elif solver.rank == 1:  # the one-hot factor is all ones; the other follows by exact BLS
        ones_u, ones_v = np.ones((A.shape[0], 1), np.int8), np.ones((A.shape[1], 1), np.int8)
        solver.polish(ones_u, ones_v, within_work_limit=False)
        return {"optimal": True, "reason": "rank-1 one-hot: the factor is all ones"}
    return {"optimal": False, "reason": None}


def covering_factors(A: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """An exact factorization when ``rank`` covers a side: each column (or each row) of ``A``
    its own component.

    >>> A = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.int8)
    >>> U, V = covering_factors(A, 3)
    >>> bool((U.astype(int) @ V.T == A).all())
    True
    """
    m, n = A.shape
    if rank < min(m, n):
        raise ValueError(f"rank {rank} covers neither side of a {m} x {n} matrix")
    U, V = np.zeros((m, rank), np.int8), np.zeros((n, rank), np.int8)
    if n <= rank:
        U[:, :n], V[:, :n] = A, np.eye(n, dtype=np.int8)
    else:
        U[:, :m], V[:, :m] = np.eye(m, dtype=np.int8), A.T
    return U, V


def _polish_seeds(solver: PortfolioSolver, warm: list[tuple[np.ndarray, np.ndarray]]) -> None:
    """ALS from the warm starts, the greedy baseline (the paper's S1 Algorithm 2) and the
    structure seeds (NMF-threshold, clusters: :mod:`bmfdsl.solvers.native._seeds`)."""
    A, rank = solver.A, solver.rank
    # the baseline needs rank <= min(m, n), which dropping zero lines can break; beyond it the
    # rank covers a side, so an exact answer needs no search (and a seeds-only solve has one)
    seeds = [*warm, baseline(A, rank) if rank <= min(A.shape) else covering_factors(A, rank)]
    for U, V in seeds:
        solver.polish(U, V, within_work_limit=True)
        solver.counts["seeds"] += 1
    if solver.one_hot_u or solver.one_hot_v or rank > min(A.shape):
        return
    if not solver.budget.affords(seed_work(A.shape, rank)):  # the budget counts them too
        return
    # a generator of their own: the restarts draw the same states as without these seeds
    generator = solver.rng.spawn(1)[0]
    started = time.perf_counter()
    probe_work = nmf_threshold_work(A.shape, rank, max_rows=EXACT_PROBE_ROWS)
    # (a generator spawned from the seeds' own leaves their draws as they were)
    for U, V in exact_rank_probes(A, rank, generator.spawn(1)[0]):
        solver.budget.spend(probe_work, time.perf_counter() - started)
        solver.polish(U, V, within_work_limit=True)
        solver.counts["seeds"] += 1
        if solver.pool.best_error == 0:
            return
        started = time.perf_counter()
    structured = list(structure_seeds(A, rank, generator))
    solver.budget.spend(seed_work(A.shape, rank), time.perf_counter() - started)
    for U, V in structured:
        solver.polish(U, V, within_work_limit=True)
        solver.counts["seeds"] += 1


def _flip_polish(solver: PortfolioSolver) -> None:
    """The flip descent of a free model from the best answer, after the search and beside its
    budget (the search runs as without it: the same restarts), within
    :func:`~bmfdsl.solvers.native._flips.flip_allowance` units and, under an opt-in time
    limit, half what the clock leaves; its answer joins the pool when it is better."""
    if solver.one_hot_u or solver.one_hot_v or not solver.settings.flip_sweeps:
        return
    error, U, V = solver.pool.items[0]
    limit = solver.budget.work_limit
    budget = limit if limit is not None else auto_work_limit(solver.A.shape)
    allowance = flip_allowance(
        solver.A.shape, solver.rank, budget, solver.settings.flip_sweeps, solver.budget.deadline
    )
    if error == 0 or allowance <= 0:
        return
    started = time.perf_counter()
    result = flip_descent(solver.A, U, V, allowance)
    if result is None:
        return
    solver.budget.spend(result.work, time.perf_counter() - started)
    solver.counts["flips"] += result.flips
    if result.error < error:
        solver.pool.add(result.error, result.U, result.V)


def _restart_modes(solver: PortfolioSolver) -> tuple[tuple[str, int], ...]:
    """The cycle of ``(mode, core rows)`` restarts.

    A square core (as in the paper's row sampling) suits planted structure, a bigger one
    suits noisy data; both are cheap.
    """
    n = solver.A.shape[1]
    small, large = n, max(solver.settings.core_rows, n)
    if solver.rank == 1 and not (solver.one_hot_u or solver.one_hot_v):
        return (("rank1", 0), ("anneal", small), ("rank1", 0), ("tempering", large))
    return (("anneal", small), ("tempering", large), ("anneal", large), ("reheat", large))


@dataclass(frozen=True)
class _SearchOutcome:
    restarts: int
    # "optimal", "num_reads", "work_limit", "time_limit", "patience" or "work_patience"
    stopped_by: str


@dataclass
class _Progress:
    """Where the search stands: restarts done, and the restart count and the work units
    (``budget.work``) at the last improvement of the best error."""

    restarts: int = 0
    last_improvement: int = 0
    work_at_improvement: float = 0.0


#: The share of the budget left after the seeds that a one-hot model keeps for its k-means++
#: restarts (:meth:`PortfolioSolver.cluster_restarts`), which also get what the annealing
#: leaves. Clustering is what the model asks for: on planted blocks of 5,000 x 200 the
#: annealing portfolio alone gave 25,936 at r = 4 and 16,895 at r = 12, the best of 100
#: k-means++ runs 22,317 and 12,647.
CLUSTERS_SHARE = 0.25


def _search(solver: PortfolioSolver, reserve: float = 0.0) -> _SearchOutcome:
    """Restarts, cycling through :func:`_restart_modes`, until one stop rule holds or the
    error is 0; ``reserve``: work units left unspent for what follows."""
    modes = _restart_modes(solver)
    progress = _Progress(work_at_improvement=solver.budget.work)  # the seeds' best
    # work units and seconds of the last restart in each slot of ``modes`` (they differ in cost)
    last_work: dict[int, float] = {}
    last_duration: dict[int, float] = {}
    while solver.pool.best_error != 0:
        slot = progress.restarts % len(modes)
        mode, core_rows = modes[slot]
        expected_work = last_work.get(slot, solver.restart_work(mode, core_rows))
        expected_seconds = last_duration.get(slot, expected_work * solver.budget.seconds_per_unit)
        stop = _stop_rule(
            solver,
            progress,
            expected_work + reserve,
            expected_seconds + reserve * solver.budget.seconds_per_unit,
        )
        if stop is not None:
            return _SearchOutcome(progress.restarts, stop)
        before = solver.pool.best_error
        restart_started = time.perf_counter()
        work_before = solver.budget.work
        solver.anneal(mode, core_rows)
        last_duration[slot] = time.perf_counter() - restart_started
        last_work[slot] = solver.budget.work - work_before
        progress.restarts += 1
        if before is None or (solver.pool.best_error or 0) < before:
            progress.last_improvement = progress.restarts
            progress.work_at_improvement = solver.budget.work
    return _SearchOutcome(progress.restarts, "optimal")


def _stop_rule(
    solver: PortfolioSolver,
    progress: _Progress,
    expected_work: float,
    expected_seconds: float,
) -> str | None:
    """The rule that stops the search before the next restart, if one does.

    A restart starts only while one like the last of its kind (``expected_work``,
    ``expected_seconds``) still fits the budget, and after the first, the work patience.
    Both patience rules grant at least as much search since the last improvement as it took
    to get there (restarts, work units).
    """
    settings = solver.settings
    restarts = progress.restarts
    if settings.num_reads is not None and restarts >= settings.num_reads:
        return "num_reads"
    if settings.num_reads is None and not solver.budget.fits_work(expected_work):
        return "work_limit"
    if not solver.budget.fits_time(expected_seconds):
        return "time_limit"
    if settings.patience is not None and restarts - progress.last_improvement >= max(
        settings.patience, progress.last_improvement
    ):
        return "patience"
    # like the budget, the patience takes a restart only while one like the last fits it
    # (the first always runs: at rank 10 one can cost more than the patience)
    stalled_work = solver.budget.work - progress.work_at_improvement + expected_work
    if (
        settings.work_patience is not None
        and restarts > 0
        and stalled_work > max(settings.work_patience, progress.work_at_improvement)
    ):
        return "work_patience"
    return None


def _info(
    solver: PortfolioSolver,
    problem: _Problem,
    certificate: dict[str, Any],
    search: _SearchOutcome,
    timings: dict[str, float],
) -> dict[str, Any]:
    """What the result's ``info`` says about the solve."""
    settings = solver.settings
    return {
        "solver": "native",
        "certificate": certificate,
        "restarts": search.restarts,
        "stopped_early": search.stopped_by in ("patience", "work_patience"),
        "stopped_by": search.stopped_by,
        "work": {
            "restarts": search.restarts,
            "sweeps": solver.sweeps,
            "als_solves": solver.solves,
            "units": round(solver.budget.work),
            "limit": None if solver.budget.work_limit is None else round(solver.budget.work_limit),
        },
        "clock_stops": solver.clock_stops,
        "deterministic": settings.time_limit is None,
        "strategies": dict(solver.counts),
        "transposed": problem.orientation.transposed,
        "reduced_shape": problem.orientation.matrix(problem.A).shape,
        "time_limit": settings.time_limit,
        "timings": timings,
        "settings": {name: getattr(settings, name) for name in NativeSettings.__dataclass_fields__},
    }
