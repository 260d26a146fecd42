"""One vocabulary for time: ``info["timings"]``, wall seconds per stage plus ``"total"``.

Every result that reports time (``factorize``, the native solver, runner records) uses this
name and unit; :class:`StageTimer` is the one helper that measures it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

__all__ = ["StageTimer"]


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
