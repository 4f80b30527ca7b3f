"""The subscription store on the broker's SQLite file.

Each subscription is one row: the realized subscription as JSON (secrets included, delivery
needs them; sealed by the layer above when it is configured) plus indexed columns for the query
filters and the tenant, and the ``types`` in a side table so that
``type=`` is an index lookup. ``seq`` (creation order) gives listings a stable order and is what
the page cursor encodes. Writes go through the storage's writer (durable); the change of each is
published on the feed once committed, before the write call returns, in commit order. Reads go
to the reader connection.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable

from cebroker.errors import Conflict, NotFound, PreconditionFailed
from cebroker.storage.sqlite.database import Database
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


class SqliteSubscriptionStore:
    """:class:`~cebroker.storage.subscriptions.SubscriptionStore` on a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._changes = ChangeFeed()
        self._version = 0

    @property
    def changes(self) -> ChangeFeed:
        """The feed on which every committed write is published."""
        return self._changes

    @property
    def version(self) -> int:
        """How many changes this process published (one process per file: that is all of them)."""
        return self._version

    async def catch_up(self) -> None:
        """Nothing to do: one process per file, and its feed is synchronous."""

    def _publish(self, kind: ChangeKind) -> Callable[[Subscription], None]:
        def publish(subscription: Subscription) -> None:
            self._version += 1
            self._changes.publish(SubscriptionChange(kind, subscription))

        return publish

    async def create(self, subscription: Subscription, *, max_per_tenant: int | None = None) -> Subscription:
        """Insert a new subscription; :class:`Conflict` if its id is already stored,
        :class:`QuotaExceeded` if its tenant holds ``max_per_tenant`` already (counted on the
        writer thread, in the insert's transaction: no two creates can both see room)."""
        stored = dataclasses.replace(subscription, revision=1)
        tenant = stored.tenant

        def job(conn: sqlite3.Connection) -> Subscription:
            if max_per_tenant is not None and tenant is not None:
                (count,) = conn.execute(
                    "SELECT count(*) FROM subscriptions WHERE tenant = ?", (tenant,)
                ).fetchone()
                if count >= max_per_tenant:
                    raise quota_exceeded(tenant, max_per_tenant)
            try:
                cur = conn.execute(
                    "INSERT INTO subscriptions (id, protocol, sink, source, revision, doc, tenant)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (stored.id, stored.protocol, stored.sink, stored.source, 1, _dump(stored), tenant),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict(f"a subscription with id {stored.id!r} already exists") from exc
            _insert_types(conn, cur.lastrowid, stored)
            return stored

        return await self._db.write(job, after=self._publish(ChangeKind.CREATED))

    async def get(self, subscription_id: str) -> Subscription | None:
        """The subscription with this id, or None."""

        def job(conn: sqlite3.Connection) -> Subscription | None:
            row = conn.execute(
                "SELECT doc, revision, tenant FROM subscriptions WHERE id = ?", (subscription_id,)
            ).fetchone()
            return _load(*row) if row else None

        return await self._db.read(job)

    async def replace(
        self, subscription: Subscription, *, expected_revision: int | None = None
    ) -> Subscription:
        """Replace the stored subscription with the same id; its revision goes up by one."""

        def job(conn: sqlite3.Connection) -> Subscription:
            seq, current, tenant = _current(conn, subscription.id, expected_revision)
            stored = dataclasses.replace(subscription, revision=current + 1, tenant=tenant)
            conn.execute(
                "UPDATE subscriptions SET protocol = ?, sink = ?, source = ?, revision = ?, doc = ?"
                " WHERE seq = ?",
                (stored.protocol, stored.sink, stored.source, stored.revision, _dump(stored), seq),
            )
            conn.execute("DELETE FROM subscription_types WHERE seq = ?", (seq,))
            _insert_types(conn, seq, stored)
            return stored

        return await self._db.write(job, after=self._publish(ChangeKind.UPDATED))

    async def delete(self, subscription_id: str, *, expected_revision: int | None = None) -> Subscription:
        """Delete the subscription and return it as it was."""

        def job(conn: sqlite3.Connection) -> Subscription:
            row = conn.execute(
                "SELECT doc, revision, tenant FROM subscriptions WHERE id = ?", (subscription_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"no subscription with id {subscription_id!r}")
            _check_revision(row[1], expected_revision)
            conn.execute("DELETE FROM subscriptions WHERE id = ?", (subscription_id,))
            return _load(*row)

        return await self._db.write(job, after=self._publish(ChangeKind.DELETED))

    async def query(self, query: SubscriptionQuery) -> SubscriptionPage:
        """One page of the subscriptions matching every given filter, in creation order."""
        after = page_start(query)
        return await self._db.read(lambda conn: _query(conn, query, after))

    async def all(self) -> list[Subscription]:
        """Every subscription in creation order, secrets included."""

        def job(conn: sqlite3.Connection) -> list[Subscription]:
            rows = conn.execute("SELECT doc, revision, tenant FROM subscriptions ORDER BY seq").fetchall()
            return [_load(*row) for row in rows]

        return await self._db.read(job)


def _dump(subscription: Subscription) -> str:
    """The stored JSON text of ``subscription``, secrets included (the revision is a column)."""
    return json.dumps(subscription.to_record(), ensure_ascii=False)


def _load(text: str, revision: int, tenant: str | None) -> Subscription:
    # A row written before tenants existed has none: it is visible to admins only.
    return subscription_from_record(json.loads(text), revision=revision, tenant=tenant)


def _query(conn: sqlite3.Connection, query: SubscriptionQuery, after: int) -> SubscriptionPage:
    # With a type filter the (type, seq) primary key of the side table drives the scan in seq
    # order; otherwise an index on (column, seq) or the table itself does.
    source = "subscriptions s"
    clauses = ["s.seq > ?"]
    params: list[object] = [after]
    if query.type is not None:
        source = "subscription_types t JOIN subscriptions s ON s.seq = t.seq"
        clauses = ["t.type = ?", "t.seq > ?"]
        params = [query.type, after]
    for column in ("tenant", "protocol", "source", "sink"):
        value = getattr(query, column)
        if value is not None:
            clauses.append(f"s.{column} = ?")
            params.append(value)
    params.append(query.limit + 1)  # one extra row tells whether another page follows
    order = "t.seq" if query.type is not None else "s.seq"
    rows = conn.execute(
        f"SELECT s.seq, s.doc, s.revision, s.tenant FROM {source} WHERE {' AND '.join(clauses)}"
        f" ORDER BY {order} LIMIT ?",
        params,
    ).fetchall()
    page = rows[: query.limit]
    items = [_load(doc, revision, tenant) for _, doc, revision, tenant in page]
    more = len(rows) > query.limit and bool(page)
    return SubscriptionPage(items=items, next_cursor=encode_cursor(page[-1][0]) if more else None)


def _current(
    conn: sqlite3.Connection, subscription_id: str, expected: int | None
) -> tuple[int, int, str | None]:
    row = conn.execute(
        "SELECT seq, revision, tenant FROM subscriptions WHERE id = ?", (subscription_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no subscription with id {subscription_id!r}")
    _check_revision(row[1], expected)
    return int(row[0]), int(row[1]), row[2]


def _check_revision(current: int, expected: int | None) -> None:
    if expected is not None and expected != current:
        raise PreconditionFailed("the subscription has changed since the given ETag was issued")


def _insert_types(conn: sqlite3.Connection, seq: int | None, subscription: Subscription) -> None:
    if seq is None:  # sqlite3 types lastrowid as optional; an INSERT always sets it
        raise sqlite3.DatabaseError("the database did not report the new row")
    if subscription.types:
        conn.executemany(
            "INSERT OR IGNORE INTO subscription_types (type, seq) VALUES (?, ?)",
            [(t, seq) for t in subscription.types],
        )
