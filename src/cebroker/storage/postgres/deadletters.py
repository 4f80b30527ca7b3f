"""Dead letters on PostgreSQL (:class:`~cebroker.storage.deadletters.DeadLetters`): pages of
them, and redrive (back into the log as deliveries due now, announced to every instance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson
from psycopg import sql

from cebroker.storage.deliveries import DeadLetter
from cebroker.storage.postgres.database import AsyncConn
from cebroker.storage.postgres.instances import notify_due
from cebroker.storage.postgres.rows import COUNT, DELIVERIES, EVENTS, NEXT_IDS, LogBase


class PostgresDeadLetters(LogBase):
    """A subscription's dead letters (see the module docstring)."""

    async def dead_letters(self, subscription: str, after: int, limit: int) -> list[DeadLetter]:
        """One page of a subscription's dead letters, oldest first, ids greater than ``after``."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(
                "SELECT id, subscription, event, status, body, attempts, last_error, first_at, failed_at"
                " FROM pipeline_deadletters WHERE subscription = %s AND id > %s ORDER BY id LIMIT %s",
                (subscription, after, limit),
            )
            return await cur.fetchall()

        rows = await self._db.run(job, write=False)
        return [
            DeadLetter(int(r[0]), str(r[1]), orjson.loads(r[2]), r[3], r[4], int(r[5]), str(r[6]), r[7], r[8])
            for r in rows
        ]

    async def redrive(self, subscription: str, ids: Sequence[int] | None) -> int:
        """Turn dead letters back into deliveries due now; returns how many."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> int:
            picked = sql.SQL("AND id = ANY(%b::bigint[])" if ids is not None else "")
            params: tuple[Any, ...] = (subscription, list(ids)) if ids is not None else (subscription,)
            cur = await conn.execute(
                sql.SQL(
                    "DELETE FROM pipeline_deadletters WHERE subscription = %s {} RETURNING id, event, trace"
                ).format(picked),
                params,
            )
            rows = sorted(await cur.fetchall())
            if not rows:
                return 0
            cur = await conn.execute(NEXT_IDS, ("pipeline_events_seq", len(rows)))
            seqs = [int(s) for s in ((await cur.fetchone()) or ([],))[0]]
            cur = await conn.execute(NEXT_IDS, ("pipeline_deliveries_seq", len(rows)))
            dids = [int(s) for s in ((await cur.fetchone()) or ([],))[0]]
            none: list[Any] = [None] * len(rows)
            async with conn.pipeline():
                await conn.execute(
                    EVENTS, (now, False, seqs, [str(r[1]) for r in rows], [r[2] for r in rows])
                )
                params = (now, now, dids, seqs, [subscription] * len(rows), none, none, none)
                await conn.execute(DELIVERIES, params)
                await conn.execute(COUNT, (len(rows),))
                await notify_due(conn, {subscription})
            return len(rows)

        return await self._db.run(job)
