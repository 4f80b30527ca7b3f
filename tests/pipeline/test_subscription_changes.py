"""The matcher follows the store's change feed: an update or delete applies to every event
ingested after the API call returned, while events keep flowing (issue "Matching and dispatch").

No protocol is under test here: the brokers deliver into the in-memory sender."""

from __future__ import annotations

import threading
import time

from ceprotocols.errors import DeliveryError, DeliveryRejected
from support.broker import Broker
from support.events import event
from support.memory import MemorySender
from support.waiting import wait_until


def test_update_and_delete_while_events_flow(memory_broker: Broker, memory: MemorySender) -> None:
    """Types narrowed by PUT, then DELETE: later events follow the new state, with no restart."""
    broker = memory_broker
    sub = broker.subscribe(f"{memory.url}/live", types=["a", "b"])
    stop = threading.Event()
    sent: list[str] = []

    def stream() -> None:
        import httpx

        with httpx.Client(base_url=broker.url) as client:
            n = 0
            while not stop.is_set():
                n += 1
                kind = "a" if n % 2 else "b"
                ev = event(n, type=kind)
                r = client.post("/events", json=ev, headers={"content-type": "application/cloudevents+json"})
                assert r.status_code == 202
                sent.append(kind)
                time.sleep(0.005)

    producer = threading.Thread(target=stream)
    producer.start()

    def delivered() -> set[int]:
        return {int(e["id"][2:]) for e in memory.events("/live")}

    try:
        wait_until(lambda: {e["type"] for e in memory.events("/live")} == {"a", "b"})
        body = {"protocol": "HTTP", "sink": f"{memory.url}/live", "types": ["a"]}
        r = broker.http.put(f"/subscriptions/{sub['id']}", json=body)
        assert r.status_code == 200, r.text
        # Event n is numbered from 1; one request may have been in flight during the PUT.
        updated_at = len(sent) + 1
        wait_until(lambda: len(sent) > updated_at + 20)
        checked = range(updated_at + 1, len(sent) + 1)
        wait_until(lambda: {n for n in checked if n % 2 == 1} <= delivered())
        assert broker.http.delete(f"/subscriptions/{sub['id']}").status_code == 200
        deleted_at = len(sent) + 1
        wait_until(lambda: len(sent) > deleted_at + 20)
    finally:
        stop.set()
        producer.join()
    broker.settled()  # every delivery made so far has arrived: none can come later
    got = delivered()
    between = range(updated_at + 1, deleted_at)
    assert not {n for n in between if n % 2 == 0} & got  # type "b" no longer matched
    assert not {n for n in range(deleted_at + 1, len(sent) + 1)} & got  # nothing after delete


def test_events_after_create_are_matched_without_restart(memory_broker: Broker, memory: MemorySender) -> None:
    """A subscription created while the broker runs gets the very next event; filters apply."""
    broker = memory_broker
    assert broker.send(event(1)).status_code == 202
    broker.subscribe(f"{memory.url}/new", filters=[{"prefix": {"type": "com.example"}}])
    only_nope = [{"exact": {"type": "nope"}}]
    broker.subscribe(f"{memory.url}/other", filters=only_nope, config={"concurrency": "1"})
    broker.send(event(2))
    (got,) = memory.wait("/new", 1)
    assert got["id"] == "e-2"
    # A marker /other does match, sent after e-2: /other delivers in order, so e-2 would be first.
    broker.send(event(3, type="nope"))
    memory.wait("/other", 1)
    assert memory.ids("/other") == ["e-3"]


def test_deleting_a_subscription_drops_its_backlog_and_dead_letters(
    memory_broker: Broker, memory: MemorySender
) -> None:
    """After DELETE nothing is kept for the subscription: no pending retries, no dead letters."""
    broker = memory_broker
    # A failure worth retrying (what a 503 is) and a final refusal (what a 400 is).
    memory.default["/down"] = DeliveryError("503 Service Unavailable", status=503)
    sub = broker.subscribe(f"{memory.url}/down", config={"initialdelay": "30"})
    gone = broker.subscribe(f"{memory.url}/gone", config={"initialdelay": "30"})
    memory.default["/gone"] = DeliveryRejected("400 Bad Request", status=400)
    for i in range(3):
        broker.send(event(i))
    wait_until(lambda: broker.http.get(f"/subscriptions/{gone['id']}/status").json()["deadlettered"] == 3)
    wait_until(lambda: broker.http.get(f"/subscriptions/{sub['id']}/status").json()["failed"] == 3)
    assert "cebroker_delivery_backlog 3.0" in broker.http.get("/metrics").text
    assert broker.http.delete(f"/subscriptions/{sub['id']}").status_code == 200
    assert broker.http.delete(f"/subscriptions/{gone['id']}").status_code == 200
    broker.settled()
    assert broker.http.get(f"/subscriptions/{gone['id']}/deadletters").status_code == 404
