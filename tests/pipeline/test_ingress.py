"""``POST /events``: content modes, validation, limits and de-duplication.

HTTP Protocol Binding 1.0 sections 3.1-3.3; JSON Event Format 1.0 (data/data_base64, batch);
CloudEvents 1.0 core section 3 (required attributes, attribute naming, ``time`` as RFC 3339).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

from support.broker import Broker
from support.events import event
from support.sinks import Sink

BATCH = {"content-type": "application/cloudevents-batch+json"}


def test_binary_mode_ingress_is_delivered_with_its_attributes(broker: Broker, sink: Sink) -> None:
    """Binary mode: ce- headers (percent-encoded) become attributes, Content-Type the datacontenttype."""
    broker.subscribe(f"{sink.url}/b")
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "bin-1",
        "ce-source": "/bin",
        "ce-type": "t",
        "ce-subject": "Euro%20%E2%82%AC",
        "ce-traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
        "content-type": "text/plain",
    }
    r = broker.http.post("/events", content=b"hello", headers=headers)
    assert r.status_code == 202, r.text
    assert r.json() == {"accepted": 1, "duplicates": 0}
    (got,) = sink.wait("/b", 1)
    assert got.body == b"hello"
    assert got.headers["content-type"] == "text/plain"
    assert got.headers["ce-subject"] == "Euro%20%E2%82%AC"
    assert got.headers["ce-traceparent"] == headers["ce-traceparent"]


def test_binary_payload_that_is_not_text_round_trips_as_bytes(broker: Broker, sink: Sink) -> None:
    """A non-text payload is kept as data_base64 (JSON Event Format 3.1) and delivered byte-exact."""
    broker.subscribe(f"{sink.url}/raw", protocolsettings={"contentmode": "structured"})
    payload = bytes(range(256))
    headers = {"ce-specversion": "1.0", "ce-id": "r", "ce-source": "/s", "ce-type": "t"}
    headers["content-type"] = "application/octet-stream"
    assert broker.http.post("/events", content=payload, headers=headers).status_code == 202
    (got,) = sink.wait("/raw", 1)
    assert base64.b64decode(json.loads(got.body)["data_base64"]) == payload


def test_batch_is_accepted_and_each_event_delivered(broker: Broker, sink: Sink) -> None:
    """Batched mode: a JSON array of events, each delivered on its own."""
    broker.subscribe(f"{sink.url}/batch")
    events = [event(i) for i in range(20)]
    r = broker.http.post("/events", content=json.dumps(events), headers=BATCH)
    assert r.status_code == 202
    assert r.json()["accepted"] == 20
    got = sink.wait("/batch", 20)
    assert sorted(g.headers["ce-id"] for g in got) == sorted(e["id"] for e in events)


def test_invalid_event_names_every_bad_attribute(broker: Broker) -> None:
    """400 problem+json with a pointer per problem: specversion, empty id, name syntax, time."""
    bad = event(1, specversion="0.3", id="", time="yesterday", **{"Bad_Name": "x"})
    r = broker.send(bad)
    assert r.status_code == 400
    assert r.headers["content-type"] == "application/problem+json"
    pointers = {e["pointer"] for e in r.json()["errors"]}
    assert pointers == {"/specversion", "/id", "/time", "/Bad_Name"}


def test_data_and_data_base64_together_are_refused(broker: Broker) -> None:
    """JSON Event Format 3.1: data and data_base64 are mutually exclusive."""
    r = broker.send(event(1, data_base64="aGk="))
    assert r.status_code == 400
    assert [e["pointer"] for e in r.json()["errors"]] == ["/data_base64"]


def test_batch_with_a_bad_event_is_rejected_whole(broker: Broker, sink: Sink) -> None:
    """Any bad event rejects the batch, naming each bad index; none of it is stored or delivered."""
    sub = broker.subscribe(f"{sink.url}/whole")
    events = [event(1), {**event(2), "type": ""}, event(3), {"specversion": "1.0"}]
    r = broker.http.post("/events", content=json.dumps(events), headers=BATCH)
    assert r.status_code == 400
    pointers = {e["pointer"] for e in r.json()["errors"]}
    assert pointers == {"/1/type", "/3/id", "/3/source", "/3/type"}
    assert broker.http.get(f"/subscriptions/{sub['id']}/status").json()["pending"] == 0
    # A good event sent afterwards is the only one delivered.
    assert broker.send(event(9)).status_code == 202
    (got,) = sink.wait("/whole", 1)
    assert got.headers["ce-id"] == "e-9"


def test_oversize_is_413_and_other_content_types_415(make_broker: Callable[..., Broker]) -> None:
    """Bodies over the configured bounds get 413; non-CloudEvents requests get 415."""
    broker = make_broker(max_event_size=1000, max_batch_size=5000)
    big = event(1, data="x" * 2000)
    assert broker.send(big).status_code == 413
    r = broker.http.post("/events", content=json.dumps([big]), headers=BATCH)
    assert r.status_code == 413
    r = broker.http.post("/events", content=json.dumps([event(i) for i in range(100)]), headers=BATCH)
    assert r.status_code == 413
    r = broker.http.post("/events", json={"hello": 1})
    assert r.status_code == 415
    assert r.headers["content-type"] == "application/problem+json"
    r = broker.http.post("/events", content=b"{}", headers={"content-type": "application/cloudevents+avro"})
    assert r.status_code == 415


def test_malformed_json_is_400(broker: Broker) -> None:
    """A body that is not JSON is a clear 400, never a 500."""
    r = broker.http.post(
        "/events", content=b"{nope", headers={"content-type": "application/cloudevents+json"}
    )
    assert r.status_code == 400
    r = broker.http.post("/events", content=b'{"a": 1}', headers=BATCH)
    assert r.status_code == 400


def test_repeated_source_and_id_is_acknowledged_but_delivered_once(broker: Broker, sink: Sink) -> None:
    """De-duplication on (source, id) within the window, across requests and inside a batch."""
    broker.subscribe(f"{sink.url}/dedup")
    assert broker.send(event(1)).json() == {"accepted": 1, "duplicates": 0}
    assert broker.send(event(1)).json() == {"accepted": 1, "duplicates": 1}
    r = broker.http.post("/events", content=json.dumps([event(1), event(2), event(2)]), headers=BATCH)
    assert r.json() == {"accepted": 3, "duplicates": 2}
    sink.wait("/dedup", 2)
    broker.send(event(3))
    got = sink.wait("/dedup", 3)
    assert sorted(g.headers["ce-id"] for g in got) == ["e-1", "e-2", "e-3"]


def test_backlog_over_bound_is_503_with_retry_after(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """Past the pending-delivery bound the broker pushes back instead of growing."""
    from support.sinks import Reply

    broker = make_broker(max_backlog=3)
    sink.default["/stuck"] = Reply(status=503)
    broker.subscribe(f"{sink.url}/stuck", config={"initialdelay": "60"})
    for i in range(3):
        assert broker.send(event(i)).status_code == 202
    r = broker.send(event(99))
    assert r.status_code == 503
    assert int(r.headers["retry-after"]) >= 1


def test_binary_mode_with_bad_header_encoding_or_body_is_400(broker: Broker) -> None:
    """Invalid percent-encoded UTF-8 in a ce- header (HTTP binding 3.1.3.2) and a body that is
    not what its JSON Content-Type says are both refused with a pointer."""
    headers = {"ce-specversion": "1.0", "ce-id": "1", "ce-source": "/s", "ce-type": "t"}
    r = broker.http.post("/events", content=b"", headers={**headers, "ce-subject": "%C0%A0"})
    assert r.status_code == 400
    assert "ce-subject" in r.json()["detail"]
    assert r.json()["errors"][0]["header"] == "ce-subject"
    # raw bytes outside printable ASCII: the binding requires percent-encoding
    for raw in (b"caf\xc3\xa9", b"\xff\xfe"):
        raw_headers = [(k.encode(), v.encode()) for k, v in headers.items() if k != "ce-source"]
        r = broker.http.post("/events", content=b"", headers=[*raw_headers, (b"ce-source", raw)])
        assert r.status_code == 400
        assert [e["header"] for e in r.json()["errors"]] == ["ce-source"]
    r = broker.http.post(
        "/events", content=b"{not json", headers={**headers, "content-type": "application/json"}
    )
    assert r.status_code == 400
    assert [e["pointer"] for e in r.json()["errors"]] == ["/data"]
    r = broker.http.post("/events", content=b"", headers={**headers, "ce-id": ""})
    assert [e["pointer"] for e in r.json()["errors"]] == ["/id"]
