"""MQTT sources with a persistent session are at-least-once across broker restarts: the source
is stopped, events are published meanwhile, the broker restarts and every event arrives. With a
clean session (the default) those events are lost, which the docs name as a limit; the second
case shows it, waiting for a marker published after the restart before looking."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import paho.mqtt.client as mqtt
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from servers import MosquittoServer
from support.servers import ServerThread
from support.sinks import Sink, served_sink

from cebroker.app import create_app
from cebroker.settings import Settings
from protocols.harness import unique_name

pytestmark = pytest.mark.mqtt


def _event(event_id: str) -> bytes:
    return f'{{"specversion":"1.0","id":"{event_id}","source":"/mqtt","type":"session.test"}}'.encode()


def _publish(server: MosquittoServer, topic: str, ids: list[str]) -> None:
    client = mqtt.Client(CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.connect(server.host, server.port)
    client.loop_start()
    try:
        for event_id in ids:
            client.publish(topic, _event(event_id), qos=1).wait_for_publish(10)
    finally:
        client.loop_stop()
        client.disconnect()


def _until(check: Callable[[], Any], what: str, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _subscribed(http: httpx.Client) -> bool:
    return 'cebroker_source_subscribed{source="mqtt-1"} 1.0' in http.get("/metrics").text


@pytest.fixture
def sink() -> Iterator[Sink]:
    with served_sink() as recorder:
        yield recorder


@pytest.mark.parametrize("version", ["5", "3"])
@pytest.mark.parametrize("session", ["persistent", "clean"])
def test_events_published_while_the_broker_is_down(
    mosquitto: MosquittoServer, tmp_path: Path, sink: Sink, session: str, version: str
) -> None:
    topic = unique_name("session")
    source = f"{mosquitto.url}/{topic}?qos=1&version={version}&session={session}&clientid=c-{topic}"
    settings = Settings(db=tmp_path / "b.db", sources=(source,), webhook_validation=False)
    ids = [f"away-{n}" for n in range(20)]
    with ServerThread(create_app(settings)) as first, httpx.Client(base_url=first.url, timeout=30) as http:
        sub = {"protocol": "HTTP", "sink": f"{sink.url}/in", "types": ["session.test"]}
        assert http.post("/subscriptions", json=sub).status_code == 201
        _until(lambda: _subscribed(http), "the source to subscribe")
    # The broker is down: only the MQTT server can keep these for the source.
    _publish(mosquitto, topic, ids)
    with ServerThread(create_app(settings)) as second, httpx.Client(base_url=second.url, timeout=30) as http:
        _until(lambda: _subscribed(http), "the source to subscribe again")
        _publish(mosquitto, topic, ["marker"])
        _until(lambda: "marker" in {r.headers["ce-id"] for r in sink.at("/in")}, "the marker")
        if session == "persistent":
            _until(lambda: {r.headers["ce-id"] for r in sink.at("/in")} >= set(ids), "every event")
        else:
            assert not {r.headers["ce-id"] for r in sink.at("/in")} & set(ids)
