"""The group-commit writer: jobs share transactions, a failing job rolls back alone, and a full
queue pushes back (architecture invariants "accepted means durable", "bounded memory")."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from cebroker.errors import Overloaded
from cebroker.storage import StorageUnavailable
from cebroker.storage.sqlite.writer import SqliteWriter
from storage.faults import sqlite_error


def _init(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")


def _writer(path: Path, *, max_group: int = 512, max_queue: int = 20_000) -> SqliteWriter:
    def connect() -> sqlite3.Connection:
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    return SqliteWriter(connect, max_group=max_group, max_queue=max_queue)


async def test_jobs_are_grouped_and_a_failing_job_rolls_back_alone(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "w.db")
    writer.start(_init)
    gate = threading.Event()
    try:
        # The first job holds the thread, so the next ones queue up and commit as one group.
        blocker = asyncio.ensure_future(writer.run(lambda conn: gate.wait(5)))
        await asyncio.sleep(0.05)

        def insert(value: int) -> Callable[[sqlite3.Connection], int]:
            def job(conn: sqlite3.Connection) -> int:
                conn.execute("INSERT INTO t VALUES (?)", (value,))
                if value == 3:
                    raise ValueError("bad job")
                return value

            return job

        jobs = [asyncio.ensure_future(writer.run(insert(v))) for v in range(6)]
        gate.set()
        await blocker
        results = await asyncio.gather(*jobs, return_exceptions=True)
        assert results[:3] == [0, 1, 2]
        assert isinstance(results[3], ValueError)
        assert results[4:] == [4, 5]
        rows = await writer.run(lambda conn: [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")])
        assert rows == [0, 1, 2, 4, 5]
    finally:
        gate.set()
        writer.stop()


async def test_a_full_queue_refuses_bounded_jobs(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "w.db", max_queue=2)
    writer.start(_init)
    gate = threading.Event()
    try:
        blocker = asyncio.ensure_future(writer.run(lambda conn: gate.wait(5)))
        await asyncio.sleep(0.05)
        queued = [asyncio.ensure_future(writer.run(lambda conn: None)) for _ in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as info:
            await writer.run(lambda conn: None, bounded=True)
        assert info.value.retry_after > 0
        gate.set()
        await asyncio.gather(blocker, *queued)
        assert await writer.run(lambda conn: 7, bounded=True) == 7
    finally:
        gate.set()
        writer.stop()


async def test_a_guarded_job_failing_alone_keeps_the_group(tmp_path: Path) -> None:
    """A ``guarded`` job runs without the writer's savepoint; when it undoes its own writes and
    raises, the other jobs of its group still commit and it alone fails."""
    writer = _writer(tmp_path / "w.db")
    writer.start(_init)
    gate = threading.Event()
    try:
        blocker = asyncio.ensure_future(writer.run(lambda conn: gate.wait(5)))
        await asyncio.sleep(0.05)

        def guarded_failure(conn: sqlite3.Connection) -> None:
            conn.execute("SAVEPOINT own")
            conn.execute("INSERT INTO t VALUES (99)")
            conn.execute("ROLLBACK TO own")
            conn.execute("RELEASE own")
            raise ValueError("guarded job failed")

        def insert(value: int) -> Callable[[sqlite3.Connection], int]:
            return lambda conn: conn.execute("INSERT INTO t VALUES (?)", (value,)).rowcount

        jobs = [
            asyncio.ensure_future(writer.run(insert(1), guarded=True)),
            asyncio.ensure_future(writer.run(guarded_failure, guarded=True)),
            asyncio.ensure_future(writer.run(insert(2))),
        ]
        gate.set()
        await blocker
        results = await asyncio.gather(*jobs, return_exceptions=True)
        assert results[0] == 1
        assert results[2] == 1
        assert isinstance(results[1], ValueError)
        rows = await writer.run(lambda conn: [r[0] for r in conn.execute("SELECT x FROM t ORDER BY x")])
        assert rows == [1, 2]
    finally:
        gate.set()
        writer.stop()


async def test_a_sqlite_error_in_a_job_fails_the_whole_group(tmp_path: Path) -> None:
    """A sqlite3 error (the storage failing, not one job's input) rolls the whole transaction
    back: every job of the group fails with StorageUnavailable naming the cause, nothing of it
    is stored, and registered undo functions are called with that error."""
    writer = _writer(tmp_path / "w.db")
    writer.start(_init)
    gate = threading.Event()
    undone: list[BaseException] = []
    try:
        blocker = asyncio.ensure_future(writer.run(lambda conn: gate.wait(5)))
        await asyncio.sleep(0.05)

        def insert(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO t VALUES (1)")
            writer.on_rollback(undone.append)

        def disk_full(conn: sqlite3.Connection) -> None:
            raise sqlite_error("disk full")

        jobs = [asyncio.ensure_future(writer.run(fn)) for fn in (insert, disk_full, insert)]
        gate.set()
        await blocker
        results = await asyncio.gather(*jobs, return_exceptions=True)
        assert all(isinstance(r, StorageUnavailable) and r.cause == "disk full" for r in results)
        assert results[0] is results[1]
        assert undone == [results[0]]  # the third job never ran
        assert await writer.run(lambda conn: conn.execute("SELECT count(*) FROM t").fetchone()[0]) == 0
    finally:
        gate.set()
        writer.stop()


async def test_after_runs_once_committed_in_commit_order(tmp_path: Path) -> None:
    """``after`` sees each committed result before its call returns, in commit order, even when
    the caller gave up waiting; a job that failed has no ``after``."""
    writer = _writer(tmp_path / "w.db")
    writer.start(_init)
    gate = threading.Event()
    seen: list[int] = []
    try:
        blocker = asyncio.ensure_future(writer.run(lambda conn: gate.wait(5)))
        await asyncio.sleep(0.05)

        def insert(value: int) -> Callable[[sqlite3.Connection], int]:
            def job(conn: sqlite3.Connection) -> int:
                conn.execute("INSERT INTO t VALUES (?)", (value,))
                if value == 2:
                    raise ValueError("refused")
                return value

            return job

        async def call(value: int) -> tuple[int, list[int]]:
            result = await writer.run(insert(value), after=seen.append)
            return result, list(seen)

        jobs = [asyncio.ensure_future(call(v)) for v in range(5)]
        await asyncio.sleep(0)
        jobs[3].cancel()  # its write still commits, and is still published
        gate.set()
        await blocker
        results = await asyncio.gather(*jobs, return_exceptions=True)
        assert seen == [0, 1, 3, 4]
        for value in (0, 1, 4):
            outcome = results[value]
            assert isinstance(outcome, tuple)
            result, published = outcome
            assert result == value
            assert value in published  # published by the time the call returned
        assert isinstance(results[2], ValueError)
        assert isinstance(results[3], asyncio.CancelledError)
    finally:
        gate.set()
        writer.stop()


async def test_a_stopped_writer_refuses_with_storage_unavailable(tmp_path: Path) -> None:
    writer = _writer(tmp_path / "w.db")
    with pytest.raises(StorageUnavailable, match="closed"):
        await writer.run(lambda conn: None)
