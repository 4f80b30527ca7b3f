"""The delivery log on the broker's SQLite file (tables prefixed ``pipeline_``).

An ingest writes the events, their de-duplication keys and one delivery row per matched
subscription in the same transaction, so an acknowledged event always has its deliveries on
disk. A delivery row leaves only when its sink confirmed it, when it became a dead letter, or
when its subscription was deleted. With a retention every event is written ``archived`` and
stays until :class:`~cebroker.storage.sqlite.archive.SqliteEventArchive` prunes it; otherwise an
event row goes with its last delivery. Ordering groups: :mod:`.ordering`.

It is one class, :class:`SqliteDeliveryLog`, made of one part per contract, each in its own
module: :mod:`.ingest`, :mod:`.queue` (``due``, ``backlog``), :mod:`.outcomes`,
:mod:`.deadletters`, :mod:`.stats`, :mod:`.cleanup`, on :mod:`.rows` (the ids and statements
every part shares); its rate buckets are the process's own
(:class:`~cebroker.storage.buckets.TokenBuckets`). It provides no
:class:`~cebroker.storage.claims.Claims`: one process per file.

Writes go through the storage's writer (``durable`` as the policy in
:mod:`cebroker.storage.sqlite.database` says). The API's reads (``status``, ``dead_letters``)
go to the reader connection. The dispatcher's reads (``due``, ``backlog``) run on the writer,
in order with its writes: a page of due deliveries read before a completion committed must not
reach the dispatcher after it has forgotten that delivery, or the delivery would be handed out
twice, and a page read before an ingest committed must not tell it that nothing more is due.
"""

from __future__ import annotations

from collections import deque

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.buckets import TokenBuckets
from cebroker.storage.sqlite.cleanup import SqliteCleanup
from cebroker.storage.sqlite.database import Database
from cebroker.storage.sqlite.deadletters import SqliteDeadLetters
from cebroker.storage.sqlite.ingest import SqliteIngest
from cebroker.storage.sqlite.outcomes import SqliteOutcomes
from cebroker.storage.sqlite.queue import SqliteDueQueue
from cebroker.storage.sqlite.stats import SqliteStats


class SqliteDeliveryLog(
    SqliteIngest, SqliteDueQueue, SqliteOutcomes, SqliteDeadLetters, SqliteStats, SqliteCleanup
):
    """:class:`~cebroker.storage.deliveries.DeliveryLog` on a :class:`Database`.

    Times (acceptance, when a delivery is due, failures, the de-duplication window) are read
    from ``clock``, the same clock the dispatcher schedules with.
    """

    def __init__(
        self, db: Database, *, dedup_window: float, clock: Clock = SYSTEM_CLOCK, retention: float = 0.0
    ) -> None:
        self._db = db
        self.dedup_window = dedup_window
        self.retention = retention
        self._clock = clock
        # Calls of append() waiting for the writer (appended on the loop, drained in the thread).
        self._appends = deque()
        # Owned by the writer thread: ids are assigned here so that rows insert in bulk.
        self._next_seq = 1
        self._next_delivery = 1
        self._buckets = TokenBuckets(clock)

    async def take(self, key: str, rate: float) -> float:
        """A token of the in-process bucket ``key`` (one process: it is every instance's)."""
        return self._buckets.take(key, rate)
