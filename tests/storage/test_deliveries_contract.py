"""The DeliveryLog contract, run against every storage backend: append with de-duplication,
read-back in due order and by pages, completion, drops, retries, dead letters and re-drive,
status counts, clean-up of a deleted subscription, expiry of de-duplication keys, and
survival across a reopen (issue "Ingress": (source, id) window; "Matching and dispatch")."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from pipeline.clocks import ManualClock

from cebroker.storage import (
    Claims,
    Cleanup,
    DeadLetters,
    DeliveryLog,
    DeliveryStats,
    DueQueue,
    Incoming,
    Ingest,
    Limits,
    Outcomes,
    Pending,
    RateBuckets,
    Storage,
)
from cebroker.storage.stats import SubscriptionCounts
from storage.support import STORAGES, opened

EV = {"specversion": "1.0", "id": "1", "source": "/s", "type": "t", "data": {"amount": 1.50, "name": "é"}}


def ev(n: int | str, **kw: Any) -> dict[str, Any]:
    return {**EV, "id": str(n), **kw}


def incoming(n: int | str, *subscriptions: str) -> Incoming:
    return Incoming(ev(n), "/s", str(n), subscriptions)


def stored(row: Pending) -> bytes:
    """The event of ``row`` as the dispatcher hands it to ``dead_letter``."""
    body = row.body or b""
    return body.encode() if isinstance(body, str) else body


def ids(rows: list[Pending]) -> list[str]:
    return [json.loads(r.body or "")["id"] for r in rows]


async def release(storage: Storage, rows: list[Pending]) -> None:
    """Give back what ``due`` claimed, on a backend with claims (a log of one process claims
    nothing)."""
    if storage.claims is not None:
        await storage.claims.release(rows)


def test_satisfies_the_protocol(storage: Storage) -> None:
    assert isinstance(storage.deliveries, DeliveryLog)


@pytest.mark.parametrize(
    "contract",
    [Ingest, DueQueue, Outcomes, DeadLetters, DeliveryStats, RateBuckets, Cleanup],
    ids=lambda c: c.__name__,
)
def test_the_log_provides_each_small_contract(storage: Storage, contract: type) -> None:
    assert isinstance(storage.deliveries, contract)


def test_only_a_shared_backend_provides_claims(storage: Storage, backend: str) -> None:
    """Claims and leases come from a backend several instances share; SQLite has none."""
    if backend == "sqlite":
        assert storage.claims is None
    else:
        assert isinstance(storage.claims, Claims)


async def test_append_dedups_within_the_window_and_after_it(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    # On a clock of its own: a stall of the machine longer than the window must not end it early.
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, dedup_window=0.3, clock=clock)) as storage:
        log = storage.deliveries
        first = await log.append([Incoming(EV, "/s", "1", ("a", "b")), Incoming(EV, "/s", "1", ("a",))])
        assert first[1] is None
        assert first[0] is not None
        assert [sub for _, sub in first[0].deliveries] == ["a", "b"]
        assert await log.append([Incoming(EV, "/s", "1", ("a",))]) == [None]
        # the same id from another source is another event
        assert (await log.append([Incoming(EV, "/other", "1", ("a",))]))[0] is not None
        clock.advance(0.35)
        again = await log.append([Incoming(EV, "/s", "1", ("a",))])
        assert again[0] is not None
        assert len(again[0].deliveries) == 1
        assert await log.purge_seen() == 1  # /other's key expired; /s's was just refreshed
        assert await log.purge_seen() == 0


async def test_a_duplicate_does_not_extend_the_window_of_its_key(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """The window runs from the event's first acceptance: duplicates refused within it do not
    restart it, in one call or across calls, and an expired key is taken once per call."""
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, dedup_window=0.3, clock=clock)) as storage:
        log = storage.deliveries
        assert (await log.append([Incoming(EV, "/s", "1", ("a",))]))[0] is not None
        clock.advance(0.2)
        assert await log.append([Incoming(EV, "/s", "1", ("a",)), Incoming(EV, "/s", "1", ("a",))]) == [
            None,
            None,
        ]
        clock.advance(0.15)  # 0.35 after the first acceptance, 0.15 after the duplicates
        again = await log.append(
            [
                Incoming(EV, "/s", "1", ("a",)),
                Incoming(EV, "/s", "2", ("a",)),
                Incoming(EV, "/s", "1", ("a",)),
            ]
        )
        assert [written is not None for written in again] == [True, True, False]


async def test_an_event_matching_nothing_keeps_only_its_key(storage: Storage) -> None:
    log = storage.deliveries
    (written,) = await log.append([incoming(1)])
    assert written is not None
    assert (written.seq, written.deliveries) == (0, [])
    assert await log.backlog() == {}
    assert await log.append([incoming(1, "a")]) == [None]  # still a duplicate


async def test_events_read_back_as_sent_and_complete_removes_them(storage: Storage) -> None:
    """Stored JSON keeps the values; pre-serialized events (bytes) are accepted too."""
    log = storage.deliveries
    raw = orjson.dumps(ev(2))
    await log.append([Incoming(EV, "/s", "1", ("a",)), Incoming(raw, "/s", "2", ("a",))])
    rows, later = await log.due("a", 10)
    assert later is None
    assert [json.loads(r.body or "") for r in rows] == [EV, ev(2)]
    assert (await log.backlog())["a"][0] == 2
    await log.complete([(rows[0].id, rows[0].event_seq, "a")])
    await log.dead_letter(rows[1], stored(rows[1]), 3, "sink answered 400", "400", "no")
    assert await log.backlog() == {}
    status = await log.status("a")
    assert (status.delivered, status.failed, status.deadlettered) == (1, 1, 1)
    (dead,) = await log.dead_letters("a", 0, 10)
    assert (dead.event["id"], dead.status, dead.attempts) == ("2", "400", 3)
    assert await log.redrive("a", [dead.id + 1]) == 0
    assert await log.redrive("a", None) == 1
    rows, _ = await log.due("a", 10)
    assert ids(rows) == ["2"]
    assert rows[0].attempts == 0
    assert await log.forget("a") == 1
    assert await log.backlog() == {}


async def test_text_that_array_syntax_would_escape_reads_back_unchanged(storage: Storage) -> None:
    """Quotes, backslashes, braces, commas, spaces, the word NULL and non-ASCII text in bodies,
    sources, ids and subscription ids: the backends pass rows as arrays (PostgreSQL in binary,
    SQLite as JSON), and nothing of them may be read as array or JSON syntax."""
    awkward = 'a "quoted" \\ back\\slash, {brace} NULL é \u2603'
    event = ev(f"id {awkward}", source=f"/s {awkward}", data={"text": awkward, "list": [awkward, None]})
    subscription = f"sub {awkward}"
    log = storage.deliveries
    (written,) = await log.append(
        [Incoming(event, event["source"], event["id"], (subscription,), tenant=awkward)]
    )
    assert written is not None
    (again,) = await log.append(
        [Incoming(event, event["source"], event["id"], (subscription,), tenant=awkward)]
    )
    assert again is None  # the awkward key is found again: a duplicate
    rows, _ = await log.due(subscription, 10)
    assert [json.loads(r.body or "") for r in rows] == [event]
    assert [r.subscription for r in rows] == [subscription]
    await log.complete([(rows[0].id, rows[0].event_seq, subscription)])
    assert await log.backlog() == {}


async def test_due_pages_in_due_order_and_says_when_more_fall_due(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([incoming(n, "a") for n in range(5)])
    await log.append([incoming(9, "b")])
    page, later = await log.due("a", 2)
    assert ids(page) == ["0", "1"]
    assert later is not None
    assert later <= time.time()
    # a retry pushed into the future goes behind the others and is not due
    await log.reschedule(page[0], 1, time.time() + 60, "503 from the sink")
    page, later = await log.due("a", 10)
    # A shared log hands out a claimed delivery once: "1" is this instance's already.
    assert ids(page) == (["2", "3", "4"] if storage.claims is not None else ["1", "2", "3", "4"])
    assert later is not None
    assert later > time.time() + 50
    backlog = await log.backlog()
    assert (backlog["a"][0], backlog["b"][0]) == (5, 1)
    status = await log.status("a")
    assert (status.failed, status.pending, status.last_error) == (1, 5, "503 from the sink")
    assert status.last_error_at is not None
    # a retry due again comes back with its attempt count
    await log.reschedule(page[0], 2, time.time() - 1, "timeout")
    first, _ = await log.due("a", 1)
    assert (ids(first), first[0].attempts) == (ids(page[:1]), 2)


async def test_drop_removes_what_is_still_there(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([incoming(1, "a", "b")])
    rows, _ = await log.due("a", 10)
    assert await log.drop([(rows[0].id, rows[0].event_seq)]) == 1
    assert await log.drop([(rows[0].id, rows[0].event_seq)]) == 0
    # the event stays for the other subscription's delivery
    assert ids((await log.due("b", 10))[0]) == ["1"]
    assert (await log.status("a")).pending == 0


async def test_dead_letters_page_and_redrive_picks(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([incoming(n, "a") for n in range(4)])
    rows, _ = await log.due("a", 10)
    for row in rows:
        await log.dead_letter(row, stored(row), 1, "gone", None, None)
    first = await log.dead_letters("a", 0, 3)
    assert [d.event["id"] for d in first] == ["0", "1", "2"]
    rest = await log.dead_letters("a", first[-1].id, 3)
    assert [d.event["id"] for d in rest] == ["3"]
    assert await log.dead_letters("b", 0, 10) == []
    assert await log.redrive("a", [first[1].id, rest[0].id]) == 2
    assert ids((await log.due("a", 10))[0]) == ["1", "3"]
    assert [d.event["id"] for d in await log.dead_letters("a", 0, 10)] == ["0", "2"]
    status = await log.status("a")
    assert (status.deadlettered, status.deadlettered_total, status.pending) == (2, 4, 2)


async def test_the_trace_context_stays_with_the_event_through_retries_dead_letters_and_redrive(
    storage: Storage,
) -> None:
    """Every read-back of a delivery (first claim, after a retry, after a redrive, after a
    time-to-live sweep and its redrive) carries its event's trace context; an event without one
    has none."""
    log = storage.deliveries
    traced = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=a;b"
    await log.append([Incoming(ev(1), "/s", "1", ("a",), trace=traced), incoming(2, "a")])
    rows, _ = await log.due("a", 10)
    assert [r.trace for r in rows] == [traced, None]
    await log.reschedule(rows[0], 1, 0.0, "503")
    await log.reschedule(rows[1], 1, 0.0, "503")
    await release(storage, rows)
    rows, _ = await log.due("a", 10)
    assert [r.trace for r in rows] == [traced, None]
    for row in rows:
        await log.dead_letter(row, stored(row), 2, "gone", None, None)
    assert await log.redrive("a", None) == 2
    rows, _ = await log.due("a", 10)
    assert sorted(ids(rows)) == ["1", "2"]
    assert {r.trace for r in rows} == {traced, None}
    assert next(r.trace for r in rows if ids([r]) == ["1"]) == traced
    await release(storage, rows)
    await log.expire("a", time.time() + 3600, "expired", 10)
    assert await log.redrive("a", None) == 2
    rows, _ = await log.due("a", 10)
    assert next(r.trace for r in rows if ids([r]) == ["1"]) == traced
    assert next(r.trace for r in rows if ids([r]) == ["2"]) is None


async def test_expire_dead_letters_the_oldest_in_batches_with_their_attempts(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """The time-to-live sweep of a subscription whose sink is down: oldest first, a batch at a
    time, the attempts each had, the reason given, no status; and when the next one runs out."""
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        log = storage.deliveries
        await log.append([incoming(n, "a") for n in range(3)])
        clock.advance(10)
        await log.append([incoming(n, "a", "b") for n in range(3, 5)])
        start = clock.now() - 10
        (row, *_), _ = await log.due("a", 1)
        await log.reschedule(row, 2, clock.now(), "503")
        clock.advance(100)
        letters, oldest = await log.expire("a", start + 5, "unavailable since then", 2)
        assert [(d.event["id"], d.attempts) for d in letters] == [("0", 2), ("1", 0)]
        assert {(d.status, d.body, d.last_error, d.first_at) for d in letters} == {
            (None, None, "unavailable since then", start)
        }
        assert oldest == start
        letters, oldest = await log.expire("a", start + 5, "unavailable since then", 2)
        assert [d.event["id"] for d in letters] == ["2"]
        assert oldest == start + 10
        assert await log.expire("a", start + 5, "unavailable since then", 2) == ([], start + 10)
        stored = await log.dead_letters("a", 0, 10)
        assert [d.event["id"] for d in stored] == ["0", "1", "2"]
        status = await log.status("a")
        assert (status.pending, status.deadlettered, status.deadlettered_total) == (2, 3, 3)
        letters, oldest = await log.expire("a", clock.now(), "later", 10)
        assert ([d.event["id"] for d in letters], oldest) == (["3", "4"], None)
        assert ids((await log.due("b", 10))[0]) == ["3", "4"]  # another subscription's are untouched
        assert await log.backlog() == {"b": (2, start + 10)}


async def test_status_of_an_unknown_subscription_is_zero(storage: Storage) -> None:
    assert await storage.deliveries.status("nobody") == SubscriptionCounts(
        delivered=0,
        failed=0,
        pending=0,
        deadlettered=0,
        deadlettered_total=0,
        last_error=None,
        last_error_at=None,
    )


async def test_forget_removes_everything_of_one_subscription(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([incoming(n, "a", "b") for n in range(3)])
    rows, _ = await log.due("a", 10)
    await log.dead_letter(rows[0], b'{"id": "0"}', 1, "no", None, None)
    await log.complete([(rows[1].id, rows[1].event_seq, "a")])
    assert await log.forget("a") == 1
    assert await log.status("a") == await log.status("nobody")
    assert await log.dead_letters("a", 0, 10) == []
    assert ids((await log.due("b", 10))[0]) == ["0", "1", "2"]  # b's deliveries are untouched


async def test_concurrent_appends_are_merged_and_a_bad_one_fails_alone(storage: Storage) -> None:
    """Group commit: concurrent calls share a write; a call whose event cannot be serialised
    fails on its own and stores nothing, the others are committed."""
    log = storage.deliveries
    good = [[Incoming(ev(f"g{n}"), "/s", f"g{n}", ("a",))] for n in range(20)]
    bad = [Incoming({**ev("bad"), "x": object()}, "/s", "bad", ("a",))]
    outcomes = await asyncio.gather(
        *(log.append(c) for c in [*good[:10], bad, *good[10:]]), return_exceptions=True
    )
    assert isinstance(outcomes[10], TypeError)
    assert all(isinstance(o, list) and o[0] is not None for i, o in enumerate(outcomes) if i != 10)
    rows, _ = await log.due("a", 100)
    assert sorted(ids(rows)) == sorted(f"g{n}" for n in range(20))
    # The bad event's key was rolled back with it: the same (source, id) is accepted later.
    assert (await log.append([Incoming(ev("bad"), "/s", "bad", ("a",))]))[0] is not None


async def test_everything_survives_close_and_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """Deliveries, retries, dead letters, counts and de-duplication keys are durable."""
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        log = storage.deliveries
        await log.append([incoming(n, "a") for n in range(3)])
        rows, _ = await log.due("a", 10)
        await log.complete([(rows[0].id, rows[0].event_seq, "a")])
        await log.reschedule(rows[1], 1, time.time() + 60, "later")
        await log.dead_letter(rows[2], b'{"id": "2"}', 4, "never", "410", "gone")
        before = await log.status("a")
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        log = storage.deliveries
        assert await log.status("a") == before
        assert await log.append([incoming(0, "a")]) == [None]
        (dead,) = await log.dead_letters("a", 0, 10)
        assert (dead.event, dead.status, dead.body, dead.attempts) == ({"id": "2"}, "410", "gone", 4)
        assert (await log.due("a", 10))[0] == []  # the retry is not due yet
        (fresh,) = await log.append([incoming(7, "a")])
        assert fresh is not None
        await log.reschedule(rows[1], 2, time.time() - 1, "now")
        due, _ = await log.due("a", 10)
        assert sorted(ids(due)) == ["1", "7"]
        assert len({r.id for r in due}) == 2


@pytest.mark.parametrize("size", [1, 1000])
async def test_one_append_is_all_or_nothing(storage: Storage, size: int) -> None:
    """A call with one unserialisable event stores none of its events, nor their keys."""
    log = storage.deliveries
    batch = [incoming(n, "a") for n in range(size - 1)] + [Incoming({"x": object()}, "/s", "bad", ("a",))]
    with pytest.raises(TypeError):
        await log.append(batch)
    assert await log.backlog() == {}
    assert all(w is not None for w in await log.append([incoming(n, "a") for n in range(size - 1)]))


async def test_pending_counts_every_delivery_in_the_log(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([incoming(n, "a", "b") for n in range(3)])
    assert await log.pending() == 6
    rows, _ = await log.due("a", 10)
    await log.complete([(r.id, r.event_seq, "a") for r in rows[:2]])
    await log.dead_letter(rows[2], stored(rows[2]), 1, "no", None, None)
    assert await log.pending() == 3
    assert await log.forget("b") == 3
    assert await log.pending() == 0


async def test_waiting_names_each_subscription_with_unclaimed_deliveries_and_its_earliest(
    storage: Storage,
) -> None:
    log, claims = storage.deliveries, storage.claims
    if claims is None:
        pytest.skip("one process per file: no claims, nobody else to look for what waits")
    assert await claims.waiting() == {}
    await log.append([incoming(n, *(["a", "b"] if n < 3 else ["c"])) for n in range(5)])
    rows, _ = await log.due("b", 10)
    await log.reschedule(rows[0], 1, time.time() + 60, "later")
    waiting = await claims.waiting()
    assert set(waiting) == {"a", "b", "c"}
    assert waiting["a"] <= time.time()
    # b's other two are claimed by a shared log (nobody else need look)
    assert waiting["b"] > time.time() + 50
    await log.complete([(r.id, r.event_seq, "b") for r in rows[1:]])
    rows, _ = await log.due("c", 10)
    assert "c" not in await claims.waiting()  # claimed: nobody else need look
    assert claims.instances == 1


async def test_what_due_hands_out_is_held_and_watch_can_be_stopped(storage: Storage) -> None:
    log, claims = storage.deliveries, storage.claims
    (written,) = await log.append([incoming(1, "a")])
    assert written is not None
    assert written.held is (claims is None)
    rows, _ = await log.due("a", 10)
    if claims is None:
        return  # one process per file: everything it reads is its own, nothing to watch
    assert [claims.holds(r) for r in rows] == [True]
    heard: list[str | None] = []
    stop = claims.watch(heard.append)
    stop()
    stop()  # stopping twice is harmless


async def test_take_gives_a_rate_and_a_burst_of_one_second(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    # On a clock of its own: a stall of 0.2 s between the takes would refill the bucket.
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        log = storage.deliveries
        assert [await log.take("k", 5.0) for _ in range(5)] == [0.0] * 5
        wait = await log.take("k", 5.0)
        assert 0.0 < wait <= 0.2
        assert await log.take("other", 5.0) == 0.0  # buckets are independent
        with pytest.raises(ValueError, match="positive"):
            await log.take("k", 0.0)


async def test_due_keeps_within_the_limits_on_a_shared_log(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """A shared log enforces a subscription's concurrency and rate over every instance; an
    unshared one leaves them to its one dispatcher and returns what is due."""
    # On a clock of its own: a stall of a quarter of a second between two looks would refill
    # the rate's bucket.
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        log = storage.deliveries
        await log.append([incoming(n, "a") for n in range(10)])
        rows, later = await log.due("a", 10, Limits(concurrency=3))
        if storage.claims is None:
            assert len(rows) == 10
            return
        assert len(rows) == 3
        assert later is not None
        assert (await log.due("a", 10, Limits(concurrency=3)))[0] == []  # all three permits are out
        await log.complete([(rows[0].id, rows[0].event_seq, "a")])
        assert len((await log.due("a", 10, Limits(concurrency=3)))[0]) == 1
        await log.append([incoming(f"r{n}", "r") for n in range(10)])
        first, _ = await log.due("r", 10, Limits(concurrency=10, rate=4.0))
        assert len(first) == 4  # a burst of one second's worth
        second, later = await log.due("r", 10, Limits(concurrency=10, rate=4.0))
        assert second == []
        assert later is not None
        assert later - clock.now() <= 0.3


async def test_release_gives_back_claims_untouched(storage: Storage) -> None:
    """Deliveries let go unattempted (their sink's circuit opened) go back as they were: free to
    claim again, their attempts and due order unchanged, nothing counted."""
    log = storage.deliveries
    await log.append([incoming(n, "a") for n in range(4)])
    rows, _ = await log.due("a", 2, Limits(concurrency=2))
    assert ids(rows) == ["0", "1"]
    await release(storage, rows)
    again, _ = await log.due("a", 4, Limits(concurrency=4))
    assert ids(again)[:2] == ["0", "1"]
    assert [r.attempts for r in again] == [0] * len(again)
    status = await log.status("a")
    assert (status.failed, status.pending, status.last_error) == (0, 4, None)
    await release(storage, [])
