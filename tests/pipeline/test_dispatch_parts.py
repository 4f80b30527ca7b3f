"""Unit tests of the dispatcher's parts that need no sink: the retry/dead-letter decision, the
rate limit on a clock that only moves when told, the backlog count and the dead-letter copy."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import pytest
from ceprotocols.errors import DeliveryError
from prometheus_client import CollectorRegistry, Gauge
from storage.support import opened

from cebroker.clock import SYSTEM_CLOCK, Clock, SystemClock, wait_or_sleep
from cebroker.pipeline.dispatch import completions
from cebroker.pipeline.dispatch.backlog import Backlog
from cebroker.pipeline.dispatch.circuits import Circuits
from cebroker.pipeline.dispatch.completions import Completions
from cebroker.pipeline.dispatch.deadletters import REASON_LIMIT, dead_letter_copy
from cebroker.pipeline.dispatch.due import DueTimes
from cebroker.pipeline.dispatch.lane import Item, Lane, TokenBucket
from cebroker.pipeline.dispatch.lanes import Lanes
from cebroker.pipeline.dispatch.retry import GiveUp, Retry, decide
from cebroker.pipeline.dispatch.setup import BatchLimits, policy_of
from cebroker.pipeline.dispatch.slots import Slots
from cebroker.pipeline.policy import DeliveryPolicy
from cebroker.storage.deliveries import DueListener, Pending
from cebroker.storage.errors import StorageUnavailable
from cebroker.storage.sqlite import SqliteStorage
from cebroker.subscription import Subscription
from pipeline.clocks import ManualClock


def most(low: float, high: float) -> float:
    """A jitter draw that always takes the top of the range."""
    return high


def retry_at(outcome: Retry | GiveUp) -> float:
    assert isinstance(outcome, Retry), outcome
    return outcome.next_at


async def asleep(clock: ManualClock, within: float) -> None:
    """Let the other tasks run until one of them sleeps on ``clock`` for at most ``within``."""
    for _ in range(1000):
        if clock.sleeping(within):
            return
        await asyncio.sleep(0)
    raise AssertionError("nothing went to sleep on the clock")


# -- the retry/dead-letter decision -------------------------------------------------------------


def test_a_final_error_goes_to_the_dead_letter_at_once() -> None:
    error = DeliveryError("HTTP 400", retryable=False, status=400, body="bad payload")
    outcome = decide(DeliveryPolicy(), 0, error, first_at=0.0, now=5.0)
    assert outcome == GiveUp(attempts=1, reason="HTTP 400", status="400", body="bad payload")


def test_a_transient_error_is_retried_after_the_backoff() -> None:
    policy = DeliveryPolicy(initialdelay=2.0, maxdelay=60.0)
    error = DeliveryError("HTTP 503", status=503)
    assert decide(policy, 0, error, first_at=0.0, now=10.0, uniform=most) == Retry(1, 12.0, "HTTP 503")
    assert decide(policy, 2, error, first_at=0.0, now=10.0, uniform=most) == Retry(3, 18.0, "HTTP 503")
    # Equal jitter: half the delay is fixed, whatever the draw.
    assert retry_at(decide(policy, 2, error, first_at=0.0, now=10.0, uniform=lambda low, high: low)) == 14.0


def test_retry_after_wins_when_longer_up_to_its_cap() -> None:
    policy = DeliveryPolicy(initialdelay=0.05, retryaftermax=30.0)
    asked = DeliveryError("HTTP 429", status=429, retry_after=1.0)
    assert retry_at(decide(policy, 0, asked, first_at=0.0, now=100.0, uniform=most)) == 101.0
    greedy = DeliveryError("HTTP 429", status=429, retry_after=3600.0)
    assert retry_at(decide(policy, 0, greedy, first_at=0.0, now=100.0, uniform=most)) == 130.0


def test_giving_up_after_max_attempts_or_past_the_time_to_live() -> None:
    error = DeliveryError("connection refused")
    by_attempts = decide(DeliveryPolicy(maxattempts=3), 2, error, first_at=0.0, now=1.0)
    assert by_attempts == GiveUp(3, "gave up after 3 attempts: connection refused", None, None)
    late = decide(DeliveryPolicy(ttl=60.0, initialdelay=10.0), 0, error, first_at=0.0, now=55.0, uniform=most)
    assert isinstance(late, GiveUp)
    assert late.reason.startswith("gave up after 1 attempts")
    in_time = decide(
        DeliveryPolicy(ttl=60.0, initialdelay=10.0), 0, error, first_at=0.0, now=45.0, uniform=most
    )
    assert in_time == Retry(1, 55.0, "connection refused")


# -- clocks and the rate limit ------------------------------------------------------------------


def test_both_clocks_are_clocks() -> None:
    clocks: list[Clock] = [SYSTEM_CLOCK, SystemClock(), ManualClock()]
    assert all(c.now() > 1_600_000_000 for c in clocks)


async def test_a_manual_clock_wakes_sleepers_only_when_advanced() -> None:
    clock = ManualClock()
    start = clock.now()
    sleeper = asyncio.ensure_future(clock.sleep(1.0))
    await asleep(clock, 1.0)
    clock.advance(0.5)
    assert clock.sleeping(within=0.5) == 1
    assert not sleeper.done()
    clock.advance(0.5)
    await asyncio.wait_for(sleeper, 5)
    assert clock.now() == start + 1.0
    assert clock.monotonic() == 1.0


async def test_wait_or_sleep_returns_on_the_event_or_the_clock() -> None:
    clock = ManualClock()
    event = asyncio.Event()
    waiting = asyncio.ensure_future(wait_or_sleep(event, 10.0, clock))
    await asleep(clock, 10.0)
    event.set()
    await asyncio.wait_for(waiting, 5)
    event.clear()
    waiting = asyncio.ensure_future(wait_or_sleep(event, 10.0, clock))
    await asleep(clock, 10.0)
    clock.advance(10.0)
    await asyncio.wait_for(waiting, 5)
    assert not event.is_set()


async def test_the_token_bucket_paces_on_its_clock() -> None:
    """A burst of ``rate`` tokens, then one per ``1/rate`` seconds of the clock, not of real time."""
    clock = ManualClock()
    bucket = TokenBucket(10.0, clock)
    for _ in range(10):
        await asyncio.wait_for(bucket.acquire(), 1)
    eleventh = asyncio.ensure_future(bucket.acquire())
    await asleep(clock, 0.1)
    assert not eleventh.done()  # the clock stands still: no token can come
    clock.advance(0.1)
    await asyncio.wait_for(eleventh, 5)
    twelfth = asyncio.ensure_future(bucket.acquire())
    await asleep(clock, 0.1)
    clock.advance(0.05)
    assert clock.sleeping(within=0.05) == 1
    assert not twelfth.done()
    clock.advance(0.06)
    await asyncio.wait_for(twelfth, 5)


# -- backlog and dead-letter copies ---------------------------------------------------------------


def test_the_backlog_counts_and_its_gauge_follows() -> None:
    registry = CollectorRegistry()
    backlog = Backlog(Gauge("backlog", "test", registry=registry))
    backlog.added(5)
    backlog.settled(2)
    assert backlog.pending == 3
    assert registry.get_sample_value("backlog") == 3.0
    backlog.settled(10)  # a clean-up racing a completion never drives it negative
    assert backlog.pending == 0
    assert registry.get_sample_value("backlog") == 0.0


def test_a_shared_count_read_keeps_what_was_added_while_it_was_read() -> None:
    """A read of a shared log's count can miss deliveries this instance added meanwhile (their
    commit raced the read): they stay counted until the next read, never dropped to zero."""
    registry = CollectorRegistry()
    backlog = Backlog(Gauge("backlog", "test", registry=registry))
    backlog.added(4)
    mark = backlog.mark()
    backlog.added(1)  # written while the count was being read
    backlog.read(0, mark)  # the read's snapshot saw none of it
    assert backlog.pending == 1
    assert registry.get_sample_value("backlog") == 1.0
    backlog.read(7, backlog.mark())  # a read with nothing added meanwhile is taken as it is
    assert backlog.pending == 7


@pytest.mark.parametrize("status", [None, "404"])
def test_a_dead_letter_copy_carries_the_reason(status: str | None) -> None:
    event = {"specversion": "1.0", "id": "e-1", "source": "/s", "type": "t", "data": {"n": 1}}
    outcome = GiveUp(attempts=4, reason="x" * (REASON_LIMIT + 10), status=status, body=None)
    copy = dead_letter_copy(event, "sub-1", outcome)
    assert copy["deadletterreason"] == "x" * REASON_LIMIT
    assert (copy["deadlettersub"], copy["deadletterattempts"]) == ("sub-1", 4)
    assert copy.get("deadletterstatus") == status
    assert {k: copy[k] for k in event} == event
    assert "deadletterreason" not in event  # the original is not changed


class Instances:
    """The claims of a shared log, as far as a lane reads them: how many instances share it."""

    def __init__(self, instances: int) -> None:
        self.instances = instances

    def holds(self, item: Pending) -> bool:
        return True

    async def release(self, items: Sequence[Pending]) -> None:
        return None

    def watch(self, listener: DueListener) -> Callable[[], None]:
        return lambda: None

    async def waiting(self) -> dict[str, float]:
        return {}

    async def take(self, key: str, rate: float) -> float:
        return 0.0


def test_with_limits_kept_by_a_shared_log_a_lane_asks_for_its_share_of_the_concurrency() -> None:
    sub = policy_of(
        Subscription(id="s", protocol="HTTP", sink="http://127.0.0.1:9/", config={"concurrency": "5"})
    )
    claims = Instances(1)
    lane = Lane("s", 256, SYSTEM_CLOCK, claims=claims)
    assert lane.room(sub) == 5
    claims.instances = 2
    assert lane.room(sub) == 3  # rounded up: the log keeps the total within 5
    lane.push(Item(Pending(1, 1, "s", 0, 0.0, None), {}))
    lane.push(Item(Pending(2, 2, "s", 0, 0.0, None), {}))
    assert lane.room(sub) == 1
    claims.instances = 9
    assert lane.room(sub) <= 0  # its share (1) is taken: nothing to ask for
    local = Lane("s", 256, SYSTEM_CLOCK)
    assert local.room(sub) == 256  # an unshared log: the lane's own places


# -- completions ----------------------------------------------------------------------------------


async def _released_within(released: list[int], wanted: set[int], seconds: float = 10.0) -> None:
    """Poll until every id of ``wanted`` has been released (its removal committed)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while not wanted <= set(released):
        assert asyncio.get_running_loop().time() < deadline, f"released {released}, wanted {wanted}"
        await asyncio.sleep(0.01)


async def test_a_shared_log_gathers_completions_for_a_shorter_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a shared log's claims a delivery counts against its subscription's concurrency
    share until its outcome is written: outcomes are gathered for :data:`SHARED_GATHER` only,
    not for the unshared log's :data:`GATHER` (here an hour)."""
    monkeypatch.setattr(completions, "GATHER", 3600.0)
    released: list[int] = []
    backlog = Backlog(Gauge("backlog", "test", registry=CollectorRegistry()))
    backlog.added(1000)  # others pending: the gathering would not end for want of them
    async with opened(SqliteStorage(tmp_path / "s.db")) as storage:
        writer = Completions(
            storage.deliveries,
            backlog,
            lambda lane, deliveries: released.extend(deliveries),
            SYSTEM_CLOCK,
            shared=True,
        )
        task = asyncio.create_task(writer.run())
        try:
            writer.delivered(Lane("s", 256, SYSTEM_CLOCK), Item(Pending(1, 1, "s", 0, 0.0, "{}"), {}))
            await _released_within(released, {1})
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_confirmed_deliveries_are_counted_once_their_removal_is_written(tmp_path: Path) -> None:
    """``delivered`` grows per subscription and write, by the confirmed deliveries the write
    recorded: not when a sink confirms (before the write), not for deliveries a transformation
    dropped (counted by their caller), and not while the write fails (they are kept for the
    next one)."""
    counted: list[tuple[str, int]] = []
    released: list[int] = []
    backlog = Backlog(Gauge("backlog", "test", registry=CollectorRegistry()))
    storage = SqliteStorage(tmp_path / "n.db")
    await storage.open()
    writer = Completions(
        storage.deliveries,
        backlog,
        lambda lane, deliveries: released.extend(deliveries),
        SYSTEM_CLOCK,
        counted=lambda subscription, count: counted.append((subscription, count)),
    )
    plain, other = Lane("plain", 256, SYSTEM_CLOCK), Lane("other", 256, SYSTEM_CLOCK)

    def item(delivery: int, subscription: str) -> Item:
        return Item(Pending(delivery, delivery, subscription, 0, 0.0, "{}"), {})

    try:
        writer.delivered(plain, item(1, "plain"))
        writer.delivered(plain, item(2, "plain"))
        writer.delivered(plain, item(3, "plain"), confirmed=False)
        writer.delivered(other, item(4, "other"))
        assert counted == []
        await writer.flush()
        assert sorted(counted) == [("other", 1), ("plain", 2)]
        assert sorted(released) == [1, 2, 3, 4]
    finally:
        await storage.close()
    writer.delivered(plain, item(5, "plain"))
    with pytest.raises(StorageUnavailable):
        await writer.flush()  # the storage is closed: nothing written
    assert sorted(counted) == [("other", 1), ("plain", 2)]
    assert sorted(released) == [1, 2, 3, 4]
    async with opened(SqliteStorage(tmp_path / "n.db")) as again:
        writer._log = again.deliveries  # the same outcomes, written once the log is back
        await writer.flush()
    assert sorted(counted) == [("other", 1), ("plain", 1), ("plain", 2)]
    assert sorted(released) == [1, 2, 3, 4, 5]


async def test_completions_are_gathered_unless_a_next_delivery_waits_for_their_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write waits for more outcomes while few wait (here an hour, to make it visible), but not
    for an ordered subscription's (its group's next is released by the write), a replay's (it
    queues its next window once these settled), a batching lane's (a batch is a group already)
    or once a group is full."""
    monkeypatch.setattr(completions, "GATHER", 3600.0)
    released: list[int] = []
    backlog = Backlog(Gauge("backlog", "test", registry=CollectorRegistry()))
    backlog.added(10 * completions.GROUP)  # others pending: see the test below
    async with opened(SqliteStorage(tmp_path / "c.db")) as storage:
        writer = Completions(
            storage.deliveries,
            backlog,
            lambda lane, deliveries: released.extend(deliveries),
            SYSTEM_CLOCK,
            waits=lambda subscription: subscription == "ordered",
        )
        task = asyncio.create_task(writer.run())
        try:
            plain, ordered = Lane("plain", 256, SYSTEM_CLOCK), Lane("ordered", 256, SYSTEM_CLOCK)

            def item(delivery: int, subscription: str, replay: str | None = None) -> Item:
                return Item(Pending(delivery, delivery, subscription, 0, 0.0, "{}", replay=replay), {})

            writer.delivered(ordered, item(1, "ordered"))
            await _released_within(released, {1})
            writer.delivered(plain, item(2, "plain", replay="r"))
            await _released_within(released, {2})
            for delivery in range(3, 3 + completions.GROUP):  # a full group goes at once
                writer.delivered(plain, item(delivery, "plain"))
            await _released_within(released, set(range(3, 3 + completions.GROUP)))
            batching = Lane("batching", 256, SYSTEM_CLOCK)
            batching.batch = BatchLimits(10, 1 << 20, 0.1)
            first = 3 + completions.GROUP
            for delivery in range(first, first + 10):  # one batch's outcomes
                writer.delivered(batching, item(delivery, "batching"))
            await _released_within(released, set(range(first, first + 10)))
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_the_gathering_ends_once_every_pending_delivery_is_collected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outcomes are gathered (here for an hour) while other deliveries are pending, but once
    every delivery the backlog counts is collected no other could join the write: it goes at
    once, with all of them, and the backlog is empty."""
    monkeypatch.setattr(completions, "GATHER", 3600.0)
    released: list[int] = []
    writes: list[list[int]] = []
    backlog = Backlog(Gauge("backlog", "test", registry=CollectorRegistry()))
    backlog.added(3)
    async with opened(SqliteStorage(tmp_path / "g.db")) as storage:
        complete = storage.deliveries.complete

        async def recorded(rows: Sequence[tuple[int, int, str]]) -> None:
            writes.append([row[0] for row in rows])
            await complete(rows)

        monkeypatch.setattr(storage.deliveries, "complete", recorded)
        writer = Completions(
            storage.deliveries, backlog, lambda lane, deliveries: released.extend(deliveries), SYSTEM_CLOCK
        )
        task = asyncio.create_task(writer.run())
        try:
            lane = Lane("s", 256, SYSTEM_CLOCK)
            for delivery in (1, 2, 3):
                lane.push(Item(Pending(delivery, delivery, "s", 0, 0.0, "{}"), {}))
            writer.delivered(lane, lane.queue.popleft())
            writer.delivered(lane, lane.queue.popleft())
            assert lane.settling == 2
            assert lane.free == 256 - 3 + 2  # done, awaiting the write: their places count as free
            writer.delivered(lane, lane.queue.popleft())  # the last pending one
            await _released_within(released, {1, 2, 3})
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert writes == [[1, 2, 3]], "gathered until the last pending one, then written at once"
    assert backlog.pending == 0
    assert lane.settling == 0


def test_a_done_delivery_wakes_the_loader_only_when_the_lane_runs_short() -> None:
    """A delivery done and waiting for its write wakes the loader once fewer than twice the
    concurrency (here 1) are queued and more of the subscription wait in the log; not while
    more are queued, not when the loader would leave the lane (less than half of it free and
    work queued for every worker), not while a load is under way, not for an ordered
    subscription (its next waits for the write) and not with a shared log's claims (the
    delivery counts against the share until written)."""
    due = DueTimes({})
    ordered: set[str] = set()
    # ``settling`` reads neither the lanes nor the circuits.
    slots = Slots(
        due=due,
        lanes=cast(Lanes, None),
        circuits=cast(Circuits, None),
        ordered=ordered,
        replay_settled=lambda: None,
    )

    def lane_of(taken: int, done: int, claims: Instances | None = None) -> Lane:
        """A lane of 8, full: ``taken`` of them out of its queue, ``done`` of those done."""
        lane = Lane("s", 8, SYSTEM_CLOCK, claims=claims)
        for delivery in range(8):
            lane.push(Item(Pending(delivery, delivery, "s", 0, 0.0, None), {}))
        for _ in range(taken):
            lane.queue.popleft()
        lane.settling = done
        return lane

    slots.settling(lane_of(7, 7))
    assert not due.wakeup.is_set(), "the subscription has nothing in the log"
    due.schedule("s", 0.0)
    due.wakeup.clear()
    slots.settling(lane_of(6, 6))
    assert not due.wakeup.is_set(), "two queued: enough for now"
    slots.settling(lane_of(7, 3))
    assert not due.wakeup.is_set(), "one queued and 3 of 8 free: the loader would leave it"
    loading = lane_of(7, 7)
    loading.loading = 1
    slots.settling(loading)
    assert not due.wakeup.is_set(), "a load is under way"
    ordered.add("s")
    slots.settling(lane_of(7, 7))
    assert not due.wakeup.is_set(), "ordered"
    ordered.clear()
    slots.settling(lane_of(8, 8, Instances(1)))
    assert not due.wakeup.is_set(), "claims"
    slots.settling(lane_of(7, 7))
    assert due.wakeup.is_set(), "one queued, 7 of 8 free"
