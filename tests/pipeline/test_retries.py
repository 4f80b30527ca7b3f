"""Retries, Retry-After, timeouts, dead letters and their re-drive.

Issue "HTTP delivery": success is 2xx; 5xx, 408, 429, connection errors and timeouts are retried
(honouring Retry-After); other 4xx go straight to the dead letter. HTTP Webhook spec 2.2: 429
comes with Retry-After, which the sender MUST honour.

Where a test is about time (a retry not yet due, a rate limit), the broker runs on a
:class:`ManualClock` that the test advances, and "nothing happened" is shown by a marker: with
``concurrency`` 1 a subscription delivers in order, so when an event sent afterwards arrives,
anything due before it has arrived first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from support.broker import Broker
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_for, wait_until

from pipeline.clocks import ManualClock

FAST = {"initialdelay": "0.05", "maxdelay": "0.2"}
IN_ORDER = {**FAST, "concurrency": "1"}


def ids(received: list[Received]) -> list[str]:
    return [r.headers["ce-id"] for r in received]


def test_5xx_is_retried_until_success(broker: Broker, sink: Sink) -> None:
    """Two 503s then 200: three attempts, one success, no dead letter."""
    sub = broker.subscribe(f"{sink.url}/flaky", config=FAST)
    sink.scripts["/flaky"] = [Reply(503), Reply(500)]
    assert broker.send(event(1)).status_code == 202
    got = sink.wait("/flaky", 3)
    assert [g.headers["ce-id"] for g in got] == ["e-1"] * 3
    status = wait_for(lambda: broker.status(sub), lambda status: status["delivered"], message="a delivery")
    assert status["failed"] == 2
    assert status["pending"] == 0
    assert status["deadlettered"] == 0
    assert "500" in status["lastError"]


def test_4xx_goes_to_the_dead_letter_and_redrive_delivers_it(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    """A 400 is final: one attempt, a dead letter with status and body; redrive re-delivers."""
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sub = broker.subscribe(f"{sink.url}/reject", config=IN_ORDER)
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
    # Not retried: nothing is pending, and after an hour on the broker's clock the next request
    # is the marker sent then.
    assert broker.status(sub)["pending"] == 0
    clock.advance(3600)
    broker.send(event(8))
    assert ids(sink.wait("/reject", 2)) == ["e-7", "e-8"]
    r = broker.http.post(f"{url}/redrive")
    assert r.status_code == 202
    assert r.json() == {"redriven": 1}
    assert ids(sink.wait("/reject", 3)) == ["e-7", "e-8", "e-7"]
    assert broker.http.get(url).json()["items"] == []


def test_redrive_of_selected_ids_and_unknown_subscription(broker: Broker, sink: Sink) -> None:
    """Redrive picks the listed ids; status/dead letters of an unknown subscription are 404."""
    sub = broker.subscribe(f"{sink.url}/gone", config=FAST)
    sink.default["/gone"] = Reply(410)
    for i in range(3):
        broker.send(event(i))
    url = f"/subscriptions/{sub['id']}/deadletters"
    items = wait_for(
        lambda: broker.http.get(url).json()["items"], lambda page: len(page) == 3, message="3 dead letters"
    )
    sink.default.pop("/gone")
    first = items[0]["id"]
    assert broker.http.post(f"{url}/redrive", json={"ids": [first]}).json() == {"redriven": 1}
    sink.wait("/gone", 4)
    assert len(broker.http.get(url).json()["items"]) == 2
    assert broker.http.post(f"{url}/redrive", json={"ids": "all"}).status_code == 400
    assert broker.http.get("/subscriptions/nope/status").status_code == 404
    assert broker.http.get("/subscriptions/nope/deadletters").status_code == 404


def test_retry_after_is_honoured(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """A 429 with Retry-After: 1 delays the next attempt by a second, not by the backoff
    (at most 0.05 s here): 0.9 s later on the broker's clock a marker goes out first."""
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sub = broker.subscribe(f"{sink.url}/busy", config=IN_ORDER)
    sink.scripts["/busy"] = [Reply(429, headers={"Retry-After": "1"})]
    broker.send(event(1))
    sink.wait("/busy", 1)
    wait_until(lambda: broker.status(sub)["failed"] == 1)  # the retry is scheduled
    clock.advance(0.9)
    broker.send(event(2))
    assert ids(sink.wait("/busy", 2)) == ["e-1", "e-2"]
    clock.advance(0.2)
    assert ids(sink.wait("/busy", 3)) == ["e-1", "e-2", "e-1"]


def test_sink_slower_than_the_timeout_is_retried(broker: Broker, sink: Sink) -> None:
    """An attempt that exceeds the subscription's timeout counts as failed and is retried."""
    sub = broker.subscribe(f"{sink.url}/slow", config={**FAST, "timeout": "0.3"})
    sink.scripts["/slow"] = [Reply(200, delay=1.5)]
    broker.send(event(1))
    sink.wait("/slow", 2)
    status = wait_for(lambda: broker.status(sub), lambda status: status["delivered"], message="a delivery")
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


@pytest.mark.alone  # a bound of 3 s on the wall clock for ten events
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


def test_concurrency_and_rate_limit_per_subscription(make_broker: Callable[..., Broker], sink: Sink) -> None:
    """``config.concurrency`` bounds deliveries in flight; ``config.ratelimit`` paces them on the
    broker's clock: a full bucket of 10, then 10 more per second."""
    clock = ManualClock()
    broker = make_broker(clock=clock)
    sink.default["/one"] = Reply(200, delay=0.1)
    broker.subscribe(f"{sink.url}/one", types=["one"], config={"concurrency": "1"})
    broker.subscribe(f"{sink.url}/paced", types=["paced"], config={"ratelimit": "10"})
    for i in range(6):
        broker.send(event(i, type="one"))
    sink.wait("/one", 6)
    assert sink.max_inflight == 1
    for i in range(15):
        broker.send(event(100 + i, type="paced"))
    sink.wait("/paced", 10)
    # The bucket is empty: the next delivery waits a tenth of a second for a token, on a clock
    # that stands still (the loader's own sleep is a second long, so it is not counted).
    wait_until(lambda: clock.sleeping(within=0.5) >= 1)
    assert len(sink.at("/paced")) == 10
    clock.advance(0.45)  # 4.5 tokens: four more deliveries, then the fifth waits again
    sink.wait("/paced", 14)
    wait_until(lambda: clock.sleeping(within=0.5) >= 1)
    assert len(sink.at("/paced")) == 14
    clock.advance(0.1)
    sink.wait("/paced", 15)
