"""The one mechanism that stops a call's background work (the seeds, the bound) when it ends."""

from __future__ import annotations

import pytest

from bmfdsl.pipeline._background import close_with_call, closes_background_work


def test_each_call_closes_only_what_it_started_in_the_order_started():
    closed: list[str] = []

    @closes_background_work
    def inner() -> None:
        close_with_call(lambda: closed.append("inner"))

    def broken_closer() -> None:
        closed.append("broken")
        raise RuntimeError("close failed")

    @closes_background_work
    def outer() -> str:
        close_with_call(lambda: closed.append("outer first"))
        close_with_call(broken_closer)
        inner()
        assert closed == ["inner"]  # the inner call's work only, at its own end
        close_with_call(lambda: closed.append("outer last"))
        return "answer"

    with pytest.raises(RuntimeError, match="close failed"):  # a returning call: its error
        outer()
    assert closed == ["inner", "outer first", "broken", "outer last"]  # every closer ran
    close_with_call(lambda: closed.append("outside"))  # outside a wrapped call: not kept
    assert closed[-1] == "outer last"


def test_the_calls_own_error_wins_over_a_closers():
    """A failed call raises its own error, not a closer's (which it notes)."""
    closed: list[str] = []

    def broken_closer() -> None:
        raise RuntimeError("close failed")

    @closes_background_work
    def fails() -> None:
        close_with_call(broken_closer)
        close_with_call(lambda: closed.append("after the broken one"))
        raise ValueError("the solve failed")

    with pytest.raises(ValueError, match="the solve failed") as raised:
        fails()
    assert closed == ["after the broken one"]
    assert any("close failed" in note for note in raised.value.__notes__)


def test_a_returning_call_returns_after_closing():
    closed: list[str] = []

    @closes_background_work
    def returns() -> int:
        close_with_call(lambda: closed.append("closed"))
        return 7

    assert returns() == 7 and closed == ["closed"]
