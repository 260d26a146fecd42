"""The native solver's settings, its work cost model and its default budget.

Budgets count work, never time, so equal seeds give bit-identical answers under any machine
load: the solver counts annealing sweeps and exact BLS solves and weighs each by a cost model of
its kernels (:func:`sweep_work`, :func:`solve_work`, :func:`rank1_sweep_work`; about 3e9 units a
second on an idle 2-core x86 machine, the one the defaults were calibrated on, hence
:data:`WORK_PER_SECOND`). :func:`solve_budget` turns :class:`NativeSettings` into the
:class:`~bmfdsl.timings.WorkBudget` of one solve: :func:`auto_work_limit` by default, plus the
opt-in wall-clock deadline of ``time_limit``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bmfdsl.errors import InvalidParameterError
from bmfdsl.solvers.native._certify import DEFAULT_MAX_ENUMERATION
from bmfdsl.timings import WorkBudget
from bmfdsl.validation import check_count, check_real

# Work units per elementary step of the kernels in ``_anneal.py``, in thirds of a
# nanosecond on the idle calibration machine (2 x86 cores; measured per sweep and per BLS
# solve from 30 x 30 to 20,000 x 2,000 and ranks 2 to 10, and matched to the restarts the old
# one-second time budget ran in bench/results/native.md). Faster kernels keep these costs:
# the budget, and so every answer, stays the same, and the solve ends sooner (the heat-bath
# draws weigh codes by a table of integer gaps, skip rows frozen on one code and count the
# cross products by popcounts: 1.6-2.8x per restart on the UCI sets, about 2x a solve).
_CELL_WORK = 4.0  # one matrix cell of a half sweep (data times the other factor)
_HOT_CODE_WORK = 25.0  # one candidate row code scored and weighed (exp) at T > 0
_COLD_CODE_WORK = 24.0  # one candidate row code scored at T = 0 (an exact BLS solve)
# one matrix cell of an ALS polish on the full matrix (tall data: cache misses, mispredicted
# branches and the error recount make it slower than a cell of the small annealing core)
_SOLVE_CELL_WORK = 24.0
#: Work units per second of the default budget (on the idle calibration machine).
WORK_PER_SECOND = 3e9
#: The fewest sweeps worth an annealing restart; below that a restart is skipped.
MIN_SWEEPS = 50
#: The largest rank whose row solves may score all ``2**r`` codes of a row (the native
#: solver's code tables, a masked model's weighted solves): their cost doubles with each rank
#: beyond, so no route enumerates there (free factors: branch and bound or local search;
#: one-hot models: clusters; masked models refuse such a rank).
PRACTICAL_MAX_RANK = 12


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
        num_reads: maximum number of annealing restarts, and of a one-hot model's k-means++
            restarts (``None``: as many as the budget allows; 0: the certificate and the
            seeds only, as the pipeline solves a sampled core).
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
        work_patience: stop before the budget once another restart like the last would
            take the work since the last improvement past this many units and past what the
            solve had spent when it found the best so far (``None``: no such stop; the first
            restart always runs). The counted twin of
            ``patience`` for inputs where only a few costly restarts fit the budget (rank 10
            on a UCI set: 2 to 4 restarts of up to 0.7e9 units each, none of which improved
            on the seeds), so the stop does not depend on how many restarts there were.
        flip_sweeps: sweeps of the final flip descent of a free model (``0``: none): every
            bit of the short side's factor flipped in turn, the other factor re-solved exactly,
            each flip kept when it lowers the error
            (:func:`~bmfdsl.solvers.native._flips.flip_descent`), in work beside the budget
            (at most a fifth of it; the search runs as without it).
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
    work_patience: float | None = None
    flip_sweeps: int = 2

    def __post_init__(self) -> None:
        """Each setting checked by the one check of its kind (:mod:`bmfdsl.validation`): the
        error names it and its valid range, before any work (NaN, infinities, ``True``,
        strings and fractional counts are refused)."""
        if self.time_limit is not None:
            check_real(self.time_limit, "time_limit", unit=" seconds")
        for name in ("work_limit", "work_patience"):
            if getattr(self, name) is not None:
                check_real(getattr(self, name), name, unit=" work units")
        for name in ("sweeps", "replicas", "core_rows", "max_solves", "num_solutions"):
            check_count(getattr(self, name), name)
        check_count(self.max_enumeration, "max_enumeration", minimum=0)
        if self.num_reads is not None:
            check_count(self.num_reads, "num_reads", minimum=0)
        if self.patience is not None:
            check_count(self.patience, "patience")
        check_count(self.flip_sweeps, "flip_sweeps", minimum=0)
        t_hot = check_real(self.t_hot, "t_hot", strict=True)
        t_cold = check_real(self.t_cold, "t_cold", strict=True)
        if t_cold > t_hot:
            raise InvalidParameterError(
                f"t_cold must be at most t_hot; got t_cold={self.t_cold!r} > t_hot={self.t_hot!r}"
            )


def check_warm_starts(
    initial_factors: Any, shape: tuple[int, int], rank: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The warm starts ``initial_factors`` (an iterable of ``(U, V)`` pairs) as 0/1 arrays,
    each of the shapes of ``A``'s factors; anything else is an error saying what is expected.

    >>> [U.shape for U, _ in check_warm_starts([(np.ones((3, 2)), np.zeros((4, 2)))], (3, 4), 2)]
    [(3, 2)]
    >>> check_warm_starts("garbage", (3, 4), 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    bmfdsl.errors.InvalidParameterError: initial_factors must be a list of (U, V) pairs...
    """
    expected = (
        f"initial_factors must be a list of (U, V) pairs of 0/1 arrays, U of shape "
        f"{(shape[0], rank)} and V of shape {(shape[1], rank)}"
    )
    if isinstance(initial_factors, str | bytes) or not isinstance(initial_factors, Iterable):
        raise InvalidParameterError(f"{expected}; got {type(initial_factors).__name__}")
    warm = []
    for pair in initial_factors:
        try:
            U, V = (np.asarray(factor, dtype=float) for factor in pair)
        except (TypeError, ValueError):
            raise InvalidParameterError(f"{expected}; got an item {pair!r:.60}") from None
        if U.shape != (shape[0], rank) or V.shape != (shape[1], rank):
            raise InvalidParameterError(f"{expected}; got shapes {U.shape} and {V.shape}")
        if not (np.isin(U, (0, 1)).all() and np.isin(V, (0, 1)).all()):
            raise InvalidParameterError(f"{expected}; got values other than 0 and 1")
        warm.append((U.astype(np.int8), V.astype(np.int8)))
    return warm


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


def rank1_sweep_work(cells: int) -> float:
    """Work units of one sweep of the rank-1 annealer over a matrix of ``cells`` cells
    (``n`` flip trials of ``O(m)`` each).

    >>> rank1_sweep_work(30 * 30)
    7200.0
    """
    return 2 * _CELL_WORK * cells


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


#: Highest rank at which the portfolio's core solve keeps a third of its budget as patience
#: (:func:`portfolio_work_patience`); above it a twelfth.
PATIENT_RANK = 3


def portfolio_work_patience(shape: tuple[int, int], rank: int) -> float:
    """The ``work_patience`` of a core solve in the pipeline's seed portfolio: a third of
    :func:`auto_work_limit` up to rank :data:`PATIENT_RANK`, a twelfth above it. There the
    solve is one candidate among the comparison methods and the repair step, so restarts that
    stopped improving give way early. On the UCI sets at ranks 2, 5 and 10 every improvement
    came within a third of the budget of the one before it (the widest gap: 0.9e9 units,
    heart at rank 2), and the solve ends after 0.8-1.9e9 units instead of 2.3-3.0e9. Above
    rank 3 the comparison methods and the repair find what later restarts would: on 76 small
    real-data runs (the UCI sets and their row and column subsamples, MNIST slices, melanoma
    and leukemia slices, ranks 2-12) a twelfth changed no answer; the core solves at ranks
    4-12 spent 34% less work (rank 7: 55% less) and the runs took 15% less time in all. At
    ranks 2 and 3 a sixth left 2 answers worse (heart at rank 2: 1,185 -> 1,187).

    >>> portfolio_work_patience((30, 30), 3), portfolio_work_patience((30, 30), 4)
    (1000000000.0, 250000000.0)
    """
    return auto_work_limit(shape) / (3 if rank <= PATIENT_RANK else 12)


def solve_budget(settings: NativeSettings, shape: tuple[int, int], started: float) -> WorkBudget:
    """The budget of one solve of a matrix of ``shape`` begun at ``started`` (a
    ``time.perf_counter()`` reading): the work limit (by default :func:`auto_work_limit`,
    unless only the clock should bound the run) and the opt-in deadline of ``time_limit``;
    the clock is read at :data:`WORK_PER_SECOND` until the solver measures its speed.

    >>> budget = solve_budget(NativeSettings(), (30, 30), started=0.0)
    >>> budget.work_limit, budget.deadline
    (3000000000.0, None)
    >>> solve_budget(NativeSettings(time_limit=2.0), (30, 30), started=5.0).work_limit is None
    True
    """
    work_limit = settings.work_limit
    if work_limit is None and settings.time_limit is None:
        work_limit = auto_work_limit(shape)
    return WorkBudget(
        work_limit, settings.time_limit, seconds_per_unit=1.0 / WORK_PER_SECOND, started=started
    )


def exact_solve_seconds(shape: tuple[int, int], rank: int) -> float:
    """Seconds of one exact BLS solve of a ``shape`` matrix at ``rank`` by the cost model
    (:func:`solve_work` at :data:`WORK_PER_SECOND`; a busy or slower machine takes longer).

    >>> round(exact_solve_seconds((10_000, 784), 20))
    45
    """
    codes = 2**rank
    return solve_work(shape[0], shape[1], codes, codes) / WORK_PER_SECOND


# one code-bit operation of the local-search row solver (bmfdsl.linalg.solve_rows_local)
_CODE_OP_WORK = 3.0


def local_solve_work(rows: int, cols: int, code_ops: int) -> float:
    """Work units of one local-search BLS solve: the cross products over every cell and the
    search's ``code_ops`` code-bit operations.

    >>> local_solve_work(30, 30, 1000)
    24600.0
    """
    return _SOLVE_CELL_WORK * rows * cols + _CODE_OP_WORK * code_ops
