"""Durable commits flushed off the writer's thread (cebroker.storage.sqlite.syncer): a durable
caller is answered only after a flush that began once its commit was made, the writer commits
the next group meanwhile, callers are answered in commit order, and a failed flush fails the
durable callers it covered. The writer runs over a real SQLite file; the flush is the test's,
so that it can be held and counted."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.waiting import async_wait_until

from cebroker.storage import StorageUnavailable
from cebroker.storage.sqlite.writer import SqliteWriter

TIMEOUT = 10.0


class Flush:
    """A flush of the WAL that counts itself, can be held until released, or fail once."""

    def __init__(self, wal: Path) -> None:
        self.wal = wal
        self.count = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_next = False

    def __call__(self) -> None:
        self.entered.set()
        assert self.release.wait(TIMEOUT)
        if self.fail_next:
            self.fail_next = False
            raise OSError(5, "Input/output error")
        fd = os.open(self.wal, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
        self.count += 1

    def hold(self) -> None:
        self.entered.clear()
        self.release.clear()


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[SqliteWriter, Flush]]:
    path = tmp_path / "w.db"
    flush = Flush(tmp_path / "w.db-wal")

    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    writer = SqliteWriter(connect, flush=flush)
    writer.start(lambda conn: conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
    try:
        yield writer, flush
    finally:
        flush.release.set()
        writer.stop()


def _insert(value: int, ran: threading.Event | None = None) -> Callable[[sqlite3.Connection], int]:
    def job(conn: sqlite3.Connection) -> int:
        conn.execute("INSERT INTO t VALUES (?)", (value,))
        if ran is not None:
            ran.set()
        return value

    return job


async def test_a_durable_caller_is_answered_after_the_flush_of_its_commit(
    writer: tuple[SqliteWriter, Flush],
) -> None:
    sqlite, flush = writer
    flush.hold()
    first = asyncio.ensure_future(sqlite.run(_insert(1)))
    await asyncio.to_thread(flush.entered.wait, TIMEOUT)
    # The flush covering the commit is under way, not done: the caller is not answered.
    assert not first.done()
    # The writer is not held by it: the next group commits meanwhile and waits for the next
    # flush, which starts only after its commit.
    ran = threading.Event()
    second = asyncio.ensure_future(sqlite.run(_insert(2, ran)))
    assert await asyncio.to_thread(ran.wait, TIMEOUT)
    await async_wait_until(lambda: sqlite.syncer is not None and sqlite.syncer.pending() >= 1)
    flushes_before = flush.count
    flush.release.set()
    assert await asyncio.wait_for(first, TIMEOUT) == 1
    assert await asyncio.wait_for(second, TIMEOUT) == 2
    assert flushes_before == 0
    assert flush.count == 2  # the second commit came after the first flush had begun


async def test_callers_are_answered_in_commit_order(writer: tuple[SqliteWriter, Flush]) -> None:
    sqlite, flush = writer
    answered: list[str] = []
    flush.hold()
    durable = asyncio.ensure_future(sqlite.run(_insert(1), after=lambda _: answered.append("durable")))
    await asyncio.to_thread(flush.entered.wait, TIMEOUT)
    # Bookkeeping needs no flush, but it committed after the durable write: it is answered after.
    later = asyncio.ensure_future(
        sqlite.run(_insert(2), durable=False, after=lambda _: answered.append("bookkeeping"))
    )
    await async_wait_until(lambda: sqlite.syncer is not None and sqlite.syncer.pending() >= 1)
    assert answered == []
    flush.release.set()
    await asyncio.wait_for(asyncio.gather(durable, later), TIMEOUT)
    assert answered == ["durable", "bookkeeping"]


async def test_bookkeeping_alone_waits_for_no_flush(writer: tuple[SqliteWriter, Flush]) -> None:
    sqlite, flush = writer
    await sqlite.run(_insert(1))
    count = flush.count
    flush.hold()  # a flush now would hold the caller: it must not be needed
    assert await asyncio.wait_for(sqlite.run(_insert(2), durable=False), TIMEOUT) == 2
    assert flush.count == count
    assert not flush.entered.is_set()


async def test_a_failed_flush_fails_the_durable_callers_it_covered(
    writer: tuple[SqliteWriter, Flush],
) -> None:
    sqlite, flush = writer
    failures: list[StorageUnavailable] = []
    sqlite.on_failed = failures.append
    flush.fail_next = True
    with pytest.raises(StorageUnavailable, match="could not be flushed"):
        await asyncio.wait_for(sqlite.run(_insert(1)), TIMEOUT)
    assert len(failures) == 1
    # The next flush works: writes are answered again.
    assert await asyncio.wait_for(sqlite.run(_insert(2)), TIMEOUT) == 2
