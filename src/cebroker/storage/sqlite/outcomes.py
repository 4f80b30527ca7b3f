"""Outcomes on SQLite (:class:`~cebroker.storage.outcomes.Outcomes`): confirmed deliveries
removed and counted, drops, retries, dead letters and expiry, each one write on the writer."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from cebroker.storage.deliveries import DeadLetter, Pending
from cebroker.storage.sqlite.rows import BUMP, REPLAY_BUMP, LogBase


class SqliteOutcomes(LogBase):
    """What became of the deliveries attempted (see the module docstring)."""

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

        # Guarded: nothing in it raises but SQLite, whose errors roll the whole transaction back
        # (the writer's rule), so the writer's savepoint around it would be two statements for
        # nothing; it runs for every group of completed deliveries.
        await self._db.write(job, durable=False, guarded=True)

    async def drop(self, done: Sequence[tuple[int, int]]) -> int:
        """Remove deliveries ``(delivery id, event seq)`` whose subscription no longer exists;
        returns how many were still there."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> int:
            return len(self.remove(conn, [d[0] for d in done], now))

        return await self._db.write(job, durable=False)

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
