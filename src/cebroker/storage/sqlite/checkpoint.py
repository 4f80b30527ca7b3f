"""WAL checkpoints off the commit path.

By default SQLite checkpoints inside whichever commit pushes the WAL past 1,000 pages: that
commit then copies the pages into the database file and fsyncs it, and every request waiting
on it is held up by tens of milliseconds. The writer turns automatic checkpoints off and this
thread, with a connection of its own, runs a ``PASSIVE`` checkpoint (one that never waits for or
blocks the writer) at a fixed interval instead.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger("cebroker.storage")


class Checkpointer:
    """Checkpoints the WAL of the database ``connect`` opens every ``interval`` seconds until
    stopped."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], interval: float = 1.0) -> None:
        self._connect = connect
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

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

    def _run(self) -> None:
        try:
            conn = self._connect()
            conn.execute("PRAGMA busy_timeout=1000")
        except sqlite3.Error as exc:
            log.warning("WAL checkpoints are off: %s", exc)
            return
        try:
            while not self._stop.wait(self._interval):
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # e.g. busy: the next round catches up
                    log.debug("WAL checkpoint skipped: %s", exc)
        finally:
            conn.close()
