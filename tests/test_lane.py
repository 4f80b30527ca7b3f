"""The fast lane of ``POST /events`` (cebroker.web.lane) answers as the full stack does: its
refusals and failures are the app's problem+json, other calls take the usual way, and a failed
send drops the rest of the answer."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.testclient import TestClient
from starlette.types import Message, Receive, Scope, Send

from cebroker.app import create_app
from cebroker.errors import BrokerError, ValidationError
from cebroker.settings import Settings
from cebroker.web.lane import Lane


def _event(n: int) -> dict[str, Any]:
    return {"specversion": "1.0", "id": f"lane-{n}", "source": "/lane", "type": "t"}


def test_events_through_the_lane_as_through_the_stack(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    entries = [
        {"id": name, "sha256": hashlib.sha256(key).hexdigest(), "tenant": "acme", "scopes": [scope]}
        for name, key, scope in (
            ("pub", b"cbk_publisher", "events:publish"),
            ("reader", b"cbk_reader", "subscriptions:read"),
        )
    ]
    entries.append({"id": "ops", "sha256": hashlib.sha256(b"cbk_ops").hexdigest(), "scopes": ["admin"]})
    keys.write_text(json.dumps({"keys": entries}))
    app = create_app(Settings(db=tmp_path / "b.db", api_keys=keys))
    structured = {"content-type": "application/cloudevents+json"}
    with TestClient(app) as client:
        refused = client.post("/events", json=_event(1), headers=structured)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["www-authenticate"].startswith("Bearer")
        forbidden = client.post(
            "/events", json=_event(1), headers={**structured, "authorization": "Bearer cbk_reader"}
        )
        assert forbidden.status_code == 403
        assert "events:publish" in forbidden.json()["detail"]
        auth = {**structured, "authorization": "Bearer cbk_publisher"}
        accepted = client.post("/events", json=_event(1), headers=auth)
        assert accepted.status_code == 202
        assert accepted.headers["content-type"] == "application/json"
        assert accepted.json() == {"accepted": 1, "duplicates": 0}
        assert client.post("/events", json=_event(1), headers=auth).json() == {"accepted": 1, "duplicates": 1}
        invalid = client.post("/events", json={"specversion": "1.0", "id": "x"}, headers=auth)
        assert invalid.status_code == 400
        assert invalid.headers["content-type"] == "application/problem+json"
        assert {e["pointer"] for e in invalid.json()["errors"]} >= {"/source", "/type"}
        # Other methods on the path take the full stack: 405 with Allow.
        other = client.get("/events", headers=auth)
        assert other.status_code == 405
        assert other.headers["content-type"] == "application/problem+json"
        # The request metrics count the lane's calls under their route, with their status.
        metrics = client.get("/metrics", headers={"authorization": "Bearer cbk_ops"}).text
        for status, count in (("202", 2), ("400", 1), ("401", 1), ("403", 1)):
            series = f'route="/events",status="{status}"'
            lines = [
                line for line in metrics.splitlines() if "duration_seconds_count" in line and series in line
            ]
            assert lines, f"no request metrics for {series}"
            assert float(lines[0].rsplit(" ", 1)[1]) == count


async def _broker_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BrokerError)
    return JSONResponse({"status": exc.status}, status_code=exc.status)


def _lane(endpoint: Any) -> tuple[Lane, list[Scope]]:
    passed: list[Scope] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(scope)

    return Lane(
        app, method="POST", path="/events", endpoint=endpoint, handlers={BrokerError: _broker_error}
    ), passed


async def _call(lane: Lane, method: str, path: str, send: Send) -> None:
    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {"type": "http", "method": method, "path": path, "headers": [], "query_string": b""}
    await lane(scope, receive, send)


async def test_other_calls_take_the_app() -> None:
    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        raise AssertionError("not for the lane")

    lane, passed = _lane(endpoint)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await _call(lane, "GET", "/events", send)
    await _call(lane, "POST", "/events/x", send)
    assert [(s["method"], s["path"]) for s in passed] == [("GET", "/events"), ("POST", "/events/x")]


async def test_an_error_is_answered_by_the_handlers_and_a_late_one_raised() -> None:
    async def refusing(scope: Scope, receive: Receive, send: Send) -> None:
        raise ValidationError([], "bad")

    lane, _ = _lane(refusing)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await _call(lane, "POST", "/events", send)
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 400

    async def late(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        raise ValidationError([], "too late for an answer")

    lane, _ = _lane(late)
    raised = None
    try:
        await _call(lane, "POST", "/events", send)
    except ValidationError as exc:
        raised = exc
    assert raised is not None


async def test_a_failed_send_drops_the_rest() -> None:
    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    lane, _ = _lane(endpoint)
    tried: list[Message] = []

    async def broken(message: Message) -> None:
        tried.append(message)
        raise RuntimeError("the server gave up on this connection")

    await _call(lane, "POST", "/events", broken)
    assert [m["type"] for m in tried] == ["http.response.start"]
