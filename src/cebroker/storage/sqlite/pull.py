"""Pull delivery on the SQLite file (:class:`~cebroker.storage.pull.PullLog`).

One process serves the file, so the locks live in memory beside the durable rows: a receive
writes the attempt count and pushes the row's due time to the lock's end, in the same write.
After a restart the locks are gone (their tokens are unknown) and each delivery falls due when
its lock would have ended: nothing is lost, the event is received again. Every call runs as
one job on the writer thread, so a token is checked and settled atomically.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cebroker.clock import SYSTEM_CLOCK, Clock
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
from cebroker.storage.sqlite.database import Database
from cebroker.storage.sqlite.deliveries import SqliteDeliveryLog
from cebroker.storage.sqlite.rows import BUMP

MAX_REACHED = "maximum delivery count reached"


@dataclass(slots=True)
class _Lock:
    token: str
    since: float
    until: float


class SqlitePullLog:
    """Locks in memory over the delivery log's rows; see the module docstring."""

    def __init__(self, db: Database, log: SqliteDeliveryLog, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._db = db
        self._log = log
        self._clock = clock
        # delivery id -> its current lock (touched on the writer thread only).
        self._locks: dict[int, _Lock] = {}
        self._settled = SettledTokens()

    async def receive(self, subscription: str, limit: int, lock: float, max_deliveries: int) -> list[Locked]:
        """Lock up to ``limit`` due deliveries; dead-letter those received too often."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> list[Locked]:
            out: list[Locked] = []
            for _ in range(8):  # each pass may dead-letter rows instead of handing them out
                rows = conn.execute(
                    "SELECT d.id, d.attempts, d.first_at, e.body, d.replay FROM pipeline_deliveries d "
                    "JOIN pipeline_events e ON e.seq = d.event_seq "
                    "WHERE d.subscription = ? AND d.next_at <= ? ORDER BY d.next_at, d.id LIMIT ?",
                    (subscription, now, limit - len(out)),
                ).fetchall()
                over = [r for r in rows if r[1] >= max_deliveries]
                taken: list[tuple[float, int]] = []
                for delivery, attempts, first_at, body, replay in rows:
                    if attempts >= max_deliveries:
                        continue
                    token = new_token(delivery)
                    self._locks[delivery] = _Lock(token, now, now + lock)
                    out.append(Locked(token, delivery, body, attempts + 1, now + lock, first_at, replay))
                    taken.append((now + lock, delivery))
                conn.executemany(
                    "UPDATE pipeline_deliveries SET attempts = attempts + 1, next_at = ? WHERE id = ?", taken
                )
                for delivery, attempts, first_at, body, _ in over:
                    self._locks.pop(delivery, None)
                    self._dead_letter(
                        conn, subscription, delivery, body, attempts, first_at, MAX_REACHED, now
                    )
                if not over or len(out) >= limit:
                    break
            return out

        return await self._db.write(job, durable=False)

    def _check(self, conn: sqlite3.Connection, subscription: str, token: str, now: float) -> str | None:
        """Why ``token`` cannot be settled now (None: it can)."""
        delivery = token_delivery(token)
        if delivery is None:
            return UNKNOWN
        held = self._locks.get(delivery)
        row = conn.execute(
            "SELECT subscription FROM pipeline_deliveries WHERE id = ?", (delivery,)
        ).fetchone()
        if row is None or row[0] != subscription:
            return self._settled.why(token)
        if held is None or held.token != token:
            # Settled here, or its lock ended and the event was received again (or the process
            # restarted since: the lock is gone with it).
            why = self._settled.why(token)
            return why if why != UNKNOWN else EXPIRED
        if held.until <= now:
            return EXPIRED
        return None

    def _settle(
        self, subscription: str, tokens: Sequence[str], act: Callable[[sqlite3.Connection, int, float], None]
    ) -> Callable[[sqlite3.Connection], list[TokenResult]]:
        """A writer job checking each token and, if it holds, applying ``act`` to its delivery."""

        def job(conn: sqlite3.Connection) -> list[TokenResult]:
            now = self._clock.now()
            results: list[TokenResult] = []
            for token in tokens:
                why = self._check(conn, subscription, token, now)
                if why is None:
                    delivery = token_delivery(token)
                    assert delivery is not None  # checked above
                    act(conn, delivery, now)
                results.append(TokenResult(token, why))
            return results

        return job

    async def acknowledge(self, subscription: str, tokens: Sequence[str]) -> list[TokenResult]:
        """Complete the locked deliveries and count them delivered."""

        def act(conn: sqlite3.Connection, delivery: int, now: float) -> None:
            self._settled.add(self._locks.pop(delivery).token)
            gone = self._log.remove(conn, [delivery], now)
            if gone:
                conn.execute(BUMP.format(col="delivered"), (subscription, 1))
                self._log.replay_counts(conn, "delivered", gone)

        return await self._db.write(self._settle(subscription, tokens, act), durable=False)

    async def release(self, subscription: str, tokens: Sequence[str], delay: float) -> list[TokenResult]:
        """End the locks; the deliveries are due again in ``delay`` seconds."""

        def act(conn: sqlite3.Connection, delivery: int, now: float) -> None:
            self._settled.add(self._locks.pop(delivery).token)
            conn.execute("UPDATE pipeline_deliveries SET next_at = ? WHERE id = ?", (now + delay, delivery))

        return await self._db.write(self._settle(subscription, tokens, act), durable=False)

    async def reject(self, subscription: str, tokens: Sequence[str], reason: str) -> list[TokenResult]:
        """Dead-letter the locked deliveries with ``reason``."""

        def act(conn: sqlite3.Connection, delivery: int, now: float) -> None:
            self._settled.add(self._locks.pop(delivery).token)
            row = conn.execute(
                "SELECT d.attempts, d.first_at, e.body FROM pipeline_deliveries d "
                "JOIN pipeline_events e ON e.seq = d.event_seq WHERE d.id = ?",
                (delivery,),
            ).fetchone()
            self._dead_letter(conn, subscription, delivery, row[2], row[0], row[1], reason, now)

        return await self._db.write(self._settle(subscription, tokens, act), durable=False)

    async def renew(self, subscription: str, tokens: Sequence[str], lock: float) -> list[TokenResult]:
        """Extend the locks to ``lock`` seconds from now."""

        def act(conn: sqlite3.Connection, delivery: int, now: float) -> None:
            self._locks[delivery].until = now + lock
            conn.execute("UPDATE pipeline_deliveries SET next_at = ? WHERE id = ?", (now + lock, delivery))

        return await self._db.write(self._settle(subscription, tokens, act), durable=False)

    async def locks(self, subscription: str) -> LockStats:
        """Pending deliveries, those locked now and the oldest lock's start."""
        now = self._clock.now()

        def job(conn: sqlite3.Connection) -> LockStats:
            rows = conn.execute(
                "SELECT id FROM pipeline_deliveries WHERE subscription = ?", (subscription,)
            ).fetchall()
            held = [self._locks[r[0]] for r in rows if r[0] in self._locks and self._locks[r[0]].until > now]
            return LockStats(len(rows), len(held), min((h.since for h in held), default=None))

        return await self._db.write(job, durable=False)

    def _dead_letter(
        self,
        conn: sqlite3.Connection,
        subscription: str,
        delivery: int,
        body: bytes | str,
        attempts: int,
        first_at: float,
        reason: str,
        now: float,
    ) -> None:
        gone = self._log.remove(conn, [delivery], now)
        if not gone:
            return
        self._log.replay_counts(conn, "deadlettered", gone)
        conn.execute(
            "INSERT INTO pipeline_deadletters (subscription, event, status, body, attempts, "
            "last_error, first_at, failed_at) VALUES (?, ?, NULL, NULL, ?, ?, ?, ?)",
            (subscription, body, attempts, reason, first_at, now),
        )
        conn.execute(BUMP.format(col="deadlettered"), (subscription, 1))
        conn.execute(BUMP.format(col="failed"), (subscription, 1))
        conn.execute(
            "UPDATE pipeline_stats SET last_error = ?, last_error_at = ? WHERE subscription = ?",
            (reason, now, subscription),
        )
