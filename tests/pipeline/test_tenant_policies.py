"""Tenant event policies with events that cross tenants: ``receive`` limits what a tenant's
subscriptions get (inside the index), ``publish`` what a tenant may send (403 naming the event,
a batch refused whole, nothing written)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
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


def a_minute_ago() -> str:
    """An RFC 3339 time within the archive's retention and before every event of a test."""
    return (datetime.now(UTC) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")


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


def test_replays_and_past_starts_keep_to_the_receive_policy(broker: Broker, sink: Sink) -> None:
    first = subscribe(broker, "acme", f"{sink.url}/acme")
    assert (
        publish(broker, "admin", event(1, source="/globex/a"), event(2, source="/acme/a")).status_code == 202
    )
    broker.settled()
    assert [json.loads(r.body)["n"] for r in sink.at("/acme")] == [2]
    # A replay of everything archived delivers only what the tenant may receive.
    started = broker.http.post(
        f"/subscriptions/{first['id']}/replay", json={"from": a_minute_ago()}, headers=as_("acme")
    )
    assert started.status_code == 202, started.text
    assert started.json()["events"] == 1
    # So does a subscription that starts at the oldest archived event.
    body = {"protocol": "HTTP", "sink": f"{sink.url}/late", "config": {"startfrom": "earliest"}}
    late = broker.http.post("/subscriptions", json=body, headers=as_("acme"))
    assert late.status_code == 201, late.text
    # A marker inside the policy shows that everything before it has arrived.
    assert publish(broker, "acme", event(3, source="/acme/marker")).status_code == 202
    sink.wait("/late", 2)
    broker.settled()
    assert sorted(json.loads(r.body)["n"] for r in sink.at("/acme")) == [2, 2, 3]
    # (an event accepted while the start replay is being set up may come twice: at least once)
    assert set(json.loads(r.body)["n"] for r in sink.at("/late")) == {2, 3}


def test_a_tenant_replays_its_own_subscriptions_only(broker: Broker, sink: Sink) -> None:
    mine = subscribe(broker, "acme", f"{sink.url}/acme")
    theirs = subscribe(broker, "globex", f"{sink.url}/globex")
    window = {"from": a_minute_ago(), "dryrun": True}
    assert (
        broker.http.post(f"/subscriptions/{mine['id']}/replay", json=window, headers=as_("acme")).status_code
        == 200
    )
    other = broker.http.post(f"/subscriptions/{theirs['id']}/replay", json=window, headers=as_("acme"))
    assert other.status_code == 404  # another tenant's subscription does not exist for acme
    listing = broker.http.get(f"/subscriptions/{theirs['id']}/replays", headers=as_("acme"))
    assert listing.status_code == 404


def test_a_transformation_cannot_widen_the_receive_policy(broker: Broker, sink: Sink) -> None:
    """The receive policy applies to the event as published: a transformation that rewrites
    ``source`` into the tenant's own does not make another tenant's event arrive."""
    rewrite = {"transform": {"cel": '{"source": "/acme/copy", "type": event.type, "data": event.data}'}}
    r = broker.http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/acme-t", "config": rewrite},
        headers=as_("acme"),
    )
    assert r.status_code == 201, r.text
    assert publish(broker, "globex", event(1, source="/globex/a")).status_code == 202
    assert publish(broker, "acme", event(2, source="/acme/a")).status_code == 202
    broker.settled()
    got = [json.loads(r.body)["n"] for r in sink.at("/acme-t")]
    assert got == [2]
    assert sink.at("/acme-t")[0].headers["ce-source"] == "/acme/copy"
