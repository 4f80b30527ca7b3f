"""The WAL stays bounded: a writer that never pauses (a busy ingest, or rows rewritten again and
again) starves passive checkpoints, so the file grows for as long as it writes; the
checkpointer has the writer start it over once half its bound is in frames, readers
notwithstanding, so that the file is written over in place, and cuts back a WAL that is fully
copied once the writer is quiet."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cebroker.storage.sqlite.checkpoint import Checkpointer

MIB = 1024 * 1024


def connect(path: Path, journal_limit: int | None = None) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
    conn.execute("PRAGMA wal_autocheckpoint=0")  # as the broker's writer: checkpoints are ours
    if journal_limit is not None:  # as the broker's writer: a restarted WAL's file is cut back to it
        conn.execute(f"PRAGMA journal_size_limit={journal_limit}")
    return conn


def wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def sample(path: Path, seconds: float) -> list[int]:
    """The WAL's size every 10 ms for ``seconds``."""
    sizes: list[int] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sizes.append(wal_size(path))
        time.sleep(0.01)
    return sizes


@contextmanager
def busy(
    path: Path, checkpointer: Checkpointer, journal_limit: int | None = None, updates: int = 50
) -> Iterator[None]:
    """A writer rewriting rows without a pause (a retry storm rescheduling deliveries) and a
    reader reading in short transactions, as the broker's API reader does. Between two
    transactions the writer gives ``checkpointer`` its turn, as the broker's writer does; its
    connection has the ``journal_size_limit`` given (the broker's is the checkpointer's bound);
    each of its transactions rewrites ``updates`` rows."""
    setup = connect(path)
    setup.execute("PRAGMA journal_mode=WAL")
    setup.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, next_at REAL, body TEXT)")
    setup.execute("CREATE INDEX rows_due ON rows (next_at)")
    setup.execute("BEGIN")
    setup.executemany("INSERT INTO rows VALUES (?, 0, ?)", [(n, "x" * 200) for n in range(20_000)])
    setup.execute("COMMIT")
    setup.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    setup.close()
    stop = threading.Event()

    def write() -> None:
        conn = connect(path, journal_limit)
        n = 0
        while not stop.is_set():
            conn.execute("BEGIN IMMEDIATE")
            for _ in range(updates):
                n += 1
                conn.execute("UPDATE rows SET next_at = ? WHERE id = ?", (n, n % 20_000))
            conn.execute("COMMIT")
            checkpointer.between_writes(conn)
        conn.close()

    def read() -> None:
        conn = connect(path)
        while not stop.is_set():
            conn.execute("BEGIN")
            conn.execute("SELECT COUNT(*) FROM rows WHERE next_at > 0").fetchone()
            conn.execute("COMMIT")
            time.sleep(0.005)
        conn.close()

    threads = [threading.Thread(target=write), threading.Thread(target=read)]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join()


@contextmanager
def checkpoints(path: Path, limit: int, interval: float = 0.05) -> Iterator[Checkpointer]:
    """The broker's checkpointer on ``path``, a round every ``interval`` seconds."""
    checkpointer = Checkpointer(lambda: connect(path), path.with_name(path.name + "-wal"), interval, limit)
    checkpointer.start()
    try:
        yield checkpointer
    finally:
        checkpointer.stop()


@pytest.mark.alone
def test_passive_checkpoints_alone_let_a_busy_writer_grow_the_wal(tmp_path: Path) -> None:
    """Why the checkpointer starts the WAL over: passive checkpoints alone let the WAL of a
    writer that hardly pauses grow far past the bound the other test keeps."""
    path = tmp_path / "passive.db"
    with checkpoints(path, limit=1 << 40) as checkpointer, busy(path, checkpointer):
        sizes = sample(path, 3.0)
    assert max(sizes) > 16 * MIB


@pytest.mark.alone
def test_the_wal_is_started_over_within_its_bound_and_written_in_place(tmp_path: Path) -> None:
    """Under a busy writer and reader the WAL is started over (not truncated) once half its
    bound is in frames: its file stays near the bound, and is never cut back to nothing while
    the writer writes, so later transactions write over it in place instead of growing it."""
    path = tmp_path / "bounded.db"
    # The writer's transactions are small enough that a round every 50 ms comes before it adds
    # the bound (2 MiB) again, so that the bound rather than the round sets what the file can
    # reach. (With rounds every 10 ms, as the writer of the other test would need, a writer the
    # machine's load held back for two rounds looked quiet to them, and its WAL was cut back.)
    limit = 2 * MIB
    with (
        checkpoints(path, limit=limit, interval=0.05) as checkpointer,
        busy(path, checkpointer, journal_limit=limit, updates=10),
    ):
        deadline = time.monotonic() + 10
        while wal_size(path) < MIB and time.monotonic() < deadline:  # the file's first fill
            time.sleep(0.01)
        sizes = sample(path, 3.0)
        assert checkpointer.restarts > 1
        assert checkpointer.truncations == 0
    # The bound, plus what the writer adds before the writer's next turn.
    assert max(sizes) < 8 * MIB
    assert min(sizes) > MIB // 2


def test_a_quiet_wal_is_cut_back_to_nothing(tmp_path: Path) -> None:
    path = tmp_path / "quiet.db"
    with checkpoints(path, limit=1 << 40) as checkpointer:
        with busy(path, checkpointer):
            time.sleep(0.5)
        assert wal_size(path) > 0
        deadline = time.monotonic() + 10
        while (wal_size(path) > 0 or not checkpointer.truncations) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert wal_size(path) == 0
        assert checkpointer.truncations > 0


def test_a_restart_of_the_wal_counts_as_the_writer_at_work(tmp_path: Path) -> None:
    """A started-over WAL keeps its frame count until the next write, so two rounds around the
    writer's restart see the same count: the restart is the writer's work, not a quiet
    interval, and the WAL it is about to write over in place is not cut back."""
    path = tmp_path / "restart.db"
    writer = connect(path)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
    writer.executemany("INSERT INTO rows VALUES (?, ?)", [(n, "x" * 200) for n in range(2_000)])
    checkpointer = Checkpointer(lambda: connect(path), path.with_name(path.name + "-wal"), 60.0, 4096)
    rounds = connect(path)
    checkpointer.checkpoint(rounds)  # past half the bound: the writer is asked to start it over
    checkpointer.between_writes(writer)
    assert checkpointer.restarts == 1
    checkpointer.checkpoint(rounds)  # no frame since: the count is the same, the restart the only work
    assert checkpointer.truncations == 0
    assert wal_size(path) > 0
    checkpointer.checkpoint(rounds)  # a whole interval without the writer: now it is quiet
    assert checkpointer.truncations == 1
    rounds.close()
    writer.close()
