"""Pull delivery over the native API (docs/pull.md): PULL subscriptions without a sink, receive
with a long poll, acknowledge, release, reject and renew answering per token; never pushed."""

from __future__ import annotations

import threading
import time
from typing import Any

from support.broker import Broker
from support.events import event


def pull(broker: Broker, **fields: Any) -> str:
    response = broker.http.post("/subscriptions", json={"protocol": "PULL", **fields})
    assert response.status_code == 201, response.text
    doc = response.json()
    assert "sink" not in doc
    assert doc["protocolsettings"] == {"lockduration": 60, "maxdeliverycount": 10, "releasedelay": 0} | (
        fields.get("protocolsettings") or {}
    )
    return str(doc["id"])


def receive(broker: Broker, sid: str, **params: Any) -> list[dict[str, Any]]:
    response = broker.http.post(f"/subscriptions/{sid}/receive", params=params)
    assert response.status_code == 200, response.text
    return list(response.json()["events"])


def settle(broker: Broker, sid: str, action: str, **body: Any) -> dict[str, Any]:
    response = broker.http.post(f"/subscriptions/{sid}/{action}", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_pull_subscriptions_are_validated(broker: Broker) -> None:
    r = broker.http.post("/subscriptions", json={"protocol": "PULL", "sink": "http://127.0.0.1:9/x"})
    assert r.status_code == 400
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "/sink" in r.text
    r = broker.http.post(
        "/subscriptions", json={"protocol": "PULL", "protocolsettings": {"lockduration": 301}}
    )
    assert r.status_code == 400
    assert "/protocolsettings/lockduration" in r.text
    r = broker.http.post("/subscriptions", json={"protocol": "HTTP"})
    assert r.status_code == 400
    assert "/sink" in r.text


def test_receive_acknowledge_release_reject_renew(broker: Broker) -> None:
    sid = pull(broker, types=["com.example.test"], protocolsettings={"lockduration": 30})
    for n in range(4):
        assert broker.send(event(n)).status_code == 202
    assert broker.send({**event(9), "type": "other"}).status_code == 202  # filtered out
    got = receive(broker, sid, max=3)
    assert [g["event"]["id"] for g in got] == ["e-0", "e-1", "e-2"]
    assert {g["deliverycount"] for g in got} == {1}
    tokens = [g["locktoken"] for g in got]
    assert settle(broker, sid, "acknowledge", locktokens=[tokens[0], "bogus"]) == {
        "succeeded": [tokens[0]],
        "failed": [{"locktoken": "bogus", "reason": "unknown"}],
    }
    assert settle(broker, sid, "renew", locktokens=[tokens[1]])["succeeded"] == [tokens[1]]
    assert settle(broker, sid, "release", locktokens=[tokens[1]], delay=0)["succeeded"] == [tokens[1]]
    assert settle(broker, sid, "reject", locktokens=[tokens[2]], reason="bad")["succeeded"] == [tokens[2]]
    assert settle(broker, sid, "acknowledge", locktokens=tokens)["failed"] == [
        {"locktoken": t, "reason": "settled"} for t in tokens
    ]
    again = receive(broker, sid, max=10)
    assert sorted((g["event"]["id"], g["deliverycount"]) for g in again) == [("e-1", 2), ("e-3", 1)]
    status = broker.status({"id": sid})
    assert (status["delivered"], status["pending"], status["deadlettered"]) == (1, 2, 1)
    assert status["locked"] == 2  # what the console shows for a PULL subscription
    assert status["oldestLockAt"] is not None
    letters = broker.http.get(f"/subscriptions/{sid}/deadletters").json()["items"]
    assert [(d["event"]["id"], d["lastError"]) for d in letters] == [("e-2", "bad")]


def test_a_long_poll_returns_when_an_event_arrives(broker: Broker) -> None:
    sid = pull(broker)
    threading.Timer(0.5, lambda: broker.send(event(1))).start()
    started = time.monotonic()
    got = receive(broker, sid, max=5, wait=20)
    assert [g["event"]["id"] for g in got] == ["e-1"]
    assert time.monotonic() - started < 10  # woken by the ingest, not by the end of the wait
    started = time.monotonic()
    assert receive(broker, sid, wait=0.3) == []
    assert time.monotonic() - started >= 0.3


def test_bad_calls_are_refused_naming_the_field(broker: Broker) -> None:
    sid = pull(broker)
    push = broker.subscribe("http://127.0.0.1:9/never")["id"]
    r = broker.http.post(f"/subscriptions/{push}/receive")
    assert r.status_code == 409
    assert broker.http.post("/subscriptions/nope/receive").status_code == 404
    r = broker.http.post(f"/subscriptions/{sid}/receive", params={"max": 0})
    assert r.status_code == 400
    assert "max" in r.text
    r = broker.http.post(f"/subscriptions/{sid}/acknowledge", json={"locktokens": []})
    assert r.status_code == 400
    assert "/locktokens" in r.text
    r = broker.http.post(f"/subscriptions/{sid}/release", json={"locktokens": ["x"], "delay": -1})
    assert r.status_code == 400
    assert "/delay" in r.text
    r = broker.http.post(f"/subscriptions/{sid}/reject", json={"locktokens": ["x"], "other": 1})
    assert r.status_code == 400
    assert "/other" in r.text


def test_a_transformation_shapes_what_consumers_receive(broker: Broker) -> None:
    """config.transform runs on receive as on push: the consumer gets the transformed event, a
    drop (null) is acknowledged by the broker, a failure is dead-lettered with its reason."""
    cel = (
        'event.data.n == 1 ? null : event.data.n == 2 ? {"source": 1} : '
        '{"type": "com.example.shaped", "source": "/shaped", "data": {"twice": event.data.n * 2}}'
    )
    sid = pull(broker, config={"transform": {"cel": cel}})
    for n in (1, 2, 3):
        assert broker.send(event(n)).status_code == 202
    got = receive(broker, sid, max=10)
    assert [(g["event"]["id"], g["event"]["type"], g["event"]["data"]) for g in got] == [
        ("e-3", "com.example.shaped", {"twice": 6})
    ]
    status = broker.status({"id": sid})
    assert (status["delivered"], status["deadlettered"], status["pending"]) == (1, 1, 1)
    (letter,) = broker.http.get(f"/subscriptions/{sid}/deadletters").json()["items"]
    assert letter["event"]["id"] == "e-2"
    assert letter["lastError"].startswith("transformation failed")
