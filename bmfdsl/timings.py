"""One vocabulary for time: ``info["timings"]``, wall seconds per stage plus ``"total"``.

Every result that reports time (``factorize``, the native solver, runner records) uses this
name and unit; :class:`StageTimer` is the one helper that measures it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

__all__ = ["StageTimer", "WorkBudget"]


class StageTimer:
    """Wall seconds per named stage, from the moment the timer is created.

    A stage is a block: ``with timer("solve"): ...`` adds the block's wall time to
    ``"solve"`` (repeated blocks add up; a block that raises is still timed).

    >>> timer = StageTimer()
    >>> with timer("square"):
    ...     squared = pow(3, 2)
    >>> squared, sorted(timer.timings())
    (9, ['square', 'total'])
    """

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        """Time the ``with`` block under ``stage``."""
        started = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            self._seconds[stage] = self._seconds.get(stage, 0.0) + elapsed

    def timings(self) -> dict[str, float]:
        """The stages measured so far (seconds) and ``"total"``, the time since creation."""
        return {**self._seconds, "total": time.perf_counter() - self._started}


class WorkBudget:
    """A solver's budget: work counted in its own units, and an opt-in wall-clock deadline.

    A work limit counts work, never time, so equal inputs and seeds spend the same units and
    stop at the same step on any machine under any load. A deadline (``time_limit``) is
    opt-in and makes the answer depend on machine speed and load. The two meet in
    :meth:`remaining`, which turns the seconds left into units at the speed measured so far
    (``seconds_per_unit``: the caller's initial guess, then each :meth:`spend` given seconds).

    >>> budget = WorkBudget(work_limit=10)
    >>> budget.affords(4)
    True
    >>> budget.spend(4); budget.spend(4)
    >>> budget.affords(4), budget.remaining()
    (False, 2.0)
    >>> WorkBudget().affords(1e30), WorkBudget(time_limit=0.0).fits_time(1.0)
    (True, False)
    """

    def __init__(
        self,
        work_limit: float | None = None,
        time_limit: float | None = None,
        *,
        seconds_per_unit: float = 0.0,
        started: float | None = None,
    ) -> None:
        """``work_limit`` in units (None: unbounded); ``time_limit`` in seconds from
        ``started`` (a ``time.perf_counter()`` reading; now by default), None: no deadline."""
        self.work_limit = work_limit
        begin = time.perf_counter() if started is None else started
        self.deadline = None if time_limit is None else begin + time_limit
        self.seconds_per_unit = seconds_per_unit
        self.work = 0.0  # units spent so far

    def spend(self, units: float, seconds: float = 0.0) -> None:
        """Count ``units`` of work done; with the ``seconds`` it took, update the speed."""
        self.work += units
        if units > 0 and seconds > 0:
            self.seconds_per_unit = seconds / units

    def fits_work(self, units: float) -> bool:
        """Whether ``units`` more stay within the work limit (always, without one)."""
        return self.work_limit is None or self.work + units <= self.work_limit

    def fits_time(self, seconds: float) -> bool:
        """Whether a step of about ``seconds`` ends before the deadline (always, without one)."""
        return self.deadline is None or time.perf_counter() + seconds <= self.deadline

    def affords(self, units: float, seconds: float | None = None) -> bool:
        """Can I afford this step: ``units`` of work taking ``seconds`` (by default ``units``
        at the measured speed) within both limits?"""
        expected = units * self.seconds_per_unit if seconds is None else seconds
        return self.fits_work(units) and self.fits_time(expected)

    def remaining(self) -> float:
        """Units left: by the work limit, and by the clock (at the measured speed) when a
        deadline is set; ``inf`` when neither bounds the budget."""
        left = float("inf") if self.work_limit is None else self.work_limit - self.work
        if self.deadline is not None:
            seconds = max(self.deadline - time.perf_counter(), 0.0)
            if seconds == 0.0:
                left = 0.0
            elif self.seconds_per_unit > 0:  # (an unknown speed turns no seconds into units)
                left = min(left, seconds / self.seconds_per_unit)
        return float(max(left, 0.0))
