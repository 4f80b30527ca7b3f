"""Ordering groups in the DeliveryLog contract, on every backend: of the deliveries of one
subscription with the same group only the oldest is ever due; it leaves the log (confirmed or
dead-lettered) before the next is handed out; a retry keeps the others waiting; the order holds
across a reopen and, on a shared log, across instances (issue "Ordered delivery")."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from cebroker.storage import Incoming, Limits, Pending, Storage
from storage.support import STORAGES, opened


def ordered(n: int | str, group: str | None, *subscriptions: str) -> Incoming:
    event: dict[str, Any] = {"specversion": "1.0", "id": str(n), "source": "/s", "type": "t"}
    return Incoming(event, "/s", str(n), subscriptions, (group,) * len(subscriptions))


def ids(rows: list[Pending]) -> list[str]:
    return [json.loads(r.body or "")["id"] for r in rows]


async def settle(storage: Storage, rows: list[Pending]) -> None:
    await storage.deliveries.complete([(r.id, r.event_seq, r.subscription) for r in rows])


async def test_only_the_oldest_of_a_group_is_due(storage: Storage) -> None:
    log = storage.deliveries
    await log.append(
        [ordered(1, "k1", "a"), ordered(2, "k1", "a"), ordered(3, "k2", "a"), ordered(4, None, "a")]
    )
    await log.append([ordered(5, "k1", "a"), ordered(6, "k2", "a")])  # a later call joins the same groups
    rows, later = await log.due("a", 10)
    assert ids(rows) == ["1", "3", "4"]
    assert later is None or later > time.time() + 3600  # the others wait for a release, not a time
    assert (await log.status("a")).pending == 6
    await settle(storage, [rows[0]])  # k1's first is confirmed: its second is due now
    rows, _ = await log.due("a", 10)
    assert [i for i in ids(rows) if i not in ("3", "4")] == ["2"]


async def test_groups_are_per_subscription(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([ordered(1, "k", "a", "b"), ordered(2, "k", "a", "b")])
    first_a, _ = await log.due("a", 10)
    first_b, _ = await log.due("b", 10)
    assert (ids(first_a), ids(first_b)) == (["1"], ["1"])
    await settle(storage, first_a)
    assert ids((await log.due("a", 10))[0]) == ["2"]
    # b's group still waits for b's first
    assert [i for i in ids((await log.due("b", 10))[0]) if i != "1"] == []


async def test_a_retry_keeps_the_group_waiting_and_a_dead_letter_releases_it(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([ordered(n, "k", "a") for n in range(3)])
    (head,), _ = await log.due("a", 10)
    await log.reschedule(head, 1, time.time() - 1, "503")  # due again at once: still the head
    (again,), _ = await log.due("a", 10)
    assert ids([again]) == ["0"]
    await log.reschedule(again, 2, time.time() + 60, "503")  # later: nobody of the group is due
    assert (await log.due("a", 10))[0] == []
    await log.dead_letter(again, b'{"id": "0"}', 3, "gave up", "503", None)
    (second,), _ = await log.due("a", 10)
    assert ids([second]) == ["1"]


async def test_drop_and_forget_leave_no_group_stuck(storage: Storage) -> None:
    log = storage.deliveries
    await log.append([ordered(n, "k", "a", "b") for n in range(3)])
    (head,), _ = await log.due("a", 10)
    assert await log.drop([(head.id, head.event_seq)]) == 1
    assert ids((await log.due("a", 10))[0]) == ["1"]
    assert await log.forget("a") == 2
    await log.append([ordered(9, "k", "a")])
    assert ids((await log.due("a", 10))[0]) == ["9"]
    assert ids((await log.due("b", 10))[0]) == ["0"]


async def test_the_order_survives_a_reopen(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        await storage.deliveries.append([ordered(n, "k", "a") for n in range(3)])
        (head,), _ = await storage.deliveries.due("a", 10)
        await storage.deliveries.reschedule(head, 1, time.time() - 1, "503")
    async with opened(STORAGES[backend](request, tmp_path)) as storage:
        log = storage.deliveries
        for expected in ("0", "1", "2"):
            rows, _ = await log.due("a", 10)
            assert ids(rows) == [expected]
            await settle(storage, rows)
        assert await log.backlog() == {}


async def test_claims_hand_out_one_of_a_group_at_a_time(storage: Storage) -> None:
    """What ``due`` returns (a claim, on a shared log) never holds two of one group, even while
    the first is still out."""
    log = storage.deliveries
    await log.append([ordered(n, f"k{n % 3}", "a") for n in range(9)])
    first, _ = await log.due("a", 10, Limits(concurrency=10))
    assert sorted(ids(first)) == ["0", "1", "2"]
    # while the three are out, nothing more of their groups is handed out
    assert [
        r for r in (await log.due("a", 10, Limits(concurrency=10)))[0] if r.id not in {f.id for f in first}
    ] == []
    await settle(storage, first[:1])
    more, _ = await log.due("a", 10, Limits(concurrency=10))
    assert [i for i in ids(more) if i not in ("1", "2")] == ["3"]


async def test_concurrent_writers_of_one_group_make_one_head(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    """Appends of one group committed at once (two instances on a shared log) leave exactly one
    delivery of it due, and the group drains in id order."""
    if backend == "sqlite":
        pytest.skip("one process per file: there is no second writer")
    async with (
        opened(STORAGES[backend](request, tmp_path)) as one,
        opened(STORAGES[backend](request, tmp_path)) as two,
    ):
        await asyncio.gather(
            *((one if n % 2 else two).deliveries.append([ordered(f"c{n}", "k", "a")]) for n in range(20))
        )
        order: list[int] = []
        for _ in range(20):
            rows, _ = await one.deliveries.due("a", 10, Limits(concurrency=10))
            assert len(rows) == 1
            order.append(rows[0].id)
            await settle(one, rows)
        assert order == sorted(order)
        assert await one.deliveries.backlog() == {}
