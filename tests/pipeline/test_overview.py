"""``GET /status`` and ``GET /status/subscriptions`` on a real broker: counts that follow what
happened (events in, deliveries, dead letters) and each subscription's health."""

from __future__ import annotations

from typing import Any

from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_for, wait_until


def test_overview_and_health_follow_deliveries(broker: Broker, sink: Sink) -> None:
    sink.default["/bad"] = Reply(status=400, body=b"refused")
    good = broker.subscribe(f"{sink.url}/good", types=["com.example.test"])
    bad = broker.subscribe(f"{sink.url}/bad", types=["com.example.test"])
    before = broker.http.get("/status").json()
    assert before["subscriptions"] == 2
    # (the broker may announce changes of its own as events too: compare with the counts before)
    for n in range(3):
        assert broker.send(event(n)).status_code == 202
    assert broker.send(event(0)).status_code == 202  # a duplicate
    assert broker.send({"specversion": "1.0"}).status_code == 400
    sink.wait("/good", 3)

    after: dict[str, Any] = wait_for(
        lambda: broker.http.get("/status").json(),
        lambda doc: doc["deliveries"]["deadlettered"] == 3 and doc["backlog"] == 0,
        message="three dead letters and no backlog",
    )
    grown = {k: after["events"][k] - before["events"][k] for k in after["events"]}
    assert grown == {"accepted": 3, "duplicates": 1, "rejected": 1, "matched": 6}
    assert after["deliveries"] == {"delivered": 3, "retried": 0, "deadlettered": 3}
    assert after["deadletters"] == 3
    r = broker.http.get("/status/subscriptions")
    assert r.status_code == 200
    assert r.headers["cache-control"] == "no-store"
    items = {item["id"]: item for item in r.json()["items"]}
    assert list(items) == [good["id"], bad["id"]]
    assert items[good["id"]]["delivered"] == 3
    assert items[good["id"]]["lastDeliveredAt"] is not None
    assert items[good["id"]]["lastError"] is None
    assert items[bad["id"]]["deadlettered"] == 3
    assert items[bad["id"]]["lastDeliveredAt"] is None
    assert "400" in items[bad["id"]]["lastError"]
    assert items[bad["id"]]["protocol"] == "HTTP"
    assert items[bad["id"]]["sink"] == f"{sink.url}/bad"
    # The sink recovers before the redrive: a redriven delivery may be attempted at once.
    sink.default["/bad"] = Reply(status=200)
    assert broker.http.post(f"/subscriptions/{bad['id']}/deadletters/redrive").status_code == 202
    wait_until(lambda: broker.http.get("/status").json()["deadletters"] == 0)
