"""Events posted to the broker reach matching HTTP sinks, in both content modes.

HTTP Protocol Binding 1.0 sections 3.1 (binary) and 3.2 (structured); Subscriptions API
``protocolsettings`` for HTTP (``headers``, ``method``).
"""

from __future__ import annotations

import json

from support.broker import Broker
from support.events import event
from support.sinks import Sink


def test_binary_delivery_by_default(broker: Broker, sink: Sink) -> None:
    """Binary mode: attributes as ce- headers, data as body, datacontenttype as Content-Type."""
    broker.subscribe(
        f"{sink.url}/bin", protocolsettings={"headers": {"x-token": "abc"}}, types=["com.example.test"]
    )
    r = broker.send(event(1, traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"))
    assert r.status_code == 202, r.text
    (got,) = sink.wait("/bin", 1)
    assert got.method == "POST"
    assert got.headers["ce-id"] == "e-1"
    assert got.headers["ce-source"] == "/tests"
    assert got.headers["ce-specversion"] == "1.0"
    assert got.headers["content-type"] == "application/json"
    assert got.headers["x-token"] == "abc"
    assert got.headers["ce-traceparent"] == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert json.loads(got.body) == {"n": 1}


def test_structured_delivery(broker: Broker, sink: Sink) -> None:
    """``contentmode: structured`` sends the JSON event format as the body."""
    broker.subscribe(f"{sink.url}/st", protocolsettings={"contentmode": "structured", "method": "PUT"})
    sent = event(2, tracestate="vendor=1")
    assert broker.send(sent).status_code == 202
    (got,) = sink.wait("/st", 1)
    assert got.method == "PUT"
    assert got.headers["content-type"].startswith("application/cloudevents+json")
    assert json.loads(got.body) == sent
