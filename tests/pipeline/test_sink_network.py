"""No SSRF through sinks: every destination checked at subscription time (400 naming the field)
and again at connect time (a name that rebinds to a refused address becomes a dead letter, and
no request reaches it); allowed networks; the loopback exception of a local broker.

Names are resolved by resolvers injected into the broker (they stand in for DNS only); every
delivery is a real connection.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from ceprotocols.egress import IPAddress
from support.broker import Broker
from support.events import event
from support.sinks import Sink
from support.waiting import wait_until

KEY = "cbk_network-test-key"


class Names:
    """Answers names from a table; ``then`` answers replace the first answer from the second
    lookup on (DNS rebinding)."""

    def __init__(self, first: dict[str, str], then: dict[str, str] | None = None) -> None:
        self.first = first
        self.then = then or {}
        self.lookups: dict[str, int] = {}

    async def __call__(self, host: str, port: int, /) -> Sequence[IPAddress]:
        count = self.lookups[host] = self.lookups.get(host, 0) + 1
        table = self.then if count > 1 and host in self.then else self.first
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, f"{host} is not in the test's table")
        return [ipaddress.ip_address(table[host])]


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    path.write_text(json.dumps({"keys": [{"id": "ops", "sha256": digest, "scopes": ["admin"]}]}))
    return path


def authenticated(make_broker: Callable[..., Broker], tmp_path: Path, **overrides: Any) -> Broker:
    broker = make_broker(api_keys=keys_file(tmp_path), **overrides)
    broker.http.headers["authorization"] = f"Bearer {KEY}"
    return broker


REFUSED = [
    ("http://10.1.2.3/hook", "a private address"),
    ("http://172.16.0.1/hook", "a private address"),
    ("http://192.168.1.1/hook", "a private address"),
    ("http://[fd00::1]/hook", "a private address"),
    ("http://169.254.169.254/latest/meta-data", "cloud instance metadata"),
    ("http://[fe80::1]/hook", "a link-local address"),
    ("http://100.64.0.1/hook", "a shared address"),
    ("http://224.0.0.1/hook", "a multicast address"),
    ("http://0.0.0.0/hook", "an unspecified address"),
    ("http://[::ffff:10.0.0.1]/hook", "a private address"),
    ("http://198.18.0.1/hook", "a reserved address"),
]


@pytest.mark.parametrize(("sink", "reason"), REFUSED)
def test_literal_addresses_of_every_class_are_refused(broker: Broker, sink: str, reason: str) -> None:
    r = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": sink})
    assert r.status_code == 400, r.text
    [error] = r.json()["errors"]
    assert error["pointer"] == "/sink"
    assert reason in error["detail"]
    assert broker.http.get("/subscriptions").json() == []


@pytest.mark.parametrize(
    "body",
    [
        {"protocol": "MQTT5", "sink": "mqtt://10.0.0.5:1883", "protocolsettings": {"topicname": "t"}},
        {"protocol": "AMQP", "sink": "amqp://192.168.0.9/queue"},
        {
            "protocol": "KAFKA",
            "sink": "kafka://k.example:9092,10.2.0.1:9092",
            "protocolsettings": {"topicname": "t"},
        },
        {"protocol": "NATS", "sink": "nats://169.254.169.254:4222", "protocolsettings": {"subject": "s"}},
    ],
)
def test_every_protocol_sink_is_checked(broker: Broker, body: dict[str, Any]) -> None:
    r = broker.http.post("/subscriptions", json=body)
    assert r.status_code == 400, r.text
    assert [e["pointer"] for e in r.json()["errors"]] == ["/sink"]


def test_dead_letter_sink_and_token_endpoint_are_checked(broker: Broker) -> None:
    r = broker.http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": "https://hooks.example/x",
            "config": {"deadlettersink": "http://169.254.169.254/dlq"},
            "sinkcredential": {
                "credentialtype": "REFRESHTOKEN",
                "accesstoken": "a",
                "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
                "accesstokentype": "bearer",
                "refreshtoken": "r",
                "refreshtokenendpoint": "http://10.9.9.9/token",
            },
        },
    )
    assert r.status_code == 400, r.text
    pointers = sorted(e["pointer"] for e in r.json()["errors"])
    assert pointers == ["/config/deadlettersink", "/sinkcredential/refreshtokenendpoint"]


def test_names_resolving_to_refused_addresses(make_broker: Callable[..., Broker]) -> None:
    names = Names({"metadata.test": "169.254.169.254", "inside.test": "10.0.0.8", "ok.test": "93.184.216.34"})
    broker = make_broker(resolver=names)
    refused = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": "http://metadata.test/x"})
    assert refused.status_code == 400
    assert "metadata.test resolves to 169.254.169.254" in refused.json()["errors"][0]["detail"]
    inside = broker.http.post(
        "/subscriptions",
        json={"protocol": "MQTT3", "sink": "mqtt://inside.test", "protocolsettings": {"topicname": "t"}},
    )
    assert inside.status_code == 400
    accepted = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": "http://ok.test/x"})
    assert accepted.status_code == 201, accepted.text


def test_loopback_sinks_only_for_a_local_broker_without_authentication(
    make_broker: Callable[..., Broker], sink: Sink, tmp_path: Path
) -> None:
    local = make_broker()
    assert (
        local.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/a"}).status_code
        == 201
    )
    secured = authenticated(make_broker, tmp_path, db=tmp_path / "secured.db")
    r = secured.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/a"})
    assert r.status_code == 400
    assert "a loopback address" in r.json()["errors"][0]["detail"]


def test_allowed_networks_reach_their_sinks(
    make_broker: Callable[..., Broker], sink: Sink, tmp_path: Path
) -> None:
    broker = authenticated(make_broker, tmp_path, allow_sink_networks=("127.0.0.0/8",))
    sub = broker.subscribe(f"{sink.url}/allowed")
    assert broker.send(event(1)).status_code == 202
    assert len(sink.wait("/allowed", 1)) == 1
    broker.settled()  # the sink answers before the broker records the outcome
    assert broker.status(sub)["delivered"] == 1
    # Another private range stays refused.
    assert (
        broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": "http://10.0.0.1/"}).status_code
        == 400
    )


def test_a_rebinding_name_becomes_a_dead_letter_and_no_request(
    make_broker: Callable[..., Broker], sink: Sink, tmp_path: Path
) -> None:
    """Public when the subscription is created, the sink's loopback address when delivering."""
    names = Names({"rebind.test": "93.184.216.34"}, then={"rebind.test": "127.0.0.1"})
    broker = authenticated(make_broker, tmp_path, resolver=names)
    sub = broker.subscribe(f"http://rebind.test:{sink.url.rsplit(':', 1)[1]}/hook")
    assert broker.send(event(1)).status_code == 202
    wait_until(lambda: broker.status(sub)["deadlettered"] == 1)
    status = broker.status(sub)
    assert "loopback" in status["lastError"]
    letters = broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"]
    assert "rebind.test resolves to 127.0.0.1, a loopback address" in letters[0]["lastError"]
    assert sink.received == []
    assert names.lookups["rebind.test"] >= 2
