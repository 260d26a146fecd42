"""The one mechanism that stops a call's background work (the seeds, the bound) when it ends."""

from __future__ import annotations

import pytest

from bmfdsl.pipeline._background import close_with_call, closes_background_work


def test_each_call_closes_only_what_it_started_even_when_a_closer_fails():
    closed: list[str] = []

    @closes_background_work
    def inner() -> None:
        close_with_call(lambda: closed.append("inner"))

    def broken_closer() -> None:
        closed.append("broken")
        raise RuntimeError("close failed")

    @closes_background_work
    def outer() -> None:
        close_with_call(lambda: closed.append("outer first"))
        close_with_call(broken_closer)
        inner()
        assert closed == ["inner"]  # the inner call's work only, at its own end
        close_with_call(lambda: closed.append("outer last"))

    with pytest.raises(RuntimeError, match="close failed"):
        outer()
    assert closed == ["inner", "outer last", "broken", "outer first"]  # last started first
    close_with_call(lambda: closed.append("outside"))  # outside a wrapped call: not kept
    assert closed[-1] == "outer first"
