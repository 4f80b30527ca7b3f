"""Pull delivery on PostgreSQL (:class:`~cebroker.storage.pull.PullLog`), shared by every instance.

A lock is held in the delivery row itself: its ``owner`` is ``lock:<token>@<lock start>`` and
its due time is the lock's end. No instance's take-over touches such an owner (those name
instances), and the push claim skips owned rows, so the lock outlives the instance that handed
it out: a receive on one instance and an acknowledge on another work, and when the instance
dies its locks simply expire (the rows are due at the lock's end, for any instance's receive).
Every settlement locks the rows (``FOR UPDATE``) before it judges the tokens, in one
transaction, so two instances never settle one token twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from psycopg import sql

from cebroker.clock import SYSTEM_CLOCK, Clock
from cebroker.storage.deliveries import HELD_AT
from cebroker.storage.postgres.database import AsyncConn, Database
from cebroker.storage.postgres.deliveries import PostgresDeliveryLog
from cebroker.storage.postgres.instances import notify_due
from cebroker.storage.postgres.rows import BUMP, FAILED
from cebroker.storage.pull import (
    EXPIRED,
    UNKNOWN,
    Locked,
    LockStats,
    SettledTokens,
    TokenResult,
    new_token,
    token_delivery,
)

MAX_REACHED = "maximum delivery count reached"
LOCK_PREFIX = "lock:"

#: Due rows of a subscription, free or with an ended lock, locked for this transaction.
PICK = (
    "SELECT d.id, d.attempts, d.first_at, e.body, d.replay FROM pipeline_deliveries d"
    " JOIN pipeline_events e ON e.seq = d.event_seq"
    " WHERE d.subscription = %s AND d.next_at <= %s AND (d.owner IS NULL OR d.owner LIKE 'lock:%%')"
    " ORDER BY d.next_at, d.id LIMIT %s FOR UPDATE OF d SKIP LOCKED"
)
TAKE = (
    "UPDATE pipeline_deliveries d SET owner = v.owner, attempts = d.attempts + 1, next_at = %s"
    " FROM unnest(%b::bigint[], %b::text[]) AS v (id, owner) WHERE d.id = v.id"
)
#: The rows named by tokens, locked for this transaction (in id order, as every settlement).
HELD = (
    "SELECT id, owner, next_at FROM pipeline_deliveries WHERE id = ANY(%b::bigint[]) AND subscription = %s"
    " ORDER BY id FOR UPDATE"
)


def _owner(token: str, since: float) -> str:
    return f"{LOCK_PREFIX}{token}@{since!r}"


def _parse(owner: str | None) -> tuple[str, float] | None:
    """The token and lock start an owner names, None if it is no lock."""
    if owner is None or not owner.startswith(LOCK_PREFIX):
        return None
    token, _, since = owner[len(LOCK_PREFIX) :].rpartition("@")
    return token, float(since)


Act = Callable[[AsyncConn, list[int], float], Awaitable[None]]


class PostgresPullLog:
    """Locks in the delivery rows; see the module docstring."""

    def __init__(self, db: Database, log: PostgresDeliveryLog, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._db = db
        self._log = log
        self._clock = clock
        self._settled = SettledTokens()

    async def receive(self, subscription: str, limit: int, lock: float, max_deliveries: int) -> list[Locked]:
        """Lock up to ``limit`` due deliveries; dead-letter those received too often."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> list[Locked]:
            out: list[Locked] = []
            for _ in range(8):  # each pass may dead-letter rows instead of handing them out
                cur = await conn.execute(PICK, (subscription, now, limit - len(out)))
                rows = await cur.fetchall()
                over = [r for r in rows if int(r[1]) >= max_deliveries]
                ids: list[int] = []
                owners: list[str] = []
                for delivery, attempts, first_at, body, replay in rows:
                    if int(attempts) >= max_deliveries:
                        continue
                    token = new_token(int(delivery))
                    ids.append(int(delivery))
                    owners.append(_owner(token, now))
                    out.append(
                        Locked(
                            token, int(delivery), body, int(attempts) + 1, now + lock, float(first_at), replay
                        )
                    )
                if ids:
                    await conn.execute(TAKE, (now + lock, ids, owners))
                for delivery, attempts, first_at, body, _ in over:
                    await self._dead_letter(
                        conn, subscription, int(delivery), body, int(attempts), first_at, MAX_REACHED, now
                    )
                if not over or len(out) >= limit:
                    break
            return out

        return await self._db.run(job, durable=False)

    async def _settle(self, subscription: str, tokens: Sequence[str], act: Act) -> list[TokenResult]:
        """Judge each token with its row locked and apply ``act`` to the deliveries of those that hold."""
        wanted = {t: token_delivery(t) for t in tokens}

        async def job(conn: AsyncConn) -> list[TokenResult]:
            now = self._clock.now()
            ids = sorted({d for d in wanted.values() if d is not None})
            cur = await conn.execute(HELD, (ids, subscription))
            rows = {int(r[0]): (r[1], float(r[2])) for r in await cur.fetchall()}
            results: list[TokenResult] = []
            good: list[int] = []
            for token, delivery in wanted.items():
                why = self._why(token, delivery, rows, now)
                if why is None and delivery is not None:
                    good.append(delivery)
                    del rows[delivery]  # a token given twice in one call settles once
                results.append(TokenResult(token, why))
            if good:
                await act(conn, good, now)
            return results

        results = await self._db.run(job, durable=False)
        return [results[list(wanted).index(t)] for t in tokens]

    def _why(
        self, token: str, delivery: int | None, rows: dict[int, tuple[str | None, float]], now: float
    ) -> str | None:
        if delivery is None:
            return UNKNOWN
        if delivery not in rows:
            return self._settled.why(token)
        owner, until = rows[delivery]
        held = _parse(owner)
        if held is None or held[0] != token:
            why = self._settled.why(token)
            return why if why != UNKNOWN else EXPIRED
        if until <= now:
            return EXPIRED
        return None

    async def acknowledge(self, subscription: str, tokens: Sequence[str]) -> list[TokenResult]:
        """Complete the locked deliveries and count them delivered."""

        async def act(conn: AsyncConn, ids: list[int], now: float) -> None:
            await conn.execute(b"SELECT cebroker_complete(%b::bigint[], %s, %s)", (ids, now, HELD_AT))

        results = await self._settle(subscription, tokens, act)
        self._remember(results)
        return results

    async def release(self, subscription: str, tokens: Sequence[str], delay: float) -> list[TokenResult]:
        """End the locks; the deliveries are due again in ``delay`` seconds."""

        async def act(conn: AsyncConn, ids: list[int], now: float) -> None:
            await conn.execute(
                b"UPDATE pipeline_deliveries SET owner = NULL, next_at = %s WHERE id = ANY(%b::bigint[])",
                (now + delay, ids),
            )
            if delay <= 0:
                await notify_due(conn, {subscription})

        results = await self._settle(subscription, tokens, act)
        self._remember(results)
        return results

    async def reject(self, subscription: str, tokens: Sequence[str], reason: str) -> list[TokenResult]:
        """Dead-letter the locked deliveries with ``reason``."""

        async def act(conn: AsyncConn, ids: list[int], now: float) -> None:
            cur = await conn.execute(
                b"SELECT d.id, d.attempts, d.first_at, e.body FROM pipeline_deliveries d"
                b" JOIN pipeline_events e ON e.seq = d.event_seq"
                b" WHERE d.id = ANY(%b::bigint[]) ORDER BY d.id",
                (ids,),
            )
            for delivery, attempts, first_at, body in await cur.fetchall():
                await self._dead_letter(
                    conn, subscription, int(delivery), body, int(attempts), first_at, reason, now
                )

        results = await self._settle(subscription, tokens, act)
        self._remember(results)
        return results

    async def renew(self, subscription: str, tokens: Sequence[str], lock: float) -> list[TokenResult]:
        """Extend the locks to ``lock`` seconds from now."""

        async def act(conn: AsyncConn, ids: list[int], now: float) -> None:
            await conn.execute(
                b"UPDATE pipeline_deliveries SET next_at = %s WHERE id = ANY(%b::bigint[])", (now + lock, ids)
            )

        return await self._settle(subscription, tokens, act)

    async def locks(self, subscription: str) -> LockStats:
        """Pending deliveries, those locked now and the oldest lock's start."""
        now = self._clock.now()

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(
                b"SELECT owner, next_at FROM pipeline_deliveries WHERE subscription = %s", (subscription,)
            )
            return await cur.fetchall()

        rows = await self._db.run(job, write=False)
        starts = [held[1] for owner, until in rows if (held := _parse(owner)) is not None and until > now]
        return LockStats(len(rows), len(starts), min(starts, default=None))

    def _remember(self, results: list[TokenResult]) -> None:
        for result in results:
            if result.error is None:
                self._settled.add(result.token)

    async def _dead_letter(
        self,
        conn: AsyncConn,
        subscription: str,
        delivery: int,
        body: str,
        attempts: int,
        first_at: float,
        reason: str,
        now: float,
    ) -> None:
        cur = await conn.execute(
            b"DELETE FROM pipeline_deliveries WHERE id = %s"
            b" RETURNING event_seq, subscription, orderkey, replay",
            (delivery,),
        )
        gone = [(int(r[0]), str(r[1]), r[2], r[3]) for r in await cur.fetchall()]
        if not gone:
            return
        await conn.execute(
            b"INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts, last_error,"
            b" first_at, failed_at) VALUES (%s, %s, NULL, NULL, %s, %s, %s, %s)",
            (subscription, body, attempts, reason, first_at, now),
        )
        await conn.execute(BUMP.format(col=sql.Identifier("deadlettered")), (subscription, 1))
        await conn.execute(FAILED, (subscription, reason, now))
        await self._log.replay_counts(conn, "deadlettered", gone)
        await self._log.settle(conn, gone, now)
