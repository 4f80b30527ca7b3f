"""Dead letters on SQLite (:class:`~cebroker.storage.deadletters.DeadLetters`): pages of them
(on the reader), and redrive (back into the log as deliveries due now)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from cebroker.storage.deliveries import DeadLetter
from cebroker.storage.sqlite.rows import LogBase


class SqliteDeadLetters(LogBase):
    """A subscription's dead letters (see the module docstring)."""

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
