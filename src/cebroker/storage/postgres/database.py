"""The PostgreSQL database: its connection pools, transactions, error translation and health.

* An **async pool** (psycopg 3, ``psycopg_pool``) serves the subscription store and the delivery
  log. psycopg prepares statements that run often on the server by itself, and the log's group
  commit sends its statements in pipeline mode.
* A **sync pool** of two connections serves the registry, whose core is synchronous code over a
  row API: each read or write runs in a worker thread, in one transaction.
* The **listener** (:mod:`.listener`) keeps one more connection for LISTEN.

Every psycopg error becomes :class:`~cebroker.storage.errors.StorageUnavailable` here and is
reported to the storage's :class:`~cebroker.storage.health.StorageHealth`; every committed
write reports success. When the server went away, every pooled connection is suspect: the pools
are drained (each connection replaced on its next use) and, until the recovery probe has
written again, calls fail at once with the same cause instead of waiting for the pool.

Bounded waits: every pooled connection has a statement timeout and a lock timeout
(:data:`STATEMENT_TIMEOUT`, :data:`LOCK_TIMEOUT`: a statement the server runs too long, or a
lock wait, ends with 503 ``database timeout`` / ``database busy``) and TCP keepalives with a
user timeout (a dead host or a cut network is noticed in seconds, not when the kernel gives up).
A server that accepts connections but answers nothing (hung) is noticed by the
:class:`~.watchdog.Watchdog` within about a second: then calls fail at once with 503.

Durability: PostgreSQL commits with the server's ``synchronous_commit`` (``on`` by default: the
commit record is flushed before the commit returns). The dispatcher's bookkeeping, whose loss
can only repeat a delivery, commits with ``synchronous_commit = off`` (no wait for the flush),
as SQLite's bookkeeping skips its fsync.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from cebroker.storage.base import StorageOptions
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.health import StorageHealth
from cebroker.storage.postgres.errors import CONNECTION_CAUSES, translate
from cebroker.storage.postgres.migrations import migrate
from cebroker.storage.postgres.watchdog import NOT_RESPONDING, Watchdog

T = TypeVar("T")
AsyncConn = psycopg.AsyncConnection[tuple[Any, ...]]
SyncConn = psycopg.Connection[tuple[Any, ...]]
#: A statement: literal text, or composed with :mod:`psycopg.sql`.
Query = LiteralString | sql.SQL | sql.Composed

#: Seconds a call waits for a pooled connection before the server counts as unreachable.
POOL_TIMEOUT = 5.0
#: Seconds a new connection may take.
CONNECT_TIMEOUT = 5
#: Connections of the async pool.
POOL_SIZE = 8
#: Milliseconds a statement of the broker may run on the server (a migration has no bound).
STATEMENT_TIMEOUT = 60_000
#: Milliseconds a statement may wait for a lock before it fails (503 ``database busy``).
LOCK_TIMEOUT = 10_000
#: libpq's TCP keepalives (seconds: idle before the first probe, between probes, probes lost)
#: and the user timeout (milliseconds unacknowledged before the connection is dropped).
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 3,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}
#: Causes during which calls fail at once instead of waiting for the server.
FAIL_FAST = CONNECTION_CAUSES | {NOT_RESPONDING}


class Database:
    """The pools of one PostgreSQL database; see the module docstring. ``name`` is the URL
    without its password, for messages."""

    def __init__(self, url: str, name: str, options: StorageOptions, health: StorageHealth) -> None:
        self.url = url
        self.name = name
        self.health = health
        self._options = options
        self._prepared = False
        self.pool: AsyncConnectionPool[AsyncConn] | None = None
        self._sync_pool: ConnectionPool[SyncConn] | None = None
        self._threads: ThreadPoolExecutor | None = None
        #: How every connection is made (migrations' too: they may take long, and wait for
        #: another instance's).
        self._base: dict[str, Any] = {
            "connect_timeout": CONNECT_TIMEOUT,
            "application_name": "cebroker",
            **KEEPALIVES,
        }
        #: The pools' connections: bounded statements and lock waits.
        self._kwargs: dict[str, Any] = {
            **self._base,
            "options": f"-c statement_timeout={STATEMENT_TIMEOUT} -c lock_timeout={LOCK_TIMEOUT}",
        }
        self.watchdog = Watchdog(name, health, self._connect)

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create or migrate every schema (under the migration lock); idempotent."""
        if self._prepared:
            return
        try:
            with psycopg.connect(self.url, autocommit=True, **self._base) as conn:
                migrate(conn, self.name)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        self._prepared = True

    async def open(self) -> None:
        """Prepare if needed, then open the pools (connections are made in the background)."""
        if self.pool is not None:
            return
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cebroker-postgres")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._threads, self.prepare)
        self.pool = AsyncConnectionPool(
            self.url,
            kwargs={**self._kwargs, "autocommit": True},
            min_size=2,
            max_size=POOL_SIZE,
            timeout=POOL_TIMEOUT,
            open=False,
            name="cebroker",
        )
        await self.pool.open(wait=False)
        self._sync_pool = ConnectionPool(
            self.url,
            kwargs={**self._kwargs, "autocommit": True},
            min_size=1,
            max_size=2,
            timeout=POOL_TIMEOUT,
            open=False,
            name="cebroker-registry",
        )
        await loop.run_in_executor(self._threads, lambda: self._open_sync())
        self.health.watch(self._probe)
        self.watchdog.start()

    async def _connect(self) -> AsyncConn:
        """A connection of its own, outside the pools (autocommit, the pools' bounds)."""
        return await psycopg.AsyncConnection.connect(self.url, autocommit=True, **self._kwargs)

    @contextlib.asynccontextmanager
    async def maintenance(self) -> AsyncIterator[AsyncConn]:
        """A connection of its own (autocommit, the pools' bounds), for maintenance whose
        failure says nothing of the broker's service (a vacuum): its errors are translated,
        not reported to the health."""
        self._fail_fast()
        try:
            async with await self._connect() as conn:
                yield conn
        except psycopg.Error as exc:
            raise translate(exc) from exc

    def _open_sync(self) -> None:
        if self._sync_pool is not None:
            self._sync_pool.open(wait=False)

    async def close(self) -> None:
        """Close the pools; idempotent."""
        await self.health.stop()
        await self.watchdog.stop()
        pool, self.pool = self.pool, None
        if pool is not None:
            await pool.close()
        sync_pool, self._sync_pool = self._sync_pool, None
        threads, self._threads = self._threads, None
        if threads is not None:
            if sync_pool is not None:
                await asyncio.get_running_loop().run_in_executor(threads, sync_pool.close)
            threads.shutdown(wait=True)
        self._prepared = False

    # -- calls -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        """A pooled connection (autocommit: open transactions with ``conn.transaction()``);
        psycopg errors inside the block are translated and reported."""
        pool = self._pool()
        connected = False
        try:
            with self.watchdog.call():
                async with pool.connection() as conn:
                    connected = True
                    yield conn
        except (psycopg.Error, PoolTimeout) as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # The task was cancelled during a statement and psycopg answered with the
                # server's "query canceled": it ends cancelled, not with a storage failure that
                # a loop would log and retry (and so outlive the cancellation for good).
                raise asyncio.CancelledError from exc
            error = await self.failed(exc)
            error.unsent = error.unsent or not connected  # no connection: nothing was sent
            raise error from exc

    async def run(
        self, fn: Callable[[AsyncConn], Awaitable[T]], *, write: bool = True, durable: bool = True
    ) -> T:
        """Run ``fn`` in one transaction on a pooled connection and commit.

        ``durable=False``: bookkeeping whose loss repeats work; commits without waiting for the
        flush. A ``write`` that commits ends a failure episode.
        """
        async with self.connection() as conn, conn.transaction():
            if not durable:
                await conn.execute("SET LOCAL synchronous_commit = off")
            result = await fn(conn)
        if write:
            self.health.succeeded()
        return result

    async def call(self, query: Query, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run one statement as a transaction of its own (autocommit) and return its rows: one
        round trip. The broker's functions that only keep books turn ``synchronous_commit``
        off for their own transaction. It counts as a write."""
        async with self.connection() as conn:
            cur = await conn.execute(query, params)
            rows = await cur.fetchall()
        self.health.succeeded()
        return rows

    async def run_sync(self, fn: Callable[[SyncConn], T], *, write: bool, snapshot: bool = False) -> T:
        """Run ``fn`` in one transaction of a sync connection in a worker thread.

        ``snapshot``: a read-only REPEATABLE READ transaction (one consistent snapshot).
        """
        self._fail_fast()
        threads, sync_pool = self._threads, self._sync_pool
        if threads is None or sync_pool is None:
            raise StorageUnavailable("storage closed", f"{self.name} is not open")

        def call() -> T:
            with sync_pool.connection() as conn, conn.transaction():
                if snapshot:
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return fn(conn)

        try:
            with self.watchdog.call():
                result = await asyncio.get_running_loop().run_in_executor(threads, call)
        except (psycopg.Error, PoolTimeout) as exc:
            raise await self.failed(exc) from exc
        if write:
            self.health.succeeded()
        return result

    async def failed(self, exc: BaseException) -> StorageUnavailable:
        """Translate and report a driver error; after a lost server, drain the pools."""
        error = translate(exc)
        first = self.health.cause is None
        self.health.failed(error)
        if error.cause in CONNECTION_CAUSES and first:
            pool, sync_pool = self.pool, self._sync_pool
            if pool is not None:
                await pool.drain()
            if sync_pool is not None and self._threads is not None:
                await asyncio.get_running_loop().run_in_executor(self._threads, sync_pool.drain)
        return error

    def _pool(self) -> AsyncConnectionPool[AsyncConn]:
        self._fail_fast()
        if self.pool is None:
            raise StorageUnavailable("storage closed", f"{self.name} is not open", unsent=True)
        return self.pool

    def check(self) -> None:
        """Raise at once, as a call would, while the server is away or not answering."""
        self._fail_fast()

    def _fail_fast(self) -> None:
        # While the server is away or hung, answer at once; the probe (or the watchdog) finds
        # out when it is back.
        cause = self.health.cause
        if cause in FAIL_FAST and not _probing.get():
            raise StorageUnavailable(cause, f"{self.name}", retry_after=1.0, unsent=True)

    async def _probe(self) -> None:
        """The recovery probe: a tiny durable write."""
        token = _probing.set(True)
        try:

            async def write(conn: AsyncConn) -> None:
                await conn.execute(
                    "INSERT INTO storage_probe (id, at) VALUES (1, %s)"
                    " ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                    (time.time(),),
                )

            await self.run(write)
        finally:
            _probing.reset(token)


#: Set while the recovery probe runs: it must reach the server even during an episode.
_probing: ContextVar[bool] = ContextVar("cebroker_postgres_probing", default=False)
