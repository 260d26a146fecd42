"""The native BMF solver: a work-budgeted portfolio of seeds, annealing and ALS polish.

Strategy (one set of defaults for every input):

1. Certificates first: rank 1 is solved exactly by enumeration when the smaller side is small,
   else by a budgeted branch and bound (:func:`bmfdsl.solvers.native._certify.exact_rank1`); error 0
   is optimal by definition.
2. Seeds: the caller's ``initial_factors``, and the greedy densest row/column cover (the
   paper's baseline, S1 Algorithm 2), each polished by ALS (ALS never worsens a start; on sparse
   data these seeds are hard to beat).
3. Restarts until the work budget is spent, cycling through simulated annealing from random
   states, parallel tempering, and annealing re-heated from the best state so far, each over
   heat-bath row moves (``_anneal.py``) and finished by ALS on the full matrix.
   Tall matrices are annealed on a uniform sample of rows (alternately ``n`` rows, like the
   paper's square core, and ``core_rows`` rows); the full ``U`` then follows by exact BLS and
   ALS.

Budgets count work, never time, so equal seeds give bit-identical answers under any machine
load: the solver counts annealing sweeps and exact BLS solves and weighs each by a cost model of
its kernels (:func:`sweep_work`, :func:`solve_work`; about 3e9 units a second on an idle
2-core x86 machine, the one the defaults were calibrated on). ``info["work"]`` records the
work done.
A wall-clock limit (``time_limit``) is opt-in and makes the answer depend on machine speed and
load; under it a restart and an ALS polish also check the clock inside, between chunks of
sweeps and pairs of BLS solves, so the limit holds on wide matrices too.

All-zero rows and columns are dropped (their factor rows are zero in every optimum, unless
that factor is one-hot) and wide inputs are transposed internally so that ``m >= n``.

The numba kernels are compiled (or loaded from numba's on-disk cache) once per process by
:func:`compile_kernels` before the first solve starts its clock, so a time limit goes to the
search: with a cold cache the first solve of a 2,000 x 30 matrix at rank 3 used to lose about
9 s of its 1 s budget to compilation and ran one restart (relative error 0.767 instead of
0.740), and with a warm cache loading the kernels still took 0.3 s of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.linalg import Orientation
from bmfdsl.solvers.methods import baseline
from bmfdsl.solvers.native._anneal import anneal_replicas, bls_step, rank1_anneal, row_codes
from bmfdsl.solvers.native._certify import DEFAULT_MAX_ENUMERATION, exact_rank1
from bmfdsl.validation import check_binary_matrix, check_one_hot, check_random_state, check_rank

__all__ = [
    "NativeResult",
    "NativeSettings",
    "auto_time_limit",
    "auto_work_limit",
    "compile_kernels",
    "solve_bmf",
    "solve_work",
    "sweep_work",
]

# Work units per elementary step of the kernels in ``_anneal.py``, in thirds of a
# nanosecond on the idle calibration machine (2 x86 cores; measured per sweep and per BLS
# solve from 30 x 30 to 20,000 x 2,000 and ranks 2 to 10, and matched to the restarts the old
# one-second time budget ran in bench/results/native.md).
_CELL_WORK = 4.0  # one matrix cell of a half sweep (data times the other factor)
_HOT_CODE_WORK = 25.0  # one candidate row code scored and weighed (exp) at T > 0
_COLD_CODE_WORK = 24.0  # one candidate row code scored at T = 0 (an exact BLS solve)
# one matrix cell of an ALS polish on the full matrix (tall data: cache misses, mispredicted
# branches and the error recount make it slower than a cell of the small annealing core)
_SOLVE_CELL_WORK = 24.0
#: Work units per second of the default budget (on the idle calibration machine).
WORK_PER_SECOND = 3e9
# The fewest sweeps worth an annealing restart; below that a restart is skipped.
_MIN_SWEEPS = 50


@dataclass(frozen=True)
class NativeSettings:
    """Settings of :func:`solve_bmf`; the defaults are used for every table of the paper.

    Attributes:
        work_limit: work units for the whole solve (seeds, restarts), counted by the cost
            model of :func:`sweep_work` and :func:`solve_work`, so that the same seed gives
            the same answer on any machine under any load. ``None``: :func:`auto_work_limit`
            (about 1 s up to 300,000 matrix cells, growing linearly to at most 4.8 s), unless
            ``time_limit`` is set (then the clock alone bounds the run). A restart starts only
            while one like the last of its kind still fits; the certificate and the seeds
            always run. The solver stops early once the error is 0 or the search stalls
            (``patience``).
        time_limit: opt-in wall-clock limit in seconds (JIT compilation excluded). The answer
            then depends on machine speed and load: **not reproducible**. Restarts and ALS
            polishes check the clock inside, so the solve ends within about 10% of it.
        num_reads: maximum number of annealing restarts (``None``: as many as the budget
            allows).
        sweeps: maximum sweeps per annealing run (fewer on big inputs so a run takes at most a
            quarter of the remaining budget).
        replicas: chains per run (independent for annealing, a temperature ladder for
            parallel tempering).
        t_hot, t_cold: temperature range in units of squared error per row.
        core_rows: tall matrices are annealed on row samples of this size (every other run)
            and of ``n`` rows (the others).
        max_solves: cap on exact BLS solves per ALS polish.
        max_enumeration: work cap of the rank-1 certificate (``2**lines * rows`` row
            operations for the enumeration, an eighth of it for the branch and bound).
        num_solutions: how many distinct solutions to return (best first).
        patience: stop before the budget once this many restarts in a row brought no
            improvement and at least as many as it took to find the best so far (``None``:
            always use the whole budget). Small inputs, where hundreds of restarts fit in
            the budget, usually settle within a few dozen.
    """

    time_limit: float | None = None
    num_reads: int | None = None
    work_limit: float | None = None
    sweeps: int = 500
    replicas: int = 4
    t_hot: float = 3.0
    t_cold: float = 0.05
    core_rows: int = 120
    max_solves: int = 100
    max_enumeration: int = DEFAULT_MAX_ENUMERATION
    num_solutions: int = 1
    patience: int | None = 24

    def __post_init__(self) -> None:
        checks = {
            "time_limit": self.time_limit is None or self.time_limit >= 0,
            "work_limit": self.work_limit is None or self.work_limit >= 0,
            "sweeps": self.sweeps >= 1,
            "replicas": self.replicas >= 1,
            "t_hot": self.t_hot > 0,
            "t_cold": 0 < self.t_cold <= self.t_hot,
            "core_rows": self.core_rows >= 1,
            "max_solves": self.max_solves >= 1,
            "max_enumeration": self.max_enumeration >= 0,
            "num_solutions": self.num_solutions >= 1,
        }
        if self.num_reads is not None:
            checks["num_reads"] = self.num_reads >= 0
        if self.patience is not None:
            checks["patience"] = self.patience >= 1
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            values = ", ".join(f"{name}={getattr(self, name)!r}" for name in bad)
            raise InvalidParameterError(
                f"invalid native solver setting(s): {values}; time_limit, work_limit, "
                "max_enumeration and num_reads must be >= 0, 0 < t_cold <= t_hot, the rest >= 1"
            )


@dataclass
class NativeResult:
    """Solutions best first as ``(U, V, error)`` plus an info dict (timings, certificate)."""

    solutions: list[tuple[np.ndarray, np.ndarray, int]]
    info: dict[str, Any] = field(default_factory=dict)


class _Pool:
    """The best distinct solutions seen so far."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: list[tuple[int, np.ndarray, np.ndarray]] = []

    @property
    def best_error(self) -> int | None:
        return self.items[0][0] if self.items else None

    def add(self, error: int, U: np.ndarray, V: np.ndarray) -> None:
        for known_error, known_U, known_V in self.items:
            if known_error == error and np.array_equal(known_U, U) and np.array_equal(known_V, V):
                return
        self.items.append((int(error), U.copy(), V.copy()))
        self.items.sort(key=lambda item: item[0])
        del self.items[self.size :]


def _random_factor(rng: np.random.Generator, shape: tuple[int, ...], one_hot: bool) -> np.ndarray:
    if not one_hot:
        return (rng.random(shape) < 0.5).astype(np.int8)
    out = np.zeros(shape, dtype=np.int8)
    picks = rng.integers(shape[-1], size=shape[:-1])
    np.put_along_axis(out, picks[..., None], 1, axis=-1)
    return out


def _project_one_hot(F: np.ndarray) -> np.ndarray:
    """Rows with exactly one 1 stay; others keep their first 1 (or get column 0)."""
    out = np.zeros_like(F, dtype=np.int8)
    out[np.arange(F.shape[0]), np.argmax(F, axis=1)] = 1
    return out


def sweep_work(rows: int, cols: int, codes_u: int, codes_v: int) -> float:
    """Work units of one annealing sweep of one replica on a ``rows x cols`` matrix.

    Both half sweeps pass over every cell and score ``codes_u`` candidate codes per row and
    ``codes_v`` per column, weighing each (an ``exp``).

    >>> sweep_work(30, 30, 32, 32)
    55200.0
    """
    return 2 * _CELL_WORK * rows * cols + _HOT_CODE_WORK * (rows * codes_u + cols * codes_v)


def solve_work(rows: int, cols: int, codes_u: int, codes_v: int) -> float:
    """Work units of one exact BLS solve (half an ALS round, the mean of its two halves).

    >>> solve_work(30, 30, 32, 32)
    44640.0
    """
    return _SOLVE_CELL_WORK * rows * cols + _COLD_CODE_WORK * (rows * codes_u + cols * codes_v) / 2


class _Solver:
    def __init__(
        self,
        A: np.ndarray,
        rank: int,
        one_hot: str | None,
        settings: NativeSettings,
        rng: np.random.Generator,
        deadline: float | None,
    ) -> None:
        self.A = A
        self.rank = rank
        self.one_hot_u = one_hot == "U"
        self.one_hot_v = one_hot == "V"
        self.settings = settings
        self.rng = rng
        self.deadline = deadline  # wall clock (opt-in time_limit); None: work alone bounds
        self.codes_u = row_codes(rank, self.one_hot_u)
        self.codes_v = row_codes(rank, self.one_hot_v)
        self.pool = _Pool(settings.num_solutions)
        self.counts: dict[str, int] = {"seeds": 0, "anneal": 0, "tempering": 0, "reheat": 0}
        # work done so far: units of the cost model, replica sweeps and exact BLS solves
        self.work = 0.0
        self.sweeps = 0
        self.solves = 0
        self.clock_stops = 0  # restarts or polishes cut short by the time limit
        m, n = A.shape
        self.solve_units = solve_work(m, n, len(self.codes_u[0]), len(self.codes_v[0]))
        self.seconds_per_unit = 1.0 / WORK_PER_SECOND  # refined by measurement (time limit)
        self.At: np.ndarray | None = None  # A.T and its number of ones, for the BLS solves

    def remaining_units(self, work_limit: float | None) -> float:
        """Work units left: by the work limit, and by the clock when a time limit is set."""
        left = np.inf if work_limit is None else work_limit - self.work
        if self.deadline is not None:
            seconds = max(self.deadline - time.perf_counter(), 0.0)
            left = min(left, seconds / self.seconds_per_unit)
        return float(max(left, 0.0))

    def out_of_time(self, expected_seconds: float) -> bool:
        return self.deadline is not None and time.perf_counter() + expected_seconds > self.deadline

    def feasible(self, U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        U = np.ascontiguousarray(U, dtype=np.int8)
        V = np.ascontiguousarray(V, dtype=np.int8)
        if self.one_hot_u:
            U = _project_one_hot(U)
        if self.one_hot_v:
            V = _project_one_hot(V)
        return U, V

    def polish(self, U: np.ndarray, V: np.ndarray, work_limit: float | None = None) -> int:
        """ALS from ``(U, V)`` (exact BLS solves of U, then V, ... until two in a row bring no
        gain, at most ``max_solves``) within the budget; adds the result to the pool.

        The first solve always runs; later ones only while they fit the work limit and the
        time limit (so a polish of a wide matrix stops in time). No solve worsens the error,
        and the first one starts from any ``U``, so the start's error is never computed.
        """
        U, V = self.feasible(U, V)
        error = np.int64(-1)
        stale = solves = 0
        seconds = 0.0
        while solves < self.settings.max_solves and stale < 2:
            if solves and work_limit is not None and self.work + self.solve_units > work_limit:
                break
            if solves and self.out_of_time(seconds):
                self.clock_stops += 1
                break
            solve_u = solves % 2 == 0
            codes = self.codes_u if solve_u else self.codes_v
            started = time.perf_counter()
            if self.At is None and not solve_u:  # a copy of A: made once, when first needed
                self.At = np.ascontiguousarray(self.A.T)
            At = self.A if self.At is None else self.At  # (a U solve does not read it)
            new = bls_step(self.A, At, U, V, codes[0], solve_u)
            seconds = time.perf_counter() - started
            self.seconds_per_unit = max(seconds, 1e-9) / self.solve_units
            solves += 1
            self.work += self.solve_units
            if error < 0 or new < error:
                error, stale = new, 0
            else:
                stale += 1
        self.solves += solves
        self.pool.add(int(error), U, V)
        return int(error)

    def _chunks(self, sweeps: int) -> int:
        """Sweeps per kernel call: all at once, or 1/16 of them under a time limit."""
        return sweeps if self.deadline is None else max(1, sweeps // 16)

    def anneal_rank1(self, work_limit: float | None) -> None:
        """Rank 1 without one-hot: anneal ``v`` on the exact objective of the full matrix."""
        A, settings, rng = self.A, self.settings, self.rng
        m, n = A.shape
        per_sweep = 2 * _CELL_WORK * A.size  # n flip trials of O(m) each
        budget = self.remaining_units(work_limit) / 4
        sweeps = int(min(settings.sweeps, max(20, budget / per_sweep)))
        scale = max(1.0, m / n)  # gains span m rows
        temperatures = np.geomspace(settings.t_hot * scale, settings.t_cold * scale, sweeps)
        v = np.asarray(rng.random(n) < 0.5, dtype=np.int8)
        seed = int(rng.integers(2**31 - 1))
        best_v, best_error = v.copy(), None
        chunk = self._chunks(sweeps)
        done = 0
        started = time.perf_counter()
        while done < sweeps:
            if self.out_of_time(self._chunk_seconds(done, started, chunk, per_sweep)):
                self.clock_stops += 1
                break
            part_v, part_error = rank1_anneal(A, v, temperatures[done : done + chunk], seed + done)
            if best_error is None or part_error < best_error:
                best_v, best_error = part_v, part_error
            done += len(temperatures[done : done + chunk])
        self._record(done, 1, per_sweep, time.perf_counter() - started)
        self.counts["rank1"] = self.counts.get("rank1", 0) + 1
        if done == 0 or self.out_of_time(self.solve_units * self.seconds_per_unit):
            return  # out of time: no polish (it would overrun), the restart is lost
        self.polish(np.zeros((m, 1), np.int8), best_v[:, None].copy(), work_limit)

    def _chunk_seconds(self, done: int, started: float, chunk: int, per_sweep: float) -> float:
        """Expected seconds of the next ``chunk`` sweeps: as the sweeps so far, else by the
        cost model at the last measured speed."""
        if done:
            return (time.perf_counter() - started) / done * chunk
        return chunk * per_sweep * self.seconds_per_unit

    def _record(self, sweeps: int, replicas: int, per_sweep: float, seconds: float) -> None:
        self.sweeps += sweeps * replicas
        units = sweeps * replicas * per_sweep  # per_sweep: one replica
        self.work += units
        if units > 0 and seconds > 0:
            self.seconds_per_unit = seconds / units

    def restart_work(self, mode: str, core_rows: int) -> float:
        """Work units of the cheapest restart of ``mode``: the fewest sweeps and one polish."""
        m, n = self.A.shape
        if mode == "rank1":
            per_sweep = 2 * _CELL_WORK * self.A.size
            return 20 * per_sweep + 4 * self.solve_units
        rows = min(m, core_rows)
        K_u, K_v = len(self.codes_u[0]), len(self.codes_v[0])
        per_sweep = self.settings.replicas * sweep_work(rows, n, K_u, K_v)
        return _MIN_SWEEPS * per_sweep + 4 * self.solve_units

    def anneal(self, mode: str, core_rows: int, work_limit: float | None) -> None:
        A, settings, rng = self.A, self.settings, self.rng
        m, n = A.shape
        if mode == "rank1":
            self.anneal_rank1(work_limit)
            return
        if m > core_rows:
            rows = np.sort(rng.choice(m, size=core_rows, replace=False))
            core = np.ascontiguousarray(A[rows])
        else:
            rows, core = None, A
        R = settings.replicas
        budget = self.remaining_units(work_limit) / 4
        K_u, K_v = len(self.codes_u[0]), len(self.codes_v[0])
        per_sweep = R * sweep_work(core.shape[0], n, K_u, K_v)
        sweeps = int(min(settings.sweeps, max(_MIN_SWEEPS, budget / per_sweep)))
        v_scale = max(1.0, core.shape[0] / n)
        if mode == "tempering":
            ladder = np.geomspace(settings.t_cold, settings.t_hot, R)
            temperatures = np.repeat(ladder[None, :], sweeps, axis=0)
        else:
            t_hot = settings.t_hot / 3 if mode == "reheat" else settings.t_hot
            column = np.geomspace(t_hot, settings.t_cold, sweeps)
            temperatures = np.repeat(column[:, None], R, axis=1)
        U = _random_factor(rng, (R, core.shape[0], self.rank), self.one_hot_u)
        V = _random_factor(rng, (R, n, self.rank), self.one_hot_v)
        if mode == "reheat" and self.pool.items:
            _, best_U, best_V = self.pool.items[0]
            U[:] = best_U if rows is None else best_U[rows]
            V[:] = best_V
        best_U = np.zeros((core.shape[0], self.rank), dtype=np.int8)
        best_V = np.zeros((n, self.rank), dtype=np.int8)
        part_U, part_V = best_U.copy(), best_V.copy()
        seed = int(rng.integers(2**31 - 1))
        best_error = None
        chunk = self._chunks(sweeps)
        done = 0
        started = time.perf_counter()
        while done < sweeps:
            if self.out_of_time(self._chunk_seconds(done, started, chunk, per_sweep)):
                self.clock_stops += 1
                break
            schedule = np.ascontiguousarray(temperatures[done : done + chunk])
            out = anneal_replicas(
                core,
                U,
                V,
                schedule,
                mode == "tempering",
                *self.codes_u,
                *self.codes_v,
                seed + done,
                part_U,
                part_V,
                v_scale,
            )
            if best_error is None or out[R] < best_error:
                best_error = out[R]
                best_U[:], best_V[:] = part_U, part_V
            done += len(schedule)
        self._record(done, R, per_sweep / R, time.perf_counter() - started)
        self.counts[mode] += 1
        if done == 0 or self.out_of_time(self.solve_units * self.seconds_per_unit):
            return  # out of time: no polish (it would overrun), the restart is lost
        if rows is not None:  # U for the full matrix follows from V by exact BLS (in ALS)
            best_U = _random_factor(rng, (m, self.rank), self.one_hot_u)
        self.polish(best_U, best_V, work_limit)


def auto_time_limit(shape: tuple[int, int]) -> float:
    """The default budget in (reference) seconds: 1 s up to 300,000 cells, then linear, at most
    4.8 s; :func:`auto_work_limit` turns it into work units.

    >>> auto_time_limit((30, 30)), auto_time_limit((2000, 30)), auto_time_limit((50000, 30))
    (1.0, 1.0, 4.8)
    """
    return float(min(4.8, max(1.0, shape[0] * shape[1] / 300_000)))


def auto_work_limit(shape: tuple[int, int]) -> float:
    """The default work budget: :func:`auto_time_limit` seconds of the calibration machine.

    >>> auto_work_limit((30, 30))
    3000000000.0
    """
    return auto_time_limit(shape) * WORK_PER_SECOND


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
    rank 2, one-hot). :func:`solve_bmf` calls it before starting its clock. Returns the
    seconds it took (0 once done).

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
    work_limit, deadline = _limits(settings, A.shape, started)
    problem = _Problem.reduce(A, one_hot, _check_warm(initial_factors, A.shape, rank))
    solver = _Solver(problem.A, rank, problem.one_hot, settings, rng, deadline)
    certificate = _certify(solver, settings)
    seeded = time.perf_counter()
    certified_first = bool(certificate["optimal"])
    if certified_first:
        search = _SearchOutcome(restarts=0, stopped_by="optimal")
    else:
        _polish_seeds(solver, problem.warm, work_limit)
        search = _search(solver, work_limit)
    if solver.pool.best_error == 0:
        certificate = {"optimal": True, "reason": "zero error"}
    if certified_first:  # warm starts are kept among the answers even when certified
        for U, V in problem.warm:  # (otherwise they were polished as seeds)
            solver.polish(U, V)
    solutions = [(*problem.expand(U, V), error) for error, U, V in solver.pool.items]
    finished = time.perf_counter()
    timings = {
        "compile": compile_seconds,
        "certificate_and_setup": seeded - started,
        "search": finished - seeded,
        "total": finished - started,
    }
    info = _info(solver, problem, certificate, search, work_limit, timings)
    return NativeResult(solutions=solutions, info=info)


def _limits(
    settings: NativeSettings, shape: tuple[int, int], started: float
) -> tuple[float | None, float | None]:
    """The work limit (by default :func:`auto_work_limit`, unless only the clock should bound
    the run) and the wall-clock deadline (None without a time limit)."""
    work_limit = settings.work_limit
    if work_limit is None and settings.time_limit is None:
        work_limit = auto_work_limit(shape)
    deadline = None if settings.time_limit is None else started + settings.time_limit
    return work_limit, deadline


def _check_warm(
    initial_factors: Any, shape: tuple[int, int], rank: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The warm starts as arrays, each of the shapes of ``A``'s factors."""
    warm = [(np.asarray(U), np.asarray(V)) for U, V in initial_factors]
    for U, V in warm:
        if U.shape != (shape[0], rank) or V.shape != (shape[1], rank):
            raise InvalidParameterError(
                f"initial factors must have shapes {(shape[0], rank)} and "
                f"{(shape[1], rank)}; got {U.shape} and {V.shape}"
            )
    return warm


@dataclass(frozen=True)
class _Problem:
    """The problem as the solver sees it: all-zero rows and columns dropped (their factor
    rows are zero in every optimum, unless that factor is one-hot) and a wide matrix
    transposed, so that ``m >= n``; :meth:`expand` maps a solution back.

    The swap is :class:`~bmfdsl.linalg._matrix.Orientation`, as in :func:`bmfdsl.factorize`, which
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


def _certify(solver: _Solver, settings: NativeSettings) -> dict[str, Any]:
    """Rank 1 solved exactly where it is cheap: the certificate (not optimal otherwise)."""
    A = solver.A
    if solver.rank == 1 and not (solver.one_hot_u or solver.one_hot_v):
        exact = exact_rank1(A, max_enumeration=settings.max_enumeration)
        if exact is not None:
            solver.pool.add(exact[2], exact[0], exact[1])
            return {"optimal": True, "reason": "rank-1 exact search"}
    elif solver.rank == 1:  # the one-hot factor is all ones; the other follows by exact BLS
        solver.polish(np.ones((A.shape[0], 1), np.int8), np.ones((A.shape[1], 1), np.int8))
        return {"optimal": True, "reason": "rank-1 one-hot: the factor is all ones"}
    return {"optimal": False, "reason": None}


def _polish_seeds(
    solver: _Solver, warm: list[tuple[np.ndarray, np.ndarray]], work_limit: float | None
) -> None:
    """ALS from the warm starts and from the greedy baseline (the paper's S1 Algorithm 2)."""
    A, rank = solver.A, solver.rank
    # the baseline needs rank <= min(m, n), which dropping zero lines can break
    seeds = [*warm, baseline(A, rank)] if rank <= min(A.shape) else warm
    for U, V in seeds:
        solver.polish(U, V, work_limit)
        solver.counts["seeds"] += 1


def _restart_modes(solver: _Solver) -> tuple[tuple[str, int], ...]:
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
    stopped_by: str  # "optimal", "num_reads", "work_limit", "time_limit" or "patience"


def _search(solver: _Solver, work_limit: float | None) -> _SearchOutcome:
    """Restarts, cycling through :func:`_restart_modes`, until one stop rule holds or the
    error is 0."""
    modes = _restart_modes(solver)
    restarts = last_improvement = 0
    # work units and seconds of the last restart in each slot of ``modes`` (they differ in cost)
    last_work: dict[int, float] = {}
    last_duration: dict[int, float] = {}
    while solver.pool.best_error != 0:
        slot = restarts % len(modes)
        mode, core_rows = modes[slot]
        expected_work = last_work.get(slot, solver.restart_work(mode, core_rows))
        stop = _stop_rule(
            solver,
            work_limit,
            restarts,
            last_improvement,
            expected_work,
            last_duration.get(slot, expected_work * solver.seconds_per_unit),
        )
        if stop is not None:
            return _SearchOutcome(restarts, stop)
        before = solver.pool.best_error
        restart_started = time.perf_counter()
        work_before = solver.work
        solver.anneal(mode, core_rows, work_limit)
        last_duration[slot] = time.perf_counter() - restart_started
        last_work[slot] = solver.work - work_before
        restarts += 1
        if before is None or (solver.pool.best_error or 0) < before:
            last_improvement = restarts
    return _SearchOutcome(restarts, "optimal")


def _stop_rule(
    solver: _Solver,
    work_limit: float | None,
    restarts: int,
    last_improvement: int,
    expected_work: float,
    expected_seconds: float,
) -> str | None:
    """The rule that stops the search before the next restart, if one does.

    A restart starts only while one like the last of its kind (``expected_work``,
    ``expected_seconds``) still fits the budget.
    """
    settings = solver.settings
    if settings.num_reads is not None and restarts >= settings.num_reads:
        return "num_reads"
    if (
        work_limit is not None
        and settings.num_reads is None
        and solver.work + expected_work > work_limit
    ):
        return "work_limit"
    if solver.deadline is not None and time.perf_counter() + expected_seconds > solver.deadline:
        return "time_limit"
    if settings.patience is not None and restarts - last_improvement >= max(
        settings.patience, last_improvement
    ):
        return "patience"
    return None


def _info(
    solver: _Solver,
    problem: _Problem,
    certificate: dict[str, Any],
    search: _SearchOutcome,
    work_limit: float | None,
    timings: dict[str, float],
) -> dict[str, Any]:
    """What the result's ``info`` says about the solve."""
    settings = solver.settings
    return {
        "solver": "native",
        "certificate": certificate,
        "restarts": search.restarts,
        "stopped_early": search.stopped_by == "patience",
        "stopped_by": search.stopped_by,
        "work": {
            "restarts": search.restarts,
            "sweeps": solver.sweeps,
            "als_solves": solver.solves,
            "units": round(solver.work),
            "limit": None if work_limit is None else round(work_limit),
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
