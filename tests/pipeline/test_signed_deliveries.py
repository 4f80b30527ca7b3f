"""Signed deliveries end to end: a subscription with ``protocolsettings.webhooksecret`` (the
broker generates it), every delivery verified by a sink with the ``standardwebhooks`` library,
before and after the secret is replaced, and after the overlap of the replaced one has ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from standardwebhooks import Webhook, WebhookVerificationError
from support.broker import Broker
from support.events import event
from support.sinks import Sink

from pipeline.clocks import ManualClock

SIGNED = {"protocol": "HTTP", "protocolsettings": {"webhooksecret": "generate"}}


def verified(secret: str, request: Any) -> bool:
    try:
        Webhook(secret).verify(request.body, dict(request.headers), json_parse=False)
    except WebhookVerificationError:
        return False
    return True


def test_every_delivery_verifies_across_a_rotation(make_broker: Callable[..., Broker], sink: Sink) -> None:
    clock = ManualClock()
    broker = make_broker(clock=clock, webhook_secret_overlap=3600.0)
    created = broker.http.post(
        "/subscriptions",
        json={
            "protocol": "HTTP",
            "sink": f"{sink.url}/hook",
            "protocolsettings": {"webhooksecret": "generate"},
        },
    )
    assert created.status_code == 201, created.text
    first = created.json()["protocolsettings"]["webhooksecret"]
    assert first.startswith("whsec_")
    sid = created.json()["id"]
    # Shown once: never again on a read or in a listing.
    assert "webhooksecret" not in broker.http.get(f"/subscriptions/{sid}").json()["protocolsettings"]
    assert first not in broker.http.get("/subscriptions").text

    assert broker.send(event(1)).status_code == 202
    [one] = sink.wait("/hook", 1)
    assert verified(first, one)

    replaced = broker.http.put(
        f"/subscriptions/{sid}",
        json={
            "protocol": "HTTP",
            "sink": f"{sink.url}/hook",
            "protocolsettings": {"webhooksecret": "generate"},
        },
    )
    assert replaced.status_code == 200, replaced.text
    second = replaced.json()["protocolsettings"]["webhooksecret"]
    assert second != first
    assert broker.send(event(2)).status_code == 202
    two = sink.wait("/hook", 2)[1]
    assert len(two.headers["webhook-signature"].split(" ")) == 2
    assert verified(first, two)
    assert verified(second, two)

    clock.advance(3601)  # the overlap of the first secret is over
    assert broker.send(event(3)).status_code == 202
    three = sink.wait("/hook", 3)[2]
    assert verified(second, three)
    assert not verified(first, three)


@pytest.mark.parametrize(
    ("value", "detail"),
    [("whsec_AAAA", "24 to 64 bytes"), ("hunter2-value", "starts with 'whsec_'"), (42, "must be a string")],
)
def test_a_bad_secret_is_refused_without_echoing_it(
    broker: Broker, sink: Sink, value: object, detail: str
) -> None:
    r = broker.http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/x", "protocolsettings": {"webhooksecret": value}},
    )
    assert r.status_code == 400
    [error] = r.json()["errors"]
    assert error["pointer"] == "/protocolsettings/webhooksecret"
    assert detail in error["detail"]
    if isinstance(value, str):
        assert value not in r.text
