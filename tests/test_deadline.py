"""The connection clock one timer serves: started and stopped per request, it fires only after
running for its whole timeout without a stop (the clock and its timers are injected)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

import pytest

from cebroker.web.deadline import Deadline


class _Handle:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class _Loop:
    """time() and call_later() of an event loop whose clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0
        self.handles: list[_Handle] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle(self.now + delay, callback)
        self.handles.append(handle)
        return handle

    def advance(self, seconds: float) -> None:
        """Move the clock and run the timers that fall due, in order."""
        self.now += seconds
        while due := sorted(
            (h for h in self.handles if not h.cancelled and h.when <= self.now), key=lambda h: h.when
        ):
            self.handles.remove(due[0])
            due[0].callback()

    def live(self) -> int:
        return sum(1 for h in self.handles if not h.cancelled)


def _deadline(timeout: float = 1.0) -> tuple[_Loop, Deadline, list[float]]:
    loop = _Loop()
    fired: list[float] = []
    deadline = Deadline(cast(asyncio.AbstractEventLoop, loop), timeout, lambda: fired.append(loop.now))
    return loop, deadline, fired


def test_a_clock_left_running_fires_once_its_timeout_has_passed() -> None:
    loop, deadline, fired = _deadline()
    deadline.start()
    loop.advance(0.99)
    assert fired == []
    loop.advance(0.02)
    assert fired == [pytest.approx(101.01)]
    assert not deadline.running
    loop.advance(5)
    assert fired == [pytest.approx(101.01)]


def test_starting_a_running_clock_keeps_its_start() -> None:
    loop, deadline, fired = _deadline()
    deadline.start()
    loop.advance(0.6)
    deadline.start()  # a second chunk of the same head
    loop.advance(0.41)
    assert fired == [pytest.approx(101.01)]


def test_a_stopped_clock_never_fires_and_one_timer_serves_many_starts() -> None:
    loop, deadline, fired = _deadline()
    for _ in range(50):  # requests 0.1 s apart, each answered at once
        deadline.start()
        deadline.stop()
        loop.advance(0.1)
    assert fired == []
    assert len(loop.handles) == 1  # one timer, set again as it fell due: never one per request


def test_a_clock_started_again_gets_what_is_left_of_its_own_timeout() -> None:
    loop, deadline, fired = _deadline()
    deadline.start()
    loop.advance(0.5)
    deadline.stop()
    loop.advance(0.2)
    deadline.start()  # at 100.7: due at 101.7, though the first timer falls at 101.0
    loop.advance(0.3)
    assert fired == []
    assert loop.live() == 1
    loop.advance(0.69)
    assert fired == []
    loop.advance(0.02)
    assert fired == [pytest.approx(101.71)]


def test_cancel_drops_the_timer() -> None:
    loop, deadline, fired = _deadline()
    deadline.start()
    deadline.cancel()
    assert loop.live() == 0
    loop.advance(2)
    assert fired == []
    deadline.start()
    loop.advance(1.01)
    assert len(fired) == 1
