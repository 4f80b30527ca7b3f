"""Long-poll receives hold no thread and no database connection: with 500 receives waiting, the
broker's /healthz and ingest do not stall, and a waiting receive is woken by the ingest of an
event for it (not by the end of its wait)."""

from __future__ import annotations

import asyncio
import statistics
import threading
import time
from collections.abc import Callable

import httpx
import pytest
from support.broker import Broker
from support.events import event

WAITERS = 500
#: A stall, not a speed goal: the machine is shared, so the bound is loose.
STALL = 0.1


def samples(broker: Broker, n: int = 15) -> tuple[float, float]:
    """Median seconds of /healthz and of a 20-event ingest."""
    health: list[float] = []
    ingest: list[float] = []
    for i in range(n):
        started = time.monotonic()
        assert broker.http.get("/healthz").status_code == 200
        health.append(time.monotonic() - started)
        started = time.monotonic()
        batch = [event(1000 * i + k, type="com.example.other") for k in range(20)]
        r = broker.http.post(
            "/events", json=batch, headers={"content-type": "application/cloudevents-batch+json"}
        )
        assert r.status_code == 202
        ingest.append(time.monotonic() - started)
    return statistics.median(health), statistics.median(ingest)


@pytest.mark.alone  # median /healthz and ingest bounded to 0.1 s, on the wall clock
def test_500_waiting_receives_do_not_stall_the_broker(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    ids = [
        broker.http.post("/subscriptions", json={"protocol": "PULL", "types": [f"com.example.w{i}"]}).json()[
            "id"
        ]
        for i in range(10)
    ]
    base_health, base_ingest = samples(broker)
    results: list[int] = []
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def waiters() -> None:
        limits = httpx.Limits(max_connections=WAITERS + 10)
        async with httpx.AsyncClient(base_url=broker.url, limits=limits, timeout=60) as client:

            async def one(i: int) -> None:
                r = await client.post(f"/subscriptions/{ids[i % 10]}/receive", params={"wait": 20, "max": 1})
                results.append(len(r.json()["events"]))

            tasks = [asyncio.create_task(one(i)) for i in range(WAITERS)]
            ready.set()
            await asyncio.gather(*tasks)

    thread = threading.Thread(target=lambda: loop.run_until_complete(waiters()))
    thread.start()
    ready.wait(30)

    def waiting() -> float:
        for line in broker.http.get("/metrics").text.splitlines():
            if line.startswith("cebroker_pull_waiting "):
                return float(line.split()[1])
        return 0.0

    deadline = time.monotonic() + 30
    while waiting() < WAITERS and time.monotonic() < deadline:
        time.sleep(0.1)
    assert waiting() >= WAITERS, f"only {waiting()} receives waiting"
    health, ingest = samples(broker)
    print(f"healthz {base_health * 1e3:.1f} -> {health * 1e3:.1f} ms")
    print(f"ingest {base_ingest * 1e3:.1f} -> {ingest * 1e3:.1f} ms")
    assert health < STALL
    assert ingest < max(STALL, 5 * base_ingest)
    # Every waiter is woken by an event of its subscription, long before its wait ends.
    started = time.monotonic()
    for i in range(10):
        batch = [event(100_000 + 100 * i + k, type=f"com.example.w{i}") for k in range(WAITERS // 10)]
        r = broker.http.post(
            "/events", json=batch, headers={"content-type": "application/cloudevents-batch+json"}
        )
        assert r.status_code == 202
    thread.join(60)
    loop.close()
    assert sum(results) == WAITERS
    assert time.monotonic() - started < 15
