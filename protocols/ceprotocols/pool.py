"""One shared connection per key (sink endpoint + credentials), opened on first use.

Concurrent first deliveries to the same endpoint wait for one connect instead of opening one
each; a connection found broken is discarded so the next delivery opens a fresh one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
C = TypeVar("C")


class ConnectionPool(Generic[K, C]):
    """Connections by key. ``closer`` releases a connection and must not raise."""

    def __init__(self, closer: Callable[[C], Awaitable[None]]) -> None:
        self._closer = closer
        self._connections: dict[K, C] = {}
        self._locks: dict[K, asyncio.Lock] = {}
        self._closed = False

    def __len__(self) -> int:
        return len(self._connections)

    def held(self, key: K) -> C | None:
        """The open connection for ``key`` if there is one now (no await: a delivery on an open
        connection needs none), else None (then :meth:`get` connects)."""
        return self._connections.get(key)

    async def get(self, key: K, opener: Callable[[], Awaitable[C]]) -> C:
        """The open connection for ``key``; if there is none, ``opener()`` connects (raising
        DeliveryError on failure)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        found = self._connections.get(key)
        if found is not None:
            return found
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._connections.get(key)
            if found is None:
                found = await opener()
                self._connections[key] = found
            return found

    async def discard(self, key: K, connection: C) -> None:
        """Forget and close ``connection`` if it is still the one held for ``key``."""
        if self._connections.get(key) is connection:
            del self._connections[key]
            await self._closer(connection)

    async def aclose(self) -> None:
        """Close every connection; later ``get`` calls fail."""
        self._closed = True
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await self._closer(connection)
