"""The server backend: every store of the broker in one PostgreSQL database, shared by any
number of broker instances."""

from __future__ import annotations

import contextlib

from cebroker.storage.base import StorageOptions
from cebroker.storage.claims import Claims
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.health import StorageHealth
from cebroker.storage.postgres.archive import PostgresEventArchive
from cebroker.storage.postgres.circuits import PostgresCircuitStore
from cebroker.storage.postgres.database import CONNECT_TIMEOUT, KEEPALIVES, Database
from cebroker.storage.postgres.deliveries import PostgresDeliveryLog
from cebroker.storage.postgres.instances import Membership
from cebroker.storage.postgres.listener import Listener
from cebroker.storage.postgres.pull import PostgresPullLog
from cebroker.storage.postgres.registry import PostgresRegistryStore
from cebroker.storage.postgres.replies import PostgresReplyChannel
from cebroker.storage.postgres.subscriptions import PostgresSubscriptionStore
from cebroker.storage.postgres.url import display_name
from cebroker.storage.postgres.vacuum import Vacuum


class PostgresStorage:
    """:class:`~cebroker.storage.base.Storage` on the PostgreSQL database at ``url``
    (``postgresql://user:password@host:port/dbname``); ``name`` shows it without the password."""

    def __init__(self, url: str, options: StorageOptions | None = None) -> None:
        chosen = options or StorageOptions()
        self._name = display_name(url)
        self.health = StorageHealth(self._name)
        self._db = Database(url, self._name, chosen, self.health)
        self._listener = Listener(
            url, {"connect_timeout": CONNECT_TIMEOUT, "application_name": "cebroker", **KEEPALIVES}
        )
        self._membership = Membership(self._db, chosen.lease)
        self._vacuum = Vacuum(self._db)
        self.subscriptions = PostgresSubscriptionStore(self._db, self._listener)
        self.deliveries = PostgresDeliveryLog(
            self._db,
            self._listener,
            self._membership,
            dedup_window=chosen.dedup_window,
            clock=chosen.clock,
            retention=chosen.retention,
        )
        #: The log's claims and leases: every instance on the database shares its work.
        self.claims: Claims = self.deliveries
        self.archive = PostgresEventArchive(
            self._db, self.deliveries, retention=chosen.retention, clock=chosen.clock
        )
        self.pull = PostgresPullLog(self._db, self.deliveries, clock=chosen.clock)
        self.circuits = PostgresCircuitStore(self._db)
        self.registry = PostgresRegistryStore(self._db, self._listener)
        self.replies = PostgresReplyChannel(self._db, self._listener)
        self._open = False

    @property
    def name(self) -> str:
        """The database URL, without its password."""
        return self._name

    def prepare(self) -> None:
        """Create or migrate every schema, under the migration lock."""
        self._db.prepare()

    async def open(self) -> None:
        """Open the pools, listen, register this instance, look after the delivery table's
        dead rows."""
        if self._open:
            return
        await self._db.open()
        try:
            self._listener.start()
            await self.subscriptions.load()
            await self._membership.start()
            self._vacuum.start()
        except BaseException:
            await self._listener.stop()
            await self._db.close()
            raise
        self._open = True

    async def close(self) -> None:
        """Announce the deliveries this instance left unclaimed, give its claims back, stop
        listening, close the pools."""
        if not self._open:
            return
        self._open = False
        await self._vacuum.stop()
        await self.deliveries.announce_now()
        with contextlib.suppress(StorageUnavailable):
            await self._membership.stop()
        await self._listener.stop()
        await self._db.close()
