"""Kept-alive HTTP/1.1 connections by origin, with caps on how many are open.

A connection whose answer allows it goes back idle to its origin's stack and serves the next
exchange to that origin (the most recently used first: the others may time out on the peer's
side and close). At most ``limit`` connections are open at once, all origins together, and at
most ``per_host`` to one origin (0: no cap); an exchange beyond a cap waits for a connection to
come back or close, and that wait counts against its deadline. An idle connection is closed
after :data:`KEEPALIVE` seconds, and one its peer closed is forgotten as soon as it closes.

With a :class:`~ceprotocols.egress.ConnectGuard`, every connection is opened to the addresses
the guard resolved and accepted for its host (IP literals included), never by name: a name
that resolves to a refused address when it is connected to (DNS rebinding) is never reached.
TLS names the URL's host (SNI and the certificate check) and verifies the peer's certificate
against the system's trust store (:func:`ssl.create_default_context`), unless the pool is given
a context of its own.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque

from ceprotocols.egress import ConnectGuard
from ceprotocols.http.connection import HttpConnection
from ceprotocols.http.wire import Target

__all__ = ["KEEPALIVE", "Origin", "Pool"]

#: Seconds an idle connection is kept.
KEEPALIVE = 15.0

#: A pool's key: TLS or not, host and port.
Origin = tuple[bool, str, int]


class Pool:
    """Connections by :data:`Origin` (see the module)."""

    def __init__(
        self, *, limit: int, per_host: int, guard: ConnectGuard | None, tls: ssl.SSLContext | None = None
    ) -> None:
        self._limit = limit
        self._per_host = per_host
        self._guard = guard
        self._idle: dict[Origin, list[HttpConnection]] = {}
        #: Connections open or being opened, by origin and in all.
        self._open: dict[Origin, int] = {}
        self._total = 0
        #: Exchanges waiting for room, in arrival order: each future gets a connection that
        #: came back idle to its origin, or None when it may open one.
        self._waiters: deque[tuple[Origin, asyncio.Future[HttpConnection | None]]] = deque()
        self._tls = tls
        self._sweeper: asyncio.TimerHandle | None = None
        self._closing = False

    def take(self, origin: Origin) -> HttpConnection | None:
        """An idle connection to ``origin`` that may serve an exchange now, if there is one."""
        idle = self._idle.get(origin)
        if not idle:
            return None
        oldest = asyncio.get_running_loop().time() - KEEPALIVE
        while idle:
            connection = idle.pop()
            if connection.reusable and connection.idle_since > oldest:
                return connection
            self.discard(connection)
        return None

    async def connect(self, target: Target, origin: Origin) -> HttpConnection:
        """A connection to ``origin``: an idle one, or a new one once the caps leave room
        (waiting until then; the caller bounds the wait). Raises what connecting raises
        (:class:`OSError`, and the guard's refusals)."""
        while True:
            connection = self.take(origin)
            if connection is not None:
                return connection
            if self._has_room(origin):
                break
            future: asyncio.Future[HttpConnection | None] = asyncio.get_running_loop().create_future()
            entry = (origin, future)
            self._waiters.append(entry)
            try:
                handed = await future
            except BaseException:
                if entry in self._waiters:
                    self._waiters.remove(entry)
                if future.done() and not future.cancelled() and future.exception() is None:
                    if (given := future.result()) is not None:
                        self.give_back(given)  # handed over as the wait ended: pass it on
                    else:
                        self._wake()  # the room it was given goes to the next one
                raise
            if handed is not None:
                return handed
            if self._has_room(origin):
                break
        self._open[origin] = self._open.get(origin, 0) + 1
        self._total += 1
        try:
            return await self._open_connection(target, origin)
        except BaseException:
            self._closed(origin)
            raise

    def _has_room(self, origin: Origin) -> bool:
        return (self._limit <= 0 or self._total < self._limit) and (
            self._per_host <= 0 or self._open.get(origin, 0) < self._per_host
        )

    async def _open_connection(self, target: Target, origin: Origin) -> HttpConnection:
        loop = asyncio.get_running_loop()
        context = None
        if target.tls:
            if self._tls is None:
                self._tls = ssl.create_default_context()
            context = self._tls
        if self._guard is None:
            hosts = [target.host]
        else:
            hosts = [str(a) for a in await self._guard.addresses(target.host, target.port, role="host")]
        failure: OSError | None = None
        for host in hosts:  # each accepted address in turn, as a resolver's answer is tried
            try:
                _, connection = await loop.create_connection(
                    lambda: HttpConnection(origin, self._lost),
                    host,
                    target.port,
                    ssl=context,
                    server_hostname=target.host if context is not None else None,
                )
            except OSError as exc:
                failure = exc
                continue
            if connection.closed:  # (closed before its connect returned: its place is freed below)
                raise ConnectionResetError("the connection closed as it opened")
            connection.counted = True  # its place is freed once, when it closes
            return connection
        assert failure is not None
        raise failure

    def give_back(self, connection: HttpConnection) -> None:
        """An exchange on ``connection`` is over: it goes idle (or to a waiting exchange) if it
        may serve another one, else it is closed."""
        if not connection.reusable or self._closing:
            self.discard(connection)
            return
        origin = connection.origin
        if self._waiters:
            for entry in self._waiters:
                if entry[0] == origin and not entry[1].done():
                    self._waiters.remove(entry)
                    entry[1].set_result(connection)
                    return
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        self._idle.setdefault(origin, []).append(connection)
        if self._sweeper is None:
            self._sweeper = loop.call_later(KEEPALIVE, self._sweep)

    def discard(self, connection: HttpConnection) -> None:
        """Close ``connection`` and free its place."""
        connection.close()
        self._lost(connection)

    def _lost(self, connection: HttpConnection) -> None:
        # Called once per connection: by its protocol when it closes, or by discard().
        if connection.counted:
            connection.counted = False
            idle = self._idle.get(connection.origin)
            if idle and connection in idle:
                idle.remove(connection)
            self._closed(connection.origin)

    def _closed(self, origin: Origin) -> None:
        left = self._open.get(origin, 0) - 1
        if left > 0:
            self._open[origin] = left
        else:
            self._open.pop(origin, None)
            if not self._idle.get(origin):
                self._idle.pop(origin, None)
        self._total -= 1
        self._wake()

    def _wake(self) -> None:
        """Room was made: the first waiting exchange that may open a connection is told so."""
        for entry in self._waiters:
            if not entry[1].done() and self._has_room(entry[0]):
                self._waiters.remove(entry)
                entry[1].set_result(None)
                return

    def _sweep(self) -> None:
        """Close the connections idle for :data:`KEEPALIVE` (one timer per pool, while any
        connection is idle: a pool that falls quiet closes them all in time)."""
        self._sweeper = None
        loop = asyncio.get_running_loop()
        oldest = loop.time() - KEEPALIVE
        for idle in list(self._idle.values()):
            for connection in [c for c in idle if c.idle_since <= oldest or c.closed]:
                self.discard(connection)
        if any(self._idle.values()):
            self._sweeper = loop.call_later(KEEPALIVE, self._sweep)

    def close(self) -> None:
        """Close every connection; exchanges waiting for one fail."""
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for idle in list(self._idle.values()):
            for connection in list(idle):
                self.discard(connection)
        while self._waiters:
            _, future = self._waiters.popleft()
            if not future.done():
                future.set_exception(ConnectionError("the transport is closed"))
