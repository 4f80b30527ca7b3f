"""Transformations on both storage backends (SQLite, PostgreSQL): ordered delivery where a drop
and a failure do not hold up the events after them, and replays, whose dry run shows the first
transformed events and whose deliveries are transformed again from the archived originals."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from support.broker import Broker
from support.events import event
from support.sinks import Sink
from support.waiting import wait_for, wait_until

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

BATCH = {"content-type": "application/cloudevents-batch+json"}
#: Drops n == 1, fails on n == 2 (no such field), and otherwise sends {"n": n * 10}.
SHAPE = (
    'event.data.n == 1 ? null : {"source": event.source, "type": event.type,'
    ' "partitionkey": event.partitionkey, "datacontenttype": "application/json",'
    ' "data": {"n": event.data.n == 2 ? event.data.missing : event.data.n * 10}}'
)


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def bodies(sink: Sink, path: str) -> list[Any]:
    return [json.loads(r.body)["n"] for r in sink.at(path)]


def test_ordered_delivery_goes_on_past_a_drop_and_a_failure(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    sub = broker.subscribe(
        f"{sink.url}/ordered",
        source="/tests",
        config={"ordering": "partitionkey", "transform": {"cel": SHAPE}},
    )
    events = [event(n, partitionkey="k") for n in range(5)]
    assert broker.http.post("/events", json=events, headers=BATCH).status_code == 202
    sink.wait("/ordered", 3)
    broker.settled()
    assert bodies(sink, "/ordered") == [0, 30, 40]  # in order; 1 dropped, 2 a dead letter
    (dead,) = broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"]
    assert dead["event"]["id"] == "e-2"
    assert dead["event"]["data"] == {"n": 2}
    assert "missing" in dead["lastError"]


def test_a_replay_transforms_the_archived_originals(start_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = start_broker()
    sub = broker.subscribe(f"{sink.url}/hook", source="/tests", config={"transform": {"cel": SHAPE}})
    since = time.time()
    events = [event(n, partitionkey="k") for n in range(4)]
    assert broker.http.post("/events", json=events, headers=BATCH).status_code == 202
    sink.wait("/hook", 2)
    broker.settled()
    window = {"from": rfc3339(since - 0.001), "to": rfc3339(time.time())}
    url = f"/subscriptions/{sub['id']}/replay"
    dry = broker.http.post(url, json={**window, "dryrun": True})
    assert dry.status_code == 200, dry.text
    answer = dry.json()
    assert answer["events"] == 4
    shown = answer["transformed"]
    assert [p["outcome"] for p in shown] == ["delivered", "dropped", "failed", "delivered"]
    assert [json.loads(p["message"]["body"]) for p in (shown[0], shown[3])] == [{"n": 0}, {"n": 30}]
    started = broker.http.post(url, json=window)
    assert started.status_code == 202, started.text
    replay_id = started.json()["replay"]
    wait_for(
        lambda: broker.http.get(f"{url}s/{replay_id}").json(),
        lambda state: state["state"] == "done",
        message="the replay done",
    )
    broker.settled()
    replayed = [r for r in sink.at("/hook") if r.headers.get("ce-replayid") == replay_id]
    assert sorted(json.loads(r.body)["n"] for r in replayed) == [0, 30]
    # The dry run's bodies are the replayed requests' bytes (binary mode: the data).
    assert sorted(r.body for r in replayed) == sorted(
        p["message"]["body"].encode() for p in (shown[0], shown[3])
    )
    dead = wait_until(lambda: broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"])
    assert {d["event"]["id"] for d in dead} == {"e-2"}
    assert all(d["event"]["data"] == {"n": 2} for d in dead)
