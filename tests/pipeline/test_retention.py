"""The archive's retention through a whole broker, on SQLite and on PostgreSQL (issue "Archive and
replay"): events age out in the background while ingest goes on at full speed, without a stall
of ingest; the archive's size and oldest event are on /metrics and in GET /status; a size bound
removes the oldest first and moves what a replay may ask for; pruning resumes after a restart."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest
from support.broker import Broker
from support.events import event
from support.waiting import wait_for, wait_until

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

BATCH = {"content-type": "application/cloudevents-batch+json"}


def metric(broker: Broker, name: str) -> float:
    for line in broker.http.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def pass_of_the_pruner(broker: Broker) -> float:
    """Wait until the pruner has taken out more events; then the age of the oldest held."""
    before = metric(broker, "cebroker_archive_pruned_total")
    wait_until(lambda: metric(broker, "cebroker_archive_pruned_total") > before, timeout=10)
    return time.time() - metric(broker, "cebroker_archive_oldest_timestamp_seconds")


def archive(broker: Broker) -> dict[str, object]:
    return dict(broker.http.get("/status").json()["archive"])


@pytest.mark.alone
def test_pruning_keeps_up_with_continuous_ingest_without_stalling_it(
    start_broker: Callable[..., Broker],
) -> None:
    broker = start_broker(retention=2.0)
    broker.subscribe("http://127.0.0.1:9/unreachable", types=["never.sent"])
    latencies: list[float] = []
    statuses: list[int] = []
    stop = threading.Event()
    counter = iter(range(10**9))

    def produce() -> None:
        with httpx.Client(base_url=broker.url, timeout=30) as client:
            while not stop.is_set():
                batch = [event(next(counter)) for _ in range(20)]
                started = time.perf_counter()
                response = client.post("/events", json=batch, headers=BATCH)
                latencies.append(time.perf_counter() - started)
                statuses.append(response.status_code)

    producers = [threading.Thread(target=produce) for _ in range(2)]
    for producer in producers:
        producer.start()
    try:
        # The pruner takes out what aged out while events keep coming in ...
        wait_until(lambda: metric(broker, "cebroker_archive_pruned_total") >= 200, timeout=20)
        # ... and keeps the oldest event held within the retention and one pass of it, pass
        # after pass.
        ages = [pass_of_the_pruner(broker) for _ in range(3)]
        held = metric(broker, "cebroker_archive_events")
    finally:
        stop.set()
        for producer in producers:
            producer.join()
    accepted = 20 * len(statuses)
    assert set(statuses) == {202}
    assert max(ages) < 2.0 + 3.0, ages
    assert 0 < held < accepted
    assert max(latencies) < 2.0, f"an ingest request waited {max(latencies):.2f} s"
    status = archive(broker)
    assert status["retention"] == 2.0
    assert isinstance(status["events"], int)
    assert isinstance(status["bytes"], int)
    assert status["bytes"] > 0
    # everything ages out once ingest stops, also after a restart
    broker.server.stop()
    again = start_broker(retention=2.0)
    wait_for(lambda: archive(again), lambda now: now["events"] == 0, timeout=20, message="an empty archive")
    assert archive(again)["oldest"] is None


def test_a_size_bound_removes_the_oldest_and_moves_the_replayable_range(
    start_broker: Callable[..., Broker],
) -> None:
    broker = start_broker(retention_bytes=20_000)
    sub = broker.subscribe("http://127.0.0.1:9/unreachable", types=["never.sent"])
    first = time.time()
    for chunk in range(10):
        response = broker.http.post(
            "/events", json=[event(chunk * 20 + n, pad="x" * 100) for n in range(20)], headers=BATCH
        )
        assert response.status_code == 202
    status = wait_for(lambda: archive(broker), lambda now: 0 < int(str(now["bytes"])) <= 20_000, timeout=20)
    assert int(str(status["events"])) < 200
    assert metric(broker, "cebroker_archive_bytes") <= 20_000
    since = datetime.fromtimestamp(first, UTC).isoformat().replace("+00:00", "Z")
    refused = broker.http.post(f"/subscriptions/{sub['id']}/replay", json={"from": since, "dryrun": True})
    assert refused.status_code == 400
    assert refused.json()["errors"][0]["pointer"] == "/from"
    oldest = str(status["oldest"])
    counted = broker.http.post(f"/subscriptions/{sub['id']}/replay", json={"from": oldest, "dryrun": True})
    assert counted.status_code == 200, counted.text
