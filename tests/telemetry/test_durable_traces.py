"""The trace context is kept with the event in the durable log: every delivery attempt joins the
publish's trace, across retries, a broker restart (a real ``cebroker serve`` configured by the
standard ``OTEL_*`` variables), a redrive and a replay."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from pipeline.backends import backend, database, start_broker
from support.broker import Broker, BrokerProcesses
from support.otlp import Receiver, served_receiver
from support.sinks import Reply, Sink
from support.waiting import wait_for

__all__ = ["backend", "database", "start_broker"]  # fixtures, used by name

TRACE_ID = "6bf92f3577b34da6a3ce929d0e0e4738"
PRODUCER_SPAN = "20f067aa0ba902b9"
TRACEPARENT = f"00-{TRACE_ID}-{PRODUCER_SPAN}-01"
STRUCTURED = {"content-type": "application/cloudevents+json", "traceparent": TRACEPARENT}


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    with served_receiver() as found:
        yield found


def event(number: int) -> dict[str, object]:
    return {"specversion": "1.0", "id": f"d{number}", "source": "/tests", "type": "t.durable"}


def test_attempts_before_and_after_a_restart_are_in_the_publish_trace(
    receiver: Receiver, broker_processes: BrokerProcesses, tmp_path: Path, sink: Sink
) -> None:
    sink.scripts["/hook"] = [Reply(500), Reply(500)]  # then 200
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "restarted-broker",
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }
    broker = broker_processes(tmp_path / "b.db", "broker.log", "--webhook-validation", "off", env=env)
    broker.start().ready()

    with httpx.Client(base_url=broker.url, timeout=10) as http:
        created = http.post(
            "/subscriptions",
            json={"protocol": "HTTP", "sink": f"{sink.url}/hook", "config": {"initialdelay": "1.5"}},
        )
        assert created.status_code == 201, created.text
        assert http.post("/events", json=event(1), headers=STRUCTURED).status_code == 202
    sink.wait("/hook", 2, timeout=30)
    # The third attempt is due about three seconds after the second: restart before it.
    restarted = time.monotonic()
    broker.terminate()
    broker.start().ready()
    [*_, third] = sink.wait("/hook", 3, timeout=30)
    assert third.at > restarted, "the third attempt came before the restart"

    [publish] = receiver.wait_spans(TRACE_ID, "publish", 1)
    assert publish.parent_id == PRODUCER_SPAN
    spans = sorted(
        receiver.wait_spans(TRACE_ID, "send HTTP", 3, timeout=30),
        key=lambda s: int(str(s.attributes["cebroker.delivery.attempt"])),
    )
    assert [s.attributes["cebroker.delivery.attempt"] for s in spans] == [1, 2, 3]
    assert [s.attributes["cebroker.delivery.outcome"] for s in spans] == ["retry", "retry", "delivered"]
    assert [s.attributes.get("cebroker.delivery.status_code") for s in spans] == [500, 500, None]
    for span in spans:
        assert span.parent_id == publish.span_id
        assert (TRACE_ID, publish.span_id) in span.links
        assert span.service == "restarted-broker"
    assert third.headers["traceparent"] == f"00-{TRACE_ID}-{spans[2].span_id}-01"


def test_a_redriven_and_a_replayed_delivery_join_the_original_trace(
    receiver: Receiver, start_broker: Callable[..., Broker], sink: Sink
) -> None:
    """On both backends (PostgreSQL's claims return the stored context too)."""
    broker = start_broker(otel_exporter_otlp_endpoint=receiver.url)
    sink.scripts["/hook"] = [Reply(422)]  # a final refusal: a dead letter at once
    subscription = broker.subscribe(f"{sink.url}/hook", source="/tests")  # not the registry's own events
    since = time.time() - 1
    assert broker.http.post("/events", json=event(2), headers=STRUCTURED).status_code == 202
    [publish] = receiver.wait_spans(TRACE_ID, "publish", 1)
    [dead] = receiver.wait_spans(TRACE_ID, "dead_letter", 1)
    [first] = receiver.wait_spans(TRACE_ID, "send HTTP", 1)
    assert dead.parent_id == first.span_id
    assert first.attributes["cebroker.delivery.outcome"] == "deadlettered"

    redriven = broker.http.post(f"/subscriptions/{subscription['id']}/deadletters/redrive")
    assert redriven.status_code == 202, redriven.text
    sink.wait("/hook", 2)
    spans = receiver.wait_spans(TRACE_ID, "send HTTP", 2)
    again = next(s for s in spans if s.span_id != first.span_id)
    assert again.parent_id == publish.span_id
    assert again.attributes["cebroker.delivery.outcome"] == "delivered"

    until = time.time() + 1
    started = broker.http.post(
        f"/subscriptions/{subscription['id']}/replay",
        json={"from": _rfc3339(since), "to": _rfc3339(until)},
    )
    assert started.status_code == 202, started.text
    replay_id = started.json()["replay"]
    [*_, replayed] = sink.wait("/hook", 3)
    assert replayed.headers["ce-replayid"] == replay_id
    spans = wait_for(
        lambda: [
            s for s in receiver.in_trace(TRACE_ID) if s.attributes.get("cebroker.replay.id") == replay_id
        ],
        lambda found: any(s.name == "send HTTP" for s in found),
        20.0,
        "the replayed delivery's attempt span",
    )
    attempt = next(s for s in spans if s.name == "send HTTP")
    assert attempt.parent_id == publish.span_id
    assert replayed.headers["traceparent"] == f"00-{TRACE_ID}-{attempt.span_id}-01"
    assert attempt.attributes["cebroker.subscription.id"] == subscription["id"]
    [step] = [s for s in receiver.named("replay") if s.attributes["cebroker.replay.id"] == replay_id]
    assert step.attributes["cebroker.replay.queued"] == 1


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")
