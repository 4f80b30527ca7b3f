"""Counts on PostgreSQL (:class:`~cebroker.storage.stats.DeliveryStats`): the backlog of every
instance (``pipeline_backlog``, one shard per connection, kept by every write that adds or
removes deliveries) and each subscription's counts (``pipeline_stats``)."""

from __future__ import annotations

from cebroker.storage.postgres.database import AsyncConn
from cebroker.storage.postgres.rows import LogBase
from cebroker.storage.stats import NO_STATS, SubscriptionCounts, counts, every_count


class PostgresStats(LogBase):
    """What the log counts (see the module docstring)."""

    async def pending(self) -> int:
        """Deliveries in the log, every instance's together."""

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute("SELECT coalesce(sum(pending), 0) FROM pipeline_backlog")
            row = await cur.fetchone()
            return int(row[0]) if row else 0

        return await self._db.run(job, write=False)

    async def status(self, subscription: str) -> SubscriptionCounts:
        """Counts and the last error of one subscription (the same on every instance)."""

        async def job(conn: AsyncConn) -> SubscriptionCounts:
            cur = await conn.execute(
                "SELECT (SELECT count(*) FROM pipeline_deliveries WHERE subscription = %s),"
                " (SELECT count(*) FROM pipeline_deadletters WHERE subscription = %s)",
                (subscription, subscription),
            )
            pending, dead = await cur.fetchone() or (0, 0)
            cur = await conn.execute(
                "SELECT delivered, failed, deadlettered, last_error, last_error_at FROM pipeline_stats"
                " WHERE subscription = %s",
                (subscription,),
            )
            row = await cur.fetchone()
            return counts(pending, dead, (row[0], row[1], row[2], row[3], row[4]) if row else NO_STATS)

        return await self._db.run(job, write=False)

    async def statuses(self) -> dict[str, SubscriptionCounts]:
        """:meth:`status` of every subscription the log knows anything about, in one snapshot."""

        async def job(conn: AsyncConn) -> dict[str, SubscriptionCounts]:
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            cur = await conn.execute("SELECT subscription, count(*) FROM pipeline_deliveries GROUP BY 1")
            pending = {str(sub): int(count) for sub, count in await cur.fetchall()}
            cur = await conn.execute("SELECT subscription, count(*) FROM pipeline_deadletters GROUP BY 1")
            dead = {str(sub): int(count) for sub, count in await cur.fetchall()}
            cur = await conn.execute(
                "SELECT subscription, delivered, failed, deadlettered, last_error, last_error_at"
                " FROM pipeline_stats"
            )
            stats = {str(r[0]): (r[1], r[2], r[3], r[4], r[5]) for r in await cur.fetchall()}
            return every_count(pending, dead, stats)

        return await self._db.run(job, write=False)
