"""A connection's clock that one timer serves across many requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Deadline:
    """A clock that calls ``expired`` once it has run for ``timeout`` seconds without a stop.

    A connection starts and stops such a clock once per request (the head's clock, the idle
    keep-alive's), and starting and cancelling a timer each time cost about 2 µs on uvloop, more
    than a small event's validation. So a stop only stops the clock, and the one timer, when it
    fires, waits on for what is left of a clock started since, or calls ``expired``.
    """

    __slots__ = ("_expired", "_loop", "_since", "_timeout", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout: float, expired: Callable[[], None]) -> None:
        self._loop = loop
        self._timeout = timeout
        self._expired = expired
        #: When the clock started (the event loop's clock); None while it is stopped.
        self._since: float | None = None
        self._timer: asyncio.TimerHandle | None = None

    @property
    def running(self) -> bool:
        """Whether the clock runs."""
        return self._since is not None

    def start(self) -> None:
        """Start the clock, unless it runs already (it then keeps its start)."""
        if self._since is None:
            self._since = self._loop.time()
            if self._timer is None:
                self._timer = self._loop.call_later(self._timeout, self._fire)

    def stop(self) -> None:
        """Stop the clock; its timer, if any, finds it stopped (or started again) when it fires."""
        self._since = None

    def cancel(self) -> None:
        """Stop the clock and its timer (the connection is gone)."""
        self._since = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _fire(self) -> None:
        self._timer = None
        since = self._since
        if since is None:
            return  # stopped: the next start sets a timer again
        left = since + self._timeout - self._loop.time()
        if left > 0:
            self._timer = self._loop.call_later(left, self._fire)
            return
        self._since = None
        self._expired()
