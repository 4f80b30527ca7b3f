"""``POST /subscriptions/{id}/explain`` and ``POST /explain`` on a real broker: the index's own
verdict condition by condition, drafts validated like a create and stored nowhere, and every bad
input a 400 naming its field."""

from __future__ import annotations

from typing import Any

from support.broker import Broker
from support.events import event
from support.sinks import Sink

ORDERS: dict[str, Any] = {
    "source": "/shop",
    "types": ["com.example.order.created"],
    "filters": [
        {"prefix": {"subject": "eu/"}},
        {"any": [{"sql": "amount > 100"}, {"not": {"exact": {"region": "us"}}}]},
    ],
}


def _order(**extra: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": "o-1",
        "source": "/shop",
        "type": "com.example.order.created",
        **extra,
    }


def test_stored_subscription_says_which_condition_refused(broker: Broker) -> None:
    sub = broker.subscribe("https://sink.example/x", **ORDERS)
    r = broker.http.post(f"/subscriptions/{sub['id']}/explain", json=_order(subject="us/42", region="us"))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["matched"] is False
    by_pointer = {c["pointer"]: c for c in answer["checks"]}
    assert list(by_pointer) == [
        "/source",
        "/types",
        "/filters/0",
        "/filters/1",
        "/filters/1/any/0",
        "/filters/1/any/1",
        "/filters/1/any/1/not",
    ]
    assert by_pointer["/source"]["matched"] is True
    assert by_pointer["/filters/0"] == {
        "pointer": "/filters/0",
        "matched": False,
        "detail": "prefix of subject: 'eu/' does not start 'us/42'",
    }
    assert "no attribute 'amount'" in by_pointer["/filters/1/any/0"]["detail"]


def test_verdict_is_the_one_delivery_uses(broker: Broker, sink: Sink) -> None:
    """An event explained as refused is not delivered; one explained as matched is."""
    sub = broker.subscribe(f"{sink.url}/in", filters=[{"sql": "amount > 100"}])
    refused, matched = event(1, amount=3), event(2, amount=120)
    path = f"/subscriptions/{sub['id']}/explain"
    assert [broker.http.post(path, json=e).json()["matched"] for e in (refused, matched)] == [False, True]
    for e in (refused, matched):  # the refused one first: once the other arrived, it would have too
        assert broker.send(e).status_code == 202
    sink.wait("/in", 1)
    broker.settled()  # the sink answers before the broker records the outcome
    assert [r.headers["ce-id"] for r in sink.at("/in")] == ["e-2"]
    assert broker.http.get(f"/subscriptions/{sub['id']}/status").json()["pending"] == 0


def test_structured_media_type_and_bad_events(broker: Broker) -> None:
    sub = broker.subscribe("https://sink.example/x")
    path = f"/subscriptions/{sub['id']}/explain"
    ok = broker.http.post(
        path,
        content=b'{"specversion":"1.0","id":"1","source":"/s","type":"t"}',
        headers={"content-type": "application/cloudevents+json"},
    )
    assert ok.status_code == 200
    assert ok.json()["matched"] is True
    bad = broker.http.post(path, json=_order(time="yesterday", id=""))
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert {e["pointer"] for e in bad.json()["errors"]} == {"/time", "/id"}
    assert (
        broker.http.post(path, content=b"[1]", headers={"content-type": "application/json"}).status_code
        == 400
    )
    assert broker.http.post(path, content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
    missing = broker.http.post("/subscriptions/nope/explain", json=_order())
    assert missing.status_code == 404


def test_draft_is_explained_and_never_stored(broker: Broker) -> None:
    draft = {"protocol": "HTTP", "sink": "https://sink.example/x", **ORDERS}
    r = broker.http.post(
        "/explain", json={"subscription": draft, "event": _order(subject="eu/1", amount=120)}
    )
    assert r.status_code == 200, r.text
    assert r.json()["matched"] is True
    assert all(c["matched"] for c in r.json()["checks"] if c["pointer"] != "/filters/1/any/1/not")
    assert broker.http.get("/subscriptions").json() == []


def test_invalid_draft_gets_the_errors_of_a_create(broker: Broker) -> None:
    draft = {"protocol": "MQTT", "sink": "http://x", "filters": [{"sql": "a ="}]}
    created = broker.http.post("/subscriptions", json=draft)
    assert created.status_code == 400
    r = broker.http.post("/explain", json={"subscription": draft, "event": _order(time="never")})
    assert r.status_code == 400
    problem = r.json()
    expected = [{**e, "pointer": "/subscription" + e["pointer"]} for e in created.json()["errors"]]
    assert problem["errors"] == [
        *expected,
        {"pointer": "/event/time", "detail": "must be an RFC 3339 timestamp"},
    ]
    assert problem["type"] == created.json()["type"]
    shape = broker.http.post("/explain", json={"draft": {}})
    assert shape.status_code == 400
    assert {e["pointer"] for e in shape.json()["errors"]} == {"/subscription", "/event", "/draft"}
    assert broker.http.get("/subscriptions").json() == []
