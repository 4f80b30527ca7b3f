"""Clean-up on SQLite (:class:`~cebroker.storage.cleanup.Cleanup`): everything of a deleted
subscription, and de-duplication keys past the window."""

from __future__ import annotations

import sqlite3

from cebroker.storage.sqlite.rows import LogBase

# Only an event that is not kept for the retention goes with its last delivery.
GC_EVENT = (
    "DELETE FROM pipeline_events WHERE seq = ?1 AND archived = 0 "
    "AND NOT EXISTS (SELECT 1 FROM pipeline_deliveries WHERE event_seq = ?1)"
)


class SqliteCleanup(LogBase):
    """What the log forgets (see the module docstring)."""

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
