"""Ordered delivery through a whole broker, on SQLite and on PostgreSQL (issue "Ordered
delivery"): with ``config.ordering: partitionkey`` the events of one ``partitionkey`` reach the
sink strictly in acceptance order, the next only once the one before succeeded or became a dead
letter, while other keys and events without one go on in parallel; the order holds over
retries, over two instances on one database and across a SIGKILL and restart."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from support.broker import Broker, BrokerProcesses
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_until

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

BATCH = {"content-type": "application/cloudevents-batch+json"}
ORDERED = {"ordering": "partitionkey", "concurrency": "8", "initialdelay": "0.2", "maxdelay": "0.2"}


def keyed(key: str | None, n: int) -> dict[str, Any]:
    name = f"{key or 'free'}-{n}"
    extra = {"partitionkey": key} if key is not None else {}
    return event(0, id=name, **extra)


def ids(got: list[Received]) -> list[str]:
    return [r.headers["ce-id"] for r in got]


def successes(got: list[Received], failed: set[int]) -> list[str]:
    """The ids of the requests that were answered 2xx, in arrival order."""
    return [r.headers["ce-id"] for r in got if id(r) not in failed]


class FailFirst:
    """A sink responder: the listed event ids get 503 that many times (counted), others 200;
    ``failed`` holds the identities of the requests answered 503 (the sink keeps them)."""

    def __init__(self, failures: dict[str, int]) -> None:
        self.failures = dict(failures)
        self.failed: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self, got: Received) -> Reply | None:
        name = got.headers.get("ce-id", "")
        with self._lock:
            if self.failures.get(name, 0) > 0:
                self.failures[name] -= 1
                self.failed.add(id(got))
                return Reply(503)
        return Reply(200)


def test_a_key_waits_for_its_failing_first_event_while_other_keys_go_on(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    broker.subscribe(f"{sink.url}/ordered", config=ORDERED, source="/tests")
    responder = FailFirst({"k1-0": 3})
    sink.responder = responder
    events = [keyed("k1", 0), keyed("k2", 0), keyed("k1", 1), keyed("k2", 1), keyed(None, 0)]
    events += [keyed("k1", 2), keyed("k2", 2), keyed("k3", 0)]
    assert broker.http.post("/events", json=events, headers=BATCH).status_code == 202
    got = sink.wait("/ordered", len(events) + 3)
    order = ids(got)
    assert [i for i in order if i.startswith("k1")] == ["k1-0"] * 4 + ["k1-1", "k1-2"]
    assert [i for i in order if i.startswith("k2")] == ["k2-0", "k2-1", "k2-2"]
    last_failure = max(i for i, name in enumerate(order) if name == "k1-0")
    # the other keys, and the event without one, did not wait for k1's retries
    for other in ("k2-2", "k3-0", "free-0"):
        assert order.index(other) < last_failure, order
    broker.settled()
    assert len(sink.at("/ordered")) == len(events) + 3


def test_a_dead_letter_lets_the_next_event_of_its_key_go(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = start_broker()
    sub = broker.subscribe(f"{sink.url}/ordered", config={**ORDERED, "maxattempts": "2"}, source="/tests")
    sink.responder = FailFirst({"k-0": 5})
    events = [keyed("k", n) for n in range(3)]
    assert broker.http.post("/events", json=events, headers=BATCH).status_code == 202
    assert ids(sink.wait("/ordered", 4)) == ["k-0", "k-0", "k-1", "k-2"]
    wait_until(lambda: broker.status(sub)["deadlettered"] == 1)


def test_turning_ordering_off_lets_the_waiting_events_go(
    start_broker: Callable[..., Broker], sink: Sink
) -> None:
    """Events held back behind their key's first are delivered after the subscription is
    replaced without ordering (the held ones go as the one before them leaves the log)."""
    broker = start_broker()
    body: dict[str, Any] = {
        "protocol": "HTTP",
        "sink": f"{sink.url}/ordered",
        "config": ORDERED,
        "source": "/tests",
    }
    sub = broker.subscribe(body["sink"], config=ORDERED, source="/tests")
    responder = FailFirst({"k-0": 2})
    sink.responder = responder
    assert (
        broker.http.post("/events", json=[keyed("k", n) for n in range(3)], headers=BATCH).status_code == 202
    )
    sink.wait("/ordered", 1)
    replaced = broker.http.put(
        f"/subscriptions/{sub['id']}", json={**body, "config": {"initialdelay": "0.2"}}
    )
    assert replaced.status_code == 200, replaced.text
    got = sink.wait("/ordered", 5)
    assert successes(got, responder.failed)[0] == "k-0"
    assert sorted(successes(got, responder.failed)) == ["k-0", "k-1", "k-2"]
    broker.settled()


def test_each_key_keeps_its_order_under_retries_and_on_two_instances(
    start_broker: Callable[..., Broker], backend: str, sink: Sink
) -> None:
    """Five keys of twenty events, every fourth event of a key failing once; on PostgreSQL the
    events go to two instances in turn, and both deliver."""
    brokers = [start_broker()]
    if backend == "postgres":
        brokers.append(start_broker())
    brokers[0].subscribe(f"{sink.url}/ordered", config=ORDERED, source="/tests")
    keys = [f"key{k}" for k in range(5)]
    responder = FailFirst({f"{key}-{n}": 1 for key in keys for n in range(0, 20, 4)})
    sink.responder = responder
    sent = 0
    for n, (broker, key) in enumerate(zip(itertools.cycle(brokers), keys * 20, strict=False)):
        response = broker.send(keyed(key, n // 5))
        assert response.status_code == 202
        sent += 1
    got = sink.wait("/ordered", sent + 25, timeout=60)
    delivered = successes(got, responder.failed)
    for key in keys:
        assert [i for i in delivered if i.startswith(f"{key}-")] == [f"{key}-{n}" for n in range(20)]


@pytest.mark.slow
def test_the_order_holds_across_a_sigkill(
    broker_processes: BrokerProcesses, database: str, sink: Sink
) -> None:
    broker = broker_processes(database, "broker.log", "--webhook-validation", "off").start().ready()
    response = httpx.post(
        f"{broker.url}/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/ordered", "config": ORDERED, "source": "/tests"},
    )
    assert response.status_code == 201
    down = threading.Event()
    down.set()
    sink.responder = lambda got: (
        Reply(503) if got.headers.get("ce-id") == "k1-0" and down.is_set() else Reply(200)
    )
    events = [keyed("k1", n) for n in range(5)] + [keyed("k2", n) for n in range(5)]
    sent = httpx.post(f"{broker.url}/events", json=events, headers=BATCH)
    assert sent.status_code == 202
    wait_until(lambda: ids(sink.at("/ordered")).count("k1-0") >= 2 and "k2-4" in ids(sink.at("/ordered")))
    broker.kill()
    down.clear()
    broker.start().ready()
    wait_until(lambda: "k1-4" in ids(sink.at("/ordered")), timeout=30)
    order = ids(sink.at("/ordered"))
    first_success = max(i for i, name in enumerate(order) if name == "k1-0")
    k1 = [name for name in order[first_success:] if name.startswith("k1")]
    assert k1[0] == "k1-0"
    assert [name for name in k1 if name != "k1-0"][:4] == ["k1-1", "k1-2", "k1-3", "k1-4"]
    assert all(not name.startswith("k1-") or name == "k1-0" for name in order[:first_success])
