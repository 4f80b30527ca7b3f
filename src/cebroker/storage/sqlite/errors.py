"""sqlite3 exceptions translated into :class:`~cebroker.storage.errors.StorageUnavailable`.

Every sqlite3 error that leaves a SQLite store goes through :func:`translate`, so components
and clients see one exception with a short cause. The cause comes from SQLite's primary result
code (``sqlite_errorcode``), not from the message text.
"""

from __future__ import annotations

import sqlite3

from cebroker.storage.errors import StorageUnavailable

_CAUSES: dict[int, str] = {
    sqlite3.SQLITE_FULL: "disk full",
    sqlite3.SQLITE_IOERR: "I/O error",
    sqlite3.SQLITE_BUSY: "database locked",
    sqlite3.SQLITE_LOCKED: "database locked",
    sqlite3.SQLITE_PROTOCOL: "database locked",
    sqlite3.SQLITE_READONLY: "database is read-only",
    sqlite3.SQLITE_CANTOPEN: "cannot open the database file",
    sqlite3.SQLITE_PERM: "permission denied",
    sqlite3.SQLITE_CORRUPT: "database file is corrupt",
    sqlite3.SQLITE_NOTADB: "not a database file",
    sqlite3.SQLITE_NOMEM: "out of memory",
}
#: Causes that clear up by themselves within moments: clients are told to retry sooner.
_SHORT = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_PROTOCOL})


def translate(exc: sqlite3.Error) -> StorageUnavailable:
    """The storage error for a sqlite3 exception; its cause named from the result code."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    cause = _CAUSES.get(primary) if primary is not None else None
    if cause is None:
        name = getattr(exc, "sqlite_errorname", None)
        cause = f"database error ({name})" if isinstance(name, str) else "database error"
    error = StorageUnavailable(cause, str(exc) or None, retry_after=1.0 if primary in _SHORT else 5.0)
    error.__cause__ = exc
    return error
