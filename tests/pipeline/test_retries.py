"""Retries, Retry-After, timeouts, dead letters and their re-drive.

Issue "HTTP delivery": success is 2xx; 5xx, 408, 429, connection errors and timeouts are retried
(honouring Retry-After); other 4xx go straight to the dead letter. HTTP Webhook spec 2.2: 429
comes with Retry-After, which the sender MUST honour.
"""

from __future__ import annotations

import time

from pipeline.helpers import Broker, event
from pipeline.servers import Reply, Sink, wait_until

FAST = {"initialdelay": "0.05", "maxdelay": "0.2"}


def test_5xx_is_retried_until_success(broker: Broker, sink: Sink) -> None:
    """Two 503s then 200: three attempts, one success, no dead letter."""
    sub = broker.subscribe(f"{sink.url}/flaky", config=FAST)
    sink.scripts["/flaky"] = [Reply(503), Reply(500)]
    assert broker.send(event(1)).status_code == 202
    got = sink.wait("/flaky", 3)
    assert [g.headers["ce-id"] for g in got] == ["e-1"] * 3
    status = wait_until(
        lambda: (s := broker.http.get(f"/subscriptions/{sub['id']}/status").json())["delivered"] and s
    )
    assert status["failed"] == 2
    assert status["pending"] == 0
    assert status["deadlettered"] == 0
    assert "500" in status["lastError"]


def test_4xx_goes_to_the_dead_letter_and_redrive_delivers_it(broker: Broker, sink: Sink) -> None:
    """A 400 is final: one attempt, a dead letter with status and body; redrive re-delivers."""
    sub = broker.subscribe(f"{sink.url}/reject", config=FAST)
    sink.scripts["/reject"] = [Reply(400, body=b"bad payload")]
    assert broker.send(event(7)).status_code == 202
    sink.wait("/reject", 1)
    url = f"/subscriptions/{sub['id']}/deadletters"
    page = wait_until(lambda: broker.http.get(url).json()["items"])
    (dead,) = page
    assert dead["status"] == "400"
    assert dead["body"] == "bad payload"
    assert dead["attempts"] == 1
    assert dead["event"]["id"] == "e-7"
    assert "400" in dead["lastError"]
    assert dead["failedAt"].endswith("Z")
    assert dead["acceptedAt"] <= dead["failedAt"]
    time.sleep(0.3)
    assert len(sink.at("/reject")) == 1  # not retried
    r = broker.http.post(f"{url}/redrive")
    assert r.status_code == 202
    assert r.json() == {"redriven": 1}
    got = sink.wait("/reject", 2)
    assert got[1].headers["ce-id"] == "e-7"
    assert broker.http.get(url).json()["items"] == []


def test_redrive_of_selected_ids_and_unknown_subscription(broker: Broker, sink: Sink) -> None:
    """Redrive picks the listed ids; status/dead letters of an unknown subscription are 404."""
    sub = broker.subscribe(f"{sink.url}/gone", config=FAST)
    sink.default["/gone"] = Reply(410)
    for i in range(3):
        broker.send(event(i))
    url = f"/subscriptions/{sub['id']}/deadletters"
    items = wait_until(lambda: len(page := broker.http.get(url).json()["items"]) == 3 and page)
    sink.default.pop("/gone")
    first = items[0]["id"]
    assert broker.http.post(f"{url}/redrive", json={"ids": [first]}).json() == {"redriven": 1}
    sink.wait("/gone", 4)
    assert len(broker.http.get(url).json()["items"]) == 2
    assert broker.http.post(f"{url}/redrive", json={"ids": "all"}).status_code == 400
    assert broker.http.get("/subscriptions/nope/status").status_code == 404
    assert broker.http.get("/subscriptions/nope/deadletters").status_code == 404


def test_retry_after_is_honoured(broker: Broker, sink: Sink) -> None:
    """A 429 with Retry-After: 1 delays the next attempt by at least a second."""
    broker.subscribe(f"{sink.url}/busy", config=FAST)
    sink.scripts["/busy"] = [Reply(429, headers={"Retry-After": "1"})]
    started = time.monotonic()
    broker.send(event(1))
    sink.wait("/busy", 2)
    assert time.monotonic() - started >= 1.0


def test_sink_slower_than_the_timeout_is_retried(broker: Broker, sink: Sink) -> None:
    """An attempt that exceeds the subscription's timeout counts as failed and is retried."""
    sub = broker.subscribe(f"{sink.url}/slow", config={**FAST, "timeout": "0.3"})
    sink.scripts["/slow"] = [Reply(200, delay=1.5)]
    broker.send(event(1))
    sink.wait("/slow", 2)
    status = wait_until(
        lambda: (s := broker.http.get(f"/subscriptions/{sub['id']}/status").json())["delivered"] and s
    )
    assert status["failed"] == 1
    assert "within 0.3" in status["lastError"]


def test_unreachable_sink_gives_up_after_max_attempts(broker: Broker) -> None:
    """Connection errors are retried; after ``maxattempts`` the event is a dead letter."""
    sub = broker.subscribe("http://127.0.0.1:9/nothing", config={**FAST, "maxattempts": "3"})
    broker.send(event(1))
    url = f"/subscriptions/{sub['id']}/deadletters"
    (dead,) = wait_until(lambda: broker.http.get(url).json()["items"])
    assert dead["attempts"] == 3
    assert dead["status"] is None
    assert "gave up after 3 attempts" in dead["lastError"]


def test_dead_letter_sink_receives_a_copy(broker: Broker, sink: Sink) -> None:
    """``config.deadlettersink`` gets the dead-lettered event with the reason as extensions."""
    broker.subscribe(f"{sink.url}/no", config={**FAST, "deadlettersink": f"{sink.url}/dls"})
    sink.default["/no"] = Reply(404)
    broker.send(event(5))
    (copy,) = sink.wait("/dls", 1)
    import json

    doc = json.loads(copy.body)
    assert doc["id"] == "e-5"
    assert doc["deadletterstatus"] == "404"
    assert doc["deadletterattempts"] == 1


def test_a_failing_sink_does_not_delay_another_subscription(broker: Broker, sink: Sink) -> None:
    """Isolation: a sink that hangs does not hold up a healthy subscription's deliveries."""
    broker.subscribe(f"{sink.url}/hang", config={"timeout": "5", "concurrency": "1"})
    broker.subscribe(f"{sink.url}/ok")
    sink.default["/hang"] = Reply(200, delay=5)
    started = time.monotonic()
    for i in range(10):
        broker.send(event(i))
    sink.wait("/ok", 10)
    assert time.monotonic() - started < 3


def test_concurrency_and_rate_limit_per_subscription(broker: Broker, sink: Sink) -> None:
    """``config.concurrency`` bounds deliveries in flight; ``config.ratelimit`` paces them."""
    sink.default["/one"] = Reply(200, delay=0.1)
    broker.subscribe(f"{sink.url}/one", types=["one"], config={"concurrency": "1"})
    broker.subscribe(f"{sink.url}/paced", types=["paced"], config={"ratelimit": "10"})
    for i in range(6):
        broker.send(event(i, type="one"))
    sink.wait("/one", 6)
    assert sink.max_inflight == 1
    started = time.monotonic()
    for i in range(15):
        broker.send(event(100 + i, type="paced"))
    sink.wait("/paced", 15)
    # A full bucket holds 10; the 15th delivery needs 10 + 10 * t >= 15 tokens, so t >= 0.5 s.
    assert time.monotonic() - started >= 0.45
