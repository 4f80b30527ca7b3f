"""One SQLite file: its lock, its connections, its pragmas and the durability policy.

Connections (each on a thread of its own, so sqlite3 never blocks the event loop):

* the **writer** (:mod:`cebroker.storage.sqlite.writer`) runs every write, of every store, with
  group commit;
* the **reader** runs the reads the API answers from (subscription queries, registry reads,
  delivery status and dead letters), each in one read transaction that ends with the call (a
  read transaction left open would keep the WAL from being reset); in WAL mode readers never
  block the writer nor wait for it, so API reads do not queue behind ingest commits;
* the **checkpointer** (:mod:`cebroker.storage.sqlite.checkpoint`) copies the WAL into the
  database file off the commit path and keeps it bounded, written over in place.

Durability policy: every write whose success is reported to a client or upstream (an event
answered 202 or acknowledged to its protocol source, a subscription or registry write, a
re-drive, the clean-up of a deleted subscription) is ``durable``: the call returns only once
the WAL holding its commit has been flushed to disk (``fdatasync``, by the writer's
:mod:`~cebroker.storage.sqlite.syncer` thread while the writer commits the next group; as
``synchronous=FULL`` would, without holding the write lock meanwhile), so the write survives a
crash and a power cut. Internal bookkeeping whose loss can only repeat work (a delivery
confirmed by its sink but not yet deleted is delivered again: at-least-once) is not
``durable``: a transaction holding only such writes waits for no flush; in WAL mode it survives
a process crash but may be lost to a power cut.

Every sqlite3 error becomes :class:`~cebroker.storage.errors.StorageUnavailable` here, and is
reported to the storage's :class:`~cebroker.storage.health.StorageHealth`, as is every commit
that changed rows.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from cebroker.storage.base import StorageOptions
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.health import StorageHealth
from cebroker.storage.sqlite.checkpoint import WAL_LIMIT, Checkpointer
from cebroker.storage.sqlite.errors import translate
from cebroker.storage.sqlite.lock import DatabaseLock
from cebroker.storage.sqlite.migrations import migrate
from cebroker.storage.sqlite.writer import Job, SqliteWriter

T = TypeVar("T")

log = logging.getLogger("cebroker.storage")

#: The WAL file is cut back to this size when it restarts after a burst (bytes): the bound the
#: checkpointer keeps it within (see :mod:`.checkpoint`).
JOURNAL_SIZE_LIMIT = WAL_LIMIT


class Database:
    """The connections to one SQLite file; see the module docstring.

    ``connection_factory`` is the sqlite3 connection class (a subclass can observe or fail
    calls in tests).
    """

    def __init__(
        self,
        path: Path,
        options: StorageOptions,
        health: StorageHealth,
        *,
        connection_factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self.path = path
        self.health = health
        self._options = options
        self._factory = connection_factory
        self._lock = DatabaseLock(path)
        self._prepared = False
        #: The WAL file, opened on its first flush (the writer's connection keeps it in being).
        self._wal: int | None = None
        self.writer = SqliteWriter(self._connect_writer, flush=self._flush_wal)
        self.writer.on_written = health.succeeded
        self.writer.on_failed = health.failed
        self._checkpointer = Checkpointer(
            self._connect, path.with_name(path.name + "-wal"), limit=JOURNAL_SIZE_LIMIT
        )
        self.writer.between = self._checkpointer.between_writes
        self._reader: ThreadPoolExecutor | None = None
        self._read_conn: sqlite3.Connection | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Take the lock, create the file if needed, switch it to WAL and migrate every schema;
        idempotent. Synchronous: the CLI calls it before the server starts."""
        if self._prepared:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(
                "cannot create the database directory", f"{self.path.parent}: {exc.strerror}"
            ) from exc
        self._lock.acquire()
        try:
            self._create_private()
            conn = self._connect()
            try:
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageUnavailable("cannot use WAL mode", f"{self.path}: journal mode is {mode}")
                migrate(conn, self.path)
            finally:
                conn.close()
        except sqlite3.Error as exc:
            self._lock.release()
            raise translate(exc) from exc
        except BaseException:
            self._lock.release()
            raise
        self._prepared = True

    def _create_private(self) -> None:
        """Create the database file, empty, readable and writable by its owner only (0600)
        before SQLite opens it: SQLite gives its ``-wal`` and ``-shm`` files the mode of the
        database file, and the default would let every local user read the events, the
        subscriptions and the dead letters. A file that exists keeps its mode; one that others
        may read is reported."""
        try:
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            mode = self.path.stat().st_mode & 0o777
            if mode & 0o077:
                log.warning(
                    "the database %s has mode %04o: other users may read it; chmod 600 it and its"
                    " -wal, -shm and .lock files",
                    self.path,
                    mode,
                )
        except OSError as exc:
            raise StorageUnavailable("cannot create the database", f"{self.path}: {exc.strerror}") from exc

    async def open(self, init: Job) -> None:
        """Prepare if needed, then start the writer (running ``init`` first), the reader, the
        checkpointer and the recovery probe; idempotent."""
        if self._reader is not None:
            return
        # The reader's thread also runs the blocking steps of opening and closing, so they need
        # no other executor (the loop's default one may be shutting down when close() runs).
        reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cebroker-storage-reader")
        self._reader = reader
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(reader, self.prepare)
            await loop.run_in_executor(reader, self.writer.start, init)
            self._read_conn = await loop.run_in_executor(reader, self._connect_reader)
        except sqlite3.Error as exc:
            await self.close()
            raise translate(exc) from exc
        except BaseException:
            await self.close()
            raise
        self._checkpointer.start()
        self.health.watch(self._probe)

    async def close(self) -> None:
        """Finish queued writes, close every connection and release the lock; idempotent."""
        await self.health.stop()
        reader, self._reader = self._reader, None
        if reader is not None:
            await asyncio.get_running_loop().run_in_executor(reader, self._shut_down)
            reader.shutdown(wait=True)
        self._lock.release()
        self._prepared = False

    def _shut_down(self) -> None:
        self._checkpointer.stop()
        self.writer.stop()
        wal, self._wal = self._wal, None
        if wal is not None:
            os.close(wal)
        conn, self._read_conn = self._read_conn, None
        if conn is not None:
            conn.close()

    def _flush_wal(self) -> None:
        """Make every WAL frame written so far durable (the writer's syncer thread). A flush of
        the file flushes what any descriptor of it wrote: SQLite's own writes included."""
        if self._wal is None:
            self._wal = os.open(self.path.with_name(self.path.name + "-wal"), os.O_RDONLY | os.O_CLOEXEC)
        os.fdatasync(self._wal)

    # -- calls -------------------------------------------------------------------------------

    async def write(
        self,
        fn: Callable[[sqlite3.Connection], T],
        *,
        durable: bool = True,
        bounded: bool = False,
        guarded: bool = False,
        after: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``fn`` in the writer's next transaction (see :meth:`SqliteWriter.run`)."""
        return await self.writer.run(fn, durable=durable, bounded=bounded, guarded=guarded, after=after)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one read transaction on the reader connection."""
        if self._reader is None:
            raise StorageUnavailable("storage closed", f"{self.path} is not open")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._reader, self._read, fn)
        except StorageUnavailable as exc:
            self.health.failed(exc)
            raise

    # -- connection side ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: transactions are explicit (BEGIN ... COMMIT).
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self._options.busy_timeout,
            factory=self._factory,
        )
        conn.execute(f"PRAGMA busy_timeout={int(self._options.busy_timeout * 1000)}")
        return conn

    def _connect_writer(self) -> sqlite3.Connection:
        conn = self._connect()
        conn.execute("PRAGMA foreign_keys=ON")
        # Checkpoints run in their own thread (see checkpoint.py), not inside commits.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
        # A group's statements need a statement journal (their savepoints) and transient
        # tables; on disk (SQLite's default) that was a temporary file created, unlinked and
        # closed in every transaction: four system calls and a file per group commit. They are
        # as large as one group's rows, so memory holds them.
        conn.execute("PRAGMA temp_store=MEMORY")
        return conn

    def _connect_reader(self) -> sqlite3.Connection:
        conn = self._connect()
        conn.execute("PRAGMA query_only=ON")
        return conn

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._read_conn
        if conn is None:
            raise StorageUnavailable("storage closed", f"{self.path} is not open")
        try:
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc) from exc

    async def _probe(self) -> None:
        """The recovery probe: a tiny durable write."""
        await self.write(
            lambda conn: (
                conn.execute(
                    "INSERT OR REPLACE INTO storage_probe (id, at) VALUES (1, ?)", (time.time(),)
                ).rowcount
            )
        )
