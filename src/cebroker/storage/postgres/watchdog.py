"""Bounded waits on a PostgreSQL server that stopped answering.

A server that is hung (stopped with ``SIGSTOP``, stuck on a dead disk, a frozen virtual machine)
still has a kernel that accepts connections and acknowledges what is sent: no connection error,
no TCP keepalive failure, no statement timeout (the server enforces those itself). Calls would
wait for as long as it is hung. The :class:`Watchdog` notices it from the client side:

* every call on the database is counted while it waits (:meth:`Watchdog.call`), and each answer
  (a result or an error from the server) is noted;
* when a call has waited :data:`STALL_AFTER` seconds and no answer at all came meanwhile, a
  ``SELECT 1`` on a connection of the watchdog's own decides: an answer within
  :data:`PING_TIMEOUT` means the server is only slow (a long statement), none means it is hung;
* a hung server becomes a failure episode with the cause :data:`NOT_RESPONDING` (``readyz``
  answers 503), new calls fail at once with 503 and ``Retry-After`` (see ``Database``), and the
  callers that chose to (:meth:`Watchdog.bounded`: ingest) are answered 503 at once rather than
  when the server resumes; the statements already sent are left to finish by themselves;
* the watchdog keeps pinging while the episode lasts; the first answer (to a ping or to a call)
  ends it.

Under load, answers arrive all the time and the watchdog never pings; on an idle broker a long
statement costs one ping per :data:`STALL_AFTER`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg_pool import PoolTimeout

from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.health import StorageHealth

log = logging.getLogger("cebroker.storage")

T = TypeVar("T")
AsyncConn = psycopg.AsyncConnection[tuple[Any, ...]]

#: The cause of an episode in which the server accepts connections but answers nothing.
NOT_RESPONDING = "database not responding"
#: Seconds a call may wait with no answer from the server at all before the server is pinged.
STALL_AFTER = 0.3
#: Seconds the ping may take before the server counts as hung.
PING_TIMEOUT = 0.35
#: Seconds between two looks.
WATCH_EVERY = 0.1


class Watchdog:
    """Notices a server that stopped answering; see the module docstring. ``connect`` opens the
    watchdog's own connection."""

    def __init__(self, name: str, health: StorageHealth, connect: Callable[[], Awaitable[AsyncConn]]) -> None:
        self._name = name
        self._health = health
        self._connect = connect
        self._calls: dict[int, float] = {}
        self._keys = itertools.count()
        self._answered = time.monotonic()
        self._stalled = asyncio.Event()
        #: The waits of :meth:`bounded` under way, answered at once when the server is hung.
        self._bounded: set[asyncio.Future[Any]] = set()
        self._task: asyncio.Task[None] | None = None
        self._ping: asyncio.Task[None] | None = None
        self._conn: AsyncConn | None = None

    @property
    def stalled(self) -> bool:
        """Whether the server is hung, as last observed."""
        return self._stalled.is_set()

    def start(self) -> None:
        """Watch in the background."""
        if self._task is None:
            # The first ping opens the watchdog's connection now: opened only when a stall is
            # judged, its connection time (slow on a loaded machine) counted against the ping's
            # bound and could call a slow server hung.
            self._ping = asyncio.create_task(self._pinged(), name="cebroker-postgres-ping")
            self._task = asyncio.create_task(self._watch(), name="cebroker-postgres-watchdog")

    async def stop(self) -> None:
        """Stop watching and close the watchdog's connection."""
        for task in (self._task, self._ping):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._task = self._ping = None
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        """Count a call while it waits for the server; its end (a result or an error from the
        server or the connection, not a pool's time-out) is an answer."""
        key = next(self._keys)
        self._calls[key] = time.monotonic()
        answered = False
        try:
            yield
            answered = True
        except PoolTimeout:  # no connection came free: no answer from the server
            raise
        except psycopg.Error:
            answered = True
            raise
        finally:
            del self._calls[key]
            if answered:
                self._answered = time.monotonic()
                if self._stalled.is_set():  # it answers again
                    self._recovered()

    def error(self) -> StorageUnavailable:
        """The error of a call refused or abandoned while the server is hung."""
        return StorageUnavailable(NOT_RESPONDING, self._name, retry_after=1.0)

    async def bounded(self, future: asyncio.Future[T]) -> T:
        """``future``'s result, unless the server is found hung first: then
        :class:`StorageUnavailable` at once, while the work behind ``future`` goes on (its
        outcome is nobody's any more).

        ``future`` must be the caller's own (nobody else waits for it): it is awaited directly,
        so that its result wakes the caller in the event loop's next round, and the hung server
        fails it (:meth:`_hung`) and a cancelled caller cancels it; whoever settles it checks
        ``done()`` first. A waiter of its own, settled from ``future``'s done callback, cost every
        single event's ingest one round of the event loop more between the commit and the
        answer: under load each round runs a burst of other requests' work.
        """
        if future.done():
            return future.result()
        if self._stalled.is_set():
            future.add_done_callback(_forget)
            raise self.error()
        self._bounded.add(future)
        try:
            return await future
        finally:
            self._bounded.discard(future)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_EVERY)
            now = time.monotonic()
            if self._stalled.is_set():
                if await self._alive():
                    self._recovered()
                continue
            if not self._calls or now - self._answered < STALL_AFTER:
                continue
            if now - min(self._calls.values()) < STALL_AFTER:
                continue
            if await self._alive():
                self._answered = time.monotonic()
                continue
            if self._answered > now:  # a call was answered while the ping waited: only slow
                continue
            self._hung(time.monotonic() - self._answered)

    async def _alive(self) -> bool:
        """Whether the server answers a ping within :data:`PING_TIMEOUT` (an error is an
        answer too: the calls will fail by themselves). A ping still waiting from before counts
        as no answer."""
        if self._ping is None or self._ping.done():
            self._ping = asyncio.create_task(self._pinged(), name="cebroker-postgres-ping")
        done, _ = await asyncio.wait({self._ping}, timeout=PING_TIMEOUT)
        return bool(done)

    async def _pinged(self) -> None:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = await self._connect()
            await self._conn.execute("SELECT 1")
        except psycopg.Error as exc:
            log.debug("watchdog ping failed: %s", exc)
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    await conn.close()

    def _hung(self, silent: float) -> None:
        self._stalled.set()
        self._health.failed(
            StorageUnavailable(NOT_RESPONDING, f"{self._name}: no answer for {silent:.1f} s", retry_after=1.0)
        )
        for waiter in self._bounded:
            if not waiter.done():
                waiter.set_exception(self.error())

    def _recovered(self) -> None:
        self._stalled.clear()
        self._answered = time.monotonic()
        if self._health.cause == NOT_RESPONDING:
            self._health.succeeded()


def _forget(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned future's outcome, so that asyncio does not report it."""
    if not future.cancelled():
        future.exception()
