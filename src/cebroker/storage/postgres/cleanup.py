"""Clean-up on PostgreSQL (:class:`~cebroker.storage.cleanup.Cleanup`): everything of a deleted
subscription, and de-duplication keys past the window."""

from __future__ import annotations

from cebroker.storage.postgres.database import AsyncConn
from cebroker.storage.postgres.rows import COUNT, GC_EVENTS, LogBase


class PostgresCleanup(LogBase):
    """What the log forgets (see the module docstring)."""

    async def forget(self, subscription: str) -> int:
        """Delete everything kept for a deleted subscription; returns the pending count removed."""

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute(
                "DELETE FROM pipeline_deliveries WHERE subscription = %s RETURNING event_seq", (subscription,)
            )
            gone = [int(r[0]) for r in await cur.fetchall()]
            # in the lock order: the replays' rows, the stats row, the backlog shard last
            async with conn.pipeline():
                await conn.execute("DELETE FROM pipeline_replays WHERE subscription = %s", (subscription,))
                await conn.execute(
                    "DELETE FROM pipeline_deadletters WHERE subscription = %s", (subscription,)
                )
                await conn.execute("DELETE FROM pipeline_stats WHERE subscription = %s", (subscription,))
                await conn.execute(
                    "DELETE FROM pipeline_buckets WHERE key = %s", (f"subscription {subscription}",)
                )
                await conn.execute("DELETE FROM pipeline_claims WHERE subscription = %s", (subscription,))
                await conn.execute(
                    "DELETE FROM pipeline_claims_freed WHERE subscription = %s", (subscription,)
                )
                if gone:
                    await conn.execute(GC_EVENTS, (gone,))
                    await conn.execute(COUNT, (-len(gone),))
            return len(gone)

        return await self._db.run(job)

    async def purge_seen(self) -> int:
        """Forget de-duplication keys older than the window."""
        horizon = self._clock.now() - self.dedup_window

        async def job(conn: AsyncConn) -> int:
            cur = await conn.execute("DELETE FROM pipeline_seen WHERE at < %s", (horizon,))
            return cur.rowcount

        return await self._db.run(job, durable=False)
