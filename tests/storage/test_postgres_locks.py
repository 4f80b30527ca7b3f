"""The lock order of the PostgreSQL delivery log (issue 30, finding 9): ordered ingest,
completions, dead letters and retries run at once on two instances over one database, on the
same ordering groups, and the server never reports ``deadlock detected``.

Before, ``cebroker_append`` took the groups' locks and then a backlog shard, while
``cebroker_complete`` took a backlog shard and then the groups' locks: under load the server
found cycles and killed one of the transactions (a producer got ``503 database busy``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

import pytest
from servers.postgres import PostgresServer

from cebroker.storage import Incoming, Storage, StorageUnavailable
from cebroker.storage.postgres import PostgresStorage
from storage.support import opened

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

#: Seconds of load.
LOAD = 12.0
SUBSCRIPTIONS = ("a", "b")
GROUPS = tuple(f"k{n}" for n in range(6))


async def _ingest(storage: Storage, numbers: itertools.count[int], stop: float, errors: list[str]) -> int:
    accepted = 0
    while time.monotonic() < stop:
        items = []
        for _ in range(16):
            n = next(numbers)
            groups = tuple(GROUPS[(n + i) % len(GROUPS)] for i in range(len(SUBSCRIPTIONS)))
            items.append(Incoming({"id": str(n)}, "/locks", str(n), SUBSCRIPTIONS, groups))
        try:
            accepted += sum(1 for done in await storage.deliveries.append(items) if done is not None)
        except StorageUnavailable as exc:
            errors.append(f"append: {exc}")
    return accepted


async def _settle(storage: Storage, stop: float, errors: list[str]) -> int:
    """Claim what is due and settle it: most confirmed in one batch, some dead-lettered or tried
    again (each of those releases or keeps its group too)."""
    log = storage.deliveries
    settled = 0
    turn = itertools.count()
    while time.monotonic() < stop:
        for subscription in SUBSCRIPTIONS:
            try:
                rows, _ = await log.due(subscription, 64)
                if not rows:
                    await asyncio.sleep(0.005)
                    continue
                confirm = [r for r in rows if next(turn) % 10]
                others = [r for r in rows if r not in confirm]
                await log.complete([(r.id, r.event_seq, r.subscription) for r in confirm])
                for n, row in enumerate(others):
                    if n % 2:
                        await log.dead_letter(row, b"{}", 1, "410", "410", None)
                    else:
                        await log.reschedule(row, 1, time.time(), "503")
                settled += len(rows)
            except StorageUnavailable as exc:
                errors.append(f"settle: {exc}")
    return settled


async def test_ordered_ingest_and_completions_on_two_instances_never_deadlock(
    server_factory: Callable[..., PostgresServer],
) -> None:
    server = server_factory(PostgresServer)
    url = server.create_database()
    errors: list[str] = []
    numbers = itertools.count()
    async with opened(PostgresStorage(url)) as one, opened(PostgresStorage(url)) as two:
        stop = time.monotonic() + LOAD
        counts = await asyncio.gather(
            *(_ingest(s, numbers, stop, errors) for s in (one, two, one, two)),
            *(_settle(s, stop, errors) for s in (one, two, one, two)),
        )
    accepted, settled = sum(counts[:4]), sum(counts[4:])
    assert min(accepted, settled) > 500, (accepted, settled)  # it did run under load
    log = server.log_path.read_text(errors="replace")
    assert "deadlock detected" not in log, log[-4000:]
    assert errors == []
