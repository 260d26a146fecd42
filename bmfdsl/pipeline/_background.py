"""Work a call starts in the background and must not outlive it: one mechanism.

The pipeline starts threads beside its solve (the portfolio's seeds, the spectral bound); a
call that fails must still stop them. Whoever starts such work registers how to stop it with
:func:`close_with_call`, and the call, wrapped by :func:`closes_background_work`, runs every
registered closer when it returns or raises, the last started first. A closer of work already
finished does nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")

# The closers registered inside the innermost call wrapped by closes_background_work.
_closers: contextvars.ContextVar[contextlib.ExitStack | None] = contextvars.ContextVar(
    "bmfdsl_background_closers", default=None
)


def close_with_call(close: Callable[[], object]) -> None:
    """Run ``close`` when the innermost call wrapped by :func:`closes_background_work` ends;
    outside such a call, nothing (the starter then closes its own work)."""
    closers = _closers.get()
    if closers is not None:
        closers.callback(close)


def closes_background_work(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` with every closer registered during it (:func:`close_with_call`) run when
    it returns or raises: no background work it started outlives it. Every closer runs even
    when one raises (its error is raised after them).

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
    ['bound', 'seeds']
    """

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with contextlib.ExitStack() as closers:
            token = _closers.set(closers)
            try:
                return function(*args, **kwargs)
            finally:
                _closers.reset(token)

    return wrapper
