"""Time, for every part that reads it or waits on it: the :class:`Clock` contract and the real one.

Parts that schedule (the dispatcher's loader and retries, a lane's rate limit, the durable
log's timestamps) take a clock instead of calling :mod:`time` and :func:`asyncio.sleep`, so
that a test can move time forward by hand instead of waiting for it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    """Where a part reads the time and how it waits.

    It is structural: any object with these three methods is a clock (tests use one whose time
    only moves when told to).
    """

    def now(self) -> float:
        """Wall-clock time in seconds since the epoch: what is stored and compared with stored times."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go backwards: for measuring intervals."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once ``seconds`` have passed on this clock (at once for zero or less)."""
        ...


class SystemClock:
    """The real clock: :func:`time.time`, :func:`time.monotonic` and :func:`asyncio.sleep`."""

    def now(self) -> float:
        """The system's wall-clock time."""
        return time.time()

    def monotonic(self) -> float:
        """The system's monotonic clock."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep on the event loop."""
        await asyncio.sleep(max(0.0, seconds))


#: The clock every part uses unless it is given another.
SYSTEM_CLOCK = SystemClock()


async def wait_or_sleep(event: asyncio.Event, seconds: float, clock: Clock) -> None:
    """Return once ``event`` is set or ``seconds`` have passed on ``clock``, whichever is first."""
    if event.is_set():
        return
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(seconds))
    try:
        await asyncio.wait((waiter, sleeper), return_when=asyncio.FIRST_COMPLETED)
    finally:
        # The loser is cancelled, not awaited: nothing else waits for it.
        waiter.cancel()
        sleeper.cancel()
