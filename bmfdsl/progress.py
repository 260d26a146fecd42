"""Progress on stderr for work that can take more than a couple of seconds (tqdm).

:func:`activity` opens a live line ("factorize: 0:07 solve") that appears only after
``delay`` seconds and only on a terminal (or when asked); long computations name their
current stage with :func:`stage`, which costs nothing when no activity is open. Nothing is
ever written to stdout, so piped output stays clean.
"""

from __future__ import annotations

import contextvars
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["activity", "enabled_by_default", "stage"]

_current: contextvars.ContextVar[Any] = contextvars.ContextVar("bmfdsl_activity", default=None)


def enabled_by_default(stream: Any = None) -> bool:
    """Progress is on when ``stream`` (default stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


@contextmanager
def activity(description: str, *, enabled: bool | None = None, delay: float = 2.0) -> Iterator[Any]:
    """A live elapsed-time line on stderr while the block runs; yields the tqdm bar or None.

    >>> with activity("demo", enabled=False) as bar:
    ...     stage("solve")  # a no-op: nothing is shown
    >>> bar is None
    True
    """
    if not (enabled_by_default() if enabled is None else enabled):
        yield None
        return
    from tqdm.auto import tqdm

    bar = tqdm(
        total=None,
        desc=description,
        file=sys.stderr,
        delay=delay,
        leave=False,
        bar_format="{desc}: {elapsed} {postfix}",
    )
    done = threading.Event()

    def tick() -> None:  # the work itself never calls back often enough to move a clock
        while not done.wait(0.5):
            # update(0) redraws only after ``delay`` and notes that it drew: refresh() did
            # neither, so the line showed at once and close() thought there was none to clear
            bar.update(0)

    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    token = _current.set(bar)
    try:
        yield bar
    finally:
        done.set()
        ticker.join()
        _current.reset(token)
        bar.close()


def stage(name: str) -> None:
    """Name the current stage of the open :func:`activity`, if any."""
    bar = _current.get()
    if bar is not None:
        bar.set_postfix_str(name, refresh=False)
