"""PostgreSQL specifics: migrations raced by several instances starting at once, a database
written by a newer release, and an outage of the server (503 with the cause, not ready, and
recovery by itself once the server is back)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from servers.postgres import PostgresServer

from cebroker.storage import Incoming, SchemaTooNew, StorageUnavailable
from cebroker.storage.postgres import PostgresStorage
from cebroker.storage.postgres.migrations import latest
from storage.support import opened

pytestmark = pytest.mark.postgres


def test_several_prepares_racing_on_a_fresh_database_migrate_once(postgres_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(6)

    def prepare() -> None:
        try:
            start.wait()
            PostgresStorage(postgres_url).prepare()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT component, version FROM schema_versions").fetchall()
        assert dict(rows) == latest()
        assert conn.execute("SELECT count(*) FROM pipeline_backlog").fetchone() == (64,)


def test_a_database_of_a_newer_release_is_refused_untouched(postgres_url: str) -> None:
    PostgresStorage(postgres_url).prepare()
    with psycopg.connect(postgres_url) as conn:
        conn.execute("UPDATE schema_versions SET version = 99 WHERE component = 'deliveries'")
    with pytest.raises(SchemaTooNew, match="deliveries schema version 99"):
        PostgresStorage(postgres_url).prepare()


def test_an_unreachable_server_is_storage_unavailable_without_the_password(tmp_path: Path) -> None:
    storage = PostgresStorage("postgresql://broker:hunter2@127.0.0.1:1/cebroker")
    with pytest.raises(StorageUnavailable) as info:
        storage.prepare()
    assert info.value.cause == "database connection lost"
    assert "hunter2" not in str(info.value)


@pytest.mark.slow
async def test_a_server_restart_is_503_then_recovers_by_itself(
    server_factory: Callable[..., PostgresServer],
) -> None:
    server = server_factory(PostgresServer)
    storage = PostgresStorage(server.create_database())
    async with opened(storage):
        log = storage.deliveries
        await log.append([Incoming({"id": "1"}, "/s", "1", ("a",))])
        server.stop()
        with pytest.raises(StorageUnavailable) as info:
            await log.append([Incoming({"id": "2"}, "/s", "2", ("a",))])
        assert info.value.retry_after <= 1.0
        assert not storage.health.ok
        assert storage.health.cause in ("database connection lost", "database restarting")
        server.start()
        deadline = time.monotonic() + 30
        while not storage.health.ok:
            assert time.monotonic() < deadline, storage.health.cause
            await asyncio.sleep(0.1)
        (written,) = await log.append([Incoming({"id": "2"}, "/s", "2", ("a",))])
        assert written is not None
        assert await log.pending() == 2
