"""Transformed events checked against the registry's message definitions (``--event-validation``):
with ``enforce`` an output that differs from the definition of its type is a dead letter naming
the violation, and explain shows the same failure for a sample event before anything is sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from support.broker import Broker
from support.shared import XREGISTRY_SAMPLES
from support.sinks import Sink
from support.waiting import wait_until

from registry.support import SCENARIOS

#: Builds a Contoso reservation from a shop's order event; ``total`` comes from the order.
TO_RESERVATION = (
    '{"type": "Contoso.ERP.ReservationPlaced", "source": "/erp/acme/orders",'
    ' "subject": "res-" + string(event.data.n), "time": "2026-01-01T10:00:00Z",'
    ' "datacontenttype": "application/json",'
    ' "data": {"orderId": "o-" + string(event.data.n), "customerId": "c-1",'
    ' "total": event.data.total, "items": []}}'
)


def order(n: int, total: float) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"o-{n}",
        "source": "/shop",
        "type": "com.example.order",
        "datacontenttype": "application/json",
        "data": {"n": n, "total": total},
    }


@XREGISTRY_SAMPLES.needed
def test_an_output_that_breaks_its_definition_is_a_dead_letter(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(event_validation="enforce")
    doc = json.loads((SCENARIOS / "contoso-erp-jsons07.xreg.json").read_text())
    assert broker.http.post("/", json=doc).status_code == 200
    sub = broker.subscribe(
        f"{sink.url}/erp",
        source="/shop",
        protocolsettings={"contentmode": "structured"},
        config={"transform": {"cel": TO_RESERVATION}},
    )
    shown = broker.http.post(f"/subscriptions/{sub['id']}/explain", json=order(9, -1)).json()
    assert shown["transform"]["outcome"] == "failed"
    assert "/data/total" in shown["transform"]["error"]["reason"]
    assert broker.send(order(1, 10.5)).status_code == 202
    assert broker.send(order(2, -1)).status_code == 202
    (got,) = sink.wait("/erp", 1)
    assert json.loads(got.body)["data"]["orderId"] == "o-1"
    (dead,) = wait_until(lambda: broker.http.get(f"/subscriptions/{sub['id']}/deadletters").json()["items"])
    assert dead["event"] == order(2, -1)
    assert "differs from its definition" in dead["lastError"]
    assert "/data/total" in dead["lastError"]
