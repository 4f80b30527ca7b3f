"""The due queue on SQLite (:class:`~cebroker.storage.queue.DueQueue`): read on the writer, in
order with the dispatcher's own writes (see :mod:`~cebroker.storage.sqlite.deliveries`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Collection

import orjson

from cebroker.storage.deliveries import Limits, Pending
from cebroker.storage.sqlite.rows import LogBase

#: Due deliveries of a subscription, oldest first; ``skip`` is empty or :data:`SKIP`.
DUE = (
    "SELECT d.id, d.event_seq, d.attempts, d.first_at, e.body, d.replay, e.trace "
    "FROM pipeline_deliveries d JOIN pipeline_events e ON e.seq = d.event_seq "
    "WHERE d.subscription = ?1 AND d.next_at <= ?2{skip} ORDER BY d.next_at, d.id LIMIT ?3"
)
#: Leaves out the deliveries of a JSON array of ids.
SKIP = " AND d.id NOT IN (SELECT value FROM json_each(?4))"


class SqliteDueQueue(LogBase):
    """``due`` and ``backlog``; nothing is claimed: one process reads the file."""

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None, *, held: Collection[int] = ()
    ) -> tuple[list[Pending], float | None]:
        """Up to ``limit`` deliveries of ``subscription`` due now (oldest first), leaving out
        those ``held`` in memory, and when the next one not returned falls due (now if more are
        due, None if there are none). ``limits`` are the dispatcher's to enforce: it is the only
        one delivering."""
        now = self._clock.now()
        # The ids as of this call (the set goes on changing on the event loop meanwhile). SQLite
        # skips them in the index, before their event is read: read again and skipped by the
        # dispatcher, they made every delivery cost about two rows read instead of one.
        skipped = orjson.dumps(list(held)) if held else None

        def job(conn: sqlite3.Connection) -> tuple[list[Pending], float | None]:
            if skipped is None:
                rows = conn.execute(DUE.format(skip=""), (subscription, now, limit)).fetchall()
            else:
                rows = conn.execute(DUE.format(skip=SKIP), (subscription, now, limit, skipped)).fetchall()
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
        # Guarded: it only reads, so a failure leaves no write behind, and the writer's savepoint
        # around it would be two statements for nothing.
        return await self._db.write(job, durable=False, guarded=True)

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""

        def job(conn: sqlite3.Connection) -> dict[str, tuple[int, float]]:
            rows = conn.execute(
                "SELECT subscription, COUNT(*), MIN(next_at) FROM pipeline_deliveries GROUP BY subscription"
            )
            return {r[0]: (r[1], r[2]) for r in rows}

        # On the writer, in order with the dispatcher's own writes: see the module docstring.
        return await self._db.write(job, durable=False)
