"""The progress bar of an experiment: runs done, and the time left from per-cell costs."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from bmfdsl.apps.experiments._runner import RunTask


def _task_size(task: RunTask) -> float:
    """Entries of the task's matrix (a proxy for its cost before any run is timed)."""
    params = task.instance.params
    m = float(params.get("m", task.instance.paper_m) or 1)
    n = float(params.get("n", 30) or 30)
    return m * n * task.rank


class CostModel:
    """Seconds a run will take, learnt from the runs timed so far.

    Runs are grouped by (method, instance group, rank): a group's estimate is the mean of its
    timed runs; an untimed group is scaled from the timed runs of the same method by matrix
    size (or of any method, before that method was timed). Per-cell costs differ by four
    orders of magnitude between m = 30 and m = 50,000, so a runs-per-second rate misleads.

    >>> from bmfdsl.apps.experiments._runner import plan_runs
    >>> from bmfdsl.apps.experiments._tables import get_experiment
    >>> tasks = plan_runs(get_experiment("table2"), sizes=[30, 2000], ranks=[1], trials=1,
    ...                   methods=["baseline"])
    >>> model = CostModel()
    >>> model.observe(tasks[0], 0.01)
    >>> round(model.estimate(tasks[1]) / model.estimate(tasks[0]))  # 2000 rows cost more
    67
    """

    def __init__(self) -> None:
        self._group: dict[tuple[str, str, int], list[float]] = {}
        self._per_size: dict[str, list[float]] = {}

    @staticmethod
    def _key(task: RunTask) -> tuple[str, str, int]:
        return (task.method, task.instance.group, task.rank)

    def observe(self, task: RunTask, seconds: float) -> None:
        """Record that ``task`` took ``seconds``."""
        self._group.setdefault(self._key(task), []).append(seconds)
        self._per_size.setdefault(task.method, []).append(seconds / _task_size(task))

    def estimate(self, task: RunTask) -> float | None:
        """Expected seconds of ``task``; ``None`` before any run was timed."""
        timed = self._group.get(self._key(task))
        if timed:
            return sum(timed) / len(timed)
        rates = self._per_size.get(task.method) or [r for v in self._per_size.values() for r in v]
        if not rates:
            return None
        return sum(rates) / len(rates) * _task_size(task)


class RunProgress:
    """A tqdm bar over runs on stderr, with the time left estimated from per-cell costs."""

    def __init__(self, tasks: Sequence[RunTask], todo: Sequence[RunTask], label: str) -> None:
        from tqdm.auto import tqdm

        self._remaining = {task.run_id: task for task in todo}
        self._costs = CostModel()
        self._started = time.monotonic()
        self._busy = 0.0  # run-seconds finished in this call (over all workers)
        self._bar = tqdm(
            total=len(tasks),
            initial=len(tasks) - len(todo),
            desc=label,
            unit="run",
            file=sys.stderr,
            dynamic_ncols=True,
            disable=None,  # off when stderr is not a terminal
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} runs "
            "[{elapsed} elapsed{postfix}]",
        )

    def finished(self, task: RunTask | None, seconds: float | None) -> None:
        """One run finished (``seconds`` from its record when it has them)."""
        if task is not None:
            self._remaining.pop(task.run_id, None)
            if seconds is not None:
                self._costs.observe(task, seconds)
                self._busy += seconds
        self._bar.set_postfix_str(self._left(), refresh=False)
        self._bar.update(1)

    def _left(self) -> str:
        estimates = [self._costs.estimate(task) for task in self._remaining.values()]
        if not self._remaining:
            return ", done"
        if any(estimate is None for estimate in estimates) or self._busy <= 0:
            return ", time left: ?"
        wall = time.monotonic() - self._started
        parallel = max(self._busy / wall, 1e-9) if wall > 0 else 1.0  # workers kept busy
        seconds = sum(e for e in estimates if e is not None) / parallel
        return f", about {_clock(seconds)} left"

    def close(self) -> None:
        self._bar.close()


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
