"""WAL checkpoints off the commit path, and a WAL that stays bounded and is written in place.

By default SQLite checkpoints inside whichever commit pushes the WAL past 1,000 pages: that
commit then copies the pages into the database file and fsyncs it, and every request waiting
on it is held up by tens of milliseconds. The writer turns automatic checkpoints off and this
thread, with a connection of its own, runs a ``PASSIVE`` checkpoint (one that never waits for or
blocks the writer) at a fixed interval instead.

A passive checkpoint copies pages but never starts the WAL over: SQLite does that only when a
write finds every frame copied and no reader using one, and a writer that commits continuously
(a busy ingest, or a retry storm) always has frames the last checkpoint did not copy yet, so
the WAL would grow for as long as it writes. Once it holds more than half its ``limit`` in
frames, the writer's own thread therefore runs a ``RESTART`` checkpoint between two transactions
(:meth:`Checkpointer.between_writes`): the next transaction writes the WAL from its beginning
again. Another connection would have to take the write lock from a writer that never lets go of
it for long (SQLite's busy handler is not fair), while the writer itself has nothing to wait for
but the readers of older snapshots, whose read transactions last one call each (see
:mod:`cebroker.storage.sqlite.database`). The passive rounds have copied most pages by then, so
the writer's pause is short.

The file is kept: a restarted WAL is written over in place, and a flush of pages written over
costs the disk a quarter to a third less than one of pages that make the file longer
(``fdatasync`` must then commit the file's new size as well), on every durable commit. SQLite
cuts a restarted file back to ``limit`` (``journal_size_limit``) if a burst made it longer.

A WAL that a passive round finds all copied, with no frame added and no restart begun since
the round before (the writer has been quiet for a whole interval), is cut back to zero by this
thread: then nothing is left to copy, and the truncation is tried without waiting for anyone (a busy writer or
reader just postpones it to the next round). Left alone, a WAL keeps the size of its largest
burst, and its pages count twice on the disk: once in the WAL, once in the database file they
were copied to.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("cebroker.storage")

#: The WAL's bound (bytes): started over once half of it is in frames, its file cut back to it.
WAL_LIMIT = 16 * 1024 * 1024
#: The bytes of one WAL frame beside its page: its header.
FRAME_HEADER = 24


class Checkpointer:
    """Checkpoints the WAL of the database ``connect`` opens every ``interval`` seconds until
    stopped; has the writer start it over once its frames pass half of ``limit`` bytes, and
    truncates ``wal`` (the WAL file) once the writer is quiet."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        wal: Path,
        interval: float = 1.0,
        limit: int = WAL_LIMIT,
    ) -> None:
        self._connect = connect
        self._wal = wal
        self._interval = interval
        self._limit = limit
        #: The WAL's frames at the previous round (-1: none yet), to tell a quiet writer.
        self._frames = -1
        #: The writer's restarts of the WAL begun, and their count at the previous round: a
        #: started-over WAL keeps its frame count until the next write, so the frames alone
        #: would take the restart's interval for a quiet one.
        self._restarting = 0
        self._restarting_seen = 0
        #: Bytes of one WAL frame (a page and its header), once read.
        self._frame_size: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wanted = threading.Event()
        #: Checkpoints that truncated the WAL, and that started it over (for tests and
        #: diagnostics).
        self.truncations = 0
        self.restarts = 0

    def start(self) -> None:
        """Start the background thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="cebroker-storage-checkpoint", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (a checkpoint in progress finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _wal_size(self) -> int:
        try:
            return os.stat(self._wal).st_size
        except OSError:
            return 0

    def _run(self) -> None:
        try:
            conn = self._connect()
            conn.execute("PRAGMA busy_timeout=1000")
        except sqlite3.Error as exc:
            log.warning("WAL checkpoints are off: %s", exc)
            return
        try:
            while not self._stop.wait(self._interval):
                self.checkpoint(conn)
        finally:
            conn.close()

    def checkpoint(self, conn: sqlite3.Connection) -> None:
        """One round of this thread: a passive checkpoint; then the WAL's truncation if it is
        all copied and the writer has added nothing since the previous round, else, if its
        frames are past half its bound, a request that the writer starts it over."""
        try:
            (busy, frames, copied) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            restarting = self._restarting
            quiet = frames == self._frames and restarting == self._restarting_seen
            self._frames = frames
            self._restarting_seen = restarting
            if quiet and not busy and frames == copied and self._wal_size() > 0:
                # The writer may stay quiet for long: this thread cuts the WAL back itself.
                conn.execute("PRAGMA busy_timeout=0")  # never wait for anyone for this one
                try:
                    self._truncate(conn)
                finally:
                    conn.execute("PRAGMA busy_timeout=1000")
            elif frames * self._frame_bytes(conn) > self._limit // 2:
                self._wanted.set()
        except sqlite3.Error as exc:  # e.g. busy: the next round catches up
            log.debug("WAL checkpoint skipped: %s", exc)

    def _frame_bytes(self, conn: sqlite3.Connection) -> int:
        # Read once: a database in WAL mode cannot change its page size.
        if self._frame_size is None:
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
            self._frame_size = int(page_size) + FRAME_HEADER
        return self._frame_size

    def between_writes(self, conn: sqlite3.Connection) -> None:
        """Run by the writer's thread between two transactions: start the WAL over if this
        thread found it past its bound (the next transaction writes it from its beginning)."""
        if not self._wanted.is_set():
            return
        self._wanted.clear()
        self._restarting += 1  # before the restart: a round meanwhile sees the writer at work
        try:
            (timeout,) = conn.execute("PRAGMA busy_timeout").fetchone()
            conn.execute("PRAGMA busy_timeout=1000")  # readers end within a call
            try:
                (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(timeout)}")
        except sqlite3.Error as exc:
            log.debug("WAL restart skipped: %s", exc)
            return
        if busy:
            log.debug("WAL restart postponed: the database was busy")
        else:
            self.restarts += 1

    def _truncate(self, conn: sqlite3.Connection) -> None:
        (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.debug("WAL truncation postponed: the database was busy")
        else:
            self.truncations += 1
