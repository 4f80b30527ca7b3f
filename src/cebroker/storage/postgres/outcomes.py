"""Outcomes on PostgreSQL (:class:`~cebroker.storage.outcomes.Outcomes`): confirmed deliveries
removed in one statement (``cebroker_complete``, which also frees the next delivery of their
ordering groups and counts their replays), drops, retries, dead letters and expiry, each in the
lock order of :mod:`~cebroker.storage.postgres.deliveries`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson
from psycopg import sql

from cebroker.storage.deliveries import HELD_AT, DeadLetter, Pending
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.postgres.database import AsyncConn
from cebroker.storage.postgres.rows import BUMP, FAILED, REPLAY_BUMP, LogBase, Removed

log = logging.getLogger("cebroker.storage")

#: Confirmed deliveries removed and counted, in one statement (see ``complete``).
COMPLETE = "SELECT cebroker_complete(%b::bigint[], %s, %s)"
#: Confirmations kept for a new id's transaction when recording them failed (see ``complete``).
MAX_UNRECORDED = 100_000


class PostgresOutcomes(LogBase):
    """What became of the deliveries attempted (see the module docstring)."""

    _unrecorded: dict[int, None]

    async def complete(self, done: Sequence[tuple[int, int, str]]) -> None:
        """Remove confirmed deliveries and count them (whoever claims them now), in one statement
        (which also frees the next delivery of their ordering groups and counts their replays).

        Confirmations that fail (the database is away) are also kept here, at most
        :data:`MAX_UNRECORDED` of them: should this instance take a new id when the database
        returns, it records them before its old claims are freed (:meth:`_record_unrecorded`),
        so another instance does not send them again. The caller retries them too."""
        ids = [d[0] for d in done]
        try:
            await self._db.call(COMPLETE, (ids, self._clock.now(), HELD_AT))
        except StorageUnavailable:
            for delivery in ids:
                self._unrecorded[delivery] = None
            while len(self._unrecorded) > MAX_UNRECORDED:  # the oldest go first
                del self._unrecorded[next(iter(self._unrecorded))]
            raise
        if self._unrecorded:
            for delivery in ids:
                self._unrecorded.pop(delivery, None)

    async def _record_unrecorded(self, conn: AsyncConn) -> None:
        """In the transaction that frees this instance's old claims, before: record the
        confirmations that failed while the database was away."""
        if self._unrecorded:
            ids, self._unrecorded = list(self._unrecorded), {}
            await conn.execute(COMPLETE, (ids, self._clock.now(), HELD_AT))
            log.info("recorded %d deliveries confirmed while the database was away", len(ids))

    async def drop(self, done: Sequence[tuple[int, int]]) -> int:
        """Remove deliveries of deleted subscriptions; returns how many were still there."""
        ids = [d[0] for d in done]
        now = self._clock.now()

        async def job(conn: AsyncConn) -> int:
            gone = await self._delete(conn, sql.SQL("id = ANY(%b::bigint[])"), (ids,))
            await self.settle(conn, gone, now)
            return len(gone)

        return await self._db.run(job, durable=False)

    async def reschedule(self, item: Pending, attempts: int, next_at: float, error: str) -> None:
        """Record a failed attempt and when to try again; the claim is given back."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> None:
            async with conn.pipeline():
                await conn.execute(
                    "UPDATE pipeline_deliveries SET attempts = %s, next_at = %s, last_error = %s,"
                    " owner = NULL WHERE id = %s AND (owner IS NULL OR owner = %s)",
                    (attempts, next_at, error, item.id, item.owner),
                )
                if item.replay is not None:  # the replay's row before the stats row (lock order)
                    await conn.execute(REPLAY_BUMP.format(col=sql.Identifier("failed")), (1, item.replay))
                await conn.execute(FAILED, (item.subscription, error, now))

        await self._db.run(job, durable=False)

    async def dead_letter(
        self, item: Pending, event: bytes, attempts: int, error: str, status: str | None, body: str | None
    ) -> None:
        """Move a delivery this instance claims to the dead letters, keeping the reason."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> None:
            gone = await self._delete(
                conn, sql.SQL("id = %s AND (owner IS NULL OR owner = %s)"), (item.id, item.owner)
            )
            # in the lock order: the replay's row, the group, the stats rows, the backlog shard
            async with conn.pipeline():
                await self.replay_counts(conn, "deadlettered", gone)
                if item.replay is not None:
                    await conn.execute(REPLAY_BUMP.format(col=sql.Identifier("failed")), (1, item.replay))
            await self.lock_removed(conn, gone)
            async with conn.pipeline():
                if gone:
                    await conn.execute(
                        "INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts,"
                        " last_error, first_at, failed_at, trace)"
                        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                        (
                            item.subscription,
                            event.decode(),
                            status,
                            body,
                            attempts,
                            error,
                            item.first_at,
                            now,
                            item.trace,
                        ),
                    )
                    await conn.execute(
                        BUMP.format(col=sql.Identifier("deadlettered")), (item.subscription, 1)
                    )
                await conn.execute(FAILED, (item.subscription, error, now))
            await self.settle(conn, gone, now)

        await self._db.run(job, durable=False)

    async def expire(
        self, subscription: str, accepted_before: float, reason: str, limit: int
    ) -> tuple[list[DeadLetter], float | None]:
        """Dead-letter up to ``limit`` unclaimed deliveries accepted before ``accepted_before``,
        oldest first (one statement); the dead letters made and the oldest acceptance time still
        pending. Claimed ones are being attempted by an instance and left to it."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> tuple[list[tuple[Any, ...]], float | None]:
            cur = await conn.execute(
                "WITH gone AS (DELETE FROM pipeline_deliveries WHERE id IN ("
                " SELECT id FROM pipeline_deliveries WHERE subscription = %s AND owner IS NULL"
                " AND first_at < %s ORDER BY first_at, id LIMIT %s FOR UPDATE SKIP LOCKED)"
                " RETURNING id, event_seq, attempts, first_at, orderkey, replay),"
                " made AS (INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts,"
                " last_error, first_at, failed_at, trace)"
                " SELECT %s, e.body, NULL, NULL, g.attempts, %s, g.first_at, %s, e.trace"
                " FROM gone g JOIN pipeline_events e ON e.seq = g.event_seq ORDER BY g.first_at, g.id"
                " RETURNING id, event, attempts, first_at)"
                " SELECT m.id, m.event, m.attempts, m.first_at, r.seqs, r.groups, r.replays FROM made m,"
                " (SELECT array_agg(g.event_seq ORDER BY g.id) AS seqs, array_agg(g.orderkey ORDER BY g.id)"
                " AS groups, array_agg(g.replay ORDER BY g.id) AS replays FROM gone g) AS r",
                (subscription, accepted_before, limit, subscription, reason, now),
            )
            made = await cur.fetchall()
            if made:
                seqs, groups, replays = made[0][4], made[0][5], made[0][6]
                gone: list[Removed] = [
                    (int(seq), subscription, group, replay)
                    for seq, group, replay in zip(seqs, groups, replays, strict=True)
                ]
                # in the lock order: the replays' rows, the groups, the stats row, the backlog
                async with conn.pipeline():
                    await self.replay_counts(conn, "deadlettered", gone)
                await self.lock_removed(conn, gone)
                await conn.execute(BUMP.format(col=sql.Identifier("deadlettered")), (subscription, len(made)))
                # the next delivery of each ordering group, the events nothing needs, the backlog
                await self.settle(conn, gone, now)
            cur = await conn.execute(
                "SELECT min(first_at) FROM pipeline_deliveries WHERE subscription = %s", (subscription,)
            )
            row = await cur.fetchone()
            return made, None if row is None or row[0] is None else float(row[0])

        made, oldest = await self._db.run(job, durable=False)
        letters = [
            DeadLetter(
                int(r[0]), subscription, orjson.loads(r[1]), None, None, int(r[2]), reason, float(r[3]), now
            )
            for r in made
        ]
        return sorted(letters, key=lambda d: (d.first_at, d.id)), oldest
