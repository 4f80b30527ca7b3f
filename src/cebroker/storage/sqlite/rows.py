"""What every part of the SQLite delivery log shares: the ids it assigns on the writer thread,
and the statements that write and remove delivery rows (a removal also removes events nothing
needs any more and releases the next delivery of an ordering group, :mod:`.ordering`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from cebroker.clock import Clock
from cebroker.storage.deliveries import HELD_AT
from cebroker.storage.sqlite import ordering
from cebroker.storage.sqlite.database import Database

BUMP = (
    "INSERT INTO pipeline_stats (subscription, {col}) VALUES (?, ?) "
    "ON CONFLICT (subscription) DO UPDATE SET {col} = {col} + excluded.{col}"
)
# Rows [id, seq, subscription, due time or null (now), group or null, replay or null].
DELIVERIES_INSERT = (
    "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, first_at, orderkey, "
    "replay) SELECT value->>0, value->>1, value->>2, 0, coalesce(value->>3, ?2), ?2, value->>4, value->>5 "
    "FROM json_each(?1)"
)
T = TypeVar("T")

#: Rows per statement of an append: serialising a whole maximum-size batch in one call would hold
#: the interpreter (and so the event loop) for tens of milliseconds; between statements SQLite
#: runs without it.
APPEND_CHUNK = 10_000


def chunks(rows: list[T]) -> Iterator[tuple[int, list[T]]]:
    """``rows`` in slices of :data:`APPEND_CHUNK`, each with the index of its first row."""
    for start in range(0, len(rows), APPEND_CHUNK):
        yield start, rows[start : start + APPEND_CHUNK]


GC_EVENTS = (
    "DELETE FROM pipeline_events WHERE seq IN (SELECT value FROM json_each(?1)) AND archived = 0 "
    "AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries WHERE event_seq = pipeline_events.seq)"
)
#: The rows :data:`REMOVE` takes out, as one JSON array of ``[seq, subscription, group, replay]``:
#: one step of one statement (``DELETE ... RETURNING`` steps once per row, and the writer thread
#: gives the interpreter lock up and takes it back at every step, competing with the event loop
#: for it).
REMOVED = (
    "SELECT json_group_array(json_array(event_seq, subscription, orderkey, replay)) "
    "FROM pipeline_deliveries WHERE id IN (SELECT value FROM json_each(?1))"
)
REMOVE = "DELETE FROM pipeline_deliveries WHERE id IN (SELECT value FROM json_each(?1))"
REPLAY_BUMP = "UPDATE pipeline_replays SET {col} = {col} + ? WHERE id = ?"

#: A delivery taken out of the log: its event seq, subscription, ordering group and replay.
Removed = tuple[int, str, str | None, str | None]


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery row to write: its event, subscription, ordering group, replay and id (from
    :meth:`LogBase.take_id`)."""

    seq: int
    subscription: str
    group: str | None = None
    replay: str | None = None
    id: int = 0


class LogBase:
    """The state every part of :class:`~cebroker.storage.sqlite.deliveries.SqliteDeliveryLog`
    reads (set by its constructor), and the helpers that write and remove delivery rows."""

    _db: Database
    _clock: Clock
    dedup_window: float
    retention: float
    #: Owned by the writer thread: ids are assigned here so that rows insert in bulk.
    _next_seq: int
    _next_delivery: int

    def take_id(self) -> int:
        """The next delivery id (on the writer thread: ids are assigned here so that rows insert
        in bulk)."""
        delivery_id = self._next_delivery
        self._next_delivery += 1
        return delivery_id

    def write_deliveries(self, conn: sqlite3.Connection, rows: Sequence[NewDelivery], now: float) -> None:
        """Insert delivery rows, due ``now``, or held back behind an earlier delivery of their
        ordering group (:mod:`.ordering`)."""
        if not rows:
            return
        waits = ordering.held(conn, [(row.subscription, row.group) for row in rows])
        values: list[list[Any]] = []
        for row, wait in zip(rows, waits, strict=True):
            if row.group is None and row.replay is None:
                values.append([row.id, row.seq, row.subscription])
            else:
                due = HELD_AT if wait else None
                values.append([row.id, row.seq, row.subscription, due, row.group, row.replay])
        self.insert_deliveries(conn, values, now)

    @staticmethod
    def insert_deliveries(conn: sqlite3.Connection, values: list[list[Any]], now: float) -> None:
        """Insert delivery rows as they are: ``[id, seq, subscription]`` (due ``now``), or with
        their due time (None: ``now``), ordering group and replay after those three."""
        for _, chunk in chunks(values):
            conn.execute(DELIVERIES_INSERT, (orjson.dumps(chunk), now))

    def remove(self, conn: sqlite3.Connection, ids: Sequence[int], now: float) -> list[Removed]:
        """Delete deliveries (and events no longer needed), release the next of their ordering
        groups; returns ``(event seq, subscription, group, replay)`` of those that were there."""
        listed = orjson.dumps(list(ids))
        (found,) = conn.execute(REMOVED, (listed,)).fetchone()
        gone: list[Removed] = [(r[0], r[1], r[2], r[3]) for r in orjson.loads(found)]
        if gone:
            conn.execute(REMOVE, (listed,))
            conn.execute(GC_EVENTS, (orjson.dumps(sorted({g[0] for g in gone})),))
            ordering.release(conn, [(g[1], g[2]) for g in gone], now)
        return gone

    @staticmethod
    def replay_counts(conn: sqlite3.Connection, col: str, rows: Sequence[Removed]) -> None:
        """Add deliveries ``rows`` to the ``col`` count of their replays."""
        counts: dict[str, int] = {}
        for _, _, _, replay in rows:
            if replay is not None:
                counts[replay] = counts.get(replay, 0) + 1
        if counts:
            conn.executemany(REPLAY_BUMP.format(col=col), [(n, r) for r, n in counts.items()])
