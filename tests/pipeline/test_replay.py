"""Archive and replay through a whole broker, on SQLite and on PostgreSQL (issue "Archive and
replay"): a dry run counts and delivers nothing; a replay delivers the archived events of its
range that the subscription (and its extra filter) matches, marked with ``replayid``, through
the normal path (retries, dead letters); a cancel stops it; a range older than the retention is
refused naming ``/from``; ``config.startfrom`` starts a subscription in the past; all of it
after a restart too."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from support.broker import Broker
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_for, wait_until

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

BATCH = {"content-type": "application/cloudevents-batch+json"}
FAST = {"initialdelay": "0.05", "maxdelay": "0.2"}
ONLY_TESTS = {"source": "/tests"}  # not the registry's own change events


def rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def send(broker: Broker, events: list[dict[str, Any]]) -> float:
    """Post a batch (202 asserted); returns a time after its acceptance."""
    response = broker.http.post("/events", json=events, headers=BATCH)
    assert response.status_code == 202, response.text
    return time.time()


def replay(broker: Broker, subscription: dict[str, Any], **body: Any) -> httpx.Response:
    return broker.http.post(f"/subscriptions/{subscription['id']}/replay", json=body)


def progress(broker: Broker, subscription: dict[str, Any], replay_id: str) -> dict[str, Any]:
    response = broker.http.get(f"/subscriptions/{subscription['id']}/replays/{replay_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def done(broker: Broker, subscription: dict[str, Any], replay_id: str) -> dict[str, Any]:
    return wait_for(
        lambda: progress(broker, subscription, replay_id),
        lambda state: state["state"] == "done",
        message=f"replay {replay_id} done",
    )


def ids(requests: list[Received]) -> list[str]:
    return [r.headers["ce-id"] for r in requests]


def replayed(requests: list[Received]) -> list[str]:
    return [r.headers["ce-id"] for r in requests if "ce-replayid" in r.headers]


def test_a_dry_run_counts_and_a_replay_delivers_again_marked(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    sub = broker.subscribe(f"{sink.url}/hook", types=["t.order"], **ONLY_TESTS)
    since = time.time()
    until = send(broker, [event(n, type="t.order", amount=n) for n in range(6)] + [event(9, type="t.other")])
    send(broker, [event(n, type="t.order", amount=n) for n in range(6, 8)])  # after ``until``
    sink.wait("/hook", 8)
    window = {"from": rfc3339(since - 0.001), "to": rfc3339(until)}
    assert replay(broker, sub, dryrun=True, **window).json() == {"events": 6}
    extra = {"sql": "amount > 2"}
    dry = replay(broker, sub, dryrun=True, filter=extra, **window)
    assert (dry.status_code, dry.json()) == (200, {"events": 3})
    started = replay(broker, sub, filter=extra, **window)
    assert started.status_code == 202, started.text
    replay_id = started.json()["replay"]
    assert started.json() == {"replay": replay_id, "events": 3}
    assert started.headers["location"].endswith(f"/subscriptions/{sub['id']}/replays/{replay_id}")
    state = done(broker, sub, replay_id)
    assert {k: state[k] for k in ("events", "matched", "delivered", "failed", "deadlettered", "pending")} == {
        "events": 3,
        "matched": 3,
        "delivered": 3,
        "failed": 0,
        "deadlettered": 0,
        "pending": 0,
    }
    assert (state["filter"], state["from"][:19]) == (extra, window["from"][:19])
    broker.settled()
    got = sink.at("/hook")
    assert sorted(replayed(got)) == ["e-3", "e-4", "e-5"]
    assert {r.headers["ce-replayid"] for r in got if "ce-replayid" in r.headers} == {replay_id}
    assert len(got) == 8 + 3  # the dry runs delivered nothing
    listed = broker.http.get(f"/subscriptions/{sub['id']}/replays").json()["items"]
    assert [r["id"] for r in listed] == [replay_id]


def test_replayed_deliveries_are_retried_and_dead_lettered_like_live_ones(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    sub = broker.subscribe(f"{sink.url}/hook", config={**FAST, "maxattempts": "3"}, **ONLY_TESTS)
    since = time.time()
    send(broker, [event(n) for n in range(4)])
    sink.wait("/hook", 4)
    answers = {"e-1": [Reply(503)], "e-2": [Reply(410, body=b"gone")]}

    def answer(got: Received) -> Reply | None:
        if "ce-replayid" not in got.headers:
            return None
        script = answers.get(got.headers["ce-id"])
        return script.pop(0) if script else Reply(200)

    sink.responder = answer
    replay_id = replay(broker, sub, **{"from": rfc3339(since - 0.001)}).json()["replay"]
    state = done(broker, sub, replay_id)
    assert (state["delivered"], state["failed"], state["deadlettered"]) == (3, 2, 1)
    assert sorted(replayed(sink.at("/hook"))) == ["e-0", "e-1", "e-1", "e-2", "e-3"]
    (dead,) = broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"]
    assert (dead["event"]["id"], dead["event"]["replayid"], dead["status"]) == ("e-2", replay_id, "410")


def test_a_cancelled_replay_queues_nothing_more(start_broker: Callable[..., Broker], sink: Sink) -> None:
    """Its deliveries waiting for a retry are removed; nothing of it is delivered afterwards."""
    broker = start_broker()
    sub = broker.subscribe(
        f"{sink.url}/hook", config={"concurrency": "4", "initialdelay": "3600"}, **ONLY_TESTS
    )
    since = time.time()
    send(broker, [event(n) for n in range(20)])
    sink.wait("/hook", 20)
    sink.responder = lambda got: Reply(503) if "ce-replayid" in got.headers else None
    replay_id = replay(broker, sub, **{"from": rfc3339(since - 0.001)}).json()["replay"]
    wait_until(lambda: progress(broker, sub, replay_id)["failed"] == 4)  # its window, all failed
    cancelled = broker.http.delete(f"/subscriptions/{sub['id']}/replays/{replay_id}")
    assert cancelled.status_code == 200
    state = cancelled.json()
    assert (state["state"], state["matched"], state["removed"], state["pending"]) == ("cancelled", 4, 4, 0)
    broker.settled()  # nothing of it is left to deliver
    assert len(replayed(sink.at("/hook"))) == 4
    again = broker.http.delete(f"/subscriptions/{sub['id']}/replays/{replay_id}")
    assert (again.status_code, again.json()["state"]) == (200, "cancelled")


def test_a_range_older_than_the_retention_and_bad_requests_are_refused(
    start_broker: Callable[..., Broker],
) -> None:
    broker = start_broker(retention=3600.0)
    sub = broker.subscribe("http://127.0.0.1:9/unused", **ONLY_TESTS)
    send(broker, [event(1)])
    oldest = broker.http.get("/status").json()["archive"]["oldest"]
    old = replay(broker, sub, **{"from": rfc3339(time.time() - 7200)})
    assert old.status_code == 400
    assert old.headers["content-type"].startswith("application/problem+json")
    ((pointer, detail),) = [(e["pointer"], e["detail"]) for e in old.json()["errors"]]
    assert pointer == "/from"
    assert f"oldest event held was accepted at {oldest}" in detail
    now = rfc3339(time.time())
    bad: list[tuple[dict[str, Any], str]] = [
        ({}, "/from"),
        ({"from": "yesterday"}, "/from"),
        ({"from": now, "to": rfc3339(time.time() - 60)}, "/to"),
        ({"from": now, "dryrun": "yes"}, "/dryrun"),
        ({"from": now, "filter": {"sql": "amount >"}}, "/filter/sql"),
        ({"from": now, "filter": [{"exact": {"type": "t"}}]}, "/filter"),
        ({"from": now, "everything": True}, "/everything"),
    ]
    for body, where in bad:
        refused = replay(broker, sub, **body)
        assert refused.status_code == 400, (body, refused.text)
        assert where in [e["pointer"] for e in refused.json()["errors"]], (body, refused.text)
    not_json = broker.http.post(
        f"/subscriptions/{sub['id']}/replay", content=b"{", headers={"content-type": "application/json"}
    )
    assert not_json.status_code == 400
    assert broker.http.post(f"/subscriptions/{sub['id']}/replay", content=b"{}").status_code == 415
    assert broker.http.get(f"/subscriptions/{sub['id']}/replays").json() == {"items": []}  # nothing made
    for method, path in [
        ("POST", "/subscriptions/nope/replay"),
        ("GET", "/subscriptions/nope/replays"),
        ("GET", "/subscriptions/nope/replays/x"),
        ("DELETE", "/subscriptions/nope/replays/x"),
        ("GET", f"/subscriptions/{sub['id']}/replays/x"),
        ("DELETE", f"/subscriptions/{sub['id']}/replays/x"),
    ]:
        assert broker.http.request(method, path, json={"from": now}).status_code == 404, path


def test_without_an_archive_a_replay_is_refused(start_broker: Callable[..., Broker]) -> None:
    broker = start_broker(retention=0.0)
    sub = broker.subscribe("http://127.0.0.1:9/unused", **ONLY_TESTS)
    refused = replay(broker, sub, **{"from": rfc3339(time.time() - 60)})
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        {"pointer": "/from", "detail": "the archive is off (--retention 0): no event is kept for replays"}
    ]
    assert "archive" in broker.http.get("/status").json()


def test_a_subscription_can_start_in_the_past(start_broker: Callable[..., Broker], sink: Sink) -> None:
    broker = start_broker()
    send(broker, [event(n) for n in range(5)])
    third = time.time()  # after e-0..e-4 were accepted, before e-5 and e-6
    send(broker, [event(n) for n in range(5, 7)])
    earliest = broker.subscribe(f"{sink.url}/earliest", config={"startfrom": "earliest"}, **ONLY_TESTS)
    later = broker.subscribe(f"{sink.url}/later", config={"startfrom": rfc3339(third)}, **ONLY_TESTS)
    now = broker.subscribe(f"{sink.url}/now", **ONLY_TESTS)
    send(broker, [event(7)])
    broker.settled()
    wait_until(lambda: len(set(ids(sink.at("/earliest")))) == 8 and len(set(ids(sink.at("/later")))) == 3)
    broker.settled()  # a replayed copy of e-7 (below) is out of the log too
    # Everything accepted before the creation comes once, from the start replay; e-7, accepted
    # after the 201 but possibly before the replay's boundary was taken (a few milliseconds
    # later, see docs/pipeline.md), comes live and at most once more from the replay.
    earliest_ids, later_ids = ids(sink.at("/earliest")), ids(sink.at("/later"))
    assert sorted(set(earliest_ids)) == [f"e-{n}" for n in range(8)]
    assert sorted(set(later_ids)) == ["e-5", "e-6", "e-7"]
    for got in (earliest_ids, later_ids):
        assert all(got.count(name) == 1 for name in set(got) - {"e-7"})
        assert got.count("e-7") in (1, 2)
    assert ids(sink.at("/now")) == ["e-7"]
    (start,) = broker.http.get(f"/subscriptions/{earliest['id']}/replays").json()["items"]
    assert (start["from"], start["events"]) == (None, None)
    assert start["matched"] == 7 + (earliest_ids.count("e-7") - 1)
    assert {r.headers.get("ce-replayid") for r in sink.at("/earliest")} == {start["id"], None}
    assert [r.headers["ce-id"] for r in sink.at("/earliest") if "ce-replayid" not in r.headers] == ["e-7"]
    later_start = broker.http.get(f"/subscriptions/{later['id']}/replays").json()["items"][0]
    assert later_start["matched"] == 2 + (later_ids.count("e-7") - 1)
    assert broker.http.get(f"/subscriptions/{now['id']}/replays").json() == {"items": []}


def test_replays_and_starts_carry_on_after_a_restart(start_broker: Callable[..., Broker], sink: Sink) -> None:
    """A broker stopped in the middle of a replay and of a subscription's start finishes both
    after its restart: every event reaches the sink (some twice: those in flight at the stop)."""
    first = start_broker()
    since = time.time()
    send(first, [event(n) for n in range(30)])
    sink.default["/slow"] = Reply(200, delay=0.1)
    sub = first.subscribe(f"{sink.url}/slow", config={"concurrency": "2"}, **ONLY_TESTS)
    start = first.subscribe(
        f"{sink.url}/start", config={"startfrom": "earliest", "concurrency": "1"}, **ONLY_TESTS
    )
    sink.default["/start"] = Reply(200, delay=0.1)
    replay_id = replay(first, sub, **{"from": rfc3339(since - 0.001)}).json()["replay"]
    sink.wait("/slow", 4)
    sink.wait("/start", 2)
    archived = first.http.get("/status").json()["archive"]
    first.server.stop()
    second = start_broker()
    assert {k: v for k, v in second.http.get("/status").json()["archive"].items() if k != "retention"} == {
        k: v for k, v in archived.items() if k != "retention"
    }
    state = done(second, sub, replay_id)
    assert state["delivered"] >= 30 - 2
    wait_until(lambda: {r.headers["ce-id"] for r in sink.at("/slow")} == {f"e-{n}" for n in range(30)})
    wait_until(lambda: {r.headers["ce-id"] for r in sink.at("/start")} == {f"e-{n}" for n in range(30)})
    (start_replay,) = second.http.get(f"/subscriptions/{start['id']}/replays").json()["items"]
    done(second, start, start_replay["id"])
    # and a new replay on the restarted broker
    again = replay(second, sub, dryrun=True, **{"from": rfc3339(since - 0.001)})
    assert again.json() == {"events": 30}


def test_a_start_in_the_past_misses_nothing_accepted_while_it_is_created(
    start_broker: Callable[..., Broker], backend: str, sink: Sink
) -> None:
    """Events stream in (to two instances on PostgreSQL) while a subscription starting at the
    earliest event is created: every accepted event reaches it, live or replayed (at least
    once: one accepted at the very moment of the creation may come twice)."""
    brokers = [start_broker()]
    if backend == "postgres":
        brokers.append(start_broker())
    accepted: list[str] = []
    stop = threading.Event()

    def produce(broker: Broker, worker: int) -> None:
        with httpx.Client(base_url=broker.url) as client:
            for n in itertools.count():
                if stop.is_set():
                    return
                batch = [event(n * 10 + k, id=f"w{worker}-{n}-{k}") for k in range(10)]
                if client.post("/events", json=batch, headers=BATCH).status_code == 202:
                    accepted.extend(e["id"] for e in batch)

    producers = [
        threading.Thread(target=produce, args=(broker, worker)) for worker, broker in enumerate(brokers * 2)
    ]
    for producer in producers:
        producer.start()
    try:
        wait_until(lambda: len(accepted) >= 200)
        brokers[0].subscribe(f"{sink.url}/late", config={"startfrom": "earliest"}, **ONLY_TESTS)
        wait_until(lambda: len(accepted) >= 600)
    finally:
        stop.set()
        for producer in producers:
            producer.join()
    expected = set(accepted)
    wait_until(lambda: expected <= {r.headers["ce-id"] for r in sink.at("/late")}, timeout=60)


def test_a_replay_is_queued_once_whichever_instance_steps_it(
    start_broker: Callable[..., Broker], backend: str, sink: Sink
) -> None:
    if backend != "postgres":
        pytest.skip("one process per file: a second instance needs PostgreSQL")
    one, two = start_broker(), start_broker()
    sub = one.subscribe(f"{sink.url}/twice", config={"concurrency": "4"}, **ONLY_TESTS)
    since = time.time()
    send(two, [event(n) for n in range(100)])
    sink.wait("/twice", 100)
    replay_id = replay(two, sub, **{"from": rfc3339(since - 0.001)}).json()["replay"]
    done(one, sub, replay_id)
    one.settled()
    two.settled()
    assert sorted(replayed(sink.at("/twice"))) == sorted(f"e-{n}" for n in range(100))


def test_a_pull_subscription_receives_its_replay(start_broker: Callable[..., Broker]) -> None:
    """A replay of a PULL subscription queues deliveries its consumers receive (marked) and settle."""
    broker = start_broker()
    created = broker.http.post("/subscriptions", json={"protocol": "PULL", **ONLY_TESTS})
    sub = created.json()
    since = time.time()
    until = send(broker, [event(n) for n in range(3)])
    first = broker.http.post(f"/subscriptions/{sub['id']}/receive", params={"max": 10}).json()["events"]
    tokens = [e["locktoken"] for e in first]
    assert (
        broker.http.post(f"/subscriptions/{sub['id']}/acknowledge", json={"locktokens": tokens}).status_code
        == 200
    )
    started = replay(broker, sub, **{"from": rfc3339(since - 0.001), "to": rfc3339(until)})
    assert started.status_code == 202, started.text
    again: list[dict[str, Any]] = []

    def received_all() -> bool:
        answer = broker.http.post(f"/subscriptions/{sub['id']}/receive", params={"max": 10, "wait": 1})
        again.extend(answer.json()["events"])
        return len(again) >= 3

    wait_until(received_all, 15, "the replayed events")
    assert sorted(e["event"]["id"] for e in again) == ["e-0", "e-1", "e-2"]
    assert {e["event"]["replayid"] for e in again} == {started.json()["replay"]}
    tokens = [e["locktoken"] for e in again]
    assert (
        broker.http.post(f"/subscriptions/{sub['id']}/acknowledge", json={"locktokens": tokens}).status_code
        == 200
    )
    state = done(broker, sub, started.json()["replay"])
    assert (state["delivered"], state["pending"]) == (3, 0)
