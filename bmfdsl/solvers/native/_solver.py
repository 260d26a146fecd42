"""One solve's moves under its budget: ALS polish, annealing restarts and the pool of the best
solutions, for the strategy of :mod:`bmfdsl.solvers.native._portfolio`.

Every step spends :class:`~bmfdsl.timings.WorkBudget` units of the cost model of
:mod:`bmfdsl.solvers.native._settings` and asks it first whether the step fits. Under the
opt-in deadline a restart and an ALS polish also check the clock inside, between chunks of
sweeps and pairs of BLS solves, so the limit holds on wide matrices too.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np

from bmfdsl.linalg import random_factor
from bmfdsl.solvers.native._anneal import anneal_replicas, bls_step, rank1_anneal, row_codes
from bmfdsl.solvers.native._beyond import OneHotData, kmeans_restarts
from bmfdsl.solvers.native._settings import (
    MIN_SWEEPS,
    NativeSettings,
    rank1_sweep_work,
    solve_work,
    sweep_work,
)
from bmfdsl.timings import WorkBudget


class SolutionPool:
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


def _project_one_hot(F: np.ndarray) -> np.ndarray:
    """Rows with exactly one 1 stay; others keep their first 1 (or get column 0)."""
    out = np.zeros_like(F, dtype=np.int8)
    out[np.arange(F.shape[0]), np.argmax(F, axis=1)] = 1
    return out


class PortfolioSolver:
    """The state of one solve: the matrix, its codes, the pool, the budget and the counts."""

    def __init__(
        self,
        A: np.ndarray,
        rank: int,
        one_hot: str | None,
        settings: NativeSettings,
        rng: np.random.Generator,
        budget: WorkBudget,
    ) -> None:
        self.A = A
        self.rank = rank
        self.one_hot_u = one_hot == "U"
        self.one_hot_v = one_hot == "V"
        self.settings = settings
        self.rng = rng
        self.budget = budget  # work units of the cost model, and the opt-in deadline
        self.codes_u = row_codes(rank, self.one_hot_u)
        self.codes_v = row_codes(rank, self.one_hot_v)
        self.pool = SolutionPool(settings.num_solutions)
        self.counts: dict[str, int] = {
            "seeds": 0,
            "anneal": 0,
            "tempering": 0,
            "reheat": 0,
            "kmeans": 0,
            "flips": 0,
        }
        # work done so far (besides the budget's units): replica sweeps and exact BLS solves
        self.sweeps = 0
        self.solves = 0
        self.clock_stops = 0  # restarts or polishes cut short by the time limit
        m, n = A.shape
        self.solve_units = solve_work(m, n, len(self.codes_u[0]), len(self.codes_v[0]))
        self.At: np.ndarray | None = None  # A.T and its number of ones, for the BLS solves

    def feasible(self, U: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        U = np.ascontiguousarray(U, dtype=np.int8)
        V = np.ascontiguousarray(V, dtype=np.int8)
        if self.one_hot_u:
            U = _project_one_hot(U)
        if self.one_hot_v:
            V = _project_one_hot(V)
        return U, V

    def polish(self, U: np.ndarray, V: np.ndarray, *, within_work_limit: bool) -> int:
        """ALS from ``(U, V)`` (exact BLS solves of U, then V, ... until two in a row bring no
        gain, at most ``max_solves``) within the budget; adds the result to the pool.

        The first solve always runs; later ones only while they fit the time limit (so a
        polish of a wide matrix stops in time) and, ``within_work_limit``, the work limit. No
        solve worsens the error, and the first one starts from any ``U``, so the start's error
        is never computed.
        """
        U, V = self.feasible(U, V)
        error = np.int64(-1)
        stale = solves = 0
        seconds = 0.0
        while solves < self.settings.max_solves and stale < 2:
            if solves and within_work_limit and not self.budget.fits_work(self.solve_units):
                break
            if solves and not self.budget.fits_time(seconds):
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
            solves += 1
            self.budget.spend(self.solve_units, max(seconds, 1e-9))
            if error < 0 or new < error:
                error, stale = new, 0
            else:
                stale += 1
        self.solves += solves
        self.pool.add(int(error), U, V)
        return int(error)

    def _chunks(self, sweeps: int) -> int:
        """Sweeps per kernel call: all at once, or 1/16 of them under a time limit."""
        return sweeps if self.budget.deadline is None else max(1, sweeps // 16)

    def anneal_rank1(self) -> None:
        """Rank 1 without one-hot: anneal ``v`` on the exact objective of the full matrix."""
        A, settings, rng = self.A, self.settings, self.rng
        m, n = A.shape
        per_sweep = rank1_sweep_work(A.size)
        budget = self.budget.remaining() / 4
        sweeps = int(min(settings.sweeps, max(20, budget / per_sweep)))
        scale = max(1.0, m / n)  # gains span m rows
        temperatures = np.geomspace(settings.t_hot * scale, settings.t_cold * scale, sweeps)
        v = np.asarray(rng.random(n) < 0.5, dtype=np.int8)
        seed = int(rng.integers(2**31 - 1))
        best_v, best_error = v.copy(), None
        done = 0
        started = time.perf_counter()
        for part in self._sweep_chunks(sweeps, per_sweep, started):
            part_v, part_error = rank1_anneal(A, v, temperatures[part], seed + part.start)
            if best_error is None or part_error < best_error:
                best_v, best_error = part_v, part_error
            done = part.stop
        self._record(done, 1, per_sweep, time.perf_counter() - started)
        self.counts["rank1"] = self.counts.get("rank1", 0) + 1
        if done == 0 or not self.budget.fits_time(self.solve_units * self.budget.seconds_per_unit):
            return  # out of time: no polish (it would overrun), the restart is lost
        self.polish(np.zeros((m, 1), np.int8), best_v[:, None].copy(), within_work_limit=True)

    def _sweep_chunks(self, sweeps: int, per_sweep: float, started: float) -> Iterator[slice]:
        """The kernel calls of one anneal, as slices of its schedule: all sweeps at once, or
        chunks while the opt-in deadline affords the next (a refusal counts as a clock stop)."""
        chunk = self._chunks(sweeps)
        for done in range(0, sweeps, chunk):
            if not self.budget.fits_time(self._chunk_seconds(done, started, chunk, per_sweep)):
                self.clock_stops += 1
                return
            yield slice(done, min(done + chunk, sweeps))

    def _chunk_seconds(self, done: int, started: float, chunk: int, per_sweep: float) -> float:
        """Expected seconds of the next ``chunk`` sweeps: as the sweeps so far, else by the
        cost model at the last measured speed."""
        if done:
            return (time.perf_counter() - started) / done * chunk
        return chunk * per_sweep * self.budget.seconds_per_unit

    def _record(self, sweeps: int, replicas: int, per_sweep: float, seconds: float) -> None:
        self.sweeps += sweeps * replicas
        self.budget.spend(sweeps * replicas * per_sweep, seconds)  # per_sweep: one replica

    def restart_work(self, mode: str, core_rows: int) -> float:
        """Work units of the cheapest restart of ``mode``: the fewest sweeps and one polish."""
        m, n = self.A.shape
        if mode == "rank1":
            return 20 * rank1_sweep_work(self.A.size) + 4 * self.solve_units
        rows = min(m, core_rows)
        K_u, K_v = len(self.codes_u[0]), len(self.codes_v[0])
        per_sweep = self.settings.replicas * sweep_work(rows, n, K_u, K_v)
        return MIN_SWEEPS * per_sweep + 4 * self.solve_units

    def cluster_restarts(self) -> None:
        """k-means++ restarts of a one-hot model into the pool
        (:func:`~bmfdsl.solvers.native._beyond.kmeans_restarts`, from no centers; on the
        transpose when ``V`` is the one-hot side), from a generator of their own: the
        annealing restarts draw the same states as without them."""
        data = OneHotData(self.A.T if self.one_hot_v else self.A)
        no_centers = np.zeros((data.A.shape[1], 0), dtype=np.int8)
        rng = self.rng.spawn(1)[0]
        for error, hot, free, solves in kmeans_restarts(
            data, self.rank, [no_centers], self.pool.best_error, rng, self.budget, self.settings
        ):
            self.pool.add(error, *((free, hot) if self.one_hot_v else (hot, free)))
            self.solves += solves
            self.counts["kmeans"] += 1

    def anneal(self, mode: str, core_rows: int) -> None:
        """One restart of ``mode`` on a core of ``core_rows`` rows, sized to a quarter of the
        budget left, then polished by ALS on the full matrix."""
        A, settings, rng = self.A, self.settings, self.rng
        m, n = A.shape
        if mode == "rank1":
            self.anneal_rank1()
            return
        if m > core_rows:
            rows = np.sort(rng.choice(m, size=core_rows, replace=False))
            core = np.ascontiguousarray(A[rows])
        else:
            rows, core = None, A
        R = settings.replicas
        budget = self.budget.remaining() / 4
        K_u, K_v = len(self.codes_u[0]), len(self.codes_v[0])
        per_sweep = R * sweep_work(core.shape[0], n, K_u, K_v)
        sweeps = int(min(settings.sweeps, max(MIN_SWEEPS, budget / per_sweep)))
        v_scale = max(1.0, core.shape[0] / n)
        if mode == "tempering":
            ladder = np.geomspace(settings.t_cold, settings.t_hot, R)
            temperatures = np.repeat(ladder[None, :], sweeps, axis=0)
        else:
            t_hot = settings.t_hot / 3 if mode == "reheat" else settings.t_hot
            column = np.geomspace(t_hot, settings.t_cold, sweeps)
            temperatures = np.repeat(column[:, None], R, axis=1)
        U = random_factor(rng, (R, core.shape[0], self.rank), self.one_hot_u)
        V = random_factor(rng, (R, n, self.rank), self.one_hot_v)
        if mode == "reheat" and self.pool.items:
            _, best_U, best_V = self.pool.items[0]
            U[:] = best_U if rows is None else best_U[rows]
            V[:] = best_V
        best_U = np.zeros((core.shape[0], self.rank), dtype=np.int8)
        best_V = np.zeros((n, self.rank), dtype=np.int8)
        part_U, part_V = best_U.copy(), best_V.copy()
        seed = int(rng.integers(2**31 - 1))
        best_error = None
        done = 0
        started = time.perf_counter()
        for part in self._sweep_chunks(sweeps, per_sweep, started):
            schedule = np.ascontiguousarray(temperatures[part])
            out = anneal_replicas(
                core,
                U,
                V,
                schedule,
                mode == "tempering",
                *self.codes_u,
                *self.codes_v,
                seed + part.start,
                part_U,
                part_V,
                v_scale,
            )
            if best_error is None or out[R] < best_error:
                best_error = out[R]
                best_U[:], best_V[:] = part_U, part_V
            done = part.stop
        self._record(done, R, per_sweep / R, time.perf_counter() - started)
        self.counts[mode] += 1
        if done == 0 or not self.budget.fits_time(self.solve_units * self.budget.seconds_per_unit):
            return  # out of time: no polish (it would overrun), the restart is lost
        if rows is not None:  # U for the full matrix follows from V by exact BLS (in ALS)
            best_U = random_factor(rng, (m, self.rank), self.one_hot_u)
        self.polish(best_U, best_V, within_work_limit=True)
