"""Transformations (``config.transform``) delivered to a real HTTP sink: reshaped data, renamed
and added attributes, an extra header and a path, a drop, a failure that becomes a dead letter
at once, a batch with drops, in binary and structured mode; and the explain preview, which is
what the sink receives, byte for byte."""

from __future__ import annotations

import json
from typing import Any

from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_for, wait_until

#: Three fields of the data, ``type`` renamed, an attribute added, a header and a path.
RESHAPE = (
    '{"type": "com.partner." + event.subject,'
    ' "source": "/partner",'
    ' "datacontenttype": "application/json",'
    ' "origin": event.source,'
    ' "data": {"order": event.data.n, "twice": event.data.n * 2, "kind": "order"},'
    ' "$delivery": {"headers": {"X-Order": string(event.data.n)},'
    ' "path": "/orders/" + string(event.data.n) + "?from=broker"}}'
)
#: Drops events with an odd ``n``; passes the others unchanged.
DROP_ODD = "event.data.n % 2 == 1 ? null : event"


def transform(text: str) -> dict[str, Any]:
    return {"transform": {"cel": text}}


def test_binary_delivery_is_reshaped_with_a_header_and_a_path(broker: Broker, sink: Sink) -> None:
    broker.subscribe(f"{sink.url}/in", config=transform(RESHAPE))
    assert broker.send(event(7, subject="order", tenantid="internal-1")).status_code == 202
    (got,) = sink.wait("/in/orders/7", 1)
    assert got.query == "from=broker"
    assert got.headers["ce-id"] == "e-7"  # the broker's id stays
    assert got.headers["ce-specversion"] == "1.0"
    assert got.headers["ce-type"] == "com.partner.order"
    assert got.headers["ce-source"] == "/partner"
    assert got.headers["ce-origin"] == "/tests"
    assert "ce-tenantid" not in got.headers  # only what the output holds is sent
    assert got.headers["x-order"] == "7"
    assert json.loads(got.body) == {"order": 7, "twice": 14, "kind": "order"}


def test_structured_delivery_is_reshaped(broker: Broker, sink: Sink) -> None:
    broker.subscribe(
        f"{sink.url}/st", protocolsettings={"contentmode": "structured"}, config=transform(RESHAPE)
    )
    assert broker.send(event(3, subject="order")).status_code == 202
    (got,) = sink.wait("/st/orders/3", 1)
    assert json.loads(got.body) == {
        "specversion": "1.0",
        "id": "e-3",
        "type": "com.partner.order",
        "source": "/partner",
        "datacontenttype": "application/json",
        "origin": "/tests",
        "data": {"order": 3, "twice": 6, "kind": "order"},
    }


def test_a_drop_is_counted_and_not_a_failure(broker: Broker, sink: Sink) -> None:
    sub = broker.subscribe(f"{sink.url}/odd", config={**transform(DROP_ODD), "concurrency": "1"})
    for n in (1, 2, 3, 4):
        assert broker.send(event(n)).status_code == 202
    broker.settled()
    assert sink.ids("/odd") == ["e-2", "e-4"]
    status = broker.status(sub)
    assert status["deadlettered"] == 0
    assert status["failed"] == 0
    metrics = broker.http.get("/metrics").text
    dropped = [
        line
        for line in metrics.splitlines()
        if line.startswith("cebroker_deliveries_total") and 'outcome="dropped"' in line
    ]
    assert len(dropped) == 1, dropped
    assert float(dropped[0].split()[-1]) == 2.0, dropped


def test_a_failed_transformation_is_a_dead_letter_at_once(broker: Broker, sink: Sink) -> None:
    """A missing field: no attempt reaches the sink, no retry, the circuit stays closed, the
    dead letter keeps the stored event and names the transformation's error; the next event,
    which has the field, is delivered."""
    sub = broker.subscribe(
        f"{sink.url}/strict",
        config={**transform('{"source": "/x", "type": "t", "data": event.data.order}'), "concurrency": "1"},
    )
    assert broker.send(event(1)).status_code == 202
    url = f"/subscriptions/{sub['id']}/deadletters"
    (dead,) = wait_until(lambda: broker.http.get(url).json()["items"])
    assert dead["attempts"] == 1
    assert dead["event"] == event(1)
    assert dead["lastError"].startswith("transformation failed: ")
    assert "order" in dead["lastError"]
    assert "at line 1, column" in dead["lastError"]
    assert sink.at("/strict") == []
    assert broker.send(event(2, data={"order": 5})).status_code == 202
    (got,) = sink.wait("/strict", 1)
    assert json.loads(got.body) == 5
    assert broker.status(sub)["circuit"]["state"] == "closed"


def test_an_output_that_is_not_an_event_is_a_dead_letter(broker: Broker, sink: Sink) -> None:
    sub = broker.subscribe(
        f"{sink.url}/bad",
        config=transform('{"source": "/x", "type": "t", "$delivery": {"headers": {"Authorization": "x"}}}'),
    )
    assert broker.send(event(1)).status_code == 202
    url = f"/subscriptions/{sub['id']}/deadletters"
    (dead,) = wait_until(lambda: broker.http.get(url).json()["items"])
    assert "/$delivery/headers/Authorization" in dead["lastError"]
    assert sink.at("/bad") == []


def test_a_batch_leaves_out_the_dropped_events(broker: Broker, sink: Sink) -> None:
    broker.subscribe(
        f"{sink.url}/batch",
        protocolsettings={"contentmode": "batch"},
        config={**transform(DROP_ODD), "maxbatchsize": "10", "maxbatchdelay": "0.5"},
    )
    for n in range(1, 7):
        assert broker.send(event(n)).status_code == 202
    broker.settled()
    got = [e for r in sink.at("/batch") for e in json.loads(r.body)]
    assert sorted(e["id"] for e in got) == ["e-2", "e-4", "e-6"]


def test_an_expression_that_does_not_compile_is_refused_when_saved(broker: Broker, sink: Sink) -> None:
    before = broker.http.get("/subscriptions").json()
    for spec, words in (
        ({"cel": '{"type": event.type +}'}, "line 1, column"),
        ({"cel": "x" * 5000}, "longer than"),
        ({"jq": "."}, "unknown member"),
        ("event", "must be an object"),
    ):
        response = broker.http.post(
            "/subscriptions",
            json={"protocol": "HTTP", "sink": f"{sink.url}/x", "config": {"transform": spec}},
        )
        assert response.status_code == 400, response.text
        (problem,) = response.json()["errors"]
        assert problem["pointer"] == "/config/transform"
        assert words in problem["detail"], problem
    assert broker.http.get("/subscriptions").json() == before


def test_explain_shows_what_the_sink_receives(broker: Broker, sink: Sink) -> None:
    """The preview's body and headers are the request's, byte for byte (binary and structured);
    a drop and a failure are shown as such."""
    for n, mode in ((11, "binary"), (12, "structured")):
        sub = broker.subscribe(
            f"{sink.url}/{mode}",
            protocolsettings={"contentmode": mode, "headers": {"x-static": "1"}},
            config=transform(RESHAPE),
        )
        sent = event(n, subject="order", data={"n": n, "note": "é"})
        shown = broker.http.post(f"/subscriptions/{sub['id']}/explain", json=sent).json()
        assert shown["matched"] is True
        preview = shown["transform"]
        assert preview["outcome"] == "delivered"
        assert preview["sink"] == f"{sink.url}/{mode}/orders/{n}?from=broker"
        assert preview["delivery"] == {"headers": {"x-order": str(n)}, "path": f"/orders/{n}?from=broker"}
        assert broker.send(sent).status_code == 202
        (got,) = sink.wait(f"/{mode}/orders/{n}", 1)
        assert got.body == preview["message"]["body"].encode()
        for name, value in preview["message"]["headers"].items():
            assert got.headers[name.lower()] == value, name
    draft = {"protocol": "HTTP", "sink": f"{sink.url}/d", "config": transform(DROP_ODD)}
    answer = broker.http.post("/explain", json={"subscription": draft, "event": event(1)}).json()
    assert answer["transform"] == {"outcome": "dropped"}
    draft["config"] = transform("event.data.missing")
    answer = broker.http.post("/explain", json={"subscription": draft, "event": event(1)}).json()
    assert answer["transform"]["outcome"] == "failed"
    assert "missing" in answer["transform"]["error"]["reason"]


def test_a_sink_failure_is_still_retried(broker: Broker, sink: Sink) -> None:
    """The transformation does not change what a sink's failure means: a 503 is retried, and the
    retry sends the same transformed event (same id)."""
    sub = broker.subscribe(
        f"{sink.url}/flaky", config={**transform(RESHAPE), "initialdelay": "0.05", "maxdelay": "0.2"}
    )
    sink.scripts["/flaky/orders/4"] = [Reply(503)]
    assert broker.send(event(4, subject="order")).status_code == 202
    got = sink.wait("/flaky/orders/4", 2)
    assert [g.headers["ce-id"] for g in got] == ["e-4", "e-4"]
    assert got[0].body == got[1].body
    wait_for(lambda: broker.status(sub), lambda status: status["delivered"] == 1, message="delivered")
