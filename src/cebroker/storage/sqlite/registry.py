"""The registry store on the broker's SQLite file: every entity one row of ``xreg_entity``.

A write runs the registry's function in a job of the storage's writer (durable, inside the
writer's savepoint, so a function that raises leaves nothing behind); a read runs it in one
read transaction of the reader connection, a consistent snapshot.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from cebroker.storage.registry import EntityClash, Kind, RegistryReader, RegistryRows, Row
from cebroker.storage.sqlite.database import Database

T = TypeVar("T")

_COLS = "xid, parent, coll, kind, eid, seq, attrs, doc"


def _row(r: tuple[Any, ...]) -> Row:
    xid, parent, coll, kind, eid, seq, attrs, doc = r
    return Row(xid, parent, coll, kind, eid, json.loads(attrs), doc, seq)


class SqliteRegistryRows:
    """:class:`~cebroker.storage.registry.RegistryRows` over a connection in a transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def get(self, xid: str) -> Row | None:
        """The entity with exactly this xid."""
        r = self._conn.execute(f"SELECT {_COLS} FROM xreg_entity WHERE xid = ?", (xid,)).fetchone()
        return _row(r) if r else None

    def sibling(self, parent: str, coll: str, eid: str) -> Row | None:
        """The entity in ``parent``'s collection whose id equals ``eid`` ignoring case."""
        r = self._conn.execute(
            f"SELECT {_COLS} FROM xreg_entity WHERE parent = ? AND coll = ? AND lower(eid) = lower(?)",
            (parent, coll, eid),
        ).fetchone()
        return _row(r) if r else None

    def children(self, parent: str, coll: str) -> list[Row]:
        """The entities of one collection, oldest first."""
        cur = self._conn.execute(
            f"SELECT {_COLS} FROM xreg_entity WHERE parent = ? AND coll = ? ORDER BY seq", (parent, coll)
        )
        return [_row(r) for r in cur.fetchall()]

    def count(self, parent: str, coll: str) -> int:
        """How many entities a collection holds."""
        cur = self._conn.execute(
            "SELECT count(*) FROM xreg_entity WHERE parent = ? AND coll = ?", (parent, coll)
        )
        return int(cur.fetchone()[0])

    def subtree(self, xid: str) -> list[Row]:
        """The entity and everything below it, in creation order."""
        if xid == "/":
            cur = self._conn.execute(f"SELECT {_COLS} FROM xreg_entity ORDER BY seq")
        else:
            # '/' sorts right before '0', so this range is exactly the xids below `xid`.
            cur = self._conn.execute(
                f"SELECT {_COLS} FROM xreg_entity WHERE xid = ? OR (xid >= ? AND xid < ?) ORDER BY seq",
                (xid, xid + "/", xid + "0"),
            )
        return [_row(r) for r in cur.fetchall()]

    def rows_of_kind(self, kind: Kind, coll: str | None = None) -> list[Row]:
        """Every entity of a kind (optionally of one collection), oldest first."""
        if coll is None:
            cur = self._conn.execute(f"SELECT {_COLS} FROM xreg_entity WHERE kind = ? ORDER BY seq", (kind,))
        else:
            cur = self._conn.execute(
                f"SELECT {_COLS} FROM xreg_entity WHERE kind = ? AND coll = ? ORDER BY seq", (kind, coll)
            )
        return [_row(r) for r in cur.fetchall()]

    def put(self, row: Row) -> Row:
        """Insert or replace ``row``; a new row gets the next sequence number."""
        if row.seq == 0:
            cur = self._conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM xreg_entity")
            row.seq = int(cur.fetchone()[0])
        try:
            # An upsert by xid: a clash on the sibling index (same id ignoring case) is an error,
            # not a silent replacement of the other row.
            self._conn.execute(
                f"INSERT INTO xreg_entity ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (xid) DO UPDATE SET parent = excluded.parent, coll = excluded.coll,"
                " kind = excluded.kind, eid = excluded.eid, seq = excluded.seq, attrs = excluded.attrs,"
                " doc = excluded.doc",
                (row.xid, row.parent, row.coll, row.kind, row.eid, row.seq, json.dumps(row.attrs), row.doc),
            )
        except sqlite3.IntegrityError as exc:
            raise EntityClash(row.xid) from exc
        return row

    def delete_subtree(self, xid: str) -> int:
        """Delete the entity and everything below it; returns how many rows went."""
        cur = self._conn.execute(
            "DELETE FROM xreg_entity WHERE xid = ? OR (xid >= ? AND xid < ?)", (xid, xid + "/", xid + "0")
        )
        return cur.rowcount


class SqliteRegistryStore:
    """:class:`~cebroker.storage.registry.RegistryStore` on a :class:`Database`."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def read(self, fn: Callable[[RegistryReader], T]) -> T:
        """Run ``fn`` over one snapshot, on the reader connection."""
        return await self._db.read(lambda conn: fn(SqliteRegistryRows(conn)))

    async def write(self, fn: Callable[[RegistryRows], T]) -> T:
        """Run ``fn`` in one durable write transaction, on the writer."""
        return await self._db.write(lambda conn: fn(SqliteRegistryRows(conn)))

    def watch(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Nobody else writes to this file: ``listener`` is never called."""
        return lambda: None
