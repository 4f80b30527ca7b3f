"""Claims on PostgreSQL: the due queue (``due``, ``backlog``) as claims, and the rest of the
:class:`~cebroker.storage.claims.Claims` contract (leases, wake-ups, shared token buckets).

The calls of ``due`` made at one moment (the loader asks for every due subscription at once) go
into one ``cebroker_claim_many``, which for each subscription, in subscription order, locks its
``pipeline_claims`` row, so that claims of one subscription take turns over every instance;
reads the count of its claimed deliveries (kept by triggers: what was claimed, on that row,
less what was freed, counted apart so that frees never wait for claims; deliveries schema step
10) against the concurrency; takes tokens of the rate limit; and claims due, unclaimed rows
with ``FOR UPDATE SKIP LOCKED``. The subscriptions without a rate limit are claimed together,
in three statements whatever their number (step 11).
A claim belongs to the instance's current id (see :mod:`.instances`): a retry or dead letter is
written only by the claim's owner, while a confirmed delivery is removed whoever claims it now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from cebroker.storage.deliveries import DueListener, Limits, Pending
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.postgres.database import AsyncConn
from cebroker.storage.postgres.instances import notify_due
from cebroker.storage.postgres.rows import LogBase

#: Seconds before a claim held back by another instance's claims (or locks) is tried again.
HELD_BACK = 0.25
#: Remembered rate-limit waits beyond which the expired ones are dropped.
LIMITED_KEPT = 1024
WAITING = (
    "WITH RECURSIVE subs (subscription) AS ("
    " (SELECT subscription FROM pipeline_deliveries ORDER BY subscription LIMIT 1)"
    " UNION ALL SELECT (SELECT d.subscription FROM pipeline_deliveries d"
    " WHERE d.subscription > s.subscription ORDER BY d.subscription LIMIT 1)"
    " FROM subs s WHERE s.subscription IS NOT NULL)"
    " SELECT s.subscription, (SELECT d.next_at FROM pipeline_deliveries d"
    " WHERE d.subscription = s.subscription AND d.owner IS NULL ORDER BY d.next_at LIMIT 1)"
    " FROM subs s WHERE s.subscription IS NOT NULL"
)


@dataclass(slots=True)
class _Claim:
    """One ``due`` waiting for a claim."""

    subscription: str
    limit: int
    limits: Limits | None
    future: asyncio.Future[tuple[list[Pending], float | None]]


def _claimed(
    claim: _Claim, rows: list[tuple[Any, ...]], owner: str, now: float
) -> tuple[list[Pending], float | None]:
    """``due``'s answer from the rows ``cebroker_claim`` returned for one subscription: the
    claimed deliveries, then one row with the next due time and the rate limit's wait."""
    items = [
        Pending(int(r[1]), int(r[2]), claim.subscription, int(r[3]), float(r[4]), r[5], owner, r[6], r[7])
        for r in rows
        if r[1] is not None
    ]
    if not rows:
        return items, now + HELD_BACK
    next_due, wait = rows[-1][8], float(rows[-1][9] or 0.0)
    if len(items) >= claim.limit:
        return items, now + wait  # wait > 0: this claim took the bucket's last token
    if next_due is None:
        return items, None
    if float(next_due) > now:
        return items, float(next_due)
    return items, now + (wait if wait > 0 else HELD_BACK)


class PostgresClaims(LogBase):
    """``due`` and ``backlog`` (:class:`~cebroker.storage.queue.DueQueue`) by claims, and
    :class:`~cebroker.storage.claims.Claims`."""

    _claims: list[_Claim]
    _claiming: bool
    _listeners: list[DueListener]

    @property
    def instances(self) -> int:
        """The live instances on the database, this one included (as of the last reaping)."""
        return self._membership.instances

    # -- wake-ups ----------------------------------------------------------------------------

    def watch(self, listener: DueListener) -> Callable[[], None]:
        """Call ``listener`` with subscriptions whose deliveries wait unclaimed (None: all)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _heard(self, payload: str) -> None:
        if payload == "*":
            self._tell(None)
            return
        for subscription in payload.split():
            self._tell(subscription)

    def _tell(self, subscription: str | None) -> None:
        for listener in list(self._listeners):
            listener(subscription)

    # -- dispatch ----------------------------------------------------------------------------

    def holds(self, item: Pending) -> bool:
        """Whether ``item``'s claim is this instance's current one and its lease is fresh."""
        return item.owner == self._membership.id and self._membership.live

    async def due(
        self, subscription: str, limit: int, limits: Limits | None = None, *, held: Collection[int] = ()
    ) -> tuple[list[Pending], float | None]:
        """Claim up to ``limit`` due deliveries of ``subscription`` within ``limits``. The calls
        made while a claim is being written go together into the next one (one statement, one
        round trip for every subscription). ``held`` needs no exclusion here: a delivery held
        in memory is claimed, and claimed ones are not returned."""
        now = self._clock.now()
        if self._membership.id is None or not self._membership.live or limit <= 0:
            return [], now + HELD_BACK
        if limits is not None and limits.rate is not None:  # a changed rate asks the database again
            refills = self.refills_at(subscription, now, limits.rate)
            if refills is not None:
                return [], refills
        claim = _Claim(subscription, limit, limits, asyncio.get_running_loop().create_future())
        self._claims.append(claim)
        if not self._claiming:
            self._claiming = True
            asyncio.create_task(self._claim_all())  # runs after the other calls of this moment
        return await claim.future

    async def _claim_all(self) -> None:
        try:
            while self._claims:
                batch: dict[str, _Claim] = {}
                again: list[_Claim] = []
                for claim in self._claims:  # a subscription asked for twice waits for the next
                    if claim.subscription in batch:
                        again.append(claim)
                    else:
                        batch[claim.subscription] = claim
                self._claims = again
                await self._claim(list(batch.values()))
        finally:
            self._claiming = False

    async def _claim(self, batch: list[_Claim]) -> None:
        now = self._clock.now()
        owner = self._membership.id
        if owner is None or not self._membership.live:
            for claim in batch:
                if not claim.future.done():
                    claim.future.set_result(([], now + HELD_BACK))
            return
        try:
            rows = await self._db.call(
                "SELECT * FROM cebroker_claim_many(%s, %s, %s, %b::int[], %b::int[], %b::float8[])",
                (
                    [c.subscription for c in batch],
                    owner,
                    now,
                    [c.limit for c in batch],
                    [c.limits.concurrency if c.limits is not None else None for c in batch],
                    [c.limits.rate if c.limits is not None else None for c in batch],
                ),
            )
        except BaseException as exc:
            if isinstance(exc, StorageUnavailable) and not exc.unsent:
                self._membership.suspect()  # it may have committed: never leave a claim unused
            for claim in batch:
                if not claim.future.done():
                    claim.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        found: dict[str, list[tuple[Any, ...]]] = {}
        for row in rows:
            found.setdefault(str(row[0]), []).append(row)
        for claim in batch:
            rows_of = found.get(claim.subscription, [])
            self._remember_rate(claim, rows_of, now)
            result = _claimed(claim, rows_of, owner, now)
            if not claim.future.done():
                claim.future.set_result(result)

    def _remember_rate(self, claim: _Claim, rows: list[tuple[Any, ...]], now: float) -> None:
        """Keep when ``claim``'s token bucket next holds a token, if the claim left it empty."""
        rate = claim.limits.rate if claim.limits is not None else None
        wait = float(rows[-1][9] or 0.0) if rows else 0.0
        if rate is None or wait <= 0:
            self._limited.pop(claim.subscription, None)
            return
        if len(self._limited) >= LIMITED_KEPT:  # those of deleted subscriptions, say
            self._limited = {k: v for k, v in self._limited.items() if v[1] > now}
        self._limited[claim.subscription] = (rate, now + wait)

    async def release(self, items: Sequence[Pending]) -> None:
        """Give back the claims of deliveries that were not attempted; the others hear of them."""
        mine = [item.id for item in items if item.owner]
        if not mine:
            return
        owner = items[0].owner

        async def job(conn: AsyncConn) -> None:
            cur = await conn.execute(
                "UPDATE pipeline_deliveries SET owner = NULL WHERE id = ANY(%b::bigint[]) AND owner = %s"
                " RETURNING subscription",
                (mine, owner),
            )
            await notify_due(conn, {str(r[0]) for r in await cur.fetchall()})

        await self._db.run(job, durable=False)

    async def backlog(self) -> dict[str, tuple[int, float]]:
        """Per subscription with pending deliveries: their count and the earliest due time."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(
                "SELECT subscription, count(*), min(next_at) FROM pipeline_deliveries GROUP BY subscription"
            )
            return await cur.fetchall()

        return {str(r[0]): (int(r[1]), float(r[2])) for r in await self._db.run(job, write=False)}

    async def waiting(self) -> dict[str, float]:
        """Per subscription with unclaimed deliveries, the earliest due time of those: a skip
        scan of the due index (one probe per subscription), not a scan of the backlog."""

        async def job(conn: AsyncConn) -> list[tuple[Any, ...]]:
            cur = await conn.execute(WAITING)
            return await cur.fetchall()

        return {str(r[0]): float(r[1]) for r in await self._db.run(job, write=False) if r[1] is not None}

    async def take(self, key: str, rate: float) -> float:
        """A token of the bucket ``key``, shared by every instance."""
        if rate <= 0:
            raise ValueError(f"a rate is positive, not {rate}")
        now = self._clock.now()

        async def job(conn: AsyncConn) -> float:
            cur = await conn.execute("SELECT cebroker_take(%s, %s, %s)", (key, rate, now))
            row = await cur.fetchone()
            return float(row[0]) if row else 0.0

        return await self._db.run(job, durable=False)
