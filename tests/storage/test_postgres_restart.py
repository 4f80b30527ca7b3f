"""A PostgreSQL restart and the confirmations that failed meanwhile (issue 30, finding 10).

An instance that delivered while the database was away could not record it. When the database
returns it records those confirmations itself, before its old claims are freed (it takes a new
id: its heartbeat went stale), and the other instance reaps nobody until it has been back for a
lease: nothing it delivered is handed out again.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from servers.postgres import PostgresServer
from support.waiting import async_wait_until

from cebroker.storage import Incoming, StorageUnavailable
from cebroker.storage.base import StorageOptions
from cebroker.storage.postgres import PostgresStorage
from storage.support import opened

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

LEASE = 1.0


async def test_confirmations_that_failed_while_away_are_recorded_before_the_claims_are_freed(
    server_factory: Callable[..., PostgresServer],
) -> None:
    server = server_factory(PostgresServer)
    url = server.create_database()
    options = StorageOptions(lease=LEASE)
    one, two = PostgresStorage(url, options), PostgresStorage(url, options)

    def back() -> bool:
        return one._membership.live and one.health.ok and two.health.ok

    async with opened(one), opened(two):
        await one.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("s",)) for n in range(10)])
        claimed, _ = await one.deliveries.due("s", 10)
        assert len(claimed) == 10
        first = one._membership.id
        server.stop()
        # delivered while the database is away: the confirmation cannot be recorded
        with pytest.raises(StorageUnavailable):
            await one.deliveries.complete([(r.id, r.event_seq, r.subscription) for r in claimed])
        server.start()
        # its heartbeat went stale: once back and live again it has a new id (its old claims
        # were freed)
        await async_wait_until(back, 20, "both back")
        assert one._membership.id != first
        # what it delivered was recorded first: nothing is handed out again, to either instance
        assert (await two.deliveries.due("s", 10))[0] == []
        assert (await one.deliveries.due("s", 10))[0] == []
        assert (await two.deliveries.status("s")).delivered == 10
        assert await two.deliveries.pending() == 0
