"""``GET /subscriptions/{id}/tail`` on a real broker: the events a subscription matches, live,
as Server-Sent Events; a slow reader loses the oldest copies and is told how many."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from httpx_sse import EventSource, ServerSentEvent
from support.broker import Broker
from support.events import event
from support.waiting import wait_until

from cebroker.pipeline.tail import TailHub
from cebroker.storage.deliveries import Appended


class Reader:
    """Reads a tail stream in a thread and keeps every message."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.messages: list[ServerSentEvent] = []
        self.ended = threading.Event()
        self.status = 0

    def run(self) -> None:
        try:
            with httpx.stream("GET", self.url, timeout=httpx.Timeout(30, read=None)) as response:
                self.status = response.status_code
                if response.status_code == 200:
                    for message in EventSource(response).iter_sse():
                        self.messages.append(message)
        finally:
            self.ended.set()

    def of(self, kind: str) -> list[Any]:
        return [json.loads(m.data) for m in list(self.messages) if m.event == kind]


@contextmanager
def reading(url: str) -> Iterator[Reader]:
    reader = Reader(url)
    thread = threading.Thread(target=reader.run, daemon=True)
    thread.start()
    yield reader
    thread.join(timeout=0)


def test_tail_shows_only_matched_events_until_the_subscription_goes(broker: Broker) -> None:
    sub = broker.subscribe("http://127.0.0.1:9/none", filters=[{"exact": {"subject": "yes"}}])
    with reading(f"{broker.url}/subscriptions/{sub['id']}/tail") as reader:
        wait_until(lambda: reader.of("ready"))
        assert reader.of("ready") == [{"subscription": sub["id"]}]
        for n, subject in enumerate(["no", "yes", "no", "yes"]):
            assert broker.send(event(n, subject=subject)).status_code == 202
        assert broker.send(event(1, subject="yes")).status_code == 202  # a duplicate: not shown again
        wait_until(lambda: len(reader.of("cloudevent")) >= 2)
        assert broker.http.delete(f"/subscriptions/{sub['id']}").status_code == 200
        assert reader.ended.wait(10), "the stream did not end when its subscription was deleted"
    shown = reader.of("cloudevent")
    assert [e["id"] for e in shown] == ["e-1", "e-3"]
    assert shown[0] == {**event(1, subject="yes")}


def test_tail_of_an_unknown_subscription_is_404(broker: Broker) -> None:
    r = broker.http.get("/subscriptions/nope/tail")
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/problem+json")


async def test_a_slow_watcher_loses_the_oldest_and_is_told() -> None:
    hub = TailHub()
    with hub.watch("s", capacity=3) as watcher:
        events = [{"id": str(n)} for n in range(5)]
        hub.publish(events, [Appended(n + 1, 0.0, [(n, "s")]) for n in range(5)])
        assert watcher.dropped == 2
        got = [await watcher.next() for _ in range(3)]
        assert [e.event["id"] if e else None for e in got] == ["2", "3", "4"]
        hub.end("s")
        assert await watcher.next() is None
    assert not hub.active
