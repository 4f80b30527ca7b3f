"""The delivery table is vacuumed as it drains (:mod:`cebroker.storage.postgres.vacuum`): a
claim walks the due index over the entries of every delivery completed since the last vacuum,
and autovacuum looks at a table only once a minute by default."""

from __future__ import annotations

import psycopg
import pytest
from support.waiting import async_wait_until

from cebroker.storage import Incoming
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.vacuum import MIN_DEAD, Thresholds, Vacuum
from storage.support import opened

pytestmark = pytest.mark.postgres

STATS = (
    "SELECT n_live_tup, n_dead_tup, vacuum_count FROM pg_stat_user_tables"
    " WHERE relname = 'pipeline_deliveries'"
)


def _stats(url: str) -> tuple[int, int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(STATS).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


async def _completed(storage: PostgresStorage, url: str, count: int, keep: int = 0) -> None:
    """``count`` deliveries appended, all but ``keep`` of them deleted as completed ones are;
    until the server's statistics count them."""
    await storage.deliveries.append([Incoming({"id": str(n)}, "/s", str(n), ("a",)) for n in range(count)])
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM pipeline_deliveries WHERE id NOT IN"
            " (SELECT id FROM pipeline_deliveries ORDER BY id LIMIT %s)",
            (keep,),
        )
    await async_wait_until(
        lambda: _stats(url)[1] >= count - keep, 10, "the server's statistics count the dead rows"
    )


def test_a_vacuum_is_due_past_a_floor_and_a_share_of_the_live_rows() -> None:
    thresholds = Thresholds(min_dead=100, scale=0.2)
    assert not thresholds.due(0, 99)
    assert thresholds.due(0, 100)
    assert not thresholds.due(1000, 199)
    assert thresholds.due(1000, 200)


async def test_dead_rows_past_the_thresholds_are_vacuumed(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as storage:
        await _completed(storage, postgres_url, 300, keep=100)
        vacuum = Vacuum(storage._db, Thresholds(min_dead=150, scale=0.2))
        assert await vacuum.vacuum_if_due()
        _, dead, vacuums = _stats(postgres_url)
        assert vacuums >= 1
        assert dead < 200


async def test_fewer_dead_rows_than_the_share_of_the_live_ones_are_left(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as storage:
        await _completed(storage, postgres_url, 300, keep=200)
        await async_wait_until(lambda: _stats(postgres_url)[0] >= 200, 10, "live rows counted")
        vacuum = Vacuum(storage._db, Thresholds(min_dead=50, scale=0.6))  # 100 dead < 0.6 x 200 live
        assert not await vacuum.vacuum_if_due()
        assert _stats(postgres_url)[2] == 0


async def test_an_open_storage_vacuums_the_table_by_itself(postgres_url: str) -> None:
    async with opened(PostgresStorage(postgres_url)) as storage:
        await _completed(storage, postgres_url, MIN_DEAD + 500)
        await async_wait_until(
            lambda: _stats(postgres_url)[2] >= 1, 20, "the instance's vacuum of the delivery table"
        )
