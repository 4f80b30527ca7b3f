"""``/metrics`` (Prometheus text format) and ``/subscriptions/{id}/status`` (issue "Observability")."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from support.broker import Broker
from support.events import event
from support.sinks import Reply, Sink
from support.waiting import wait_for, wait_until


def _value(text: str, sample: str) -> float:
    """A sample's value; a labelled counter not yet incremented is absent, i.e. zero."""
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def test_metrics_count_events_matches_outcomes_and_latency(broker: Broker, sink: Sink) -> None:
    """Counters move with traffic: events in, matches, deliveries by outcome, dead letters, latency."""
    # Other parts (the registry) may ingest events of their own: count from a baseline.
    before = broker.http.get("/metrics").text
    accepted = 'cebroker_events_received_total{outcome="accepted"}'
    matches = "cebroker_event_matches_total"
    ok = broker.subscribe(f"{sink.url}/m-ok", types=["com.example.test"])
    bad = broker.subscribe(f"{sink.url}/m-bad", types=["com.example.test"])
    sink.default["/m-bad"] = Reply(400)
    for i in range(4):
        broker.send(event(i))
    broker.send(event(0))  # duplicate
    sink.wait("/m-ok", 4)
    wait_until(lambda: len(broker.http.get(f"/subscriptions/{bad['id']}/deadletters").json()["items"]) == 4)
    broker.settled()  # the sink has a delivery before the broker counts it
    r = broker.http.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert _value(text, accepted) - _value(before, accepted) == 4
    assert _value(text, 'cebroker_events_received_total{outcome="duplicate"}') == 1
    assert _value(text, matches) - _value(before, matches) == 8
    sub_ok, sub_bad = ok["id"], bad["id"]
    delivered = f'cebroker_deliveries_total{{outcome="delivered",subscription="{sub_ok}"}}'
    assert _value(text, delivered) == 4
    assert _value(text, f'cebroker_dead_letters_total{{subscription="{sub_bad}"}}') == 4
    assert _value(text, f'cebroker_delivery_latency_seconds_count{{subscription="{sub_ok}"}}') == 4
    assert "cebroker_delivery_backlog" in text
    assert "cebroker_delivery_queue_depth" in text


def test_two_brokers_in_one_process_keep_separate_metrics(
    make_broker: Callable[..., Broker], tmp_path: Path
) -> None:
    """Each app instance has its own registry (no duplicate-timeseries clash, no shared counts)."""
    first = make_broker(db=tmp_path / "one.db")
    second = make_broker(db=tmp_path / "two.db")
    accepted = 'cebroker_events_received_total{outcome="accepted"}'
    one, two = (
        _value(first.http.get("/metrics").text, accepted),
        _value(second.http.get("/metrics").text, accepted),
    )
    first.send(event(1))
    first.send(event(2))
    second.send(event(1))
    assert _value(first.http.get("/metrics").text, accepted) - one == 2
    assert _value(second.http.get("/metrics").text, accepted) - two == 1


def test_status_counts_and_last_error(broker: Broker, sink: Sink) -> None:
    """Status reports delivered, failed, pending, dead-lettered and the last error."""
    sub = broker.subscribe(f"{sink.url}/st", config={"initialdelay": "0.05"})
    sink.scripts["/st"] = [Reply(502), Reply(200), Reply(403)]
    broker.send(event(1))
    sink.wait("/st", 2)
    broker.send(event(2))
    url = f"/subscriptions/{sub['id']}/status"
    status = wait_for(
        lambda: broker.http.get(url).json(), lambda status: status["deadlettered"], message="a dead letter"
    )
    assert status["delivered"] == 1
    assert status["failed"] == 2
    assert status["pending"] == 0
    assert "403" in status["lastError"]
