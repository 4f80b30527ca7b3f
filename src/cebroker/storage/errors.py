"""Errors of the storage layer, the same for every backend.

Each backend translates its driver's exceptions into these at its boundary, so no sqlite3 (or
other driver) exception reaches a component::

    BrokerError
    └── StorageError                 the storage cannot be used as asked
        ├── StorageUnavailable  503  a call failed for a reason outside the request (disk full,
        │                            I/O error, database locked or read-only, ...): nothing of a
        │                            failed write was stored; retry after ``retry_after`` seconds
        │   └── IndexBehind          a shared log saw a subscription change the caller's index has not
        ├── StorageInUse             another broker process holds the storage (one per file)
        └── SchemaTooNew             the stored schema is newer than this broker understands
"""

from __future__ import annotations

from cebroker.errors import BrokerError


class StorageError(BrokerError):
    """The storage cannot be used as asked; what was asked did not happen."""

    status = 503
    title = "Store unavailable"
    type_suffix = "store-unavailable"


class StorageUnavailable(StorageError):
    """A storage call failed for a reason outside the request; a failed write stored nothing.

    ``cause`` names the reason in a few words ("disk full", "I/O error", "database locked",
    "database is read-only", ...); clients get 503 with ``Retry-After``. ``unsent``: the call
    failed before any of it reached the storage (refused at once while the storage is known to
    be away, or no connection to send it on), so none of it can have taken effect; otherwise a
    failure with the connection may have come after a commit the caller did not hear of.
    """

    retry_after: float

    def __init__(
        self, cause: str, detail: str | None = None, *, retry_after: float = 5.0, unsent: bool = False
    ) -> None:
        self.cause = cause
        self.retry_after = retry_after
        self.unsent = unsent
        super().__init__(f"storage unavailable: {cause}" + (f" ({detail})" if detail else ""))


class IndexBehind(StorageUnavailable):
    """An append matched against an index older than the latest committed subscription change
    (another instance made it): nothing was stored; catch up, match again and retry. Should
    retries not catch up, it reaches the client as a 503 like any storage outage."""

    def __init__(self, latest: int) -> None:
        self.latest = latest
        super().__init__("subscription changes are still arriving", retry_after=1.0)


class StorageInUse(StorageError):
    """Another process holds the storage: one broker per SQLite file."""


class SchemaTooNew(StorageError):
    """The stored schema of a component is newer than this broker's code."""
