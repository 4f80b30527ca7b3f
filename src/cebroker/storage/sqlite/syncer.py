"""Durable commits, with the flush to disk off the writer's thread.

With ``synchronous=FULL`` SQLite flushes the WAL inside ``COMMIT``, holding the write lock: the
writer can start the next group only once the disk has answered, and under a stream of single
events that flush was most of a commit's time. The writer now commits with
``synchronous=NORMAL`` (the WAL's frames are written, not yet flushed) and hands each group to
this thread, which flushes the WAL file (``fdatasync``) for every group committed since its
last flush, then answers their callers, in commit order. The writer meanwhile writes the next
group, whose callers wait for the next flush.

A durable caller is answered only after a flush that began once its ``COMMIT`` had returned, so
its write is on disk exactly as with ``synchronous=FULL``. A frame that was written but not yet
flushed when the machine failed belongs to a caller not yet answered; SQLite's recovery ignores
frames after the last intact commit, and a WAL is only started again after a checkpoint has
copied (and flushed) everything in it into the database file. Groups with nothing durable in
them (bookkeeping, reads, rolled-back transactions) wait for no flush but keep their place in
the order. A flush that fails answers the durable callers of its groups with
:class:`~cebroker.storage.errors.StorageUnavailable`: their rows are in the database, but
nobody can say whether on disk, so the callers retry (a retried event is a duplicate).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from cebroker.storage.sqlite.batches import batches

log = logging.getLogger("cebroker.storage")

#: What the syncer calls once a group's fate is known: with None once its writes are on disk
#: (or need not be), else with the flush's error.
Wake = Callable[[OSError | None], None]


class Syncer:
    """The thread that flushes the WAL for committed groups and wakes their callers in order.

    Args:
        flush: makes every WAL frame written so far durable (``os.fdatasync`` of the WAL file);
            runs on this thread.
    """

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._queue: queue.SimpleQueue[tuple[bool, Wake] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        #: Flushes made so far (for tests and figures).
        self.flushes = 0

    def start(self) -> None:
        """Start the thread."""
        self._thread = threading.Thread(target=self._run, name="cebroker-storage-sync", daemon=True)
        self._thread.start()

    def submit(self, durable: bool, wake: Wake) -> None:
        """A group is committed (or failed): ``wake`` it after the next flush if ``durable``,
        else in its turn. Called by the writer's thread, in commit order."""
        self._queue.put((durable, wake))

    def pending(self) -> int:
        """Groups submitted and not yet taken by this thread."""
        return self._queue.qsize()

    def stop(self) -> None:
        """Flush and wake what was submitted, then end the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        for batch in batches(self._queue):
            error: OSError | None = None
            if any(durable for durable, _ in batch):
                try:
                    self._flush()
                    self.flushes += 1
                except OSError as exc:
                    log.error("the WAL could not be flushed to disk: %s", exc)
                    error = exc
            for durable, wake in batch:
                try:
                    wake(error if durable else None)
                except Exception:
                    log.exception("answering a committed group failed")
