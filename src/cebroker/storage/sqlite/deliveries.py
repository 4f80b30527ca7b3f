"""The delivery log on the broker's SQLite file (tables prefixed ``pipeline_``).

An ingest writes the events, their de-duplication keys and one delivery row per matched
subscription in the same transaction, so an acknowledged event always has its deliveries on
disk. A delivery row leaves only when its sink confirmed it, when it became a dead letter, or
when its subscription was deleted. With a retention every event is written ``archived`` and
stays until :class:`~cebroker.storage.sqlite.archive.SqliteEventArchive` prunes it; otherwise an
event row goes with its last delivery. Ordering groups: :mod:`.ordering`.

Writes go through the storage's writer (``durable`` as the policy in
:mod:`cebroker.storage.sqlite.database` says). The API's reads (``status``, ``dead_letters``)
go to the reader connection. The dispatcher's reads (``due``, ``backlog``) run on the writer,
in order with its writes: a page of due deliveries read before a completion committed must not
reach the dispatcher after it has forgotten that delivery, or the delivery would be handed out
twice, and a page read before an ingest committed must not tell it that nothing more is due.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.buckets import TokenBuckets
from cebroker.storage.deliveries import HELD_AT, Appended, DeadLetter, Incoming, Limits, Pending
from cebroker.storage.sqlite import ordering
from cebroker.storage.sqlite.database import Database

BUMP = (
    "INSERT INTO pipeline_stats (subscription, {col}) VALUES (?, ?) "
    "ON CONFLICT (subscription) DO UPDATE SET {col} = {col} + excluded.{col}"
)
#: The array indexes (as a JSON array) of ``[tenant, source, id]`` keys seen after the horizon.
SEEN_LOOKUP = (
    "SELECT json_group_array(k.key) FROM json_each(?1) AS k WHERE EXISTS (SELECT 1 FROM pipeline_seen s "
    "WHERE s.tenant = k.value->>0 AND s.source = k.value->>1 AND s.id = k.value->>2 AND s.at >= ?2)"
)
SEEN_INSERT = (
    "INSERT INTO pipeline_seen (tenant, source, id, at) SELECT value->>0, value->>1, value->>2, ?2"
    " FROM json_each(?1) WHERE true ON CONFLICT (tenant, source, id) DO UPDATE SET at = excluded.at"
)
# ``value->1`` is the event object as JSON text (SQLite keeps number and string spellings).
EVENTS_INSERT = (
    "INSERT INTO pipeline_events (seq, body, received, archived) "
    "SELECT value->>0, value->1, ?2, ?3 FROM json_each(?1)"
)
# The same with each event's trace context, ``value->>2`` (NULL past the end of a shorter row):
# used only when an event of the call is traced, so untraced ingest parses no more than before.
EVENTS_INSERT_TRACED = (
    "INSERT INTO pipeline_events (seq, body, received, archived, trace) "
    "SELECT value->>0, value->1, ?2, ?3, value->>2 FROM json_each(?1)"
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


def _chunks(rows: list[T]) -> Iterator[tuple[int, list[T]]]:
    """``rows`` in slices of :data:`APPEND_CHUNK`, each with the index of its first row."""
    for start in range(0, len(rows), APPEND_CHUNK):
        yield start, rows[start : start + APPEND_CHUNK]


ARCHIVE_ADD = "UPDATE pipeline_archive SET events = events + ?, bytes = bytes + ?"
# Only an event that is not kept for the retention goes with its last delivery.
GC_EVENT = (
    "DELETE FROM pipeline_events WHERE seq = ?1 AND archived = 0 "
    "AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries WHERE event_seq = ?1)"
)
GC_EVENTS = (
    "DELETE FROM pipeline_events WHERE seq IN (SELECT value FROM json_each(?1)) AND archived = 0 "
    "AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries WHERE event_seq = pipeline_events.seq)"
)
REMOVE = (
    "DELETE FROM pipeline_deliveries WHERE id IN (SELECT value FROM json_each(?1)) "
    "RETURNING event_seq, subscription, orderkey, replay"
)
REPLAY_BUMP = "UPDATE pipeline_replays SET {col} = {col} + ? WHERE id = ?"

#: A delivery taken out of the log: its event seq, subscription, ordering group and replay.
Removed = tuple[int, str, str | None, str | None]


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery row to write: its event, subscription, ordering group, replay and id (from
    :meth:`SqliteDeliveryLog.take_id`)."""

    seq: int
    subscription: str
    group: str | None = None
    replay: str | None = None
    id: int = 0


@dataclass(slots=True)
class _AppendCall:
    """One ``append`` waiting for the writer; the writer fills ``result`` or ``error``."""

    items: Sequence[Incoming]
    result: list[Appended | None] | None = None
    error: BaseException | None = None


class SqliteDeliveryLog:
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
        self._appends: deque[_AppendCall] = deque()
        # Owned by the writer thread: ids are assigned here so that rows insert in bulk.
        self._next_seq = 1
        self._next_delivery = 1
        self._buckets = TokenBuckets(clock)

    async def take(self, key: str, rate: float) -> float:
        """A token of the in-process bucket ``key`` (one process: it is every instance's)."""
        return self._buckets.take(key, rate)

    async def pending(self) -> int:
        """Deliveries in the log."""

        def job(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM pipeline_deliveries").fetchone()[0])

        return await self._db.read(job)

    def load(self, conn: sqlite3.Connection) -> None:
        """Read the next ids to assign (on the writer's connection, before it serves jobs)."""
        self._next_seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM pipeline_events").fetchone()[0]
        self._next_delivery = conn.execute(
            "SELECT COALESCE(MAX(id), 0) + 1 FROM pipeline_deliveries"
        ).fetchone()[0]

    # -- ingest ------------------------------------------------------------------------------

    async def append(self, items: Sequence[Incoming], *, version: int | None = None) -> list[Appended | None]:
        """Commit events and their deliveries (durable); per event what was written, or None for
        a duplicate of an event seen within the de-duplication window. ``version`` is not
        checked: the one process's index follows its store synchronously.

        Concurrent calls are merged: the first of their jobs the writer runs writes the events
        of every call waiting at that moment, and the others find their result ready (each
        caller is still answered only after a commit that holds its events). Rows travel to
        SQLite as one JSON array per table, expanded by ``json_each``, so a whole group is a
        handful of statements: each statement hands the GIL to and from the event loop, and
        under CPU contention every handoff can cost milliseconds.
        """
        call = _AppendCall(items)
        self._appends.append(call)

        def job(conn: sqlite3.Connection) -> list[Appended | None]:
            if call.result is None and call.error is None:
                self._append_waiting(conn)
            if call.error is not None:
                raise call.error
            if call.result is None:
                raise RuntimeError("append was not written")  # _append_waiting sets one of the two
            return call.result

        # Guarded: the job writes only through _append_waiting, which rolls its own savepoint
        # back on failure, so the writer's per-job savepoint would be two wasted statements.
        return await self._db.write(job, bounded=True, guarded=True)

    def _append_waiting(self, conn: sqlite3.Connection) -> None:
        """Write every waiting call at once; if that fails, each on its own, so one caller's
        bad input (an event that is not JSON-serialisable) fails only that caller.

        A sqlite3 error is the storage failing, not the input: it propagates and the writer
        rolls the whole transaction back. The calls written here may belong to jobs of a later
        group, so their results are withdrawn if this transaction does not commit: no caller is
        ever told that events were written when they were not.
        """
        calls: list[_AppendCall] = []
        while self._appends:
            calls.append(self._appends.popleft())

        def undo(error: BaseException) -> None:
            for call in calls:
                if call.result is not None:
                    call.result, call.error = None, error

        self._db.writer.on_rollback(undo)
        conn.execute("SAVEPOINT merged")
        try:
            results = self._write(conn, [item for call in calls for item in call.items])
        except sqlite3.Error:
            raise
        except Exception:
            conn.execute("ROLLBACK TO merged")
            conn.execute("RELEASE merged")
            if len(calls) == 1:
                raise
            for call in calls:
                conn.execute("SAVEPOINT single")
                try:
                    call.result = self._write(conn, call.items)
                except sqlite3.Error:
                    raise
                except Exception as exc:
                    conn.execute("ROLLBACK TO single")
                    call.error = exc
                conn.execute("RELEASE single")
            return
        conn.execute("RELEASE merged")
        start = 0
        for call in calls:
            call.result = results[start : start + len(call.items)]
            start += len(call.items)

    def _write(self, conn: sqlite3.Connection, items: Sequence[Incoming]) -> list[Appended | None]:
        now = self._clock.now()
        keep = self.retention > 0
        keys = [(item.tenant, item.source, item.id) for item in items]
        recent: set[int] = set()
        for start, chunk in _chunks(keys):
            (found,) = conn.execute(SEEN_LOOKUP, (orjson.dumps(chunk), now - self.dedup_window)).fetchone()
            if found:
                recent.update(start + index for index in orjson.loads(found))
        fresh: set[tuple[str, str, str]] = set()
        out: list[Appended | None] = []
        seen: list[tuple[str, str, str]] = []
        events: list[tuple[Any, ...]] = []
        traced = False
        size = 0
        deliveries: list[NewDelivery] = []
        for index, (item, key) in enumerate(zip(items, keys, strict=True)):
            if index in recent or key in fresh:
                out.append(None)
                continue
            fresh.add(key)
            seen.append(key)
            seq = 0
            pairs: list[tuple[int, str]] = []
            if item.subscriptions or keep:
                seq = self._next_seq
                self._next_seq += 1
                event = item.event
                if keep:  # serialized alone, so that the archive knows its size
                    body = orjson.dumps(event) if isinstance(event, Mapping) else event
                    body = body.encode() if isinstance(body, str) else body
                    size += len(body)
                    stored: Any = orjson.Fragment(body)
                else:
                    stored = event if isinstance(event, Mapping) else orjson.Fragment(event)
                if item.trace is None:
                    events.append((seq, stored))
                else:
                    events.append((seq, stored, item.trace))
                    traced = True
                groups = item.groups or (None,) * len(item.subscriptions)
                for sub, group in zip(item.subscriptions, groups, strict=True):
                    row = NewDelivery(seq, sub, group, id=self.take_id())
                    deliveries.append(row)
                    pairs.append((row.id, sub))
            out.append(Appended(seq, now, pairs))
        for _, new_keys in _chunks(seen):
            conn.execute(SEEN_INSERT, (orjson.dumps(new_keys), now))
        insert = EVENTS_INSERT_TRACED if traced else EVENTS_INSERT
        for _, new_events in _chunks(events):
            conn.execute(insert, (orjson.dumps(new_events), now, 1 if keep else 0))
        if keep and events:
            conn.execute(ARCHIVE_ADD, (len(events), size))
        self.write_deliveries(conn, deliveries, now)
        return out

    def last_seq(self) -> int:
        """The sequence number of the last event written (on the writer thread)."""
        return self._next_seq - 1

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
        for _, chunk in _chunks(values):
            conn.execute(DELIVERIES_INSERT, (orjson.dumps(chunk), now))

    # -- dispatch ----------------------------------------------------------------------------

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None
    ) -> tuple[list[Pending], float | None]:
        """Up to ``limit`` deliveries of ``subscription`` due now (oldest first) and when the
        next one not returned falls due (now if more are due, None if there are none).
        ``limits`` are the dispatcher's to enforce: it is the only one delivering."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> tuple[list[Pending], float | None]:
            rows = conn.execute(
                "SELECT d.id, d.event_seq, d.attempts, d.first_at, e.body, d.replay, e.trace "
                "FROM pipeline_deliveries d JOIN pipeline_events e ON e.seq = d.event_seq "
                "WHERE d.subscription = ? AND d.next_at <= ? ORDER BY d.next_at, d.id LIMIT ?",
                (subscription, now, limit),
            ).fetchall()
            items = [
                Pending(r[0], r[1], subscription, r[2], r[3], r[4], replay=r[5], trace=r[6]) for r in rows
            ]
            if len(items) == limit:
                return items, now
            (later,) = conn.execute(
                "SELECT MIN(next_at) FROM pipeline_deliveries WHERE subscription = ? AND next_at > ?",
                (subscription, now),
            ).fetchone()
            return items, later

        # On the writer, in order with the dispatcher's own writes: see the module docstring.
        return await self._db.write(job, durable=False)

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""

        def job(conn: sqlite3.Connection) -> dict[str, tuple[int, float]]:
            rows = conn.execute(
                "SELECT subscription, COUNT(*), MIN(next_at) FROM pipeline_deliveries GROUP BY subscription"
            )
            return {r[0]: (r[1], r[2]) for r in rows}

        # On the writer, in order with the dispatcher's own writes: see the module docstring.
        return await self._db.write(job, durable=False)

    async def complete(self, done: Sequence[tuple[int, int, str]]) -> None:
        """Remove confirmed deliveries ``(delivery id, event seq, subscription)`` and count them
        (those still in the log)."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> None:
            gone = self.remove(conn, [d[0] for d in done], now)
            counts: dict[str, int] = {}
            for _, sub, _, _ in gone:
                counts[sub] = counts.get(sub, 0) + 1
            conn.executemany(BUMP.format(col="delivered"), list(counts.items()))
            self.replay_counts(conn, "delivered", gone)

        await self._db.write(job, durable=False)

    async def drop(self, done: Sequence[tuple[int, int]]) -> int:
        """Remove deliveries ``(delivery id, event seq)`` whose subscription no longer exists;
        returns how many were still there."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> int:
            return len(self.remove(conn, [d[0] for d in done], now))

        return await self._db.write(job, durable=False)

    def remove(self, conn: sqlite3.Connection, ids: Sequence[int], now: float) -> list[Removed]:
        """Delete deliveries (and events no longer needed), release the next of their ordering
        groups; returns ``(event seq, subscription, group, replay)`` of those that were there."""
        gone = [(int(r[0]), str(r[1]), r[2], r[3]) for r in conn.execute(REMOVE, (orjson.dumps(list(ids)),))]
        if gone:
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

    async def reschedule(self, item: Pending, attempts: int, next_at: float, error: str) -> None:
        """Record a failed attempt and when to try again."""

        def job(conn: sqlite3.Connection) -> None:
            conn.execute(
                "UPDATE pipeline_deliveries SET attempts = ?, next_at = ?, last_error = ? WHERE id = ?",
                (attempts, next_at, error, item.id),
            )
            self._failed(conn, item, error)

        await self._db.write(job, durable=False)

    async def dead_letter(
        self, item: Pending, event: bytes, attempts: int, error: str, status: str | None, body: str | None
    ) -> None:
        """Move a delivery to the dead letters, keeping the event and the reason."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> None:
            gone = self.remove(conn, [item.id], now)
            if gone:
                conn.execute(
                    "INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts, "
                    "last_error, first_at, failed_at, trace) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (item.subscription, event, status, body, attempts, error, item.first_at, now, item.trace),
                )
                conn.execute(BUMP.format(col="deadlettered"), (item.subscription, 1))
                self.replay_counts(conn, "deadlettered", gone)
            self._failed(conn, item, error)

        await self._db.write(job, durable=False)

    async def expire(
        self, subscription: str, accepted_before: float, reason: str, limit: int
    ) -> tuple[list[DeadLetter], float | None]:
        """Dead-letter up to ``limit`` deliveries accepted before ``accepted_before``, oldest
        first; the dead letters made and the oldest acceptance time still pending.

        One scan of the subscription's rows per call: the caller sweeps when the oldest
        delivery runs out of time, not on a timer, so an outage costs a scan per batch expired.
        """
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> tuple[list[DeadLetter], float | None]:
            rows = conn.execute(
                "SELECT d.id, d.event_seq, d.attempts, d.first_at, e.body, e.trace "
                "FROM pipeline_deliveries d JOIN pipeline_events e ON e.seq = d.event_seq "
                "WHERE d.subscription = ? AND d.first_at < ? ORDER BY d.first_at, d.id LIMIT ?",
                (subscription, accepted_before, limit),
            ).fetchall()
            # One writer: every row read above is still there, removed together (which also
            # frees the next delivery of each ordering group and counts replays' dead letters).
            gone = self.remove(conn, [r[0] for r in rows], now) if rows else []
            letters: list[DeadLetter] = []
            for _, _, attempts, first_at, body, trace in rows:
                (letter_id,) = conn.execute(
                    "INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts, "
                    "last_error, first_at, failed_at, trace) "
                    "VALUES (?, ?, NULL, NULL, ?, ?, ?, ?, ?) RETURNING id",
                    (subscription, body, attempts, reason, first_at, now, trace),
                ).fetchone()
                letters.append(
                    DeadLetter(
                        letter_id,
                        subscription,
                        orjson.loads(body),
                        None,
                        None,
                        attempts,
                        reason,
                        first_at,
                        now,
                    )
                )
            if letters:
                conn.execute(BUMP.format(col="deadlettered"), (subscription, len(letters)))
                self.replay_counts(conn, "deadlettered", gone)
            (oldest,) = conn.execute(
                "SELECT MIN(first_at) FROM pipeline_deliveries WHERE subscription = ?", (subscription,)
            ).fetchone()
            return letters, oldest

        return await self._db.write(job, durable=False)

    def _failed(self, conn: sqlite3.Connection, item: Pending, error: str) -> None:
        conn.execute(BUMP.format(col="failed"), (item.subscription, 1))
        conn.execute(
            "UPDATE pipeline_stats SET last_error = ?, last_error_at = ? WHERE subscription = ?",
            (error, self._clock.now(), item.subscription),
        )
        if item.replay is not None:
            conn.execute(REPLAY_BUMP.format(col="failed"), (1, item.replay))

    # -- dead letters, status, housekeeping --------------------------------------------------

    async def dead_letters(self, subscription: str, after: int, limit: int) -> list[DeadLetter]:
        """One page of a subscription's dead letters, oldest first, ids greater than ``after``."""

        def job(conn: sqlite3.Connection) -> list[DeadLetter]:
            rows = conn.execute(
                "SELECT id, subscription, event, status, body, attempts, last_error, first_at, failed_at "
                "FROM pipeline_deadletters WHERE subscription = ? AND id > ? ORDER BY id LIMIT ?",
                (subscription, after, limit),
            ).fetchall()
            return [DeadLetter(r[0], r[1], orjson.loads(r[2]), *r[3:]) for r in rows]

        return await self._db.read(job)

    async def redrive(self, subscription: str, ids: Sequence[int] | None) -> int:
        """Turn dead letters (all of the subscription's, or those ``ids``) back into deliveries."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> int:
            rows = conn.execute(
                "SELECT id, event, trace FROM pipeline_deadletters WHERE subscription = ? ORDER BY id",
                (subscription,),
            ).fetchall()
            wanted = set(ids) if ids is not None else None
            picked = [r for r in rows if wanted is None or r[0] in wanted]
            for dl_id, body, trace in picked:
                seq = self._next_seq
                self._next_seq += 1
                conn.execute(
                    "INSERT INTO pipeline_events (seq, body, received, archived, trace) "
                    "VALUES (?, ?, ?, 0, ?)",
                    (seq, body, now, trace),
                )
                did = self._next_delivery
                self._next_delivery += 1
                conn.execute(
                    "INSERT INTO pipeline_deliveries (id, event_seq, subscription, attempts, next_at, "
                    "first_at) VALUES (?, ?, ?, 0, ?, ?)",
                    (did, seq, subscription, now, now),
                )
                conn.execute("DELETE FROM pipeline_deadletters WHERE id = ?", (dl_id,))
            return len(picked)

        return await self._db.write(job)

    async def status(self, subscription: str) -> dict[str, Any]:
        """Counts and the last error of one subscription."""

        def job(conn: sqlite3.Connection) -> dict[str, Any]:
            (pending,) = conn.execute(
                "SELECT COUNT(*) FROM pipeline_deliveries WHERE subscription = ?", (subscription,)
            ).fetchone()
            (dead,) = conn.execute(
                "SELECT COUNT(*) FROM pipeline_deadletters WHERE subscription = ?", (subscription,)
            ).fetchone()
            row = conn.execute(
                "SELECT delivered, failed, deadlettered, last_error, last_error_at FROM pipeline_stats "
                "WHERE subscription = ?",
                (subscription,),
            ).fetchone() or (0, 0, 0, None, None)
            return {
                "delivered": row[0],
                "failed": row[1],
                "pending": pending,
                "deadlettered": dead,
                "deadletteredTotal": row[2],
                "lastError": row[3],
                "lastErrorAt": row[4],
            }

        return await self._db.read(job)

    async def statuses(self) -> dict[str, dict[str, Any]]:
        """:meth:`status` of every subscription the log knows anything about, in one read."""

        def job(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
            found: dict[str, dict[str, Any]] = {}

            def entry(subscription: str) -> dict[str, Any]:
                return found.setdefault(
                    subscription,
                    {
                        "delivered": 0,
                        "failed": 0,
                        "pending": 0,
                        "deadlettered": 0,
                        "deadletteredTotal": 0,
                        "lastError": None,
                        "lastErrorAt": None,
                    },
                )

            for sub, count in conn.execute(
                "SELECT subscription, COUNT(*) FROM pipeline_deliveries GROUP BY subscription"
            ):
                entry(sub)["pending"] = count
            for sub, count in conn.execute(
                "SELECT subscription, COUNT(*) FROM pipeline_deadletters GROUP BY subscription"
            ):
                entry(sub)["deadlettered"] = count
            for row in conn.execute(
                "SELECT subscription, delivered, failed, deadlettered, last_error, last_error_at "
                "FROM pipeline_stats"
            ):
                entry(row[0]).update(
                    delivered=row[1],
                    failed=row[2],
                    deadletteredTotal=row[3],
                    lastError=row[4],
                    lastErrorAt=row[5],
                )
            return found

        return await self._db.read(job)

    async def forget(self, subscription: str) -> int:
        """Delete everything kept for a deleted subscription; returns the pending count removed."""

        def job(conn: sqlite3.Connection) -> int:
            seqs = conn.execute(
                "SELECT event_seq FROM pipeline_deliveries WHERE subscription = ?", (subscription,)
            ).fetchall()
            conn.execute("DELETE FROM pipeline_deliveries WHERE subscription = ?", (subscription,))
            conn.executemany(GC_EVENT, seqs)
            conn.execute("DELETE FROM pipeline_deadletters WHERE subscription = ?", (subscription,))
            conn.execute("DELETE FROM pipeline_stats WHERE subscription = ?", (subscription,))
            conn.execute("DELETE FROM pipeline_replays WHERE subscription = ?", (subscription,))
            return len(seqs)

        return await self._db.write(job)

    async def purge_seen(self) -> int:
        """Forget de-duplication keys older than the window."""
        horizon = self._clock.now() - self.dedup_window

        def job(conn: sqlite3.Connection) -> int:
            return conn.execute("DELETE FROM pipeline_seen WHERE at < ?", (horizon,)).rowcount

        return await self._db.write(job, durable=False)
