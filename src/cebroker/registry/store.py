"""SQLite persistence of registry entities, in the broker's database file, in its own table.

Every entity (the registry root, groups, resources, versions) is one row keyed by its xid. A
resource row holds the resource-level (``meta``) attributes; a version row holds the version's
attributes and, for document resources, the document bytes. All access goes through one
connection owned by one thread (see :class:`cebroker.registry.service.RegistryService`), and
every write request runs in one ``BEGIN IMMEDIATE`` transaction so it is applied whole or not
at all.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from cebroker.registry.errors import XRegistryError

Kind = Literal["registry", "group", "resource", "version"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS xreg_entity (
    xid    TEXT PRIMARY KEY,
    parent TEXT NOT NULL,
    coll   TEXT NOT NULL,
    kind   TEXT NOT NULL,
    eid    TEXT NOT NULL,
    seq    INTEGER NOT NULL,
    attrs  TEXT NOT NULL,
    doc    BLOB
);
CREATE UNIQUE INDEX IF NOT EXISTS xreg_entity_sibling ON xreg_entity (parent, coll, lower(eid));
CREATE INDEX IF NOT EXISTS xreg_entity_children ON xreg_entity (parent, coll, seq);
"""


@dataclass(slots=True)
class Row:
    """One stored entity. ``coll`` is the collection it sits in within ``parent``."""

    xid: str
    parent: str
    coll: str
    kind: Kind
    eid: str
    attrs: dict[str, Any] = field(default_factory=dict)
    doc: bytes | None = None
    seq: int = 0


def _row(r: tuple[Any, ...]) -> Row:
    xid, parent, coll, kind, eid, seq, attrs, doc = r
    return Row(xid, parent, coll, kind, eid, json.loads(attrs), doc, seq)


_COLS = "xid, parent, coll, kind, eid, seq, attrs, doc"


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise XRegistryError("server_busy", detail=str(exc), headers={"Retry-After": "1"}) from exc
        raise XRegistryError("server_error", detail=f"database error: {exc}") from exc
    except sqlite3.Error as exc:
        raise XRegistryError("server_error", detail=f"database error: {exc}") from exc


class RegistryStore:
    """Row-level access to the registry table; not thread-safe (one owning thread)."""

    def __init__(self, path: Path, *, busy_timeout: float = 10.0) -> None:
        self._path = path
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None

    def open(self) -> None:
        """Open the database file (WAL mode) and create the table if needed."""
        self._path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout
        )
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout * 1000)}")
        conn.executescript(_SCHEMA)
        self._conn = conn

    def close(self) -> None:
        """Close the connection."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("registry store is not open")
        return self._conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic write: committed when the block ends, rolled back if it raises.

        SQLite errors become ``server_busy`` (the file stayed locked past the busy timeout) or
        ``server_error``; nothing of the write remains.
        """
        with _translated():
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            else:
                self.conn.execute("COMMIT")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """A consistent read of several queries (errors translated as for writes)."""
        with _translated():
            self.conn.execute("BEGIN")
            try:
                yield
            finally:
                self.conn.execute("COMMIT")

    def get(self, xid: str) -> Row | None:
        """The entity with exactly this xid."""
        cur = self.conn.execute(f"SELECT {_COLS} FROM xreg_entity WHERE xid = ?", (xid,))
        r = cur.fetchone()
        return _row(r) if r else None

    def sibling(self, parent: str, coll: str, eid: str) -> Row | None:
        """The entity in ``parent``'s collection whose id equals ``eid`` case-insensitively."""
        cur = self.conn.execute(
            f"SELECT {_COLS} FROM xreg_entity WHERE parent = ? AND coll = ? AND lower(eid) = lower(?)",
            (parent, coll, eid),
        )
        r = cur.fetchone()
        return _row(r) if r else None

    def children(self, parent: str, coll: str) -> list[Row]:
        """The entities of one collection, oldest first."""
        cur = self.conn.execute(
            f"SELECT {_COLS} FROM xreg_entity WHERE parent = ? AND coll = ? ORDER BY seq",
            (parent, coll),
        )
        return [_row(r) for r in cur.fetchall()]

    def count(self, parent: str, coll: str) -> int:
        """How many entities a collection holds."""
        cur = self.conn.execute(
            "SELECT count(*) FROM xreg_entity WHERE parent = ? AND coll = ?", (parent, coll)
        )
        return int(cur.fetchone()[0])

    def subtree(self, xid: str) -> list[Row]:
        """The entity and everything below it, in insertion order."""
        if xid == "/":
            cur = self.conn.execute(f"SELECT {_COLS} FROM xreg_entity ORDER BY seq")
        else:
            # '/' sorts right before '0', so this range is exactly the xids below `xid`.
            cur = self.conn.execute(
                f"SELECT {_COLS} FROM xreg_entity WHERE xid = ? OR (xid >= ? AND xid < ?) ORDER BY seq",
                (xid, xid + "/", xid + "0"),
            )
        return [_row(r) for r in cur.fetchall()]

    def rows_of_kind(self, kind: Kind, coll: str | None = None) -> list[Row]:
        """Every entity of a kind (optionally of one collection), oldest first."""
        if coll is None:
            cur = self.conn.execute(f"SELECT {_COLS} FROM xreg_entity WHERE kind = ? ORDER BY seq", (kind,))
        else:
            cur = self.conn.execute(
                f"SELECT {_COLS} FROM xreg_entity WHERE kind = ? AND coll = ? ORDER BY seq", (kind, coll)
            )
        return [_row(r) for r in cur.fetchall()]

    def put(self, row: Row) -> Row:
        """Insert or replace ``row``; a new row gets the next sequence number."""
        if row.seq == 0:
            cur = self.conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM xreg_entity")
            row.seq = int(cur.fetchone()[0])
        try:
            self.conn.execute(
                f"INSERT OR REPLACE INTO xreg_entity ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (row.xid, row.parent, row.coll, row.kind, row.eid, row.seq, json.dumps(row.attrs), row.doc),
            )
        except sqlite3.IntegrityError as exc:
            raise XRegistryError("bad_request", row.xid, error_detail=f"id clash: {exc}") from exc
        return row

    def delete_subtree(self, xid: str) -> int:
        """Delete the entity and everything below it; returns how many rows went."""
        cur = self.conn.execute(
            "DELETE FROM xreg_entity WHERE xid = ? OR (xid >= ? AND xid < ?)", (xid, xid + "/", xid + "0")
        )
        return cur.rowcount
