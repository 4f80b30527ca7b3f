"""No stalls: while the largest batch the limits allow (16 MiB of tiny events) is parsed,
checked, matched and committed, the broker keeps answering ``/healthz`` within 100 ms (real
``cebroker serve`` process, measured from outside; issue: hostile input).

On a machine shared with other work even an idle broker can be slow to answer now and then, so
the same probes are also run against the idle broker, before the batch and after it for as long
as the batch took, and the limit applies to what the batch adds to the worst of those. The test
prints each batch's figures (the benchmark figure in docs/pipeline.md)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostile.support import HostileBroker, start_broker

MAX_BATCH = 16 * 1024 * 1024
LATENCY_LIMIT = 0.100


def max_batch(source: str = "/stall") -> tuple[bytes, int]:
    """A batch body of tiny events just under the batch size limit, and its event count."""
    template = '{"specversion":"1.0","id":"%d","source":"' + source + '","type":"t"}'
    parts: list[str] = []
    size = 2
    n = 0
    while True:
        event = template % n
        if size + len(event) + 1 > MAX_BATCH:
            break
        parts.append(event)
        size += len(event) + 1
        n += 1
    return ("[" + ",".join(parts) + "]").encode(), n


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[HostileBroker]:
    process = start_broker(tmp_path / "stall.db", tmp_path / "broker.log")
    try:
        yield process
    finally:
        process.close()


@dataclass
class Attempt:
    """One maximum batch ingested while ``/healthz`` is probed."""

    count: int
    seconds: float
    latencies: list[float]
    idle: float

    @property
    def worst(self) -> float:
        return max(self.latencies)

    def report(self, size: int) -> str:
        median = sorted(self.latencies)[len(self.latencies) // 2]
        return (
            f"max batch: {self.count} events, {size / 2**20:.1f} MiB, ingested in {self.seconds:.2f} s; "
            f"/healthz during it: {len(self.latencies)} probes, p50 {median * 1000:.1f} ms, "
            f"max {self.worst * 1000:.1f} ms; idle broker max {self.idle * 1000:.1f} ms "
            f"(load average {os.getloadavg()[0]:.2f})"
        )


def _attempt(url: str, body: bytes, count: int) -> Attempt:
    outcome: dict[str, Any] = {}

    def ingest() -> None:
        started = time.perf_counter()
        response = httpx.post(
            f"{url}/events",
            content=body,
            headers={"content-type": "application/cloudevents-batch+json"},
            timeout=120,
        )
        outcome["seconds"] = time.perf_counter() - started
        outcome["status"] = response.status_code
        outcome["accepted"] = response.json().get("accepted") if response.status_code == 202 else None

    latencies: list[float] = []
    sender = threading.Thread(target=ingest)
    with httpx.Client(base_url=url, timeout=5) as probe:
        idle = _probe_idle(probe, seconds=2.0)
        sender.start()
        deadline = time.monotonic() + 120
        while sender.is_alive():
            assert time.monotonic() < deadline, "the batch was not answered within 120 s"
            started = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
        sender.join()
        assert outcome["status"] == 202
        assert outcome["accepted"] == count
        idle = max(idle, _probe_idle(probe, seconds=min(10.0, max(2.0, outcome["seconds"]))))
    assert len(latencies) >= 10
    return Attempt(count, outcome["seconds"], latencies, idle)


@pytest.mark.slow
@pytest.mark.alone
def test_healthz_answers_while_a_maximum_batch_is_ingested(broker: HostileBroker) -> None:
    """Up to three batches: a busy machine can hold any process up now and then, so one batch
    that keeps the limit passes; code that blocks the loop stalls every batch (the code before
    this test existed kept /healthz waiting about a second each time)."""
    with httpx.Client(base_url=broker.url, timeout=10) as http:
        # A subscription to match against: every event goes through the filter index.
        sub = {
            "protocol": "HTTP",
            "sink": "http://127.0.0.1:9/x",
            "filters": [{"prefix": {"type": "nomatch"}}],
        }
        assert http.post("/subscriptions", json=sub).status_code == 201
        for _ in range(5):  # warm the connection and the route
            http.get("/healthz")
    reports = []
    for attempt in range(3):
        body, count = max_batch(f"/stall-{attempt}")
        result = _attempt(broker.url, body, count)
        reports.append(result.report(len(body)))
        print(reports[-1])
        if result.worst < LATENCY_LIMIT + result.idle:
            return
    pytest.fail("\n".join(reports))


def _probe_idle(probe: httpx.Client, seconds: float) -> float:
    """The worst ``/healthz`` latency of an idle broker over ``seconds``, probed as below."""
    worst = 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.perf_counter()
        assert probe.get("/healthz").status_code == 200
        worst = max(worst, time.perf_counter() - started)
        time.sleep(0.02)
    return worst


def test_batch_body_is_what_it_claims() -> None:
    body, count = max_batch()
    assert len(body) <= MAX_BATCH
    assert len(json.loads(body)) == count
