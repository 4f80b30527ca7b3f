"""The subscription store on PostgreSQL, with a change feed shared by every instance.

Rows are as on SQLite (the realized subscription as JSON plus indexed query columns, ``types``
in a side table, ``seq`` for creation order and cursors). Every write, in its transaction,
takes the next version from ``subscription_version`` (one row: writes take turns, so versions
commit in order, without gaps), records the change in ``subscription_changes`` and sends
``NOTIFY cebroker_subscriptions``. Each instance publishes the changes on its feed in version
order: its own once committed, before the write call returns, and the others' when it hears of
them, or when an ingest finds its index behind (``catch_up``). An instance that missed changes
that are no longer kept (they are kept for an hour) compares every subscription instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

from psycopg import errors as pg
from psycopg import sql

from cebroker.errors import Conflict, NotFound, PreconditionFailed
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.listener import SUBSCRIPTIONS, Listener
from cebroker.storage.subscriptions import (
    ChangeFeed,
    ChangeKind,
    SubscriptionChange,
    SubscriptionPage,
    SubscriptionQuery,
    encode_cursor,
    page_start,
    quota_exceeded,
)
from cebroker.subscription import Subscription, subscription_from_record

log = logging.getLogger("cebroker.storage")

NEXT_VERSION = "UPDATE subscription_version SET version = version + 1 RETURNING version"
RECORD = "INSERT INTO subscription_changes (version, kind, id, revision, doc) VALUES (%s, %s, %s, %s, %s)"


class PostgresSubscriptionStore:
    """:class:`~cebroker.storage.subscriptions.SubscriptionStore` on a PostgreSQL :class:`Database`."""

    def __init__(self, db: Database, listener: Listener) -> None:
        self._db = db
        self._changes = ChangeFeed()
        self._version = 0
        #: id -> revision of every subscription as last published (to compare after a gap).
        self._known: dict[str, int] = {}
        self._lock = asyncio.Lock()
        self._pending: asyncio.Task[None] | None = None
        listener.on(SUBSCRIPTIONS, self._heard)
        listener.on_connect(lambda: self._heard(""))

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every committed change, any instance's, is published."""
        return self._changes

    @property
    def version(self) -> int:
        """The version of the last change published on the feed."""
        return self._version

    async def load(self) -> None:
        """Start from the database's current version and subscriptions (at open)."""

        async def read(conn: AsyncConn) -> tuple[int, dict[str, int]]:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur = await conn.execute("SELECT version FROM subscription_version")
            (version,) = await cur.fetchone() or (0,)
            cur = await conn.execute("SELECT id, revision FROM subscriptions")
            return int(version), {str(i): int(r) for i, r in await cur.fetchall()}

        self._version, self._known = await self._db.run(read, write=False)

    # -- the feed ----------------------------------------------------------------------------

    def _heard(self, payload: str) -> None:
        if payload.isdigit() and int(payload) <= self._version:
            return
        if self._pending is None or self._pending.done():
            self._pending = asyncio.create_task(self._catch_up_quietly())

    async def _catch_up_quietly(self) -> None:
        try:
            await self.catch_up()
        except StorageUnavailable as exc:  # the listener's reconnection tries again
            log.debug("catching up with subscription changes failed: %s", exc)

    async def catch_up(self) -> None:
        """Publish, in version order, every committed change not yet published."""
        async with self._lock:
            start = self._version

            async def read(conn: AsyncConn) -> tuple[int, list[tuple[Any, ...]]]:
                cur = await conn.execute("SELECT version FROM subscription_version")
                (latest,) = await cur.fetchone() or (0,)
                cur = await conn.execute(
                    "SELECT version, kind, id, revision, doc FROM subscription_changes"
                    " WHERE version > %s ORDER BY version",
                    (start,),
                )
                return int(latest), await cur.fetchall()

            latest, rows = await self._db.run(read, write=False)
            if latest <= start:
                return
            if not rows or int(rows[0][0]) != start + 1:
                await self._resync(latest)
                return
            for version, kind, _, revision, doc in rows:
                self._publish(int(version), ChangeKind(kind), _load(doc, int(revision)))

    async def _resync(self, latest: int) -> None:
        """Changes were missed and are no longer kept: publish the difference to every row."""
        log.info(
            "subscription changes %d to %d are no longer kept; comparing every subscription",
            self._version + 1,
            latest,
        )

        async def read(conn: AsyncConn) -> tuple[int, list[tuple[Any, ...]]]:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur = await conn.execute("SELECT version FROM subscription_version")
            (version,) = await cur.fetchone() or (0,)
            cur = await conn.execute("SELECT doc, revision FROM subscriptions ORDER BY seq")
            return int(version), await cur.fetchall()

        version, rows = await self._db.run(read, write=False)
        current = {sub.id: sub for sub in (_load(doc, int(rev)) for doc, rev in rows)}
        for sid in [sid for sid in self._known if sid not in current]:
            gone = Subscription(id=sid, protocol="HTTP", sink="http://deleted.invalid/")
            self._publish(self._version, ChangeKind.DELETED, gone)
        for sub in current.values():
            if self._known.get(sub.id) != sub.revision:
                kind = ChangeKind.UPDATED if sub.id in self._known else ChangeKind.CREATED
                self._publish(self._version, kind, sub)
        self._version = version

    def _publish(self, version: int, kind: ChangeKind, subscription: Subscription) -> None:
        self._version = version
        if kind is ChangeKind.DELETED:
            self._known.pop(subscription.id, None)
        else:
            self._known[subscription.id] = subscription.revision
        self._changes.publish(SubscriptionChange(kind, subscription))

    async def _write(self, kind: ChangeKind, job: Any) -> Subscription:
        async def transaction(conn: AsyncConn) -> Subscription:
            cur = await conn.execute(NEXT_VERSION)
            (version,) = await cur.fetchone() or (0,)
            stored: Subscription = await job(conn)
            await conn.execute(RECORD, (version, kind.value, stored.id, stored.revision, _dump(stored)))
            await conn.execute("SELECT pg_notify(%s, %s)", (SUBSCRIPTIONS, str(version)))
            return stored

        stored = await self._db.run(transaction)
        try:
            await self.catch_up()  # publishes this change, after any earlier one
        except StorageUnavailable as exc:
            # Committed: the caller is told so. The change is published once the listener is
            # back, and an ingest that finds its index behind catches up itself meanwhile.
            log.debug("publishing a committed subscription change failed: %s", exc)
        return stored

    # -- writes ------------------------------------------------------------------------------

    async def create(self, subscription: Subscription, *, max_per_tenant: int | None = None) -> Subscription:
        """Insert a new subscription; :class:`Conflict` if its id is already stored,
        :class:`QuotaExceeded` if its tenant holds ``max_per_tenant`` already (counted under a
        transaction-scoped advisory lock of the tenant, so that concurrent creates on any
        instance are counted one after the other)."""
        stored = dataclasses.replace(subscription, revision=1)
        tenant = stored.tenant

        async def job(conn: AsyncConn) -> Subscription:
            if max_per_tenant is not None and tenant is not None:
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7))", (tenant,))
                cur = await conn.execute("SELECT count(*) FROM subscriptions WHERE tenant = %s", (tenant,))
                counted = await cur.fetchone()
                if counted is not None and int(counted[0]) >= max_per_tenant:
                    raise quota_exceeded(tenant, max_per_tenant)
            try:
                cur = await conn.execute(
                    "INSERT INTO subscriptions (id, protocol, sink, source, revision, doc, tenant)"
                    " VALUES (%s, %s, %s, %s, 1, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING seq",
                    (stored.id, stored.protocol, stored.sink, stored.source, _dump(stored), tenant),
                )
            except pg.UniqueViolation as exc:  # pragma: no cover - ON CONFLICT covers the id
                raise Conflict(f"a subscription with id {stored.id!r} already exists") from exc
            row = await cur.fetchone()
            if row is None:
                raise Conflict(f"a subscription with id {stored.id!r} already exists")
            await _insert_types(conn, int(row[0]), stored)
            return stored

        return await self._write(ChangeKind.CREATED, job)

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace the stored subscription with the same id; its revision goes up by one and its
        tenant stays the stored one."""

        async def job(conn: AsyncConn) -> Subscription:
            seq, current, tenant = await _current(conn, subscription.id, expected_revision)
            stored = dataclasses.replace(subscription, revision=current + 1, tenant=tenant)
            await conn.execute(
                "UPDATE subscriptions SET protocol = %s, sink = %s, source = %s, revision = %s, doc = %s"
                " WHERE seq = %s",
                (stored.protocol, stored.sink, stored.source, stored.revision, _dump(stored), seq),
            )
            await conn.execute("DELETE FROM subscription_types WHERE seq = %s", (seq,))
            await _insert_types(conn, seq, stored)
            return stored

        return await self._write(ChangeKind.UPDATED, job)

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete the subscription and return it as it was."""

        async def job(conn: AsyncConn) -> Subscription:
            cur = await conn.execute(
                "SELECT doc, revision FROM subscriptions WHERE id = %s FOR UPDATE", (subscription_id,)
            )
            row = await cur.fetchone()
            if row is None:
                raise NotFound(f"no subscription with id {subscription_id!r}")
            _check_revision(int(row[1]), expected_revision)
            await conn.execute("DELETE FROM subscriptions WHERE id = %s", (subscription_id,))
            return _load(row[0], int(row[1]))

        return await self._write(ChangeKind.DELETED, job)

    # -- reads -------------------------------------------------------------------------------

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""

        async def job(conn: AsyncConn) -> Subscription | None:
            cur = await conn.execute(
                "SELECT doc, revision FROM subscriptions WHERE id = %s", (subscription_id,)
            )
            row = await cur.fetchone()
            return _load(row[0], int(row[1])) if row else None

        return await self._db.run(job, write=False)

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """One page of the subscriptions matching every given filter, in creation order."""
        after = page_start(query)
        source = sql.SQL("subscriptions s")
        clauses: list[sql.Composable] = [sql.SQL("s.seq > %s")]
        params: list[object] = [after]
        if query.type is not None:
            source = sql.SQL("subscription_types t JOIN subscriptions s ON s.seq = t.seq")
            clauses = [sql.SQL("t.type = %s"), sql.SQL("t.seq > %s")]
            params = [query.type, after]
        for column in ("tenant", "protocol", "source", "sink"):
            value = getattr(query, column)
            if value is not None:
                clauses.append(sql.SQL("{} = %s").format(sql.Identifier("s", column)))
                params.append(value)
        params.append(query.limit + 1)  # one extra row tells whether another page follows
        statement = sql.SQL(
            "SELECT s.seq, s.doc, s.revision FROM {} WHERE {} ORDER BY s.seq LIMIT %s"
        ).format(source, sql.SQL(" AND ").join(clauses))

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(statement, params)
            return await cur.fetchall()

        rows = await self._db.run(job, write=False)
        page = rows[: query.limit]
        items = [_load(doc, int(revision)) for _, doc, revision in page]
        more = len(rows) > query.limit and bool(page)
        return SubscriptionPage(items=items, next_cursor=encode_cursor(int(page[-1][0])) if more else None)

    async def all(self) -> list[Subscription]:
        """Every subscription in creation order, secrets included."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute("SELECT doc, revision FROM subscriptions ORDER BY seq")
            return await cur.fetchall()

        return [_load(doc, int(revision)) for doc, revision in await self._db.run(job, write=False)]


def _dump(subscription: Subscription) -> str:
    """The stored JSON text of ``subscription``: everything, tenant and secrets (sealed by the
    layer above) included; the revision is a column."""
    return json.dumps(subscription.to_record(), ensure_ascii=False)


def _load(text: str, revision: int) -> Subscription:
    return subscription_from_record(json.loads(text), revision=revision)


async def _current(
    conn: AsyncConn, subscription_id: str, expected: int | None
) -> tuple[int, int, str | None]:
    cur = await conn.execute(
        "SELECT seq, revision, tenant FROM subscriptions WHERE id = %s FOR UPDATE", (subscription_id,)
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no subscription with id {subscription_id!r}")
    _check_revision(int(row[1]), expected)
    return int(row[0]), int(row[1]), row[2]


def _check_revision(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise PreconditionFailed("the subscription has changed since the given ETag was issued")


async def _insert_types(conn: AsyncConn, seq: int, subscription: Subscription) -> None:
    if subscription.types:
        await conn.execute(
            "INSERT INTO subscription_types (type, seq) SELECT DISTINCT t, %s FROM unnest(%b::text[]) AS t"
            " ON CONFLICT DO NOTHING",
            (seq, list(subscription.types)),
        )
