"""At-least-once across SIGKILL (issue "Matching and dispatch"; architecture invariant
"accepted means durable"): a ``cebroker serve`` process is killed while events stream in,
restarted on the same database, and every event that got a 202 reaches the sink."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest
from support.broker import BrokerProcesses
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_until

FLAGS = ("--webhook-validation", "off", "--log-level", "warning")


@pytest.mark.slow
def test_sigkill_while_streaming_loses_no_accepted_event(
    tmp_path: Path, sink: Sink, broker_processes: BrokerProcesses
) -> None:
    """Kill -9 mid-stream, restart: every 202-acknowledged event is delivered (duplicates allowed)."""
    # A slow sink keeps deliveries pending, so the kill lands with a real backlog.
    sink.default["/crash"] = Reply(200, delay=0.02)
    first = broker_processes(tmp_path / "broker.db", "broker.log", *FLAGS).start().ready()
    body = {"protocol": "HTTP", "sink": f"{sink.url}/crash", "config": {"concurrency": "2"}}
    assert httpx.post(f"{first.url}/subscriptions", json=body).status_code == 201

    accepted: list[str] = []
    stop = threading.Event()

    def produce(worker: int) -> None:
        with httpx.Client(base_url=first.url, timeout=5) as client:
            n = 0
            while not stop.is_set():
                n += 1
                batch = [event(worker * 1_000_000 + n * 10 + k) for k in range(5)]
                try:
                    r = client.post(
                        "/events",
                        content=json.dumps(batch),
                        headers={"content-type": "application/cloudevents-batch+json"},
                    )
                except httpx.HTTPError:
                    return  # the broker died; this request was not acknowledged
                if r.status_code == 202:
                    accepted.extend(e["id"] for e in batch)

    producers = [threading.Thread(target=produce, args=(w,)) for w in range(3)]
    for p in producers:
        p.start()
    wait_until(
        lambda: len(accepted) > 300 and len(sink.at("/crash")) > 20,
        timeout=30,
        message="over 300 events accepted and over 20 delivered",
    )
    first.kill()
    stop.set()
    for p in producers:
        p.join()
    delivered_before = set(sink.ids("/crash"))
    assert set(accepted) - delivered_before, "the kill should leave accepted events undelivered"

    sink.default.pop("/crash")
    first.start().ready()  # the same database, port and log
    wait_until(
        lambda: set(accepted) <= set(sink.ids("/crash")),
        timeout=90,
        message="every accepted event delivered after the restart",
    )
    first.terminate()
