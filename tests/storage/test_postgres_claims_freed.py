"""PostgreSQL's deliveries schema step 10: the claims a completion (a retry, a dead letter)
frees are counted apart from the claims row, which only claims lock; so a completion never
waits for a claim of another instance, and a claim never counts a release that is not
committed (the concurrency holds)."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from cebroker.storage import Incoming, Limits
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.migrations import latest
from storage.support import DELIVERIES_VERSION, at_deliveries_step, claims_held, opened

pytestmark = pytest.mark.postgres


async def test_a_completion_does_not_wait_for_a_claim_under_way(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        await log.append([Incoming({"id": str(n)}, "/s", str(n), ("a",)) for n in range(4)])
        claimed, _ = await log.due("a", 2, Limits(4))
        assert len(claimed) == 2
        with psycopg.connect(postgres_url) as other:
            # another instance's claim of "a", under way: it holds the claims row until it commits
            other.execute("SELECT held FROM pipeline_claims WHERE subscription = 'a' FOR UPDATE")
            await asyncio.wait_for(log.complete([(d.id, d.event_seq, "a") for d in claimed]), 10)
            other.rollback()
        assert claims_held(postgres_url) == {"a": 0}
        assert len((await log.due("a", 4, Limits(4)))[0]) == 2


async def test_a_release_not_yet_committed_is_not_counted_as_free(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as storage:
        log = storage.deliveries
        await log.append([Incoming({"id": str(n)}, "/s", str(n), ("a",)) for n in range(4)])
        claimed, _ = await log.due("a", 4, Limits(2))
        assert len(claimed) == 2  # the concurrency
        with psycopg.connect(postgres_url) as other:
            other.execute("SELECT cebroker_complete(%s::bigint[], 0, 0)", ([claimed[0].id],))
            # the completion is under way, not committed: the slot is not free yet
            assert (await log.due("a", 4, Limits(2)))[0] == []
            other.commit()
        assert claims_held(postgres_url) == {"a": 1}
        more, _ = await log.due("a", 4, Limits(2))
        assert len(more) == 1
        assert claims_held(postgres_url) == {"a": 2}


async def test_upgrading_from_step_9_keeps_the_count_of_claims(postgres_url: str) -> None:
    at_deliveries_step(postgres_url, 9)
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # claimed under step 9
        conn.execute("INSERT INTO broker_instances (id, host, pid, heartbeat) VALUES ('old', 'h', 1, now())")
        conn.execute(
            "SELECT * FROM cebroker_append(extract(epoch FROM now()), 0, NULL, ARRAY['', '', '']::text[],"
            " ARRAY['/s', '/s', '/s'], ARRAY['1', '2', '3'], ARRAY['{}', '{}', '{}'], NULL,"
            " ARRAY[1, 2, 3], ARRAY['a', 'a', 'a'], NULL, false, 0, 1)"
        ).fetchall()
        rows = conn.execute(
            "SELECT * FROM cebroker_claim_many(ARRAY['a'], 'old', extract(epoch FROM now()) + 1,"
            " ARRAY[2], ARRAY[3], ARRAY[NULL]::float8[])"
        ).fetchall()
        old = [int(r[1]) for r in rows if r[1] is not None]
        assert len(old) == 2
    async with opened(PostgresStorage(postgres_url)) as storage:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            assert conn.execute(DELIVERIES_VERSION).fetchone() == (latest()["deliveries"],)
        assert claims_held(postgres_url) == {"a": 2}
        log = storage.deliveries
        assert len((await log.due("a", 3, Limits(3)))[0]) == 1  # the third slot, and no more
        assert claims_held(postgres_url) == {"a": 3}
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("SELECT cebroker_complete(%s::bigint[], 0, 0)", (old,))
        assert claims_held(postgres_url) == {"a": 1}
