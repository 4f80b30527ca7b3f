"""Replays are capped and their bad requests answered 400 (issue: hardening, finding 11): replays
still scanning the archive are capped per subscription and per tenant (429 problem+json with
``Retry-After``, nothing created); ``{"from": null, "to": ...}`` is a 400 naming ``/from``,
not a 500 (found by schemathesis). A whole broker and a real sink that refuses the replayed
deliveries, so that each replay stays scanning."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink

BATCH = {"content-type": "application/cloudevents-batch+json"}


def _from(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _replay(broker: Broker, sub: dict[str, Any], since: float) -> httpx.Response:
    return broker.http.post(f"/subscriptions/{sub['id']}/replay", json={"from": _from(since)})


def _assert_capped(answer: httpx.Response, setting: str) -> None:
    assert answer.status_code == 429, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert int(answer.headers["retry-after"]) >= 1
    assert setting in answer.json()["detail"]


def test_replays_are_capped_per_subscription_and_per_tenant(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(max_replays_per_subscription=2, max_replays_per_tenant=3)
    # A replayed delivery fails and waits an hour: each replay keeps its window full and its
    # scan unfinished, so it counts as long as the test runs.
    config = {"concurrency": "1", "initialdelay": "3600"}
    first = broker.subscribe(f"{sink.url}/a", config=config, source="/tests")
    second = broker.subscribe(f"{sink.url}/b", config=config, source="/tests")
    since = time.time() - 0.001
    assert broker.http.post("/events", json=[event(n) for n in range(20)], headers=BATCH).status_code == 202
    sink.wait("/a", 20)
    sink.wait("/b", 20)
    sink.responder = lambda got: Reply(503) if "ce-replayid" in got.headers else None
    made = [_replay(broker, first, since) for _ in range(2)]
    assert [answer.status_code for answer in made] == [202, 202]
    _assert_capped(_replay(broker, first, since), "--max-replays-per-subscription 2")
    listed = broker.http.get(f"/subscriptions/{first['id']}/replays").json()["items"]
    assert len(listed) == 2  # the refused one was not created
    assert _replay(broker, second, since).status_code == 202  # the tenant's third
    _assert_capped(_replay(broker, second, since), "--max-replays-per-tenant 3")
    cancelled = broker.http.delete(f"/subscriptions/{first['id']}/replays/{made[0].json()['replay']}")
    assert cancelled.status_code == 200
    assert _replay(broker, second, since).status_code == 202  # a place was freed
    # Dry runs scan within their own request: never capped.
    dry = broker.http.post(
        f"/subscriptions/{first['id']}/replay", json={"from": _from(since), "dryrun": True}
    )
    assert dry.status_code == 200


def test_a_null_from_is_a_400_naming_it(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    sub = broker.subscribe("http://127.0.0.1:9/unused", source="/tests")
    for body in ({"from": None, "to": "2000-01-01T00:00:00Z"}, {"from": None}, {"from": 5, "to": None}):
        answer = broker.http.post(f"/subscriptions/{sub['id']}/replay", json=body)
        assert answer.status_code == 400, (body, answer.text)
        assert "/from" in [item["pointer"] for item in answer.json()["errors"]]
    assert broker.http.get(f"/subscriptions/{sub['id']}/replays").json() == {"items": []}
    # "to": null is "up to now", as leaving it out.
    fine = broker.http.post(
        f"/subscriptions/{sub['id']}/replay",
        json={"from": _from(time.time() - 1), "to": None, "dryrun": True},
    )
    assert fine.status_code == 200, fine.text
