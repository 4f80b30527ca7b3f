"""A clock for tests whose time moves only when the test says so.

It satisfies :class:`cebroker.clock.Clock`. Give it to a broker (``make_broker(clock=...)``)
and every retry, rate limit and due time in that broker waits for :meth:`ManualClock.advance`
instead of for real seconds. The broker runs its event loop in a server thread and the test
advances the clock from its own: reading, sleeping and advancing are safe across threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from dataclasses import dataclass


@dataclass(eq=False)
class _Sleeper:
    deadline: float
    loop: asyncio.AbstractEventLoop
    done: asyncio.Future[None]


def _wake(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


class ManualClock:
    """Starts at the real wall-clock time (so stored times read sensibly) and then stands still."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start = time.time()
        self._elapsed = 0.0
        self._sleepers: list[_Sleeper] = []

    def now(self) -> float:
        """Wall-clock time: the start plus every advance."""
        with self._lock:
            return self._start + self._elapsed

    def monotonic(self) -> float:
        """Seconds advanced since the clock was made."""
        with self._lock:
            return self._elapsed

    async def sleep(self, seconds: float) -> None:
        """Return once the clock has been advanced by ``seconds`` (yield once for zero or less)."""
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        loop = asyncio.get_running_loop()
        with self._lock:
            sleeper = _Sleeper(self._elapsed + seconds, loop, loop.create_future())
            self._sleepers.append(sleeper)
        try:
            await sleeper.done
        finally:
            with self._lock:
                if sleeper in self._sleepers:
                    self._sleepers.remove(sleeper)

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleep that has run out."""
        with self._lock:
            self._elapsed += seconds
            due = [s for s in self._sleepers if s.deadline <= self._elapsed]
            self._sleepers = [s for s in self._sleepers if s.deadline > self._elapsed]
        for sleeper in due:
            with contextlib.suppress(RuntimeError):  # its loop has closed: nobody waits any more
                sleeper.loop.call_soon_threadsafe(_wake, sleeper.done)

    def sleeping(self, within: float) -> int:
        """How many sleeps would end if the clock advanced by ``within`` seconds."""
        with self._lock:
            return sum(1 for s in self._sleepers if s.deadline <= self._elapsed + within)
