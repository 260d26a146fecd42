"""One vocabulary for time: ``info["timings"]``, wall seconds per stage plus ``"total"``.

Every result that reports time (``factorize``, the native solver, runner records) uses this
name and unit; :class:`StageTimer` is the one helper that measures it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["StageTimer"]

T = TypeVar("T")


class StageTimer:
    """Wall seconds per named stage, from the moment the timer is created.

    >>> timer = StageTimer()
    >>> timer.run("square", pow, 3, 2)
    9
    >>> sorted(timer.timings())
    ['square', 'total']
    """

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._seconds: dict[str, float] = {}

    def run(self, stage: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``func(*args, **kwargs)``, add its wall time to ``stage``, return its value."""
        started = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - started
            self._seconds[stage] = self._seconds.get(stage, 0.0) + elapsed

    def timings(self) -> dict[str, float]:
        """The stages measured so far (seconds) and ``"total"``, the time since creation."""
        return {**self._seconds, "total": time.perf_counter() - self._started}
