"""Bounded waits on PostgreSQL at the storage's level: a slow statement is not a hung server,
a hung one is an episode within a second, and ingest does not queue without a bound."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from servers.postgres import PostgresServer
from support.waiting import async_wait_until

from cebroker.storage import Incoming, StorageUnavailable
from cebroker.storage.postgres import PostgresStorage, ingest
from cebroker.storage.postgres.watchdog import NOT_RESPONDING
from storage.support import opened

# Each test holds the database watchdog to bounds of a few tenths of a second (PING_TIMEOUT,
# STALL_AFTER): alone, so that the load of the other tests does not stretch them.
pytestmark = [pytest.mark.postgres, pytest.mark.alone]


async def test_a_slow_statement_is_not_a_hung_server(postgres_url: str) -> None:
    storage = PostgresStorage(postgres_url)
    seen: list[str | None] = []
    async with opened(storage):

        async def slow(conn: Any) -> None:
            await conn.execute("SELECT pg_sleep(1.5)")

        task = asyncio.create_task(storage._db.run(slow, write=False))
        while not task.done():  # the watchdog pings meanwhile: the server answers
            seen.append(storage.health.cause)
            await asyncio.sleep(0.05)
        await task
    assert set(seen) == {None}


async def test_a_call_larger_than_the_bound_alone_is_written_when_nothing_waits(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bound on waiting events refuses what would join a queue, not a large batch on its own:
    refused, that batch would be refused again on every retry."""
    monkeypatch.setattr(ingest, "MAX_QUEUED", 10)
    storage = PostgresStorage(postgres_url)
    async with opened(storage):
        written = await storage.deliveries.append(
            [Incoming({"id": f"big{n}"}, "/s", f"big{n}", ("a",)) for n in range(15)]
        )
        assert len(written) == 15
        assert all(w is not None for w in written)
        assert (await storage.deliveries.backlog())["a"][0] == 15


@pytest.mark.slow
async def test_a_hung_server_is_an_episode_and_ingest_is_bounded(
    server_factory: Callable[..., PostgresServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest, "MAX_QUEUED", 10)
    server = server_factory(PostgresServer)
    storage = PostgresStorage(server.create_database())
    async with opened(storage):
        log = storage.deliveries
        await log.append([Incoming({"id": "0"}, "/s", "0", ("a",))])
        pids = server.freeze()
        try:
            frozen = time.monotonic()
            # three calls waiting for a transaction (its task takes them when it starts)
            calls = [
                asyncio.create_task(log.append([Incoming({"id": str(n)}, "/s", str(n), ("a",))]))
                for n in range(1, 4)
            ]
            await asyncio.sleep(0)
            with pytest.raises(StorageUnavailable, match="database busy"):  # over the bound: at once
                await log.append([Incoming({"id": f"x{n}"}, "/s", f"x{n}", ("a",)) for n in range(10)])
            assert time.monotonic() - frozen < 0.3
            await async_wait_until(lambda: storage.health.cause == NOT_RESPONDING, 2.0, "not responding")
            assert time.monotonic() - frozen < 1.0
            for call in calls:  # the waiting calls are answered, not left until the thaw
                with pytest.raises(StorageUnavailable, match=NOT_RESPONDING):
                    await asyncio.wait_for(call, 1.0)
            with pytest.raises(StorageUnavailable, match=NOT_RESPONDING):  # new calls: at once
                await asyncio.wait_for(log.append([Incoming({"id": "y"}, "/s", "y", ("a",))]), 0.2)
        finally:
            server.thaw(pids)
        await async_wait_until(lambda: storage.health.ok, 10, "the episode ends once it answers")
        assert (await log.append([Incoming({"id": "z"}, "/s", "z", ("a",))]))[0] is not None


async def test_a_caller_cancelled_while_its_ingest_waits_leaves_its_group_answered(postgres_url: str) -> None:
    """The bounded wait awaits the call's own future: a cancelled caller cancels it, and the
    group's transaction answers the other calls and frees its place for the next."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        first = asyncio.ensure_future(log.append([Incoming({"id": "1"}, "/s", "1", ("a",))]))
        second = asyncio.ensure_future(log.append([Incoming({"id": "2"}, "/s", "2", ("a",))]))
        await asyncio.sleep(0)  # both made, waiting for the group's transaction
        first.cancel()
        assert (await asyncio.wait_for(second, 10))[0] is not None
        with pytest.raises(asyncio.CancelledError):
            await first
        for n in range(3, 6):  # the transactions' places are free again
            assert (await asyncio.wait_for(log.append([Incoming({"id": str(n)}, "/s", str(n), ("a",))]), 10))[
                0
            ] is not None
