"""The event archive and its replays on PostgreSQL, for every instance (see
:mod:`cebroker.storage.archive`).

Archived events are the ``pipeline_events`` rows marked ``archived``, read in acceptance order
through a partial index on ``(received, seq)``; ``pipeline_archive`` keeps their count and size
in shards (one per connection, as the backlog), ``pipeline_replays`` each replay's range,
position and counts.

* Pruning runs on one instance at a time (``pg_try_advisory_xact_lock``: the others skip it).
* A replay is stepped by one instance at a time: a step locks the replay's row with ``FOR UPDATE
  SKIP LOCKED``, so another instance trying meanwhile moves on; the deliveries it queues and its
  new position commit together.
* A replay that must cover every event accepted before it (``boundary``) takes the exclusive side
  of the lock every append holds shared until it commits
  (:data:`~cebroker.storage.postgres.rows.BOUNDARY`): once it has it, every append that
  matched without the new subscription has committed, and ``max(seq)`` bounds them all.
"""

from __future__ import annotations

from collections.abc import Collection

from psycopg import sql

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
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.deliveries import PostgresDeliveryLog
from cebroker.storage.postgres.rows import BOUNDARY, NewDelivery

_SCAN = (
    "SELECT seq, received, body FROM pipeline_events WHERE archived AND (received, seq) > (%s, %s)"
    " AND received < %s AND seq <= %s ORDER BY received, seq LIMIT %s"
)
_PIN = (
    "SELECT at_time, at_seq FROM pipeline_replays WHERE NOT cancelled AND NOT scanned"
    " ORDER BY at_time, at_seq LIMIT 1"
)
#: ``SELECT <the replay columns> FROM pipeline_replays``, to which each query adds its clauses.
_SELECT = sql.SQL("SELECT {} FROM pipeline_replays ").format(
    sql.SQL(", ").join(sql.Identifier(column.strip()) for column in REPLAY_COLUMNS.split(","))
)
#: The advisory lock key of pruning (any constant the broker alone uses).
_PRUNING = 0x63656272_70727565 & 0x7FFF_FFFF_FFFF_FFFF


async def _scan(
    conn: AsyncConn, after: Position, until: float, limit: int, last_seq: int | None
) -> list[Archived]:
    bound = NO_SEQ_BOUND if last_seq is None else last_seq
    cur = await conn.execute(_SCAN, (after[0], after[1], until, bound, limit))
    return [Archived(int(r[0]), float(r[1]), str(r[2])) for r in await cur.fetchall()]


class PostgresEventArchive:
    """:class:`~cebroker.storage.archive.EventArchive` over the shared delivery log ``log``."""

    def __init__(
        self, db: Database, log: PostgresDeliveryLog, *, retention: float, clock: Clock = SYSTEM_CLOCK
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

        async def job(conn: AsyncConn) -> ArchiveStats:
            cur = await conn.execute(
                "SELECT coalesce(sum(events), 0), coalesce(sum(bytes), 0), coalesce(max(pruned_to), 0)"
                " FROM pipeline_archive"
            )
            events, size, pruned_to = await cur.fetchone() or (0, 0, 0.0)
            cur = await conn.execute(
                "SELECT received FROM pipeline_events WHERE archived ORDER BY received, seq LIMIT 1"
            )
            oldest = await cur.fetchone()
            horizon = max(now - self._retention, float(pruned_to)) if self._retention > 0 else now
            return ArchiveStats(int(events), int(size), None if oldest is None else float(oldest[0]), horizon)

        return await self._db.run(job, write=False)

    async def read(
        self, after: Position, until: float, limit: int, last_seq: int | None = None
    ) -> list[Archived]:
        """One page of archived events past ``after``, in acceptance order."""
        return await self._db.run(lambda conn: _scan(conn, after, until, limit, last_seq), write=False)

    async def prune(self, before: float, max_bytes: int | None, limit: int) -> int:
        """Take up to ``limit`` of the oldest events out of the archive, if no other instance is
        pruning now (see the contract)."""

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_PRUNING,))
            locked = await cur.fetchone()
            if not locked or not locked[0]:
                return 0
            cur = await conn.execute("SELECT coalesce(sum(bytes), 0) FROM pipeline_archive")
            (size,) = await cur.fetchone() or (0,)
            over = int(size) - max_bytes if max_bytes is not None else 0
            cur = await conn.execute(_PIN)
            pin = await cur.fetchone()
            cur = await conn.execute(
                "SELECT seq, received, octet_length(body) FROM pipeline_events WHERE archived"
                " ORDER BY received, seq LIMIT %s",
                (limit,),
            )
            chosen: list[int] = []
            freed = 0
            newest = 0.0
            for seq, received, length in await cur.fetchall():
                position = (float(received), int(seq))
                aged = position[0] < before and (pin is None or position <= (float(pin[0]), int(pin[1])))
                if not aged and over <= 0:
                    break  # in acceptance order: everything after is newer
                chosen.append(int(seq))
                freed += int(length)
                over -= int(length)
                newest = max(newest, position[0])
            if not chosen:
                return 0
            async with conn.pipeline():
                # Still needed by pending deliveries: out of the archive, but kept for them (and
                # removed with the last of them, like any event that is not archived).
                await conn.execute(
                    "UPDATE pipeline_events e SET archived = false WHERE e.seq = ANY(%b::bigint[])"
                    " AND EXISTS (SELECT 1 FROM pipeline_deliveries d WHERE d.event_seq = e.seq)",
                    (chosen,),
                )
                await conn.execute(
                    "DELETE FROM pipeline_events WHERE seq = ANY(%b::bigint[]) AND archived", (chosen,)
                )
                await conn.execute(
                    "UPDATE pipeline_archive SET events = events - %s, bytes = bytes - %s,"
                    " pruned_to = greatest(pruned_to, %s) WHERE shard = pg_backend_pid() %% 64",
                    (len(chosen), freed, newest),
                )
            return len(chosen)

        return await self._db.run(job, durable=False)

    async def create_replay(self, request: ReplayRequest) -> Replay:
        """Store a new replay; an existing id returns the stored one."""
        existing = await self._get(request.id)
        if existing is not None:
            return existing
        now = self._clock.now()

        async def job(conn: AsyncConn) -> Replay:
            last_seq = None
            if request.boundary:
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (BOUNDARY,))
                cur = await conn.execute("SELECT coalesce(max(seq), 0) FROM pipeline_events")
                last_seq = int(((await cur.fetchone()) or (0,))[0])
            await conn.execute(
                "INSERT INTO pipeline_replays (id, subscription, created, since, until, last_seq, filter,"
                " events, at_time, at_seq) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, -1)"
                " ON CONFLICT (id) DO NOTHING",
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
            cur = await conn.execute(_SELECT + sql.SQL("WHERE id = %s"), (request.id,))
            row = await cur.fetchone()
            assert row is not None, "the replay written in this transaction"
            return Replay.from_row(row)

        return await self._db.run(job)

    async def queue(self, replay: str, window: int, scan: int, pick: Pick) -> Queued:
        """One step of a running replay, by one instance at a time (see the module docstring)."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> Queued:
            cur = await conn.execute(
                _SELECT + sql.SQL("WHERE id = %s FOR UPDATE SKIP LOCKED"),
                (replay,),
            )
            found = await cur.fetchone()
            if found is None:  # gone, or another instance is stepping it
                return Queued(0, False)
            state = Replay.from_row(found)
            room = window - state.pending
            if state.cancelled or state.scanned or room <= 0:
                return Queued(0, False)
            events = await _scan(conn, state.position, state.until, scan, state.last_seq)
            picked = pick(events)
            taken = picked[:room]
            truncated = len(picked) > room
            if truncated:
                last = taken[-1][0]
                position = next(e.position for e in events if e.seq == last)
            else:
                position = events[-1].position if events else state.position
            rows = [NewDelivery(seq, state.subscription, group, replay) for seq, group in taken]
            await self._log.write_deliveries(conn, rows, now)
            more = len(events) == scan and not truncated
            await conn.execute(
                "UPDATE pipeline_replays SET at_time = %s, at_seq = %s, queued = queued + %s, scanned = %s"
                " WHERE id = %s",
                (position[0], position[1], len(rows), not more and not truncated, replay),
            )
            return Queued(len(rows), more)

        return await self._db.run(job, durable=False)

    async def replays(self, subscription: str | None) -> list[Replay]:
        """A subscription's replays, oldest first; None: every replay with events left to queue."""

        async def job(conn: AsyncConn) -> list[Replay]:
            if subscription is None:
                cur = await conn.execute(
                    _SELECT + sql.SQL("WHERE NOT cancelled AND NOT scanned ORDER BY created, id")
                )
            else:
                cur = await conn.execute(
                    _SELECT + sql.SQL("WHERE subscription = %s ORDER BY created, id"),
                    (subscription,),
                )
            return [Replay.from_row(r) for r in await cur.fetchall()]

        return await self._db.run(job, write=False)

    async def cancel_replay(
        self, subscription: str, replay: str, keep: Collection[int]
    ) -> tuple[Replay, int] | None:
        """Cancel a running replay; its deliveries no instance has claimed leave the log."""
        now = self._clock.now()
        query = _SELECT + sql.SQL("WHERE id = %s AND subscription = %s")

        async def job(conn: AsyncConn) -> tuple[Replay, int] | None:
            cur = await conn.execute(query + sql.SQL(" FOR UPDATE"), (replay, subscription))
            found = await cur.fetchone()
            if found is None:
                return None
            state = Replay.from_row(found)
            if state.state != "running":
                return state, 0
            cur = await conn.execute(
                "DELETE FROM pipeline_deliveries WHERE replay = %s AND owner IS NULL"
                " AND NOT (id = ANY(%b::bigint[])) RETURNING event_seq, subscription, orderkey, replay",
                (replay, list(keep)),
            )
            gone = [(int(r[0]), str(r[1]), r[2], r[3]) for r in await cur.fetchall()]
            await self._log.settle(conn, gone, now)
            await conn.execute(
                "UPDATE pipeline_replays SET cancelled = true, removed = removed + %s WHERE id = %s",
                (len(gone), replay),
            )
            cur = await conn.execute(query, (replay, subscription))
            row = await cur.fetchone()
            assert row is not None, "the replay read and updated in this transaction"
            return Replay.from_row(row), len(gone)

        return await self._db.run(job)

    async def _get(self, replay: str) -> Replay | None:
        async def job(conn: AsyncConn) -> Replay | None:
            cur = await conn.execute(_SELECT + sql.SQL("WHERE id = %s"), (replay,))
            found = await cur.fetchone()
            return None if found is None else Replay.from_row(found)

        return await self._db.run(job, write=False)
