"""Tenant event policies with events that cross tenants: ``receive`` limits what a tenant's
subscriptions get (inside the index), ``publish`` what a tenant may send (403 naming the event,
a batch refused whole, nothing written)."""

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

KEYS = {"admin": "cbk_admin-key", "acme": "cbk_acme-key", "globex": "cbk_globex-key"}
SCOPES = ["subscriptions:read", "subscriptions:write", "events:publish"]
POLICIES = {
    "tenants": {
        "acme": {"receive": "source LIKE '/acme/%'", "publish": "source LIKE '/acme/%'"},
        "globex": {"publish": "source LIKE '/globex/%' OR type = 'shared'"},
    }
}


def as_(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[name]}"}


@pytest.fixture
def broker(make_broker: Callable[..., Broker], tmp_path: Path) -> Broker:
    keys = [
        {"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest()}
        | ({"scopes": ["admin"]} if name == "admin" else {"tenant": name, "scopes": SCOPES})
        for name, key in KEYS.items()
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    (tmp_path / "policies.json").write_text(json.dumps(POLICIES))
    running = make_broker(
        api_keys=tmp_path / "keys.json",
        tenant_policies=tmp_path / "policies.json",
        allow_sink_networks=("127.0.0.0/8",),
    )
    running.http.headers.update(as_("admin"))  # the helpers' own calls (settled, status)
    return running


def publish(broker: Broker, tenant: str, *events: dict[str, Any]) -> httpx.Response:
    if len(events) == 1:
        headers = {**as_(tenant), "content-type": "application/cloudevents+json"}
        return broker.http.post("/events", content=json.dumps(events[0]), headers=headers)
    headers = {**as_(tenant), "content-type": "application/cloudevents-batch+json"}
    return broker.http.post("/events", content=json.dumps(list(events)), headers=headers)


def subscribe(broker: Broker, tenant: str, sink: str) -> dict[str, Any]:
    r = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": sink}, headers=as_(tenant))
    assert r.status_code == 201, r.text
    return dict(r.json())


def test_receive_policy_limits_what_a_tenants_subscriptions_get(broker: Broker, sink: Sink) -> None:
    subscribe(broker, "acme", f"{sink.url}/acme")
    subscribe(broker, "globex", f"{sink.url}/globex")
    assert publish(broker, "globex", event(1, source="/globex/a")).status_code == 202
    assert publish(broker, "acme", event(2, source="/acme/a")).status_code == 202
    assert publish(broker, "globex", event(3, source="/acme/x", type="shared")).status_code == 202
    broker.settled()
    acme = sorted(json.loads(r.body)["n"] for r in sink.at("/acme"))
    globex = sorted(json.loads(r.body)["n"] for r in sink.at("/globex"))
    assert acme == [2, 3]  # /globex/a is outside acme's receive policy, whoever published it
    assert globex == [1, 2, 3]  # globex has no receive policy


def test_publish_policy_refuses_the_event_and_the_whole_batch(broker: Broker, sink: Sink) -> None:
    subscribe(broker, "globex", f"{sink.url}/globex")
    refused = publish(broker, "acme", event(1, source="/globex/forged"))
    assert refused.status_code == 403
    assert "the event (source '/globex/forged', id 'e-1') may not be published" in refused.json()["detail"]
    batch = publish(broker, "acme", event(2, source="/acme/ok"), event(3, source="/elsewhere"))
    assert batch.status_code == 403
    assert "event /1 (source '/elsewhere', id 'e-3')" in batch.json()["detail"]
    # The admin is not bound by a tenant's policy; a marker event shows everything before it arrived.
    assert publish(broker, "admin", event(4, source="/marker")).status_code == 202
    broker.settled()
    assert [json.loads(r.body)["n"] for r in sink.at("/globex")] == [4]
    # Nothing of the refused requests was kept: the same ids are new events now.
    assert publish(broker, "acme", event(2, source="/acme/ok")).json() == {"accepted": 1, "duplicates": 0}


def test_a_bad_policy_file_stops_the_broker(make_broker: Callable[..., Broker], tmp_path: Path) -> None:
    from cebroker.errors import ConfigurationError

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"tenants": {"acme": {"receive": "source LIKE"}}}))
    with pytest.raises(ConfigurationError, match="tenant 'acme': 'receive' is not valid CloudEvents SQL"):
        make_broker(tenant_policies=bad)
