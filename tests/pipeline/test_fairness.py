"""Fair use of connections: sinks that accept connections and never answer, at the highest
concurrency the broker accepts, take none of the connections a healthy subscription needs."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import statistics
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from support.broker import Broker
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_until

from cebroker.pipeline.policy import MAX_CONCURRENCY

BATCH = {"content-type": "application/cloudevents-batch+json"}


class HangingSinks:
    """``count`` TCP servers on 127.0.0.1 that accept every connection, read what comes and
    never answer; ``open`` counts the connections each holds now."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._servers: list[asyncio.Server] = []
        self._held: set[asyncio.StreamWriter] = set()
        self.urls: list[str] = []
        self.open: list[int] = [0] * count
        #: The most connections each held at once since :meth:`reset_peaks`.
        self.peak: list[int] = [0] * count

    def __enter__(self) -> HangingSinks:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _start(self) -> None:
        for index in range(self._count):
            server = await asyncio.start_server(
                functools.partial(self._hold, index), "127.0.0.1", 0, backlog=1024
            )
            self._servers.append(server)
            self.urls.append(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/hang")

    async def _hold(self, index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open[index] += 1
        self.peak[index] = max(self.peak[index], self.open[index])
        self._held.add(writer)
        try:
            while await reader.read(65536):
                pass  # the request arrives; no answer ever goes back
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.open[index] -= 1
            self._held.discard(writer)
            writer.close()

    def reset_peaks(self) -> None:
        self.peak = list(self.open)

    async def _stop(self) -> None:
        for server in self._servers:
            server.close()
        for writer in list(self._held):
            writer.transport.abort()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)


@pytest.fixture
def hanging() -> Iterator[HangingSinks]:
    with HangingSinks(8) as sinks:
        yield sinks


def latencies(broker: Broker, sink: Sink, arrived: dict[int, float], first: int, count: int) -> list[float]:
    """Send ``count`` events one by one, 20 ms apart, to the healthy subscription; the time
    from each POST to its arrival at the sink, in seconds."""
    sent: dict[int, float] = {}
    for n in range(first, first + count):
        sent[n] = time.monotonic()
        assert broker.send(event(n)).status_code == 202
        time.sleep(0.02)
    wait_until(lambda: all(n in arrived for n in sent), timeout=60)
    return [arrived[n] - sent[n] for n in sent]


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


@pytest.mark.alone
def test_hanging_sinks_at_the_highest_concurrency_leave_a_healthy_sink_its_latency(
    broker: Broker, sink: Sink, hanging: HangingSinks
) -> None:
    arrived: dict[int, float] = {}

    def record(got: Received) -> Reply | None:
        arrived[orjson.loads(got.body)["n"]] = time.monotonic()
        return None

    sink.responder = record
    broker.subscribe(f"{sink.url}/fast", types=["com.example.test"])
    baseline = latencies(broker, sink, arrived, 0, 200)
    # Eight sinks that never answer, each offered more than the most it may hold at once.
    config = {"concurrency": str(MAX_CONCURRENCY), "timeout": "60"}
    for url in hanging.urls:
        broker.subscribe(url, types=["com.example.hang"], config=config)
    stuck: list[dict[str, Any]] = [event(10_000 + n, type="com.example.hang") for n in range(300)]
    assert broker.http.post("/events", content=orjson.dumps(stuck), headers=BATCH).status_code == 202
    wait_until(lambda: hanging.open == [MAX_CONCURRENCY] * 8, timeout=60)
    during = latencies(broker, sink, arrived, 1000, 200)
    assert hanging.open == [MAX_CONCURRENCY] * 8  # they still hold every connection they may
    base, now = p99(baseline), p99(during)
    assert now <= max(5 * base, base + 0.05), f"p99 {now * 1000:.1f} ms against {base * 1000:.1f} ms"


def test_a_concurrency_above_the_bound_is_refused_and_changes_nothing(broker: Broker) -> None:
    body = {
        "protocol": "HTTP",
        "sink": "http://127.0.0.1:9/x",
        "config": {"concurrency": MAX_CONCURRENCY + 1},
    }
    refused = broker.http.post("/subscriptions", json=body)
    assert refused.status_code == 400
    assert refused.headers["content-type"].startswith("application/problem+json")
    problems = refused.json()["errors"]
    assert [p["pointer"] for p in problems] == ["/config/concurrency"]
    assert str(MAX_CONCURRENCY) in problems[0]["detail"]
    assert broker.http.get("/subscriptions").json() == []
    accepted = broker.http.post("/subscriptions", json={**body, "config": {"concurrency": MAX_CONCURRENCY}})
    assert accepted.status_code == 201
    sub = accepted.json()
    replaced = broker.http.put(
        f"/subscriptions/{sub['id']}", json={**body, "config": {"concurrency": str(MAX_CONCURRENCY * 4)}}
    )
    assert replaced.status_code == 400
    assert [p["pointer"] for p in replaced.json()["errors"]] == ["/config/concurrency"]
    assert broker.http.get(f"/subscriptions/{sub['id']}").json() == sub


@pytest.mark.alone
def test_a_hanging_sink_times_out_opens_its_circuit_and_then_holds_one_connection(
    broker: Broker, hanging: HangingSinks
) -> None:
    """Requests that hang end at the subscription's timeout and count toward its circuit; once
    it is open the sink holds at most the one probe's connection."""
    config = {"timeout": "1", "concurrency": "16", "initialdelay": "0.2", "probemaxdelay": "0.5"}
    sub = broker.subscribe(hanging.urls[0], types=["com.example.hang"], config=config)
    stuck = [event(n, type="com.example.hang") for n in range(100)]
    assert broker.http.post("/events", content=orjson.dumps(stuck), headers=BATCH).status_code == 202
    wait_until(lambda: hanging.peak[0] == 16)
    opened = wait_until(lambda: (c := broker.status(sub)["circuit"])["state"] != "closed" and c)
    assert opened["lastError"] == f"no answer from {hanging.urls[0]} within 1.0s"
    wait_until(lambda: hanging.open[0] <= 1)  # the 16 that hung have timed out
    hanging.reset_peaks()
    wait_until(lambda: broker.status(sub)["circuit"]["failedProbes"] >= 3, timeout=30)
    assert hanging.peak[0] <= 1
    status = broker.status(sub)
    assert status["pending"] == 100
    assert status["failed"] <= 16 + status["circuit"]["failedProbes"] + 1  # 16 that hung, then probes
