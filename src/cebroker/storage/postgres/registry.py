"""The registry store on PostgreSQL: every entity one row of ``xreg_entity``.

The registry's core is synchronous, so each read or write runs in a worker thread on a
connection of the sync pool, in one transaction: a read in a read-only REPEATABLE READ
transaction (one snapshot), a write under a transaction-level advisory lock, so that writes of
several instances take turns (the next ``seq`` and the id checks below see every earlier write).

Each write also takes the next registry version (``xreg_version``) and announces it with
``NOTIFY cebroker_registry``; :meth:`PostgresRegistryStore.watch` tells this instance's
listeners of the versions it did not write itself, so that what an instance derives from the
registry follows the other instances' writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, LiteralString, TypeVar

from psycopg import sql

from cebroker.storage.postgres.database import Database, SyncConn
from cebroker.storage.postgres.listener import REGISTRY, Listener
from cebroker.storage.registry import EntityClash, Kind, RegistryReader, RegistryRows, Row

T = TypeVar("T")

#: The advisory lock key of registry writes.
REGISTRY_LOCK = 0x78726567_69737472

_COLS = sql.SQL(", ").join(
    map(sql.Identifier, ("xid", "parent", "coll", "kind", "eid", "seq", "attrs", "doc"))
)
_SELECT = sql.SQL("SELECT {} FROM xreg_entity ").format(_COLS)


def _row(r: tuple[Any, ...]) -> Row:
    xid, parent, coll, kind, eid, seq, attrs, doc = r
    return Row(
        xid, parent, coll, kind, eid, json.loads(attrs), bytes(doc) if doc is not None else None, int(seq)
    )


class PostgresRegistryRows:
    """:class:`~cebroker.storage.registry.RegistryRows` over a connection in a transaction."""

    def __init__(self, conn: SyncConn) -> None:
        self._conn = conn

    def _all(self, rest: LiteralString, params: tuple[Any, ...]) -> list[Row]:
        """The entities ``SELECT <columns> FROM xreg_entity <rest>`` finds."""
        return [_row(r) for r in self._conn.execute(_SELECT + sql.SQL(rest), params).fetchall()]

    def _one(self, rest: LiteralString, params: tuple[Any, ...]) -> Row | None:
        r = self._conn.execute(_SELECT + sql.SQL(rest), params).fetchone()
        return _row(r) if r else None

    def get(self, xid: str) -> Row | None:
        """The entity with exactly this xid."""
        return self._one("WHERE xid = %s", (xid,))

    def sibling(self, parent: str, coll: str, eid: str) -> Row | None:
        """The entity in ``parent``'s collection whose id equals ``eid`` ignoring case."""
        return self._one(
            "WHERE parent = %s AND coll = %s AND lower(eid) = lower(%s)",
            (parent, coll, eid),
        )

    def children(self, parent: str, coll: str) -> list[Row]:
        """The entities of one collection, oldest first."""
        return self._all("WHERE parent = %s AND coll = %s ORDER BY seq", (parent, coll))

    def count(self, parent: str, coll: str) -> int:
        """How many entities a collection holds."""
        row = self._conn.execute(
            "SELECT count(*) FROM xreg_entity WHERE parent = %s AND coll = %s", (parent, coll)
        ).fetchone()
        return int(row[0]) if row else 0

    def subtree(self, xid: str) -> list[Row]:
        """The entity and everything below it, in creation order."""
        if xid == "/":
            return self._all("ORDER BY seq", ())
        return self._all(
            "WHERE xid = %s OR (xid >= %s AND xid < %s) ORDER BY seq",
            (xid, xid + "/", xid + "0"),
        )

    def rows_of_kind(self, kind: Kind, coll: str | None = None) -> list[Row]:
        """Every entity of a kind (optionally of one collection), oldest first."""
        if coll is None:
            return self._all("WHERE kind = %s ORDER BY seq", (kind,))
        return self._all("WHERE kind = %s AND coll = %s ORDER BY seq", (kind, coll))

    def put(self, row: Row) -> Row:
        """Insert or replace ``row``; a new row gets the next sequence number."""
        # Checked before writing: a unique violation would abort the whole transaction.
        clash = self._conn.execute(
            "SELECT 1 FROM xreg_entity"
            " WHERE parent = %s AND coll = %s AND lower(eid) = lower(%s) AND xid <> %s",
            (row.parent, row.coll, row.eid, row.xid),
        ).fetchone()
        if clash is not None:
            raise EntityClash(row.xid)
        if row.seq == 0:
            got = self._conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM xreg_entity").fetchone()
            row.seq = int(got[0]) if got else 1
        self._conn.execute(
            sql.SQL(
                "INSERT INTO xreg_entity ({}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (xid) DO UPDATE SET parent = excluded.parent, coll = excluded.coll,"
                " kind = excluded.kind, eid = excluded.eid, seq = excluded.seq, attrs = excluded.attrs,"
                " doc = excluded.doc"
            ).format(_COLS),
            (row.xid, row.parent, row.coll, row.kind, row.eid, row.seq, json.dumps(row.attrs), row.doc),
        )
        return row

    def delete_subtree(self, xid: str) -> int:
        """Delete the entity and everything below it; returns how many rows went."""
        cur = self._conn.execute(
            "DELETE FROM xreg_entity WHERE xid = %s OR (xid >= %s AND xid < %s)", (xid, xid + "/", xid + "0")
        )
        return cur.rowcount


class PostgresRegistryStore:
    """:class:`~cebroker.storage.registry.RegistryStore` on a PostgreSQL :class:`Database`."""

    def __init__(self, db: Database, listener: Listener) -> None:
        self._db = db
        #: The latest registry version this instance wrote or was told of.
        self._version = 0
        self._watchers: list[Callable[[], None]] = []
        listener.on(REGISTRY, self._heard)
        listener.on_connect(self._tell)  # notifications may have been missed meanwhile

    async def read(self, fn: Callable[[RegistryReader], T]) -> T:
        """Run ``fn`` over one snapshot."""
        return await self._db.run_sync(
            lambda conn: fn(PostgresRegistryRows(conn)), write=False, snapshot=True
        )

    async def write(self, fn: Callable[[RegistryRows], T]) -> T:
        """Run ``fn`` in one durable write transaction, after the other instances' writes, and
        announce the write to them."""

        def job(conn: SyncConn) -> tuple[T, int]:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (REGISTRY_LOCK,))
            result = fn(PostgresRegistryRows(conn))
            row = conn.execute("UPDATE xreg_version SET version = version + 1 RETURNING version").fetchone()
            version = int(row[0]) if row else 0
            conn.execute("SELECT pg_notify(%s, %s)", (REGISTRY, str(version)))
            return result, version

        result, version = await self._db.run_sync(job, write=True)
        self._version = max(self._version, version)
        return result

    def watch(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` (on the event loop) after another instance's write."""
        self._watchers.append(listener)
        return lambda: self._watchers.remove(listener) if listener in self._watchers else None

    def _heard(self, payload: str) -> None:
        if payload.isdigit() and int(payload) <= self._version:
            return  # this instance's own write, or one it was told of already
        if payload.isdigit():
            self._version = int(payload)
        self._tell()

    def _tell(self) -> None:
        for listener in list(self._watchers):
            listener()
