"""psycopg exceptions translated into :class:`~cebroker.storage.errors.StorageUnavailable`.

Every driver error that leaves a PostgreSQL store goes through :func:`translate`, so components
and clients see the same exception as with SQLite, with a short cause taken from the error's
class (its SQLSTATE), never from the message text. Messages of psycopg name the server's host
and port, never the password.
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

from cebroker.storage.errors import StorageUnavailable

#: Causes after which every pooled connection is suspect (the server went away).
CONNECTION_CAUSES = frozenset({"database connection lost", "database unreachable", "database restarting"})

_CAUSES: tuple[tuple[type[BaseException], str, float], ...] = (
    (pg.DiskFull, "disk full", 5.0),
    (pg.ReadOnlySqlTransaction, "database is read-only", 5.0),
    (pg.DeadlockDetected, "database busy", 1.0),
    (pg.SerializationFailure, "database busy", 1.0),
    (pg.LockNotAvailable, "database busy", 1.0),
    (pg.QueryCanceled, "database timeout", 1.0),
    (pg.TooManyConnections, "too many database connections", 1.0),
    (pg.AdminShutdown, "database restarting", 1.0),
    (pg.CrashShutdown, "database restarting", 1.0),
    (pg.CannotConnectNow, "database restarting", 1.0),
    (pg.InsufficientPrivilege, "permission denied", 5.0),
    (pg.InvalidPassword, "database authentication failed", 5.0),
    (pg.InvalidAuthorizationSpecification, "database authentication failed", 5.0),
    (pg.InvalidCatalogName, "no such database", 5.0),
    (pg.OutOfMemory, "out of memory", 5.0),
)


def translate(exc: BaseException) -> StorageUnavailable:
    """The storage error for a psycopg (or pool) exception."""
    if isinstance(exc, StorageUnavailable):
        return exc
    cause, retry = "database error", 5.0
    if isinstance(exc, PoolTimeout):
        cause, retry = "database unreachable", 1.0
    else:
        for kind, name, after in _CAUSES:
            if isinstance(exc, kind):
                cause, retry = name, after
                break
        else:
            if isinstance(exc, psycopg.OperationalError):
                cause, retry = "database connection lost", 1.0
            elif isinstance(exc, psycopg.Error) and exc.sqlstate:
                cause = f"database error ({exc.sqlstate})"
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else None
    error = StorageUnavailable(cause, detail, retry_after=retry)
    error.__cause__ = exc
    return error
