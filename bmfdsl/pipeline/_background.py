"""Work a call starts in the background, stopped when the call ends: one mechanism.

The pipeline starts threads beside its solve (the portfolio's seeds, the spectral bound); a
call that fails must still stop them. Whoever starts such work registers how to stop it with
:func:`close_with_call`, and the call, wrapped by :func:`closes_background_work`, runs every
registered closer when it returns or raises, in the order the work started (the seeds' closer,
which only cancels, before the bound's, which joins its thread: no queued seed starts during
that join). A closer of work already finished does nothing. What a closer stops is its own
affair: the bound's thread is joined; a seed job not started never starts, one already running
(a seed has no point to stop at) ends in its thread and its seed is dropped.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

# The closers registered inside the innermost call wrapped by closes_background_work.
_closers: contextvars.ContextVar[list[Callable[[], object]] | None] = contextvars.ContextVar(
    "bmfdsl_background_closers", default=None
)


def close_with_call(close: Callable[[], object]) -> None:
    """Run ``close`` when the innermost call wrapped by :func:`closes_background_work` ends;
    outside such a call, nothing (the starter then closes its own work)."""
    closers = _closers.get()
    if closers is not None:
        closers.append(close)


def closes_background_work(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` with every closer registered during it (:func:`close_with_call`) run, in
    the order registered, when it returns or raises. Every closer runs even when one raises:
    the call's own error, if any, is what propagates (a closer's error is added to it as a
    note); else the first closer's error.

    >>> closed = []
    >>> @closes_background_work
    ... def fails():
    ...     close_with_call(lambda: closed.append("seeds"))
    ...     close_with_call(lambda: closed.append("bound"))
    ...     raise ValueError("the solve failed")
    >>> try:
    ...     fails()
    ... except ValueError:
    ...     closed
    ['seeds', 'bound']
    """

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        closers: list[Callable[[], object]] = []
        token = _closers.set(closers)
        try:
            result = function(*args, **kwargs)
        except BaseException as error:
            for failure in _run(closers):
                error.add_note(f"while stopping background work: {failure!r}")
            raise
        finally:
            _closers.reset(token)
        failures = _run(closers)
        if failures:
            for later in failures[1:]:
                failures[0].add_note(f"also while stopping background work: {later!r}")
            raise failures[0]
        return result

    return wrapper


def _run(closers: list[Callable[[], object]]) -> list[BaseException]:
    """Run every closer in order; the errors they raised."""
    failures: list[BaseException] = []
    for close in closers:
        try:
            close()
        except BaseException as failure:  # the others still run
            failures.append(failure)
    return failures
