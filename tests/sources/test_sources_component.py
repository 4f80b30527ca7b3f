"""The ingress sources component: receivers feed the Ingestor; what it refuses as invalid is
dropped (counted) without stopping the source; when it is overloaded the events come again.
Runs against a real mosquitto with a recording Ingestor."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import paho.mqtt.publish as publish
import pytest
from ceprotocols.errors import SettingsError
from ceprotocols.tracecontext import TraceContext
from servers import MosquittoServer
from support.waiting import async_wait_until

from cebroker.contracts import Event, Ingestor, IngestResult
from cebroker.errors import FieldProblem, Overloaded, ValidationError
from cebroker.sources import SourcesComponent

pytestmark = pytest.mark.mqtt


class RecordingIngestor:
    """Stores events in memory; refuses type ``bad`` as invalid; overloaded ``busy`` times."""

    def __init__(self, busy: int = 0) -> None:
        self.events: list[Event] = []
        self.busy = busy
        self.calls = 0

    async def ingest(
        self, events: Sequence[Event], traces: Sequence[TraceContext | None] = ()
    ) -> IngestResult:
        self.calls += 1
        if self.busy:
            self.busy -= 1
            raise Overloaded("backlog full", retry_after=0.1)
        bad = [i for i, e in enumerate(events) if e["type"] == "bad"]
        if bad:
            raise ValidationError([FieldProblem(f"/{i}/type", "not accepted") for i in bad])
        self.events.extend(events)
        return IngestResult(accepted=len(events), duplicates=0)


def ce(n: int, type_: str = "com.example.t") -> bytes:
    return json.dumps(
        {"specversion": "1.0", "id": f"id-{n}", "source": "/s", "type": type_, "data": n}
    ).encode()


async def test_source_feeds_the_ingestor_and_skips_invalid_events(mosquitto: MosquittoServer) -> None:
    """Valid events reach ``Ingestor.ingest``; an event it refuses is dropped and counted."""
    ingestor = RecordingIngestor()
    assert isinstance(ingestor, Ingestor)
    component = SourcesComponent([f"{mosquitto.url}/component/one?version=3"], ingestor)
    await component.start()
    try:
        [receiver] = component.receivers
        await async_wait_until(lambda: receiver.stats.subscribed)
        for payload in (ce(1), ce(2, "bad"), b"not json", ce(3)):
            await asyncio.to_thread(publish.single, "component/one", payload, qos=1, port=mosquitto.port)
        await async_wait_until(lambda: len(ingestor.events) == 2)
        assert [e["id"] for e in ingestor.events] == ["id-1", "id-3"]
        await async_wait_until(lambda: receiver.stats.invalid == 2)
    finally:
        await component.stop()


async def test_overloaded_ingestor_gets_the_events_again(mosquitto: MosquittoServer) -> None:
    """Overloaded (503) is transient: the events are handed over again, none is lost."""
    ingestor = RecordingIngestor(busy=3)
    component = SourcesComponent([f"{mosquitto.url}/component/two"], ingestor)
    await component.start()
    try:
        [receiver] = component.receivers
        await async_wait_until(lambda: receiver.stats.subscribed)
        await asyncio.to_thread(publish.single, "component/two", ce(7), qos=1, port=mosquitto.port)
        await async_wait_until(lambda: len(ingestor.events) == 1)
        assert ingestor.calls == 4
    finally:
        await component.stop()


async def test_bad_source_url_fails_the_start() -> None:
    """A source that cannot be consumed stops the broker from starting, naming the URL."""
    component = SourcesComponent(["mqtt://127.0.0.1:1883"], RecordingIngestor())
    with pytest.raises(SettingsError, match="topic filter"):
        await component.start()
    await component.stop()


def test_cli_sources_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--source`` is repeatable; CEBROKER_SOURCES is space-separated; the flag wins."""
    from cebroker.cli import build_parser, settings_from_args

    monkeypatch.setenv("CEBROKER_SOURCES", "nats://h:4222/a mqtt://h/b/#")
    assert settings_from_args(build_parser().parse_args(["serve"])).sources == (
        "nats://h:4222/a",
        "mqtt://h/b/#",
    )
    args = build_parser().parse_args(
        ["serve", "--source", "kafka://h:9092/t?group=g", "--source", "amqp://h/queue/q"]
    )
    assert settings_from_args(args).sources == ("kafka://h:9092/t?group=g", "amqp://h/queue/q")


async def test_source_counters_are_prometheus_metrics(mosquitto: MosquittoServer) -> None:
    """Received, accepted and invalid counts per source are exported to the metrics registry,
    labelled with the source's name (a URL may carry credentials)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    ingestor = RecordingIngestor()
    source = f"{mosquitto.url}/component/three?version=3"
    component = SourcesComponent([source], ingestor, metrics=registry)
    await component.start()
    try:
        [receiver] = component.receivers
        await async_wait_until(lambda: receiver.stats.subscribed)
        for payload in (ce(1), b"{broken"):
            await asyncio.to_thread(publish.single, "component/three", payload, qos=1, port=mosquitto.port)
        await async_wait_until(lambda: receiver.stats.received == 2)
        text = generate_latest(registry).decode()
        assert 'cebroker_source_accepted_total{source="mqtt-1"} 1.0' in text
        assert 'cebroker_source_invalid_total{source="mqtt-1"} 1.0' in text
        assert 'cebroker_source_subscribed{source="mqtt-1"} 1.0' in text
        assert 'cebroker_source_restarts_total{source="mqtt-1"} 0.0' in text
    finally:
        await component.stop()


def test_source_names() -> None:
    """``?name=`` names a source, else its scheme and position; names are checked and unique."""
    from cebroker.sources.component import source_names

    urls = ["mqtt://h/a", "kafka://h:9092/t?name=orders&group=g", "amqp://u:p@h/queue/q"]
    assert source_names(urls) == ["mqtt-1", "orders", "amqp-3"]
    with pytest.raises(SettingsError, match="already taken"):
        source_names(["mqtt://h/a?name=x", "nats://h/b?name=x"])
    with pytest.raises(SettingsError, match="name must be"):
        source_names(["mqtt://h/a?name=Not%20OK"])


def test_cli_rejects_a_source_it_cannot_consume(tmp_path: Any) -> None:
    """``cebroker serve --source`` with an unusable URL is a usage error (exit 2) naming it."""
    import subprocess
    import sys

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cebroker",
            "serve",
            "--db",
            str(tmp_path / "b.db"),
            "--source",
            "kafka://127.0.0.1:9092",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "argument --source" in result.stderr
    assert "kafka://127.0.0.1:9092" in result.stderr
