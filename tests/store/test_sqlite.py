"""What only the SQLite store promises: one file that survives restarts, WAL with
``synchronous=FULL``, a per-component schema version, and sqlite3 errors translated."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cebroker.store import StoreError, Subscription, SubscriptionChange, SubscriptionQuery
from cebroker.store.sqlite import SqliteSubscriptionStore


def make(sid: str, **kw: Any) -> Subscription:
    return dataclasses.replace(Subscription(id=sid, protocol="HTTP", sink=f"http://127.0.0.1:9/{sid}"), **kw)


async def test_survives_reopen_and_uses_wal(tmp_path: Path) -> None:
    """One file, created on first open, surviving restarts; WAL + synchronous=FULL."""
    path = tmp_path / "nested" / "dir" / "subs.db"
    first = SqliteSubscriptionStore(path)
    await first.open()
    await first.create(make("keep", types=("t",)))
    await first.close()
    await first.close()  # idempotent
    assert path.exists()
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    second = SqliteSubscriptionStore(path)
    await second.open()
    try:
        assert [s.id for s in (await second.query(SubscriptionQuery(type="t"))).items] == ["keep"]
    finally:
        await second.close()


async def test_not_a_database_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    store = SqliteSubscriptionStore(path)
    with pytest.raises(StoreError):
        await store.open()
    with pytest.raises(StoreError):
        await store.get("x")  # never opened


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)")
        raw.execute("INSERT INTO schema_versions VALUES ('subscriptions', 99)")
    with pytest.raises(StoreError, match="newer"):
        await SqliteSubscriptionStore(path).open()


async def test_sqlite_errors_become_store_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sqlite3 exceptions are translated at the store's boundary; a failed write publishes nothing."""
    store = SqliteSubscriptionStore(tmp_path / "s.db")
    await store.open()
    seen: list[SubscriptionChange] = []
    store.changes.subscribe(seen.append)

    def disk_failure(subscription: Subscription) -> Subscription:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_create_sync", disk_failure)
    try:
        with pytest.raises(StoreError, match="disk I/O error"):
            await store.create(make("a"))
        assert seen == []
    finally:
        await store.close()
