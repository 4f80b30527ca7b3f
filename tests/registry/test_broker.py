"""The registry inside a running broker: change events delivered to a real HTTP sink through an
ordinary subscription, and incoming events validated against the definitions in each mode.

xRegistry core events (``io.xregistry.*``), Schema Registry API 0.2 section 4 and Message
Catalog section 5 (the older ``*.updated.v1``/``*.deleted.v1`` types), Message Definitions
1.0-rc2 (attribute constraints used for validation).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support.broker import Broker
from support.shared import XREGISTRY_SAMPLES
from support.sinks import Received, Sink

from registry.support import SCENARIOS

BROKER_URL = "http://broker.test"
#: generous: deliveries retry with backoff when a loaded machine is slow to answer
WAIT = 60.0


def _events(requests: list[Received]) -> list[dict[str, Any]]:
    """Structured or binary HTTP deliveries as attribute dicts."""
    out = []
    for r in requests:
        if r.headers.get("content-type", "").startswith("application/cloudevents+json"):
            out.append(json.loads(r.body))
        else:
            out.append({k[3:]: v for k, v in r.headers.items() if k.startswith("ce-")})
    return out


@pytest.fixture
def registry_broker(make_broker: Callable[..., Broker]) -> Callable[..., Broker]:
    """Brokers whose public URL (the registry's change event source) is fixed."""

    def make(**settings: Any) -> Broker:
        return make_broker(base_url=BROKER_URL, **settings)

    return make


def test_change_events_reach_a_subscription(registry_broker: Callable[..., Broker], sink: Sink) -> None:
    """Registry writes become CloudEvents on the broker's own path; a prefix filter on subject
    follows one group, a types filter selects the Message Catalog's older event type."""
    broker = registry_broker()
    broker.subscribe(
        f"{sink.url}/xreg",
        config={"concurrency": "1"},  # one at a time: delivered in the order they were ingested
        filters=[
            {"all": [{"prefix": {"subject": "/messagegroups/g1"}}, {"prefix": {"type": "io.xregistry."}}]}
        ],
    )
    broker.subscribe(f"{sink.url}/legacy", types=["io.cloudevents.messagecatalog.deleted.v1"])
    assert broker.http.put("/messagegroups/g1", json={"envelope": "CloudEvents/1.0"}).status_code == 201
    r = broker.http.put(
        "/messagegroups/g1/messages/m1",
        json={"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "m1"}}},
    )
    assert r.status_code == 201
    assert broker.http.put("/messagegroups/other", json={}).status_code == 201
    assert broker.http.patch("/messagegroups/g1", json={"description": "now described"}).status_code == 200
    assert broker.http.delete("/messagegroups/g1/messages/m1").status_code == 204
    got = _events(sink.wait("/xreg", 5, timeout=WAIT))
    seen = [(e["type"], e["subject"]) for e in got]
    assert seen == [
        ("io.xregistry.group.created", "/messagegroups/g1"),
        ("io.xregistry.resource.created", "/messagegroups/g1/messages/m1"),
        ("io.xregistry.version.created", "/messagegroups/g1/messages/m1/versions/1"),
        ("io.xregistry.group.updated", "/messagegroups/g1"),
        ("io.xregistry.resource.deleted", "/messagegroups/g1/messages/m1"),
    ]
    assert {e["source"] for e in got} == {BROKER_URL}
    assert len({e["xregcorrelationid"] for e in got[1:3]}) == 1  # one request, one correlation id
    updated = got[3]
    data = updated["data"] if "data" in updated else json.loads(sink.at("/xreg")[3].body)
    assert "description" in data["changed"]
    legacy = _events(sink.wait("/legacy", 1, timeout=WAIT))
    assert [(e["type"], e["subject"]) for e in legacy] == [
        ("io.cloudevents.messagecatalog.deleted.v1", "/messagegroups/g1/messages/m1")
    ]
    assert "data" not in legacy[0]
    assert not sink.at("/legacy")[0].body  # the older types carry no data


def _reservation(n: int, **overrides: Any) -> dict[str, Any]:
    event = {
        "specversion": "1.0",
        "id": f"r-{n}",
        "type": "Contoso.ERP.ReservationPlaced",
        "source": "/erp/acme/orders",
        "subject": f"res-{n}",
        "time": "2026-01-01T10:00:00Z",
        "datacontenttype": "application/json",
        "data": {"orderId": "o-1", "customerId": "c-1", "total": 10.5, "items": []},
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not None}


def _import_contoso(broker: Broker) -> None:
    doc = json.loads((SCENARIOS / "contoso-erp-jsons07.xreg.json").read_text())
    assert broker.http.post("/", json=doc).status_code == 200


VIOLATING = {"source": "/erp/orders", "time": None, "data": {"orderId": "o-1", "total": -1}}
VIOLATION_POINTERS = {"/source", "/time", "/data/total"}


@XREGISTRY_SAMPLES.needed
def test_validation_enforce(registry_broker: Callable[..., Broker]) -> None:
    """enforce: a conforming event is accepted; a violating one is refused with every violation."""
    broker = registry_broker(event_validation="enforce")
    _import_contoso(broker)
    assert broker.send(_reservation(1)).status_code == 202
    r = broker.send(_reservation(2, **VIOLATING))
    assert r.status_code == 400
    assert {e["pointer"] for e in r.json()["errors"]} == VIOLATION_POINTERS
    # the data schema is resolved through dataschemauri in this registry
    r = broker.send(_reservation(3, data={"orderId": 5}))
    assert [e["pointer"] for e in r.json()["errors"]] == ["/data/orderId"]
    # an event of a type without a definition passes
    assert broker.send(_reservation(4, type="com.example.unknown", source="x")).status_code == 202
    # in a batch, each violation is pointed at within its event
    batch = [_reservation(5), _reservation(6, source="/nope")]
    r = broker.http.post(
        "/events", json=batch, headers={"content-type": "application/cloudevents-batch+json"}
    )
    assert r.status_code == 400
    assert [e["pointer"] for e in r.json()["errors"]] == ["/1/source"]


@XREGISTRY_SAMPLES.needed
def test_validation_warn_counts(registry_broker: Callable[..., Broker]) -> None:
    """warn: violating events are accepted, counted and logged."""
    broker = registry_broker(event_validation="warn")
    _import_contoso(broker)
    assert broker.send(_reservation(1)).status_code == 202
    assert broker.send(_reservation(2, **VIOLATING)).status_code == 202
    metrics = broker.http.get("/metrics").text
    counted = [ln for ln in metrics.splitlines() if ln.startswith("cebroker_event_validation_warnings_total")]
    assert counted == ["cebroker_event_validation_warnings_total 1.0"]


@XREGISTRY_SAMPLES.needed
def test_validation_off_accepts(registry_broker: Callable[..., Broker]) -> None:
    """off (the default): definitions are not consulted."""
    broker = registry_broker()
    _import_contoso(broker)
    assert broker.send(_reservation(1)).status_code == 202
    assert broker.send(_reservation(2, **VIOLATING)).status_code == 202


def test_definition_changes_apply_at_once(registry_broker: Callable[..., Broker]) -> None:
    """A new or changed definition is used by the next event (the index follows every write)."""
    broker = registry_broker(event_validation="enforce")
    event = _reservation(1, type="com.example.ping", source="/ping")
    assert broker.send(event).status_code == 202
    broker.http.put(
        "/messagegroups/g/messages/com.example.ping",
        json={
            "envelope": "CloudEvents/1.0",
            "envelopemetadata": {"source": {"type": "uritemplate", "value": "/pong/{x}"}},
        },
    )
    r = broker.send({**event, "id": "2"})
    assert r.status_code == 400
    assert [e["pointer"] for e in r.json()["errors"]] == ["/source"]
    assert broker.send({**event, "id": "3", "source": "/pong/1"}).status_code == 202
