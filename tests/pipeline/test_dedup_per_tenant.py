"""De-duplication per publishing tenant (issue 30, finding 7), on SQLite and PostgreSQL.

The attack: a tenant without a publish policy publishes an event with another tenant's
``source`` and a guessed ``id`` first. Before, the victim's own event with that id was then
dropped as a duplicate. Now a key is ``(publishing tenant, source, id)``: the victim's event is
accepted and delivered, and each tenant's own repeat is still a duplicate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.broker import Broker
from support.events import event
from support.sinks import Sink

from pipeline.backends import backend, database, start_broker

__all__ = ["backend", "database", "start_broker"]

KEYS = {"admin": "cbk_admin-key", "acme": "cbk_acme-key", "mallory": "cbk_mallory-key"}
SCOPES = ["subscriptions:read", "subscriptions:write", "events:publish"]


def as_(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[name]}"}


@pytest.fixture
def broker(start_broker: Callable[..., Broker], tmp_path: Path) -> Broker:
    keys = [
        {"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest()}
        | ({"scopes": ["admin"]} if name == "admin" else {"tenant": name, "scopes": SCOPES})
        for name, key in KEYS.items()
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    running = start_broker(api_keys=tmp_path / "keys.json", allow_sink_networks=("127.0.0.0/8",))
    running.http.headers.update({"authorization": f"Bearer {KEYS['admin']}"})
    return running


def publish(broker: Broker, tenant: str, body: dict[str, Any]) -> httpx.Response:
    headers = {**as_(tenant), "content-type": "application/cloudevents+json"}
    return broker.http.post("/events", content=json.dumps(body), headers=headers)


def test_a_tenant_cannot_suppress_another_tenants_event(broker: Broker, sink: Sink) -> None:
    made = broker.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/acme"}, headers=as_("acme")
    )
    assert made.status_code == 201, made.text
    real = event(1, source="/acme/orders", id="order-42", data={"from": "acme"})
    forged = {**real, "data": {"from": "mallory"}}
    # mallory publishes acme's next (source, id) first
    assert publish(broker, "mallory", forged).json() == {"accepted": 1, "duplicates": 0}
    # acme's own event is not a duplicate of mallory's: accepted and delivered
    assert publish(broker, "acme", real).json() == {"accepted": 1, "duplicates": 0}
    # each tenant's own repeat still is one
    assert publish(broker, "acme", real).json() == {"accepted": 1, "duplicates": 1}
    assert publish(broker, "mallory", forged).json() == {"accepted": 1, "duplicates": 1}
    got = sink.wait("/acme", 2)
    broker.settled()
    senders = sorted(json.loads(r.body)["from"] for r in sink.at("/acme"))
    assert senders == ["acme", "mallory"]  # the forgery is delivered (no policy), the real one too
    assert len(got) == 2
