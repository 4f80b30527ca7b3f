"""A single SQLite writer thread with group commit.

Callers on the event loop submit small functions of a connection; the thread takes every job
queued at that moment, runs each inside its own savepoint (a failing job rolls back alone)
and commits them together in one transaction, then resolves each caller's future. With
``synchronous=FULL`` a commit is one fsync, shared by all the requests that arrived meanwhile.

Under load the thread competes with the event loop for the GIL: every SQLite statement and
every wake-up of the loop releases it, and taking it back from a busy loop can cost up to the
interpreter's switch interval (5 ms). A group therefore issues as few statements and wake-ups
as it can: jobs that undo their own partial writes (``guarded``) skip the savepoint, and all the
futures of one event loop are resolved by a single wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cebroker.errors import Overloaded
from cebroker.pipeline.checkpoint import Checkpointer

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]
log = logging.getLogger("cebroker.pipeline")


@dataclass(slots=True)
class _Pending:
    fn: Job
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    durable: bool
    guarded: bool


Outcome = tuple[asyncio.Future[Any], Any, BaseException | None]


def _resolve(outcomes: list[Outcome]) -> None:
    """Settle the futures of one event loop (runs on that loop)."""
    for future, result, error in outcomes:
        if future.done():
            continue  # the caller was cancelled meanwhile
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


class SqliteWriter:
    """Owns one connection to ``path`` in a dedicated thread; see the module docstring."""

    def __init__(self, path: Path, *, max_group: int = 512, max_queue: int = 20_000) -> None:
        self._path = path
        self._max_group = max_group
        self._max_queue = max_queue
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._durable = True  # the connection's current synchronous mode (writer thread only)
        self._checkpointer = Checkpointer(path)

    def start(self, init: Job) -> None:
        """Open the connection, run ``init`` (schema) in the thread and start serving jobs."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def main() -> None:
            try:
                conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("PRAGMA busy_timeout=10000")
                # Checkpoints run in their own thread (see checkpoint.py), not inside commits.
                conn.execute("PRAGMA wal_autocheckpoint=0")
                # After a burst, give back disk: the WAL is cut to this size when it restarts.
                conn.execute("PRAGMA journal_size_limit=67108864")
                conn.execute("BEGIN IMMEDIATE")
                init(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._serve(conn)

        self._thread = threading.Thread(target=main, name="cebroker-log-writer", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        self._checkpointer.start()

    def backlog(self) -> int:
        """Jobs waiting for the writer."""
        return self._queue.qsize()

    async def run(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        bounded: bool = False,
        durable: bool = True,
        guarded: bool = False,
    ) -> T:
        """Run ``fn`` in the writer's next transaction and return its result once committed.

        With ``bounded``, refuse (:class:`Overloaded`) when too many jobs are already waiting.
        A transaction holding only jobs that are not ``durable`` commits with
        ``synchronous=NORMAL``: in WAL mode that survives a process crash (the write is in the
        OS) but not a power cut, and skips the fsync. It suits bookkeeping whose loss only
        repeats work (a delivery confirmed but not yet deleted is delivered again).
        A ``guarded`` job promises that when it raises it has left no write behind (it runs its
        own savepoint), so the writer does not wrap it in one.
        """
        if self._thread is None:
            raise RuntimeError("the log writer is not running")
        if bounded and self._queue.qsize() >= self._max_queue:
            raise Overloaded("the event log is busy; retry shortly", retry_after=1.0)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Pending(fn, future, loop, durable, guarded))
        return await future

    def stop(self) -> None:
        """Finish the queued jobs, close the connection and end the thread."""
        self._checkpointer.stop()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _serve(self, conn: sqlite3.Connection) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is None:
                break
            group = [first]
            while len(group) < self._max_group:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                group.append(item)
            self._commit(conn, group)
        conn.close()

    def _commit(self, conn: sqlite3.Connection, group: list[_Pending]) -> None:
        durable = any(job.durable for job in group)
        if durable != self._durable:
            conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
            self._durable = durable
        try:
            conn.execute("BEGIN IMMEDIATE")
            outcomes = [self._run_job(conn, job) for job in group]
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.exception("event log commit failed")
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            outcomes = [(None, exc)] * len(group)
        self._wake(group, outcomes)

    @staticmethod
    def _run_job(conn: sqlite3.Connection, job: _Pending) -> tuple[Any, BaseException | None]:
        """Run one job of the open transaction; a failing job leaves no write behind."""
        if job.guarded:
            try:
                return job.fn(conn), None
            except Exception as exc:
                return None, exc
        conn.execute("SAVEPOINT job")
        try:
            result = job.fn(conn)
        except Exception as exc:
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
            return None, exc
        conn.execute("RELEASE job")
        return result, None

    @staticmethod
    def _wake(group: list[_Pending], outcomes: list[tuple[Any, BaseException | None]]) -> None:
        """Hand the outcomes to their event loops, one wake-up per loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
        for job, (result, error) in zip(group, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job.future, result, error))
        for loop, settled in by_loop.items():
            # A closed loop means nobody waits for these results any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, settled)
