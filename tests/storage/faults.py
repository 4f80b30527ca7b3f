"""Injected storage failures: a sqlite3 connection class that fails chosen statements.

``connection, faults = faulty_connection()`` gives a connection class for
``SqliteStorage(..., connection_factory=connection)`` and the switchboard of its failures:
``faults.arm(code, message, sql="COMMIT", thread="writer")`` makes every matching statement
raise the sqlite3 error SQLite raises for that result code, until ``faults.disarm()``. The
database stays real: everything else runs against the file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: (result code, name, message) of the failures the storage must answer with 503.
CAUSES: dict[str, tuple[int, str, str]] = {
    "disk full": (sqlite3.SQLITE_FULL, "SQLITE_FULL", "database or disk is full"),
    "I/O error": (sqlite3.SQLITE_IOERR_WRITE, "SQLITE_IOERR_WRITE", "disk I/O error"),
    "database locked": (sqlite3.SQLITE_BUSY, "SQLITE_BUSY", "database is locked"),
    "database is read-only": (
        sqlite3.SQLITE_READONLY,
        "SQLITE_READONLY",
        "attempt to write a readonly database",
    ),
    "database file is corrupt": (
        sqlite3.SQLITE_CORRUPT,
        "SQLITE_CORRUPT",
        "database disk image is malformed",
    ),
}


def sqlite_error(cause: str) -> sqlite3.Error:
    """The exception sqlite3 raises for ``cause`` (one of :data:`CAUSES`), codes included."""
    code, name, message = CAUSES[cause]
    error: sqlite3.Error = (
        sqlite3.DatabaseError(message)
        if code == sqlite3.SQLITE_CORRUPT
        else sqlite3.OperationalError(message)
    )
    error.sqlite_errorcode = code
    error.sqlite_errorname = name
    return error


@dataclass
class Faults:
    """Which statements fail, and how often they were tried while armed."""

    cause: str | None = None
    sql: str = "COMMIT"
    thread: str = "writer"
    hits: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, cause: str, *, sql: str = "COMMIT", thread: str = "writer") -> None:
        """Fail statements containing ``sql`` on the storage thread named ``thread``."""
        with self._lock:
            self.cause, self.sql, self.thread, self.hits = cause, sql, thread, 0

    def disarm(self) -> None:
        """Let every statement through again."""
        with self._lock:
            self.cause = None

    def check(self, statement: str) -> None:
        with self._lock:
            cause = self.cause
            if cause is None or self.sql not in statement:
                return
            if f"cebroker-storage-{self.thread}" not in threading.current_thread().name:
                return
            self.hits += 1
        raise sqlite_error(cause)


def faulty_connection() -> tuple[type[sqlite3.Connection], Faults]:
    """A connection class whose statements fail as its :class:`Faults` say."""
    faults = Faults()

    class FaultyConnection(sqlite3.Connection):
        def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
            faults.check(sql)
            return super().execute(sql, parameters)

        def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
            faults.check(sql)
            return super().executemany(sql, parameters)

    return FaultyConnection, faults
