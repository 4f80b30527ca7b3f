"""The embedded backend: every store of the broker in one SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from cebroker.storage.base import StorageOptions
from cebroker.storage.claims import Claims
from cebroker.storage.health import StorageHealth
from cebroker.storage.replies import LocalReplyChannel
from cebroker.storage.sqlite.archive import SqliteEventArchive
from cebroker.storage.sqlite.circuits import SqliteCircuitStore
from cebroker.storage.sqlite.database import Database
from cebroker.storage.sqlite.deliveries import SqliteDeliveryLog
from cebroker.storage.sqlite.pull import SqlitePullLog
from cebroker.storage.sqlite.registry import SqliteRegistryStore
from cebroker.storage.sqlite.subscriptions import SqliteSubscriptionStore


class SqliteStorage:
    """:class:`~cebroker.storage.base.Storage` on the SQLite file ``path`` (created on first
    use, with its directory), held exclusively by this process while prepared or open.

    ``connection_factory``: the sqlite3 connection class (tests inject failures through it).
    """

    def __init__(
        self,
        path: Path,
        options: StorageOptions | None = None,
        *,
        connection_factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        chosen = options or StorageOptions()
        self.path = path
        self.health = StorageHealth(str(path))
        self._db = Database(path, chosen, self.health, connection_factory=connection_factory)
        self.subscriptions = SqliteSubscriptionStore(self._db)
        self.deliveries = SqliteDeliveryLog(
            self._db, dedup_window=chosen.dedup_window, clock=chosen.clock, retention=chosen.retention
        )
        self.archive = SqliteEventArchive(
            self._db, self.deliveries, retention=chosen.retention, clock=chosen.clock
        )
        self.pull = SqlitePullLog(self._db, self.deliveries, clock=chosen.clock)
        self.circuits = SqliteCircuitStore(self._db)
        self.registry = SqliteRegistryStore(self._db)
        self.replies = LocalReplyChannel()
        #: None: one process per file, so there is no other instance to share the work with.
        self.claims: Claims | None = None

    @property
    def name(self) -> str:
        """The database file."""
        return str(self.path)

    def prepare(self) -> None:
        """Lock the file and migrate every schema (see :meth:`Database.prepare`)."""
        self._db.prepare()

    async def open(self) -> None:
        """Start the connections."""
        await self._db.open(self.deliveries.load)

    async def close(self) -> None:
        """Finish queued writes, close the connections, release the file."""
        await self._db.close()
