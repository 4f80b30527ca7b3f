"""WAL checkpoints off the commit path, and a WAL that stays bounded.

By default SQLite checkpoints inside whichever commit pushes the WAL past 1,000 pages: that
commit then copies the pages into the database file and fsyncs it, and every request waiting
on it is held up by tens of milliseconds. The writer turns automatic checkpoints off and this
thread, with a connection of its own, runs a ``PASSIVE`` checkpoint (one that never waits for or
blocks the writer) at a fixed interval instead.

A passive checkpoint copies pages but never shortens the WAL: the WAL starts again from its
beginning only when a write finds every frame copied and no reader using one, and a writer that
commits continuously (a busy ingest, or a retry storm) always has frames the last checkpoint
did not copy yet, so the file grows for as long as it writes. Once the WAL is larger than
``truncate_at`` bytes it is therefore cut back with a ``TRUNCATE`` checkpoint, run by the
writer's own thread between two transactions (:meth:`Checkpointer.between_writes`): another
connection would have to take the write lock from a writer that never lets go of it for long
(SQLite's busy handler is not fair), while the writer itself has nothing to wait for but the
readers of older snapshots, whose read transactions last one call each (see
:mod:`cebroker.storage.sqlite.database`). The passive rounds have copied most pages by then, so
the writer's pause is short.

A WAL below that bound is also cut back to zero by this thread once a passive checkpoint has
copied all of it (the writer has been quiet since): then nothing is left to copy, and the
truncation is tried without waiting for anyone (a busy writer or reader just postpones it to
the next round). Left alone, a WAL keeps the size of its largest burst, and its pages count
twice on the disk: once in the WAL, once in the database file they were copied to.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("cebroker.storage")

#: WAL size (bytes) above which a checkpoint truncates it.
TRUNCATE_AT = 16 * 1024 * 1024


class Checkpointer:
    """Checkpoints the WAL of the database ``connect`` opens every ``interval`` seconds until
    stopped; truncates it when ``wal`` (the WAL file) has grown past ``truncate_at`` bytes."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        wal: Path,
        interval: float = 1.0,
        truncate_at: int = TRUNCATE_AT,
    ) -> None:
        self._connect = connect
        self._wal = wal
        self._interval = interval
        self._truncate_at = truncate_at
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wanted = threading.Event()
        #: Checkpoints that truncated the WAL (for tests and diagnostics).
        self.truncations = 0

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
        """One round of this thread: a passive checkpoint; then, if the WAL is over its bound,
        a request that the writer truncates it, else its truncation if it is all copied."""
        try:
            (busy, frames, copied) = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            size = self._wal_size()
            if size > self._truncate_at:
                self._wanted.set()
            elif size > 0 and not busy and frames == copied:
                conn.execute("PRAGMA busy_timeout=0")  # never wait for anyone for this one
                try:
                    self._truncate(conn)
                finally:
                    conn.execute("PRAGMA busy_timeout=1000")
        except sqlite3.Error as exc:  # e.g. busy: the next round catches up
            log.debug("WAL checkpoint skipped: %s", exc)

    def between_writes(self, conn: sqlite3.Connection) -> None:
        """Run by the writer's thread between two transactions: truncate the WAL if this
        thread found it over its bound."""
        if not self._wanted.is_set():
            return
        self._wanted.clear()
        try:
            (timeout,) = conn.execute("PRAGMA busy_timeout").fetchone()
            conn.execute("PRAGMA busy_timeout=1000")  # readers end within a call
            try:
                self._truncate(conn)
            finally:
                conn.execute(f"PRAGMA busy_timeout={int(timeout)}")
        except sqlite3.Error as exc:
            log.debug("WAL truncation skipped: %s", exc)

    def _truncate(self, conn: sqlite3.Connection) -> None:
        (busy, _, _) = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            log.debug("WAL truncation postponed: the database was busy")
        else:
            self.truncations += 1
