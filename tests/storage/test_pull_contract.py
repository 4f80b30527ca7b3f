"""The PullLog contract on every backend: receive locks due deliveries with a token and a
delivery count; acknowledge, release, reject and renew answer per token; an ended lock hands
the event out again; ordering groups wait for the locked one; too many receives dead-letter;
and on PostgreSQL a lock outlives the instance that handed it out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pipeline.clocks import ManualClock

from cebroker.storage import Incoming
from cebroker.storage.pull import EXPIRED, SETTLED, UNKNOWN, Locked, TokenResult
from storage.support import STORAGES, opened

LOCK = 60.0


def event(n: int, sub: str = "p", group: str | None = None) -> Incoming:
    body: dict[str, Any] = {"specversion": "1.0", "id": str(n), "source": "/s", "type": "t"}
    return Incoming(body, "/s", str(n), (sub,), (group,) if group else ())


def ids(rows: list[Locked]) -> list[str]:
    return [json.loads(r.body)["id"] for r in rows]


def errors(results: list[TokenResult]) -> list[str | None]:
    return [r.error for r in results]


async def test_receive_acknowledge_and_settled_tokens(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        pull = storage.pull
        await storage.deliveries.append([event(n) for n in range(5)])
        first = await pull.receive("p", 3, LOCK, 10)
        assert ids(first) == ["0", "1", "2"]
        assert {r.count for r in first} == {1}
        assert len({r.token for r in first}) == 3
        assert all(r.locked_until == clock.now() + LOCK for r in first)
        second = await pull.receive("p", 10, LOCK, 10)
        assert ids(second) == ["3", "4"]  # locked ones are not handed out twice
        assert await pull.receive("p", 10, LOCK, 10) == []
        stats = await pull.locks("p")
        assert (stats.pending, stats.locked, stats.oldest_lock) == (5, 5, clock.now())
        results = await pull.acknowledge("p", [first[0].token, first[1].token])
        assert errors(results) == [None, None]
        # again, and a token of another subscription, a malformed one, a made-up one
        made_up = f"{first[2].delivery}.{'0' * 32}"
        results = await pull.acknowledge("p", [first[0].token, "nonsense", made_up])
        assert errors(results) == [SETTLED, UNKNOWN, EXPIRED]
        assert errors(await pull.acknowledge("other", [first[2].token])) == [UNKNOWN]
        status = await storage.deliveries.status("p")
        assert (status.delivered, status.pending) == (2, 3)


async def test_lock_expiry_release_with_delay_and_renew(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        pull = storage.pull
        await storage.deliveries.append([event(n) for n in range(3)])
        a, b, c = await pull.receive("p", 3, LOCK, 10)
        clock.advance(LOCK - 1)
        assert errors(await pull.renew("p", [b.token], LOCK)) == [None]
        assert errors(await pull.release("p", [c.token], 30)) == [None]
        clock.advance(2)  # a's lock ended, b's was renewed, c waits for its delay
        again = await pull.receive("p", 10, LOCK, 10)
        assert ids(again) == ["0"]
        assert again[0].count == 2
        assert again[0].token != a.token
        # mixed: valid, expired (re-received since), settled, unknown
        results = await pull.acknowledge("p", [b.token, a.token, c.token, "1.zz"])
        assert errors(results) == [None, EXPIRED, SETTLED, UNKNOWN]
        clock.advance(30)
        (c2,) = await pull.receive("p", 10, LOCK, 10)
        assert (ids([c2]), c2.count) == (["2"], 2)
        clock.advance(LOCK + 1)
        assert errors(await pull.acknowledge("p", [c2.token])) == [EXPIRED]  # ended, not received again


async def test_reject_and_max_delivery_count_dead_letter(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        pull = storage.pull
        await storage.deliveries.append([event(n) for n in range(2)])
        first, second = await pull.receive("p", 2, LOCK, 2)
        assert errors(await pull.reject("p", [first.token], "cannot parse")) == [None]
        clock.advance(LOCK + 1)
        (again,) = await pull.receive("p", 10, LOCK, 2)
        assert again.count == 2
        clock.advance(LOCK + 1)
        assert await pull.receive("p", 10, LOCK, 2) == []  # received twice: dead-lettered instead
        letters = await storage.deliveries.dead_letters("p", 0, 10)
        assert [(d.event["id"], d.last_error, d.attempts) for d in letters] == [
            ("0", "cannot parse", 1),
            ("1", "maximum delivery count reached", 2),
        ]
        status = await storage.deliveries.status("p")
        assert (status.pending, status.deadlettered) == (0, 2)


async def test_an_ordering_group_waits_for_its_locked_event(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        pull = storage.pull
        await storage.deliveries.append([event(1, group="k"), event(2, group="k"), event(3, group="j")])
        rows = await pull.receive("p", 10, LOCK, 10)
        assert ids(rows) == ["1", "3"]
        assert errors(await pull.release("p", [rows[0].token], 0)) == [None]
        again = await pull.receive("p", 10, LOCK, 10)
        assert ids(again) == ["1"]  # released: still first of its group, 2 still waits
        assert errors(await pull.acknowledge("p", [again[0].token])) == [None]
        assert ids(await pull.receive("p", 10, LOCK, 10)) == ["2"]


async def test_a_restart_loses_no_locked_event(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> None:
    clock = ManualClock()
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        await storage.deliveries.append([event(1)])
        (held,) = await storage.pull.receive("p", 10, LOCK, 10)
    async with opened(STORAGES[backend](request, tmp_path, clock=clock)) as storage:
        assert await storage.pull.receive("p", 10, LOCK, 10) == []  # still locked
        clock.advance(LOCK + 1)
        (again,) = await storage.pull.receive("p", 10, LOCK, 10)
        assert (ids([again]), again.count) == (["1"], 2)
        assert errors(await storage.pull.acknowledge("p", [held.token])) == [EXPIRED]
