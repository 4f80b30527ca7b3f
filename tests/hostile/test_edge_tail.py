"""The live tail's Server-Sent Events match the OpenAPI document the broker serves (issue:
hardening, finding 11): every message of a real stream (``ready``, ``cloudevent`` for events
in binary and structured mode, with data, base64 data and extensions, and ``dropped`` once the
reader falls behind) has an event name the document lists under ``x-events`` and a ``data``
valid against the schema given there."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import httpx
import jsonschema
from httpx_sse import EventSource, ServerSentEvent
from support.broker import Broker
from support.events import event
from support.waiting import wait_until

BATCH = {"content-type": "application/cloudevents-batch+json"}


def _event_schemas(document: dict[str, Any]) -> dict[str, Any]:
    """Event name -> schema of its data, each resolving its references in ``document``."""
    media = document["paths"]["/subscriptions/{id}/tail"]["get"]["responses"]["200"]["content"]
    events = media["text/event-stream"]["x-events"]
    return {name: {**schema, "components": document["components"]} for name, schema in events.items()}


def test_every_tail_message_matches_its_schema(make_broker: Callable[..., Broker]) -> None:
    broker = make_broker()
    schemas = _event_schemas(broker.http.get("/openapi.json").json())
    assert set(schemas) == {"ready", "cloudevent", "dropped"}
    sub = broker.subscribe("http://127.0.0.1:9/none", source="/tests")
    messages: list[ServerSentEvent] = []
    stop = threading.Event()
    go_on = threading.Event()

    def read() -> None:
        url = f"{broker.url}/subscriptions/{sub['id']}/tail"
        with httpx.stream("GET", url, timeout=httpx.Timeout(30, read=None)) as response:
            assert response.status_code == 200
            for message in EventSource(response).iter_sse():
                messages.append(message)
                if message.event == "ready":
                    go_on.wait(30)  # fall behind while a large batch is accepted
                if stop.is_set():
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_until(lambda: any(m.event == "ready" for m in messages))
    binary = {
        "ce-specversion": "1.0",
        "ce-id": "bin-1",
        "ce-source": "/tests",
        "ce-type": "t",
        "ce-flag": "on",
        "content-type": "application/octet-stream",
    }
    assert broker.http.post("/events", content=b"\x00\x01binary", headers=binary).status_code == 202
    rich = {**event(1), "subject": "s", "time": "2026-01-01T00:00:00Z", "ext": "x", "data": {"a": [1]}}
    assert broker.send(rich).status_code == 202
    # More than a watcher holds, while the reader waits: the oldest are dropped and it is told.
    many = [event(n) for n in range(100, 1100)]
    assert broker.http.post("/events", json=many, headers=BATCH).status_code == 202
    go_on.set()
    wait_until(lambda: any(m.data and '"e-1099"' in m.data for m in messages), timeout=30)
    stop.set()
    assert broker.send(event(2000)).status_code == 202  # wakes the reader so that it returns
    reader.join(timeout=10)
    kinds = {m.event for m in messages}
    assert {"ready", "cloudevent", "dropped"} <= kinds, kinds
    for message in messages:
        assert message.event in schemas, message.event
        jsonschema.Draft202012Validator(schemas[message.event]).validate(json.loads(message.data))
