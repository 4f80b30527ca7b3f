"""Batched HTTP delivery through a whole broker, on SQLite and on PostgreSQL (issue "Batched
delivery"): ``contentmode: batch`` sends ``application/cloudevents-batch+json`` arrays of at
most ``maxbatchsize`` events and ``maxbatchbytes`` bytes, waiting up to ``maxbatchdelay`` for a
batch to fill; a 2xx confirms the whole batch, a failed batch is retried whole, and events that
run out of attempts become dead letters one by one, with the reason."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

from support.broker import Broker
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_for

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

BATCH = {"content-type": "application/cloudevents-batch+json"}
FAST = {"initialdelay": "0.05", "maxdelay": "0.2"}


def batched(broker: Broker, sink: Sink, path: str, **config: str) -> dict[str, Any]:
    return broker.subscribe(
        f"{sink.url}{path}", protocolsettings={"contentmode": "batch"}, config=config, source="/tests"
    )


def arrays(got: list[Received]) -> list[list[str]]:
    """The event ids of every request, each a batch."""
    for request in got:
        assert request.headers["content-type"].startswith("application/cloudevents-batch+json")
    return [[e["id"] for e in json.loads(r.body)] for r in got]


def dead_letters(broker: Broker, subscription: dict[str, Any]) -> list[dict[str, Any]]:
    return list(broker.http.get(f"/subscriptions/{subscription['id']}/deadletters").json()["items"])


def post(broker: Broker, events: list[dict[str, Any]]) -> None:
    assert broker.http.post("/events", json=events, headers=BATCH).status_code == 202


def test_batches_hold_at_most_their_size_in_events_and_bytes(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    batched(broker, sink, "/count", maxbatchsize="5", maxbatchdelay="0.2")
    post(broker, [event(n) for n in range(12)])
    got = wait_for(
        lambda: arrays(sink.at("/count")),
        lambda got: sum(map(len, got)) >= 12,
        message="12 events in batches",
    )
    assert all(1 <= len(ids) <= 5 for ids in got)
    assert sorted(i for ids in got for i in ids) == sorted(f"e-{n}" for n in range(12))
    assert len(got) >= 3
    limit = 3 * len(json.dumps(event(10, pad="x" * 200), separators=(",", ":"))) + 4
    batched(broker, sink, "/bytes", maxbatchbytes=str(limit), maxbatchdelay="0.2")
    post(broker, [event(100 + n, pad="x" * 200) for n in range(9)])
    got = wait_for(lambda: arrays(sink.at("/bytes")), lambda got: sum(map(len, got)) >= 9)
    assert all(len(r.body) <= limit for r in sink.at("/bytes"))
    assert max(map(len, got)) >= 2  # but more than one event per request where they fit
    broker.settled()


def test_a_batch_waits_for_its_delay_to_fill(start_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = start_broker()
    batched(broker, sink, "/slow", maxbatchsize="100", maxbatchdelay="1")
    sent = time.monotonic()
    for n in range(3):
        assert broker.send(event(n)).status_code == 202
    (request,) = sink.wait("/slow", 1)
    assert arrays([request]) == [["e-0", "e-1", "e-2"]]
    assert request.at - sent >= 0.9  # it waited for more, up to the delay


def test_a_failed_batch_is_retried_whole(start_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = start_broker()
    sub = batched(broker, sink, "/flaky", maxbatchdelay="0.3", **FAST)
    sink.scripts["/flaky"] = [Reply(503), Reply(500)]
    post(broker, [event(n) for n in range(4)])
    got = arrays(sink.wait("/flaky", 3))
    assert [sorted(ids) for ids in got] == [["e-0", "e-1", "e-2", "e-3"]] * 3
    status = wait_for(
        lambda: broker.status(sub), lambda s: s["delivered"] == 4 and s["pending"] == 0, message="4 delivered"
    )
    assert (status["failed"], status["deadlettered"]) == (8, 0)


def test_dead_letters_are_made_per_event_with_the_reason(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    refused = batched(broker, sink, "/refused", maxbatchdelay="0.3", **FAST)
    tired = batched(broker, sink, "/tired", maxbatchdelay="0.3", maxattempts="2", **FAST)
    sink.default["/refused"] = Reply(400, body=b"no batches here")
    sink.default["/tired"] = Reply(503)
    post(broker, [event(n) for n in range(3)])
    for sub, attempts, reason in [(refused, 1, "400"), (tired, 2, "gave up after 2 attempts")]:
        items = wait_for(functools.partial(dead_letters, broker, sub), lambda items: len(items) == 3)
        assert sorted(d["event"]["id"] for d in items) == ["e-0", "e-1", "e-2"]
        assert all(d["attempts"] == attempts and reason in d["lastError"] for d in items)
    assert len(sink.at("/refused")) == 1
    assert len(sink.at("/tired")) == 2
    assert {
        d["body"] for d in broker.http.get(f"/subscriptions/{refused['id']}/deadletters").json()["items"]
    } == {"no batches here"}


def test_a_replay_in_batches_marks_every_event(start_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = start_broker()
    post(broker, [event(n) for n in range(6)])
    sub = batched(broker, sink, "/replayed", maxbatchdelay="0.2", startfrom="earliest")
    got = wait_for(lambda: sink.at("/replayed"), lambda got: sum(len(json.loads(r.body)) for r in got) >= 6)
    marks = {e.get("replayid") for r in got for e in json.loads(r.body)}
    (start,) = broker.http.get(f"/subscriptions/{sub['id']}/replays").json()["items"]
    assert marks == {start["id"]}
