"""Ingress end to end: a broker started with ``--source`` for each protocol consumes events
published on the real server (both content modes) and delivers them to an HTTP subscription:
the same durable path as ``POST /events`` (issue: ingress)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ceprotocols.http.binding import from_binary
from ceprotocols.registry import create_sender
from support.broker import Broker
from support.sinks import Sink
from support.waiting import async_wait_until

from protocols.ce_samples import make_event
from protocols.harness import ProtocolCase, protocol_params, source_url, unique_name


@pytest.mark.parametrize("case", protocol_params())
async def test_source_events_reach_an_http_subscription(
    case: ProtocolCase,
    server_of: Callable[[ProtocolCase], Any],
    make_broker: Callable[..., Broker],
    sink: Sink,
) -> None:
    """Events published on the protocol (every content mode it has) arrive at the HTTP sink."""
    server = server_of(case)
    name = unique_name()
    url = make_broker(sources=(source_url(case, server, name),)).url
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        response = await http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/in"})
        assert response.status_code == 201, response.text
    sender = create_sender(case.protocol)
    events = [make_event("json-object", modeext=mode) for mode in case.modes]

    async def arrived() -> bool:
        if len(set(sink.ids("/in"))) >= len(events):
            return True
        for event, mode in zip(events, case.modes, strict=True):
            await sender.deliver(event, case.destination(server, name, mode))
        return False

    try:
        # The source connects after start-up; core NATS and clean MQTT sessions drop what is
        # published before, so publish until everything arrived (duplicates are dropped by
        # the broker's de-duplication of source and id).
        await async_wait_until(arrived, 45, f"{len(events)} events at the HTTP sink", interval=0.5)
    finally:
        await sender.aclose()
    received = {r.headers["ce-id"]: from_binary(r.headers, r.body) for r in sink.at("/in")}
    for event in events:
        assert received[event["id"]]["data"] == event["data"]
        assert received[event["id"]]["type"] == event["type"]
