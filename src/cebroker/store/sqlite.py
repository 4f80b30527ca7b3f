"""The embedded subscription store: one SQLite file in WAL mode with ``synchronous=FULL``.

One connection lives on one dedicated worker thread, so sqlite3 never blocks the event loop
and never sees two threads. Each subscription is one row: the realized subscription as JSON
(secrets included, delivery needs them) plus indexed columns for the query filters, and the
``types`` in a side table so that ``type=`` is an index lookup. ``seq`` (creation order) gives
listings a stable order and is what the page cursor encodes.

Writes are serialized by an asyncio lock that also covers publishing on the change feed, so
listeners see changes in commit order, each before its write call returns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cebroker.errors import Conflict, NotFound, PreconditionFailed
from cebroker.store.base import (
    ChangeFeed,
    ChangeKind,
    StoreError,
    Subscription,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
)
from cebroker.store.codec import decode_cursor, dump_subscription, encode_cursor, load_subscription

log = logging.getLogger("cebroker.store")

T = TypeVar("T")

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS subscriptions (
    seq       INTEGER PRIMARY KEY AUTOINCREMENT,
    id        TEXT    NOT NULL UNIQUE,
    protocol  TEXT    NOT NULL,
    sink      TEXT    NOT NULL,
    source    TEXT,
    revision  INTEGER NOT NULL,
    doc       TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS subscriptions_protocol ON subscriptions (protocol, seq);
CREATE INDEX IF NOT EXISTS subscriptions_sink ON subscriptions (sink, seq);
CREATE INDEX IF NOT EXISTS subscriptions_source ON subscriptions (source, seq);
CREATE TABLE IF NOT EXISTS subscription_types (
    type TEXT    NOT NULL,
    seq  INTEGER NOT NULL REFERENCES subscriptions (seq) ON DELETE CASCADE,
    PRIMARY KEY (type, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS subscription_types_seq ON subscription_types (seq);
"""


class SqliteSubscriptionStore:
    """:class:`cebroker.store.SubscriptionStore` on one SQLite file (created on first open)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._changes = ChangeFeed()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._write_lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        """The database file."""
        return self._path

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every committed write is published."""
        return self._changes

    async def open(self) -> None:
        """Create the file, its directory and the schema if needed; switch to WAL."""
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cebroker-sqlite")
        try:
            await self._run(self._open_sync)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        log.info("subscription store open at %s", self._path)

    async def close(self) -> None:
        """Close the connection and stop the worker thread; safe to call twice."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._close_sync)
        finally:
            executor.shutdown(wait=False)

    async def create(self, subscription: Subscription) -> Subscription:
        """Insert a new subscription; :class:`Conflict` if its id is already stored."""
        async with self._write_lock:
            stored = await self._run(self._create_sync, subscription)
            self._changes.publish(SubscriptionChange(ChangeKind.CREATED, stored))
        return stored

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""
        return await self._run(self._get_sync, subscription_id)

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace the stored subscription with the same id; its revision goes up by one."""
        async with self._write_lock:
            stored = await self._run(self._replace_sync, subscription, expected_revision)
            self._changes.publish(SubscriptionChange(ChangeKind.UPDATED, stored))
        return stored

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete the subscription and return it as it was."""
        async with self._write_lock:
            gone = await self._run(self._delete_sync, subscription_id, expected_revision)
            self._changes.publish(SubscriptionChange(ChangeKind.DELETED, gone))
        return gone

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """One page of the subscriptions matching every given filter, in creation order."""
        if query.limit < 1:
            raise ValueError(f"a page holds at least one subscription, not {query.limit}")
        after = decode_cursor(query.cursor) if query.cursor is not None else 0
        return await self._run(self._query_sync, query, after)

    async def all(self) -> list[Subscription]:
        """Every subscription in creation order, secrets included."""
        return await self._run(self._all_sync)

    # -- worker-thread side -------------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            raise StoreError("the subscription store is not open")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, functools.partial(fn, *args))
        except sqlite3.Error as exc:
            # Translated here so that no sqlite3 exception reaches the HTTP layer.
            log.error("subscription store failure: %s", exc)
            raise StoreError(f"the subscription store failed: {exc}") from exc

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError("the subscription store is not open")
        return self._conn

    def _open_sync(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
        conn = sqlite3.connect(self._path, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout = 10000")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self._path}: cannot switch the database to WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        # The file is shared with other parts (delivery log, registry), so the version is kept
        # per component in a table rather than in the file-wide PRAGMA user_version.
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions"
                " (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            row = conn.execute(
                "SELECT version FROM schema_versions WHERE component = 'subscriptions'"
            ).fetchone()
            if row is not None and row[0] > SCHEMA_VERSION:
                raise StoreError(
                    f"{self._path}: subscriptions schema version {row[0]} is newer than this broker's"
                    f" ({SCHEMA_VERSION})"
                )
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT OR REPLACE INTO schema_versions (component, version) VALUES ('subscriptions', ?)",
                (SCHEMA_VERSION,),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _close_sync(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._db()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return result

    def _create_sync(self, subscription: Subscription) -> Subscription:
        stored = _with_revision(subscription, 1)

        def work(conn: sqlite3.Connection) -> Subscription:
            try:
                cur = conn.execute(
                    "INSERT INTO subscriptions (id, protocol, sink, source, revision, doc)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (stored.id, stored.protocol, stored.sink, stored.source, 1, dump_subscription(stored)),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"a subscription with id {stored.id!r} already exists") from exc
            _insert_types(conn, cur.lastrowid, stored)
            return stored

        return self._transaction(work)

    def _get_sync(self, subscription_id: str) -> Subscription | None:
        row = (
            self._db()
            .execute("SELECT doc, revision FROM subscriptions WHERE id = ?", (subscription_id,))
            .fetchone()
        )
        return load_subscription(row[0], row[1]) if row else None

    def _replace_sync(self, subscription: Subscription, expected_revision: int | None) -> Subscription:
        def work(conn: sqlite3.Connection) -> Subscription:
            seq, current = _current(conn, subscription.id, expected_revision)
            stored = _with_revision(subscription, current + 1)
            conn.execute(
                "UPDATE subscriptions SET protocol = ?, sink = ?, source = ?, revision = ?, doc = ?"
                " WHERE seq = ?",
                (stored.protocol, stored.sink, stored.source, stored.revision, dump_subscription(stored))
                + (seq,),
            )
            conn.execute("DELETE FROM subscription_types WHERE seq = ?", (seq,))
            _insert_types(conn, seq, stored)
            return stored

        return self._transaction(work)

    def _delete_sync(self, subscription_id: str, expected_revision: int | None) -> Subscription:
        def work(conn: sqlite3.Connection) -> Subscription:
            row = conn.execute(
                "SELECT doc, revision FROM subscriptions WHERE id = ?", (subscription_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no subscription with id {subscription_id!r}")
            _check_revision(row[1], expected_revision)
            conn.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))
            return load_subscription(row[0], row[1])

        return self._transaction(work)

    def _query_sync(self, query: SubscriptionQuery, after: int) -> SubscriptionPage:
        # With a type filter the (type, seq) primary key of the side table drives the scan in
        # seq order; otherwise an index on (column, seq) or the table itself does.
        source = "subscriptions s"
        clauses = ["s.seq > ?"]
        params: list[object] = [after]
        if query.type is not None:
            source = "subscription_types t JOIN subscriptions s ON s.seq = t.seq"
            clauses = ["t.type = ?", "t.seq > ?"]
            params = [query.type, after]
        for column in ("protocol", "source", "sink"):
            value = getattr(query, column)
            if value is not None:
                clauses.append(f"s.{column} = ?")
                params.append(value)
        params.append(query.limit + 1)  # one extra row tells whether another page follows
        order = "t.seq" if query.type is not None else "s.seq"
        rows = (
            self._db()
            .execute(
                f"SELECT s.seq, s.doc, s.revision FROM {source} WHERE {' AND '.join(clauses)}"
                f" ORDER BY {order} LIMIT ?",
                params,
            )
            .fetchall()
        )
        page = rows[: query.limit]
        items = [load_subscription(doc, revision) for _, doc, revision in page]
        more = len(rows) > query.limit and bool(page)
        return SubscriptionPage(items=items, next_cursor=encode_cursor(page[-1][0]) if more else None)

    def _all_sync(self) -> list[Subscription]:
        rows = self._db().execute("SELECT doc, revision FROM subscriptions ORDER BY seq").fetchall()
        return [load_subscription(doc, revision) for doc, revision in rows]


def _with_revision(subscription: Subscription, revision: int) -> Subscription:
    return dataclasses.replace(subscription, revision=revision)


def _current(conn: sqlite3.Connection, subscription_id: str, expected: int | None) -> tuple[int, int]:
    row = conn.execute("SELECT seq, revision FROM subscriptions WHERE id = ?", (subscription_id,)).fetchone()
    if row is None:
        raise NotFound(f"no subscription with id {subscription_id!r}")
    _check_revision(row[1], expected)
    return int(row[0]), int(row[1])


def _check_revision(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise PreconditionFailed("the subscription has changed since the given ETag was issued")


def _insert_types(conn: sqlite3.Connection, seq: int | None, subscription: Subscription) -> None:
    if seq is None:  # sqlite3 types lastrowid as optional; an INSERT always sets it
        raise StoreError("the database did not report the new row")
    if subscription.types:
        conn.executemany(
            "INSERT OR IGNORE INTO subscription_types (type, seq) VALUES (?, ?)",
            [(t, seq) for t in subscription.types],
        )
