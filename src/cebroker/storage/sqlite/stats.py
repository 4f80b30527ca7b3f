"""Counts on SQLite (:class:`~cebroker.storage.stats.DeliveryStats`), read on the reader."""

from __future__ import annotations

import sqlite3

from cebroker.storage.sqlite.rows import LogBase
from cebroker.storage.stats import NO_STATS, SubscriptionCounts, counts, every_count


class SqliteStats(LogBase):
    """What the log counts."""

    async def pending(self) -> int:
        """Deliveries in the log."""

        def job(conn: sqlite3.Connection) -> int:
            return int(conn.execute("SELECT COUNT(*) FROM pipeline_deliveries").fetchone()[0])

        return await self._db.read(job)

    async def status(self, subscription: str) -> SubscriptionCounts:
        """Counts and the last error of one subscription."""

        def job(conn: sqlite3.Connection) -> SubscriptionCounts:
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
            ).fetchone()
            return counts(pending, dead, (row[0], row[1], row[2], row[3], row[4]) if row else NO_STATS)

        return await self._db.read(job)

    async def statuses(self) -> dict[str, SubscriptionCounts]:
        """:meth:`status` of every subscription the log knows anything about, in one read."""

        def job(conn: sqlite3.Connection) -> dict[str, SubscriptionCounts]:
            pending = dict(
                conn.execute("SELECT subscription, COUNT(*) FROM pipeline_deliveries GROUP BY subscription")
            )
            dead = dict(
                conn.execute("SELECT subscription, COUNT(*) FROM pipeline_deadletters GROUP BY subscription")
            )
            stats = {
                row[0]: (row[1], row[2], row[3], row[4], row[5])
                for row in conn.execute(
                    "SELECT subscription, delivered, failed, deadlettered, last_error, last_error_at "
                    "FROM pipeline_stats"
                )
            }
            return every_count(pending, dead, stats)

        return await self._db.read(job)
