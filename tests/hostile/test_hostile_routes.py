"""Every route against hostile input, on a real ``cebroker serve`` (issue: hostile input).

Each route gets a nesting bomb, a lone surrogate, bad query parameters, an oversized body, a
broken chunked body and a client that disconnects half-way. Nothing may answer 5xx (other than a
deliberate 503); a refused request changes nothing stored and emits no change event; and the
broker's log grows by at most one line per request, with no traceback, error or warning.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.sinks import Sink, served_sink

from hostile.support import BOMB, OVERSIZED, HostileBroker, headers_text, raw_request, snapshot, start_broker

JSON = "application/json"
SUB = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/nowhere", "types": ["never.delivered"]}
EVENT = {"specversion": "1.0", "id": "h-1", "source": "/hostile", "type": "hostile.test"}
BINARY = (
    ("ce-specversion", "1.0"),
    ("ce-id", "h-2"),
    ("ce-source", "/hostile"),
    ("ce-type", "hostile.test"),
)
BAD_QUERY = "?inline=bogus&epoch=x&specversion=9&limit=-1&after=x&filter=(((&bogus=%FF"


@dataclass(frozen=True)
class Route:
    """One way in: ``body`` is a valid body for it (None: the route takes none)."""

    method: str
    path: str
    body: Any = None
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()
    #: whether the route stores anything (a refusal must leave everything unchanged)
    writes: bool = True
    #: whether it reads a JSON body (a bad body must be refused), even if it stores nothing
    reads: bool | None = None

    @property
    def takes_body(self) -> bool:
        return self.writes if self.reads is None else self.reads

    @property
    def id(self) -> str:
        suffix = "" if self.content_type == JSON else f"[{self.content_type.split('/')[1]}]"
        return f"{self.method} {self.path}{suffix}"


def _routes(sid: str) -> list[Route]:
    group = {"envelope": "CloudEvents/1.0", "description": "g"}
    message = {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "t"}}}
    read = [
        "/healthz",
        "/readyz",
        "/metrics",
        "/openapi.json",
        "/subscriptions",
        f"/subscriptions/{sid}",
        f"/subscriptions/{sid}/status",
        f"/subscriptions/{sid}/deadletters",
        "/",
        "/model",
        "/modelsource",
        "/capabilities",
        "/export",
        "/messagegroups",
        "/messagegroups/g",
        "/messagegroups/g/messages/m",
        "/schemagroups/s/schemas/x",
        "/schema?uri=/schemagroups/s/schemas/x",
        "/messagedefinition?uri=/messagegroups/g/messages/m",
        "/endpoints",
        "/sources",
        "/sources/none/rejects",
        "/status",
        "/status/subscriptions",
        f"/subscriptions/{sid}/tail",
        "/console",
        "/docs",
    ]
    return [
        *(Route("GET", path, writes=False) for path in read),
        Route("OPTIONS", "/subscriptions", writes=False),
        Route("POST", f"/subscriptions/{sid}/explain", EVENT, writes=False, reads=True),
        Route("POST", "/explain", {"subscription": SUB, "event": EVENT}, writes=False, reads=True),
        Route("POST", "/subscriptions", SUB),
        Route("PUT", f"/subscriptions/{sid}", SUB),
        Route("DELETE", f"/subscriptions/{sid}"),
        Route("POST", f"/subscriptions/{sid}/deadletters/redrive", {"ids": [1]}),
        Route("POST", "/events", EVENT, "application/cloudevents+json"),
        Route("POST", "/events", [EVENT], "application/cloudevents-batch+json"),
        Route("POST", "/events", {"n": 1}, JSON, BINARY),
        Route("PUT", "/", {"description": "r"}),
        Route("PATCH", "/", {"description": "r"}),
        Route("POST", "/", {"messagegroups": {"g2": group}}),
        Route("PUT", "/messagegroups/g", group),
        Route("PATCH", "/messagegroups/g", {"description": "changed"}),
        Route("POST", "/messagegroups", {"g3": group}),
        Route("POST", "/messagegroups/g", {"messages": {"m2": message}}),
        Route("PUT", "/messagegroups/g/messages/m", message),
        Route("POST", "/messagegroups/g/messages/m", message),
        Route("PUT", "/schemagroups/s/schemas/x", {"type": "object"}),
        Route("PUT", "/schemagroups/s/schemas/x$details", {"schema": {"type": "object"}}),
        Route("PATCH", "/schemagroups/s/schemas/x/meta", {"defaultversionsticky": False}),
        Route("PUT", "/endpoints/e", {"usage": ["producer"], "protocol": "HTTP"}),
        Route("DELETE", "/messagegroups/g"),
        Route("DELETE", "/schemagroups", {"s": {}}),
    ]


def _with_surrogate(body: Any) -> bytes:
    """``body`` with one string that holds an unpaired surrogate (valid JSON, not Unicode)."""
    if isinstance(body, dict):
        body = {**body, "description": "\ud800"}
    elif isinstance(body, list):
        body = [{**body[0], "subject": "\ud800"}]
    return json.dumps(body).encode()  # ensure_ascii: written as the escape \ud800


class Probe:
    """Sends hostile requests and checks each outcome against the stored state."""

    def __init__(self, broker: HostileBroker) -> None:
        self.broker = broker
        self.requests = 0
        self.failures: list[str] = []
        self.baseline = self.settle()

    def settle(self) -> dict[str, list[tuple[Any, ...]]]:
        """The stored state once deliveries to the sink have drained and it stops changing."""
        previous: dict[str, list[tuple[Any, ...]]] | None = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state = snapshot(Path(self.broker.db))
            if state == previous and not state.get("pipeline_deliveries"):
                return state
            previous = state
            time.sleep(0.1)
        raise AssertionError("the broker's state did not settle")

    def incomplete(self) -> float:
        return self.broker.metric("cebroker_http_incomplete_requests_total", kind="disconnect")

    def send(
        self, label: str, route: Route, head: str, body: bytes, *, refuse: bool, abandon: bool = False
    ) -> int | None:
        """Send one request; a route that reads its body counts a body that ends early, and
        that count is the marker that the broker is done with it before the state is compared."""
        counted = (
            self.incomplete() if route.takes_body and label in ("broken-chunked", "disconnect") else None
        )
        status = raw_request(self.broker.port, head, body, abandon=abandon)
        self.requests += 1
        if counted is not None:
            deadline = time.monotonic() + 15
            while self.incomplete() <= counted:
                if time.monotonic() > deadline:
                    self.failures.append(f"{label} {route.id}: the incomplete body was not counted")
                    break
                time.sleep(0.02)
        self.check(label, route, status, refuse=refuse)
        return status

    def check(self, label: str, route: Route, status: int | None, *, refuse: bool) -> None:
        if status is not None and status >= 500 and status != 503:
            self.failures.append(f"{label} {route.id}: {status}")
            return
        refused = status is None or status >= 400
        if refuse and not refused:
            self.failures.append(f"{label} {route.id}: accepted ({status}) instead of refused")
        if refused and snapshot(Path(self.broker.db)) != self.baseline:
            self.failures.append(f"{label} {route.id}: refused ({status}) but the stored state changed")
        if not refused or snapshot(Path(self.broker.db)) != self.baseline:
            self.baseline = self.settle()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[HostileBroker]:
    process = start_broker(tmp_path / "hostile.db", tmp_path / "broker.log")
    try:
        yield process
    finally:
        process.close()


def _setup(broker: HostileBroker, sink: Sink) -> str:
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        # Every change event of the registry reaches this sink: a refused write must send none.
        watch = http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/changes"})
        assert watch.status_code == 201, watch.text
        sid = http.post("/subscriptions", json=SUB).json()["id"]
        assert http.put("/messagegroups/g", json={"envelope": "CloudEvents/1.0"}).status_code == 201
        message = {"envelope": "CloudEvents/1.0", "envelopemetadata": {"type": {"value": "t"}}}
        assert http.put("/messagegroups/g/messages/m", json=message).status_code == 201
        assert http.put("/schemagroups/s/schemas/x", json={"type": "object"}).status_code == 201
        return str(sid)


def _send(probe: Probe, route: Route, kind: str) -> None:
    path = route.path
    headers = [("Content-Type", route.content_type), *route.headers]
    body = b"" if route.body is None else json.dumps(route.body).encode()
    if kind == "query":
        separator = "&" if "?" in path else "?"
        head = headers_text(route.method, path + separator + BAD_QUERY[1:], [*headers, _length(body)])
        # Registry and subscription writes check every parameter before writing; /events ignores them.
        probe.send(kind, route, head, body, refuse=route.writes and route.path != "/events")
        return
    if route.body is None and route.method not in ("GET", "OPTIONS"):
        return  # a bodiless write would simply happen: only its parameters are hostile
    if kind in ("bomb", "surrogate"):
        payload = BOMB if kind == "bomb" else _with_surrogate(route.body if route.body is not None else {})
        head = headers_text(route.method, path, [*headers, _length(payload)])
        probe.send(kind, route, head, payload, refuse=route.takes_body)
    elif kind == "oversized":
        head = headers_text(route.method, path, [*headers, ("Content-Length", str(OVERSIZED))])
        status = probe.send(kind, route, head, body[:10], refuse=route.takes_body)
        if route.takes_body and status != 413:
            probe.failures.append(f"{kind} {route.id}: {status} instead of 413")
    elif kind == "broken-chunked":
        head = headers_text(route.method, path, [*headers, ("Transfer-Encoding", "chunked")])
        probe.send(kind, route, head, b'5\r\n{"a":\r\nzz-not-hex\r\n\r\n', refuse=route.takes_body)
    elif kind == "disconnect":
        head = headers_text(route.method, path, [*headers, ("Content-Length", str(len(body) + 1000))])
        probe.send(kind, route, head, body[: len(body) // 2], refuse=True, abandon=True)


def _length(body: bytes) -> tuple[str, str]:
    return ("Content-Length", str(len(body)))


KINDS = ("bomb", "surrogate", "query", "oversized", "broken-chunked", "disconnect")


@pytest.mark.slow
def test_every_route_survives_hostile_input(broker: HostileBroker) -> None:
    with served_sink() as sink:
        sid = _setup(broker, sink)
        probe = Probe(broker)
        changes_before = len(sink.at("/changes"))
        lines_before = len(broker.log_lines())
        for route in _routes(sid):
            for kind in KINDS:
                _send(probe, route, kind)
        added = broker.log_lines()[lines_before:]
        assert probe.failures == []
        # The change events of the setup were delivered before the baseline; refusals sent none
        # (accepted requests, e.g. an event with ignored parameters, are not registry changes).
        assert len(sink.at("/changes")) - changes_before == _accepted_events(sink, changes_before)
    assert len(added) <= probe.requests, "\n".join(added)
    noisy = [line for line in added if "Traceback" in line or " ERROR " in line or " WARNING " in line]
    assert noisy == []


def _accepted_events(sink: Sink, since: int) -> int:
    """Deliveries after ``since`` that are events the test posted (not registry changes)."""
    return sum(1 for r in sink.at("/changes")[since:] if r.headers.get("ce-source", "/hostile") == "/hostile")
