"""The group commit's transactions on PostgreSQL: calls that wait for a short transaction go
into the next one together, a second transaction beside one is started only once that one is
long (written for ``SECOND_AFTER``, or holding ``SECOND_AT`` events), so that an append held by
another writer's lock never stops the instance's ingest; and ``append``'s ``durable`` callback is
called by the group's task as soon as the group committed, never for a call that failed."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from support.waiting import async_wait_until

from cebroker.storage import Incoming, IndexBehind
from cebroker.storage.deliveries import Appended
from cebroker.storage.postgres import PostgresStorage, ingest
from storage.support import opened

pytestmark = pytest.mark.postgres


def one(key: str) -> list[Incoming]:
    return [Incoming({"id": key}, "/s", key, ("a",))]


@contextmanager
def key_held(url: str, key: str) -> Iterator[None]:
    """Another writer's uncommitted de-duplication key ``key``: an append of that key waits
    for it (the block's end rolls it back, and the append then finds its key fresh)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO pipeline_seen (tenant, source, id, at) VALUES ('', '/s', %s, %s)", (key, time.time())
        )
        try:
            yield
        finally:
            conn.rollback()


def lock_waits(url: str) -> int:
    """Backends of the database waiting for a lock."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return int(row[0]) if row else 0


def transactions(url: str, keys: list[str]) -> dict[str, int]:
    """The transaction (``xmin``) that wrote each event of ``keys``."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT body, xmin::text FROM pipeline_events").fetchall()
    found = {str(json.loads(body)["id"]): int(xmin) for body, xmin in rows}
    return {key: found[key] for key in keys}


async def test_calls_waiting_for_a_short_transaction_go_into_the_next_one_together(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the first transaction held (by another writer's lock) but not yet long, calls made
    in later rounds of the event loop wait and are then written in one transaction; before, the
    first of them went into a second transaction at once and the next waited for a third."""
    monkeypatch.setattr(ingest, "SECOND_AFTER", 60.0)
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        with key_held(postgres_url, "held"):
            first = asyncio.create_task(log.append(one("held")))
            await async_wait_until(lambda: lock_waits(postgres_url) == 1)
            second = asyncio.create_task(log.append(one("second")))
            await asyncio.sleep(0.05)  # a later round of the event loop: not the same group
            third = asyncio.create_task(log.append(one("third")))
            await asyncio.sleep(0.05)
            assert not first.done()
        written = await asyncio.gather(first, second, third)
        assert all(w[0] is not None for w in written)
    xmins = transactions(postgres_url, ["held", "second", "third"])
    assert xmins["second"] == xmins["third"] != xmins["held"]


async def test_a_transaction_held_long_gets_a_second_one_beside_it(postgres_url: str) -> None:
    """An append held by another writer's lock does not stop the instance's ingest: once it has
    been written for ``SECOND_AFTER``, the calls waiting go into a second transaction."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        with key_held(postgres_url, "held"):
            first = asyncio.create_task(log.append(one("held")))
            await async_wait_until(lambda: lock_waits(postgres_url) == 1)
            written = await asyncio.wait_for(log.append(one("other")), 10)
            assert written[0] is not None
            assert not first.done()
        assert (await first)[0] is not None


async def test_a_large_transaction_gets_a_second_one_beside_it_at_once(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction of ``SECOND_AT`` events or more (a batch's) lets the calls waiting have a
    second transaction at once, however long it has been written."""
    monkeypatch.setattr(ingest, "SECOND_AFTER", 60.0)
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        batch = [item for n in range(ingest.SECOND_AT - 1) for item in one(f"b{n}")] + one("held")
        with key_held(postgres_url, "held"):
            first = asyncio.create_task(log.append(batch))
            await async_wait_until(lambda: lock_waits(postgres_url) == 1)
            written = await asyncio.wait_for(log.append(one("other")), 10)
            assert written[0] is not None
            assert not first.done()
        assert all(w is not None for w in await first)


async def test_the_durable_callback_is_called_by_the_group_once_committed(postgres_url: str) -> None:
    """``durable`` gets the call's own result, from the group's task (so the caller's client can
    be answered before the caller wakes up), and is not called for a call that failed."""
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        seen: list[tuple[list[Appended | None], Any]] = []

        def durable(result: list[Appended | None]) -> None:
            seen.append((result, asyncio.current_task()))

        async def publish(key: str, version: int | None = None) -> list[Appended | None]:
            return await log.append(one(key), version=version, durable=durable)

        caller = asyncio.create_task(publish("1"))
        written = await caller
        assert len(seen) == 1
        assert seen[0][0] is written
        assert written[0] is not None
        assert seen[0][1] is not caller
        again = await publish("1")  # a duplicate is durable too
        assert again == [None]
        assert seen[1][0] is again

        def failing(result: list[Appended | None]) -> None:
            raise RuntimeError("the caller's own failure")

        # a callback that raises is the caller's: its call and the others are still answered
        both = await asyncio.gather(
            log.append(one("2"), durable=failing), log.append(one("3"), durable=durable)
        )
        assert all(w[0] is not None for w in both)
        assert seen[2][0] is both[1]
        with pytest.raises(IndexBehind):
            await publish("4", version=-1)  # matched against an older subscription version
        assert len(seen) == 3
