"""Pull delivery over two ``cebroker serve`` instances on one PostgreSQL database: consumers
receive on both and acknowledge on either; every event is acknowledged exactly once; an instance
killed while holding locks loses nothing (its events come back when the locks expire)."""

from __future__ import annotations

import collections
import itertools
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.broker import BrokerProcess, BrokerProcesses
from support.events import event
from support.waiting import wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

BATCH = {"content-type": "application/cloudevents-batch+json"}
EVENTS = 300


@pytest.fixture
def start(broker_processes: BrokerProcesses) -> Callable[..., BrokerProcess]:
    logs = itertools.count()

    def launch(db: str) -> BrokerProcess:
        flags = ("--instance-lease", "2s", "--log-level", "warning")
        return broker_processes(db, f"broker-{next(logs)}.log", *flags).start().ready()

    return launch


def receive(url: str, sid: str, n: int, wait: float = 1) -> list[dict[str, Any]]:
    r = httpx.post(f"{url}/subscriptions/{sid}/receive", params={"max": n, "wait": wait}, timeout=30)
    assert r.status_code == 200, r.text
    return list(r.json()["events"])


def acknowledge(url: str, tokens: list[str]) -> dict[str, Any]:
    return dict(httpx.post(url, json={"locktokens": tokens}, timeout=30).json())


def test_consumers_on_two_instances_acknowledge_every_event_once(
    postgres_url: str, start: Callable[..., BrokerProcess]
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    created = httpx.post(f"{a.url}/subscriptions", json={"protocol": "PULL"})
    sid = created.json()["id"]
    acked: collections.Counter[str] = collections.Counter()
    lock = threading.Lock()
    done = threading.Event()

    def consume(mine: BrokerProcess, other: BrokerProcess) -> None:
        while not done.is_set():
            got = receive(mine.url, sid, 50)
            if not got:
                continue
            # acknowledged on the other instance than the receive
            answer = acknowledge(
                f"{other.url}/subscriptions/{sid}/acknowledge", [g["locktoken"] for g in got]
            )
            assert answer["failed"] == []
            with lock:
                acked.update(g["event"]["id"] for g in got)
                if sum(acked.values()) >= EVENTS:
                    done.set()

    consumers = [threading.Thread(target=consume, args=pair) for pair in ((a, b), (b, a), (a, b), (b, a))]
    for thread in consumers:
        thread.start()
    for start_at in range(0, EVENTS, 50):  # published on both instances
        target = a if start_at % 100 else b
        batch = [event(n) for n in range(start_at, start_at + 50)]
        assert httpx.post(f"{target.url}/events", json=batch, headers=BATCH).status_code == 202
    assert done.wait(60), f"acknowledged {sum(acked.values())} of {EVENTS}"
    for thread in consumers:
        thread.join(30)
    assert sorted(acked) == sorted(f"e-{n}" for n in range(EVENTS))
    assert set(acked.values()) == {1}
    status = httpx.get(f"{b.url}/subscriptions/{sid}/status").json()
    assert (status["delivered"], status["pending"]) == (EVENTS, 0)


def test_an_instance_killed_holding_locks_loses_nothing(
    postgres_url: str, start: Callable[..., BrokerProcess]
) -> None:
    a, b = start(postgres_url), start(postgres_url)
    sid = httpx.post(
        f"{a.url}/subscriptions", json={"protocol": "PULL", "protocolsettings": {"lockduration": 2}}
    ).json()["id"]
    batch = [event(n) for n in range(20)]
    assert httpx.post(f"{a.url}/events", json=batch, headers=BATCH).status_code == 202
    held = receive(a.url, sid, 20)
    assert len(held) == 20
    a.kill()
    assert receive(b.url, sid, 20, wait=0) == []  # still locked
    again: list[dict[str, Any]] = []

    def all_back() -> bool:
        again.extend(receive(b.url, sid, 20, wait=1))
        return len(again) >= 20

    wait_until(all_back, 30, "the killed instance's events to come back")
    assert sorted(g["event"]["id"] for g in again) == sorted(f"e-{n}" for n in range(20))
    assert {g["deliverycount"] for g in again} == {2}
    answer = acknowledge(f"{b.url}/subscriptions/{sid}/acknowledge", [g["locktoken"] for g in again])
    assert answer["failed"] == []
    stale = acknowledge(f"{b.url}/subscriptions/{sid}/acknowledge", [held[0]["locktoken"]])
    assert stale["failed"] == [{"locktoken": held[0]["locktoken"], "reason": "unknown"}]
