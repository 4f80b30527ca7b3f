"""The EventArchive contract, run against every storage backend: every accepted event kept for
the retention whatever became of its deliveries, read back in acceptance order, pruned a step at
a time by age and by size, and replays that queue deliveries a window at a time, count them
and can be cancelled (issue "Archive and replay")."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cebroker.storage import Incoming, Pending, Storage
from cebroker.storage.archive import Archived, EventArchive, ReplayRequest
from storage.support import STORAGES, opened

HOUR = 3600.0


class TickClock:
    """A clock that moves only when told (a second per tick), for exact acceptance times."""

    def __init__(self) -> None:
        self.t = time.time()

    def tick(self) -> None:
        self.t += 1.0

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


def event(n: int | str, **extra: Any) -> dict[str, Any]:
    return {"specversion": "1.0", "id": str(n), "source": "/s", "type": "t", **extra}


def incoming(n: int | str, *subscriptions: str, **extra: Any) -> Incoming:
    return Incoming(event(n, **extra), "/s", str(n), subscriptions)


def ids(found: Sequence[Archived | Pending]) -> list[str]:
    return [json.loads(e.body or "")["id"] for e in found]


def everything(events: Sequence[Archived]) -> list[tuple[int, str | None]]:
    return [(e.seq, None) for e in events]


def even(events: Sequence[Archived]) -> list[tuple[int, str | None]]:
    return [(e.seq, None) for e in events if int(json.loads(e.body)["id"]) % 2 == 0]


@pytest.fixture
async def kept(request: pytest.FixtureRequest, backend: str, tmp_path: Path) -> Any:
    """A storage of ``backend`` keeping events for an hour."""
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR)) as storage:
        yield storage


def replay(replay_id: str, subscription: str = "a", **fields: Any) -> ReplayRequest:
    values: dict[str, Any] = {"since": 0.0, "until": time.time() + 1, **fields}
    return ReplayRequest(id=replay_id, subscription=subscription, **values)


def test_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage.archive, EventArchive)


async def test_every_event_is_kept_matched_or_not_delivered_or_not(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    assert archive.retention == HOUR
    (alone,) = await log.append([incoming(1)])
    assert alone is not None
    assert alone.seq > 0
    assert alone.deliveries == []
    await log.append([incoming(2, "a"), incoming(3, "a")])
    rows, _ = await log.due("a", 10)
    await log.complete([(r.id, r.event_seq, "a") for r in rows])
    assert await log.backlog() == {}
    found = await archive.read((0.0, -1), time.time() + 1, 10)
    assert ids(found) == ["1", "2", "3"]
    before = time.time()
    stats = await archive.stats()
    after = time.time()  # the horizon is of a moment in between, however long the call took
    assert stats.events == 3
    assert stats.bytes == sum(len(e.body.encode() if isinstance(e.body, str) else e.body) for e in found)
    assert stats.oldest == found[0].at
    assert before - HOUR <= stats.horizon <= after - HOUR
    # a duplicate is not archived twice
    assert await log.append([incoming(1)]) == [None]
    assert (await archive.stats()).events == 3


async def test_without_a_retention_nothing_more_is_kept(storage: Storage) -> None:
    log, archive = storage.deliveries, storage.archive
    assert archive.retention == 0
    await log.append([incoming(1), incoming(2, "a")])
    rows, _ = await log.due("a", 10)
    await log.complete([(r.id, r.event_seq, "a") for r in rows])
    assert await archive.read((0.0, -1), time.time() + 1, 10) == []
    before = time.time()
    stats = await archive.stats()
    after = time.time()  # the horizon is the moment of the call, however long it took
    assert (stats.events, stats.bytes, stats.oldest) == (0, 0, None)
    assert before <= stats.horizon <= after


async def test_reads_page_in_acceptance_order_within_the_range(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = TickClock()
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR, clock=clock)) as storage:
        log, archive = storage.deliveries, storage.archive
        for n in range(6):
            clock.tick()
            await log.append([incoming(n)])
        first = await archive.read((0.0, -1), clock.now() + 1, 4)
        assert ids(first) == ["0", "1", "2", "3"]
        rest = await archive.read(first[-1].position, clock.now() + 1, 4)
        assert ids(rest) == ["4", "5"]
        assert ids(await archive.read((0.0, -1), clock.now() + 1, 10, last_seq=first[1].seq)) == ["0", "1"]
        # [accepted at "2", accepted at "4")
        assert ids(await archive.read((first[2].at, -1), rest[0].at, 10)) == ["2", "3"]


async def test_pruning_by_age_keeps_what_pending_deliveries_need(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = TickClock()
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR, clock=clock)) as storage:
        log, archive = storage.deliveries, storage.archive
        await log.append([incoming(1), incoming(2, "a"), incoming(3)])
        clock.tick()
        await log.append([incoming(4)])
        cut = clock.now()  # the first three are older
        assert await archive.prune(cut - 2, None, 10) == 0  # nothing that old
        assert await archive.prune(cut, None, 2) == 2  # a small step
        assert await archive.prune(cut, None, 10) == 1
        assert await archive.prune(cut, None, 10) == 0
        assert ids(await archive.read((0.0, -1), cut + 1, 10)) == ["4"]
        stats = await archive.stats()
        assert (stats.events, stats.oldest) == (1, cut)
        # the delivery of "2" still has its event
        rows, _ = await log.due("a", 10)
        assert ids(rows) == ["2"]
        await log.complete([(rows[0].id, rows[0].event_seq, "a")])
        assert (await archive.stats()).events == 1


async def test_pruning_by_size_removes_the_oldest_and_moves_the_horizon(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    for n in range(10):
        await log.append([incoming(n, pad="x" * 100)])
    stats = await archive.stats()
    first = await archive.read((0.0, -1), time.time() + 1, 100)
    per_event = stats.bytes // 10
    limit = stats.bytes - 3 * per_event  # three events too many
    assert await archive.prune(0.0, limit, 100) == 3
    assert await archive.prune(0.0, limit, 100) == 0
    left = await archive.read((0.0, -1), time.time() + 1, 100)
    assert ids(left) == [str(n) for n in range(3, 10)]
    after = await archive.stats()
    assert after.events == 7
    assert after.bytes <= limit
    assert after.oldest == left[0].at
    # Moved up to the newest event pruned (whatever time passed between the appends).
    assert first[2].at <= after.horizon <= left[0].at


async def test_a_running_replay_keeps_what_it_has_not_reached_from_age_pruning(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    for n in range(4):
        await log.append([incoming(n)])
    await archive.create_replay(replay("r"))
    await archive.queue("r", 1, 10, everything)  # passes "0" only: the window holds one
    cut = time.time() + 1
    assert await archive.prune(cut, None, 10) == 1
    assert ids(await archive.read((0.0, -1), time.time() + 1, 10)) == ["1", "2", "3"]
    # size pruning is a hard bound: it passes the replay by
    assert await archive.prune(0.0, 0, 10) == 3


async def test_a_replay_queues_a_window_at_a_time_and_counts_its_deliveries(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(n) for n in range(10)])
    created = await archive.create_replay(replay("r", events=5))
    assert (created.state, created.events, created.queued, created.pending) == ("running", 5, 0, 0)
    assert (await archive.create_replay(replay("r", events=99))).events == 5  # the same one
    step = await archive.queue("r", 3, 100, even)
    assert (step.queued, step.more) == (3, False)
    assert (await archive.queue("r", 3, 100, even)).queued == 0  # the window is full
    rows, _ = await log.due("a", 10)
    assert ids(rows) == ["0", "2", "4"]
    assert {r.replay for r in rows} == {"r"}
    await log.complete([(rows[0].id, rows[0].event_seq, "a")])
    await log.reschedule(rows[1], 1, time.time() - 1, "503")
    await log.dead_letter(rows[2], b'{"id": "4"}', 1, "410", "410", None)
    (state,) = await archive.replays("a")
    assert (state.queued, state.delivered, state.failed, state.deadlettered, state.pending) == (3, 1, 2, 1, 1)
    assert (await archive.queue("r", 3, 100, even)).queued == 2  # and the end of the range
    (state,) = await archive.replays("a")
    assert (state.state, state.scanned, state.pending) == ("running", True, 3)
    rows, _ = await log.due("a", 10)
    assert sorted(ids(rows)) == ["2", "6", "8"]
    await log.complete([(r.id, r.event_seq, "a") for r in rows])
    assert (await archive.queue("r", 3, 100, even)).queued == 0
    (state,) = await archive.replays("a")
    assert (state.state, state.delivered, state.pending) == ("done", 4, 0)
    assert await archive.replays(None) == []
    assert (await log.status("a")).delivered == 4


async def test_a_replay_scans_its_range_in_steps(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = TickClock()
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR, clock=clock)) as storage:
        log, archive = storage.deliveries, storage.archive
        for n in range(6):
            clock.tick()
            await log.append([incoming(n)])
        held = await archive.read((0.0, -1), clock.now() + 1, 10)
        await archive.create_replay(replay("r", since=held[1].at, until=held[4].at))
        steps = []
        while True:
            step = await archive.queue("r", 100, 1, everything)
            steps.append(step.queued)
            if not step.more:
                break
        rows, _ = await log.due("a", 10)
        assert ids(rows) == ["1", "2", "3"]
        assert steps[:3] == [1, 1, 1]
        (state,) = await archive.replays("a")
        assert (state.scanned, state.queued) == (True, 3)


async def test_a_boundary_replay_covers_exactly_what_was_accepted_before(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(n) for n in range(3)])
    created = await archive.create_replay(replay("r", until=time.time() + HOUR, boundary=True))
    assert created.last_seq is not None
    await log.append([incoming(n) for n in range(3, 6)])
    await archive.queue("r", 100, 100, everything)
    rows, _ = await log.due("a", 10)
    assert ids(rows) == ["0", "1", "2"]


async def test_cancel_removes_what_is_not_being_attempted(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(n) for n in range(6)])
    await archive.create_replay(replay("r"))
    await archive.queue("r", 4, 100, everything)
    rows, _ = await log.due("a", 1)  # one of them is out (claimed, on a shared log)
    assert await archive.cancel_replay("a", "nope", ()) is None
    assert await archive.cancel_replay("b", "r", ()) is None  # another subscription's id
    cancelled = await archive.cancel_replay("a", "r", {rows[0].id})
    assert cancelled is not None
    state, removed = cancelled
    assert (state.state, removed, state.removed, state.pending) == ("cancelled", 3, 3, 1)
    assert (await archive.queue("r", 4, 100, everything)).queued == 0
    assert (await log.backlog())["a"][0] == 1
    await log.complete([(rows[0].id, rows[0].event_seq, "a")])
    assert await log.backlog() == {}
    again = await archive.cancel_replay("a", "r", ())
    assert again is not None
    assert again[1] == 0
    assert await archive.replays(None) == []


async def test_steps_of_one_replay_never_queue_twice(kept: Storage) -> None:
    """Concurrent steps (two instances on a shared log) queue each event once."""
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(n) for n in range(50)])
    await archive.create_replay(replay("r"))
    for _ in range(10):
        await asyncio.gather(*(archive.queue("r", 100, 7, everything) for _ in range(4)))
    rows, _ = await log.due("a", 100)
    assert sorted(ids(rows), key=int) == [str(n) for n in range(50)]


async def test_forget_removes_the_replays_of_a_subscription(kept: Storage) -> None:
    log, archive = kept.deliveries, kept.archive
    await log.append([incoming(1)])
    await archive.create_replay(replay("r"))
    await archive.create_replay(replay("s", subscription="b"))
    await archive.queue("r", 10, 10, everything)
    assert await log.forget("a") == 1
    assert await archive.replays("a") == []
    assert [r.id for r in await archive.replays(None)] == ["s"]
    assert ids(await archive.read((0.0, -1), time.time() + 1, 10)) == ["1"]  # the archive stays


async def test_archive_and_replays_survive_a_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR)) as storage:
        await storage.deliveries.append([incoming(n) for n in range(4)])
        await storage.archive.create_replay(replay("r", filter='{"exact": {"type": "t"}}'))
        await storage.archive.queue("r", 2, 100, everything)
        before = (await storage.archive.stats(), await storage.archive.replays("a"))
    async with opened(STORAGES[backend](request, tmp_path, retention=HOUR)) as storage:
        stats, replays = await storage.archive.stats(), await storage.archive.replays("a")
        assert (stats.events, stats.bytes, stats.oldest) == (
            before[0].events,
            before[0].bytes,
            before[0].oldest,
        )
        assert replays == before[1]
        assert replays[0].filter == '{"exact": {"type": "t"}}'
        rows, _ = await storage.deliveries.due("a", 10)
        await storage.deliveries.complete([(r.id, r.event_seq, "a") for r in rows])
        assert (await storage.archive.queue("r", 2, 100, everything)).queued == 2
        rows, _ = await storage.deliveries.due("a", 10)
        assert ids(rows) == ["2", "3"]
