"""The event archive and its replays in the SQLite file (see :mod:`cebroker.storage.archive`).

Archived events are the ``pipeline_events`` rows marked ``archived``, read in acceptance order
through a partial index on ``(received, seq)``; ``pipeline_archive`` keeps their count and size,
and ``pipeline_replays`` each replay's range, position and counts. Writes run on the storage's
writer, as the delivery log's do (a replay's deliveries are delivery log rows, given their ids
by :class:`~cebroker.storage.sqlite.deliveries.SqliteDeliveryLog`); reads on the reader.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.archive import (
    NO_SEQ_BOUND,
    REPLAY_COLUMNS,
    Archived,
    ArchiveStats,
    Pick,
    Position,
    Queued,
    Replay,
    ReplayRequest,
)
from cebroker.storage.sqlite.database import Database
from cebroker.storage.sqlite.deliveries import SqliteDeliveryLog
from cebroker.storage.sqlite.rows import NewDelivery

_SCAN = (
    "SELECT seq, received, body FROM pipeline_events WHERE archived = 1 AND (received, seq) > (?, ?) "
    "AND received < ? AND seq <= ? ORDER BY received, seq LIMIT ?"
)
#: Where the running replays stand: the archive is not pruned past the earliest.
_PIN = (
    "SELECT at_time, at_seq FROM pipeline_replays WHERE cancelled = 0 AND scanned = 0 "
    "ORDER BY at_time, at_seq LIMIT 1"
)


def _scan(
    conn: sqlite3.Connection, after: Position, until: float, limit: int, last_seq: int | None
) -> list[Archived]:
    bound = NO_SEQ_BOUND if last_seq is None else last_seq
    rows = conn.execute(_SCAN, (after[0], after[1], until, bound, limit))
    return [Archived(int(r[0]), float(r[1]), r[2]) for r in rows]


class SqliteEventArchive:
    """:class:`~cebroker.storage.archive.EventArchive` over the SQLite delivery log ``log``."""

    def __init__(
        self, db: Database, log: SqliteDeliveryLog, *, retention: float, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self._db = db
        self._log = log
        self._retention = retention
        self._clock = clock

    @property
    def retention(self) -> float:
        """Seconds every accepted event is kept (0: off)."""
        return self._retention

    async def stats(self) -> ArchiveStats:
        """Count, size and oldest event of the archive, and its horizon."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> ArchiveStats:
            events, size, pruned_to = conn.execute(
                "SELECT events, bytes, pruned_to FROM pipeline_archive"
            ).fetchone()
            oldest = conn.execute(
                "SELECT received FROM pipeline_events WHERE archived = 1 ORDER BY received, seq LIMIT 1"
            ).fetchone()
            horizon = max(now - self._retention, float(pruned_to)) if self._retention > 0 else now
            return ArchiveStats(int(events), int(size), None if oldest is None else float(oldest[0]), horizon)

        return await self._db.read(job)

    async def read(
        self, after: Position, until: float, limit: int, last_seq: int | None = None
    ) -> list[Archived]:
        """One page of archived events past ``after``, in acceptance order."""
        return await self._db.read(lambda conn: _scan(conn, after, until, limit, last_seq))

    async def prune(self, before: float, max_bytes: int | None, limit: int) -> int:
        """Take up to ``limit`` of the oldest events out of the archive (see the contract)."""

        def job(conn: sqlite3.Connection) -> int:
            (size,) = conn.execute("SELECT bytes FROM pipeline_archive").fetchone()
            over = int(size) - max_bytes if max_bytes is not None else 0
            pin = conn.execute(_PIN).fetchone()
            rows = conn.execute(
                "SELECT seq, received, length(CAST(body AS BLOB)) FROM pipeline_events WHERE archived = 1 "
                "ORDER BY received, seq LIMIT ?",
                (limit,),
            ).fetchall()
            chosen: list[int] = []
            freed = 0
            newest = 0.0
            for seq, received, length in rows:
                aged = received < before and (pin is None or (received, seq) <= (pin[0], pin[1]))
                if not aged and over <= 0:
                    break  # in acceptance order: everything after is newer
                chosen.append(int(seq))
                freed += int(length)
                over -= int(length)
                newest = max(newest, float(received))
            if not chosen:
                return 0
            marks = ",".join("?" * len(chosen))
            # Still needed by pending deliveries: out of the archive, but kept for them (and
            # removed with the last of them, like any event that is not archived).
            conn.execute(
                f"UPDATE pipeline_events SET archived = 0 WHERE seq IN ({marks}) "
                "AND EXISTS (SELECT 1 FROM pipeline_deliveries d WHERE d.event_seq = pipeline_events.seq)",
                chosen,
            )
            conn.execute(f"DELETE FROM pipeline_events WHERE seq IN ({marks}) AND archived = 1", chosen)
            conn.execute(
                "UPDATE pipeline_archive SET events = events - ?, bytes = bytes - ?, "
                "pruned_to = max(pruned_to, ?)",
                (len(chosen), freed, newest),
            )
            return len(chosen)

        return await self._db.write(job, durable=False)

    async def create_replay(self, request: ReplayRequest) -> Replay:
        """Store a new replay; an existing id returns the stored one."""
        existing = await self._get(request.id)
        if existing is not None:
            return existing
        if request.boundary:
            # Every append waiting for the writer (any event matched before this call) is
            # written first: the writer takes them all in one job.
            await self._log.append([])
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> Replay:
            found = conn.execute(
                f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE id = ?", (request.id,)
            ).fetchone()
            if found is not None:
                return Replay.from_row(found)
            last_seq = self._log.last_seq() if request.boundary else None
            conn.execute(
                "INSERT INTO pipeline_replays (id, subscription, created, since, until, last_seq, filter, "
                "events, at_time, at_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, -1)",
                (
                    request.id,
                    request.subscription,
                    now,
                    request.since,
                    request.until,
                    last_seq,
                    request.filter,
                    request.events,
                    request.since,
                ),
            )
            row = conn.execute(f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE id = ?", (request.id,))
            return Replay.from_row(row.fetchone())

        return await self._db.write(job)

    async def queue(self, replay: str, window: int, scan: int, pick: Pick) -> Queued:
        """One step of a running replay (see the contract); ``pick`` runs on the writer thread."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> Queued:
            row = conn.execute(f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE id = ?", (replay,))
            found = row.fetchone()
            if found is None:
                return Queued(0, False)
            state = Replay.from_row(found)
            room = window - state.pending
            if state.cancelled or state.scanned or room <= 0:
                return Queued(0, False)
            events = _scan(conn, state.position, state.until, scan, state.last_seq)
            picked = pick(events)
            taken = picked[:room]
            truncated = len(picked) > room
            if truncated:
                last = taken[-1][0]
                position = next(e.position for e in events if e.seq == last)
            else:
                position = events[-1].position if events else state.position
            rows = [
                NewDelivery(seq, state.subscription, group, replay, self._log.take_id())
                for seq, group in taken
            ]
            self._log.write_deliveries(conn, rows, now)
            more = len(events) == scan and not truncated
            conn.execute(
                "UPDATE pipeline_replays SET at_time = ?, at_seq = ?, queued = queued + ?, scanned = ? "
                "WHERE id = ?",
                (position[0], position[1], len(rows), int(not more and not truncated), replay),
            )
            return Queued(len(rows), more)

        return await self._db.write(job, durable=False)

    async def replays(self, subscription: str | None) -> list[Replay]:
        """A subscription's replays, oldest first; None: every replay with events left to queue."""

        def job(conn: sqlite3.Connection) -> list[Replay]:
            if subscription is None:
                rows = conn.execute(
                    f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE cancelled = 0 AND scanned = 0 "
                    "ORDER BY created, id"
                )
            else:
                rows = conn.execute(
                    f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE subscription = ? "
                    "ORDER BY created, id",
                    (subscription,),
                )
            return [Replay.from_row(r) for r in rows]

        return await self._db.read(job)

    async def cancel_replay(
        self, subscription: str, replay: str, keep: Collection[int]
    ) -> tuple[Replay, int] | None:
        """Cancel a running replay and remove its deliveries but ``keep``."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> tuple[Replay, int] | None:
            query = f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE id = ? AND subscription = ?"
            found = conn.execute(query, (replay, subscription)).fetchone()
            if found is None:
                return None
            state = Replay.from_row(found)
            if state.state != "running":
                return state, 0
            ids = [
                int(r[0])
                for r in conn.execute("SELECT id FROM pipeline_deliveries WHERE replay = ?", (replay,))
                if int(r[0]) not in keep
            ]
            gone = self._log.remove(conn, ids, now)
            conn.execute(
                "UPDATE pipeline_replays SET cancelled = 1, removed = removed + ? WHERE id = ?",
                (len(gone), replay),
            )
            return Replay.from_row(conn.execute(query, (replay, subscription)).fetchone()), len(gone)

        return await self._db.write(job)

    async def _get(self, replay: str) -> Replay | None:
        def job(conn: sqlite3.Connection) -> Replay | None:
            row = conn.execute(f"SELECT {REPLAY_COLUMNS} FROM pipeline_replays WHERE id = ?", (replay,))
            found = row.fetchone()
            return None if found is None else Replay.from_row(found)

        return await self._db.read(job)
