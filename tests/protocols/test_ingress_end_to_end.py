"""Ingress end to end: a broker started with ``--source`` for each protocol consumes events
published on the real server (both content modes) and delivers them to an HTTP subscription:
the same durable path as ``POST /events`` (issue: ingress)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from ce_samples import make_event
from ceprotocols.http.binding import from_binary
from ceprotocols.registry import create_sender
from conftest import protocol_params
from harness import ProtocolCase, source_url, unique_name
from pipeline.servers import ServerThread, Sink


@pytest.mark.parametrize("case", protocol_params())
async def test_source_events_reach_an_http_subscription(
    case: ProtocolCase, server_of: Callable[[ProtocolCase], Any], broker_factory: Callable[..., str]
) -> None:
    """Events published on the protocol (every content mode it has) arrive at the HTTP sink."""
    server = server_of(case)
    name = unique_name()
    sink = Sink()
    with ServerThread(sink) as http_sink:
        url = broker_factory(sources=(source_url(case, server, name),))
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            response = await http.post(
                "/subscriptions", json={"protocol": "HTTP", "sink": f"{http_sink.url}/in"}
            )
            assert response.status_code == 201, response.text
        sender = create_sender(case.protocol)
        events = [make_event("json-object", modeext=mode) for mode in case.modes]
        try:
            # The source connects after start-up; core NATS and clean MQTT sessions drop what is
            # published before, so publish until everything arrived (duplicates are dropped by
            # the broker's de-duplication of source and id).
            async with asyncio.timeout(45):
                while len({r.headers["ce-id"] for r in sink.at("/in")}) < len(events):
                    for event, mode in zip(events, case.modes, strict=True):
                        destination = case.destination(server, name, mode)
                        await sender.deliver(event, destination)
                    await asyncio.sleep(0.5)
        finally:
            await sender.aclose()
        received = {r.headers["ce-id"]: from_binary(r.headers, r.body) for r in sink.at("/in")}
        for event in events:
            assert received[event["id"]]["data"] == event["data"]
            assert received[event["id"]]["type"] == event["type"]
