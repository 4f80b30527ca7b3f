"""The one SQLite writer thread, with group commit.

Every write of the broker (events, deliveries, subscriptions, registry) runs here. Callers on
the event loop submit small functions of a connection; the thread takes every job queued at
that moment, runs each inside its own savepoint (a job that raises rolls back alone) and commits
them together in one transaction, then resolves each caller's future. A commit is one flush to
disk shared by all the requests that arrived meanwhile: made by ``COMMIT`` itself
(``synchronous=FULL``), or, given a ``flush``, by the :mod:`~cebroker.storage.sqlite.syncer`
thread while this one writes the next group (``synchronous=NORMAL`` plus the syncer's flush of
the WAL before any durable caller is answered).

A sqlite3 error raised by a job (rather than translated by it, as a constraint it expects) or by
the commit means the transaction cannot be trusted: the whole group is rolled back and every
job in it fails with the :class:`~cebroker.storage.errors.StorageUnavailable` that names the
cause. Nothing of a failed job is ever committed.

Under load the thread competes with the event loop for the GIL: every SQLite statement and
every wake-up of the loop releases it, and taking it back from a busy loop can cost up to the
interpreter's switch interval (5 ms). A group therefore issues as few statements and wake-ups
as it can: jobs that undo their own partial writes (``guarded``) skip the savepoint, and all the
futures of one event loop are resolved by a single wake-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cebroker.errors import Overloaded
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.sqlite.batches import batches
from cebroker.storage.sqlite.errors import translate
from cebroker.storage.sqlite.syncer import Syncer

T = TypeVar("T")
Job = Callable[[sqlite3.Connection], Any]
log = logging.getLogger("cebroker.storage")


@dataclass(slots=True)
class _Pending:
    fn: Job
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    durable: bool
    guarded: bool
    after: Callable[[Any], None] | None


Outcome = tuple[_Pending, Any, BaseException | None]


def _resolve(outcomes: list[Outcome], report: Callable[[], None] | None) -> None:
    """Settle the futures of one event loop (runs on that loop), in commit order, after
    ``report``ing the transaction's outcome."""
    if report is not None:
        report()
    for job, result, error in outcomes:
        if error is None and job.after is not None:
            # Committed: the follow-up runs even when the caller has been cancelled meanwhile.
            try:
                job.after(result)
            except Exception:
                log.exception("a follow-up of a committed write failed")
        if job.future.done():
            continue  # the caller was cancelled meanwhile
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)


class _Abort(Exception):
    """A job left the transaction unusable (SQLite rolled it back under it)."""


class SqliteWriter:
    """Owns the write connection in a dedicated thread; see the module docstring."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        *,
        flush: Callable[[], None] | None = None,
        max_group: int = 512,
        max_queue: int = 20_000,
    ) -> None:
        self._connect = connect
        #: Flushes the WAL off this thread (see the module docstring); None: ``COMMIT`` does.
        self.syncer = Syncer(flush) if flush is not None else None
        self._max_group = max_group
        self._max_queue = max_queue
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._durable = True  # the connection's current synchronous mode (writer thread only)
        # What to undo in memory if the current transaction does not commit (writer thread only).
        self._undo: list[Callable[[BaseException], None]] = []
        #: Called on the event loop, before the callers are answered, after each commit that
        #: changed rows (proof that the storage accepts writes) and with the error of each
        #: transaction that failed.
        self.on_written: Callable[[], None] | None = None
        self.on_failed: Callable[[StorageUnavailable], None] | None = None
        #: Called in the thread after each group's callers are answered, with no transaction
        #: open (maintenance that needs the write lock: the WAL's truncation).
        self.between: Callable[[sqlite3.Connection], None] | None = None

    @property
    def running(self) -> bool:
        """True between :meth:`start` and :meth:`stop`."""
        return self._thread is not None

    def start(self, init: Job) -> None:
        """Open the connection, run ``init`` in a transaction in the thread and start serving jobs.

        Raises:
            StorageUnavailable: the connection or ``init`` failed (translated sqlite3 error).
        """
        ready = threading.Event()
        failure: list[BaseException] = []
        self._durable = True

        def main() -> None:
            try:
                conn = self._connect()
                conn.execute("PRAGMA synchronous=FULL")
                conn.execute("BEGIN IMMEDIATE")
                init(conn)
                conn.execute("COMMIT")
                if self.syncer is not None:
                    # From here on the syncer flushes the WAL for the durable groups.
                    conn.execute("PRAGMA synchronous=NORMAL")
                    self._durable = False
            except sqlite3.Error as exc:
                failure.append(translate(exc))
                ready.set()
                return
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._serve(conn)

        if self.syncer is not None:
            self.syncer.start()
        self._thread = threading.Thread(target=main, name="cebroker-storage-writer", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            self._thread = None
            if self.syncer is not None:
                self.syncer.stop()
            raise failure[0]

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
        after: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``fn`` in the writer's next transaction and return its result once committed.

        ``durable``: see :mod:`cebroker.storage.sqlite.database` for the durability policy; a
        transaction holding only jobs that are not durable commits without the fsync.
        ``bounded``: refuse (:class:`Overloaded`) when too many jobs are already waiting.
        ``guarded``: ``fn`` promises that when it raises it has left no write behind (it runs
        its own savepoint), so the writer does not wrap it in one.
        ``after``: called on the event loop with the result once committed, before this call
        returns and in commit order across all writes (even if the caller was cancelled).
        """
        if self._thread is None:
            raise StorageUnavailable("storage closed", "the writer is not running")
        if bounded and self._queue.qsize() >= self._max_queue:
            raise Overloaded("the storage is busy; retry shortly", retry_after=1.0)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Pending(fn, future, loop, durable, guarded, after))
        return await future

    def on_rollback(self, undo: Callable[[BaseException], None]) -> None:
        """From a job: call ``undo`` with the error if the transaction it runs in does not commit
        (for results a job hands to callers outside its own return value)."""
        self._undo.append(undo)

    def stop(self) -> None:
        """Finish the queued jobs, close the connection and end the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _serve(self, conn: sqlite3.Connection) -> None:
        for group in batches(self._queue, self._max_group):
            self._commit(conn, group)
            if self.between is not None:
                self.between(conn)
        if self.syncer is not None:
            self.syncer.stop()  # the last groups' flush, before the connection closes
        conn.close()

    def _commit(self, conn: sqlite3.Connection, group: list[_Pending]) -> None:
        self._undo.clear()
        outcomes: list[tuple[Any, BaseException | None]]
        changes = conn.total_changes
        durable = any(job.durable for job in group)
        committed = False
        try:
            if self.syncer is None and durable != self._durable:
                conn.execute("PRAGMA synchronous=FULL" if durable else "PRAGMA synchronous=NORMAL")
                self._durable = durable
            conn.execute("BEGIN IMMEDIATE")
            outcomes = [self._run_job(conn, job) for job in group]
            conn.execute("COMMIT")
            committed = True
            report = self.on_written if conn.total_changes != changes else None
        except (sqlite3.Error, _Abort) as exc:
            error = translate(exc) if isinstance(exc, sqlite3.Error) else translate(_lost())
            self._rollback(conn)
            for undo in self._undo:
                undo(error)
            outcomes = [(None, error)] * len(group)
            report = functools.partial(self.on_failed, error) if self.on_failed is not None else None
        self._undo.clear()
        if self.syncer is None:
            self._wake(group, outcomes, report)
        else:
            wake = functools.partial(self._synced, group, outcomes, report)
            self.syncer.submit(committed and durable, wake)

    def _synced(
        self,
        group: list[_Pending],
        outcomes: list[tuple[Any, BaseException | None]],
        report: Callable[[], None] | None,
        error: OSError | None,
    ) -> None:
        """Wake ``group``'s callers once the syncer has flushed its commit (or failed to)."""
        if error is not None:
            failure = StorageUnavailable("cannot write to disk", f"the WAL could not be flushed: {error}")
            outcomes = [(None, failure)] * len(group)
            report = functools.partial(self.on_failed, failure) if self.on_failed is not None else None
        self._wake(group, outcomes, report)

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already
                conn.execute("ROLLBACK")

    @staticmethod
    def _run_job(conn: sqlite3.Connection, job: _Pending) -> tuple[Any, BaseException | None]:
        """Run one job of the open transaction; a failing job leaves no write behind. A sqlite3
        error propagates: it aborts the whole group."""
        outcome: tuple[Any, BaseException | None]
        if job.guarded:
            try:
                outcome = job.fn(conn), None
            except sqlite3.Error:
                raise
            except Exception as exc:
                outcome = None, exc
        else:
            conn.execute("SAVEPOINT job")
            try:
                outcome = job.fn(conn), None
            except sqlite3.Error:
                raise
            except Exception as exc:
                conn.execute("ROLLBACK TO job")
                outcome = None, exc
            conn.execute("RELEASE job")
        if not conn.in_transaction:
            raise _Abort
        return outcome

    @staticmethod
    def _wake(
        group: list[_Pending],
        outcomes: list[tuple[Any, BaseException | None]],
        report: Callable[[], None] | None,
    ) -> None:
        """Hand the outcomes to their event loops, one wake-up per loop."""
        by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
        for job, (result, error) in zip(group, outcomes, strict=True):
            by_loop.setdefault(job.loop, []).append((job, result, error))
        for loop, settled in by_loop.items():
            # A closed loop means nobody waits for these results any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, settled, report)


def _lost() -> sqlite3.Error:
    return sqlite3.OperationalError("the transaction was rolled back by SQLite during a write")
