"""``POST /events`` served by the HTTP server's protocol itself (cebroker.pipeline.routes.direct):
the single events it takes are committed, delivered, counted and answered as the app answers
them, and every request it must not serve alone reaches the app, which answers it as before.

A whole broker in a thread, served as ``cebroker serve`` serves it (its httptools protocol and
direct route), with a spy on the route that records whether it took each request offered.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.events import event
from support.servers import ServedApps
from support.sinks import Sink
from support.waiting import wait_until

from cebroker.app import build_components, create_app
from cebroker.errors import Overloaded
from cebroker.pipeline.component import PipelineComponent
from cebroker.settings import Settings
from cebroker.web.direct import DirectRoute, RawHeaders, Reply

STRUCTURED = {"content-type": "application/cloudevents+json"}
KEYS = {"admin": "cbk_admin-key", "acme": "cbk_acme-key", "reader": "cbk_reader-key"}
POLICIES = {"tenants": {"acme": {"publish": "source LIKE '/acme/%'"}}}


class Spy:
    """The broker's direct route, recording whether it took each request it was offered."""

    def __init__(self, route: DirectRoute) -> None:
        self.route = route
        self.method = route.method
        self.path = route.path
        self.taken: list[bool] = []

    def take(self, headers: RawHeaders, body: bytes, reply: Reply) -> bool:
        took = self.route.take(headers, body, reply)
        self.taken.append(took)
        return took


class Served:
    def __init__(self, http: httpx.Client, spy: Spy, pipeline: PipelineComponent) -> None:
        self.http = http
        self.spy = spy
        self.pipeline = pipeline

    def metric(self, name: str, **labels: str) -> float:
        """The value of one series of the broker's metrics (0 when absent)."""
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
        for line in self.http.get("/metrics").text.splitlines():
            if line.startswith(prefix):
                return float(line.split()[-1])
        return 0.0


@pytest.fixture
def served_apps() -> Iterator[ServedApps]:
    apps = ServedApps()
    try:
        yield apps
    finally:
        apps.close()


def _serve(apps: ServedApps, tmp_path: Path, **overrides: Any) -> Served:
    settings = Settings(
        db=tmp_path / "broker.db",
        webhook_validation=False,
        shutdown_grace=0.0,
        allow_sink_networks=("127.0.0.0/8",),
        **overrides,
    )
    parts = build_components(settings)
    app = create_app(settings, parts)
    assert app.state.direct is not None
    spy = Spy(app.state.direct)
    app.state.direct = spy
    _, client = apps.start(app)
    pipeline = next(part for part in parts if isinstance(part, PipelineComponent))
    return Served(client, spy, pipeline)


@pytest.fixture
def broker(served_apps: ServedApps, tmp_path: Path) -> Served:
    return _serve(served_apps, tmp_path)


@pytest.fixture
def keyed(served_apps: ServedApps, tmp_path: Path) -> Served:
    scopes = {
        "admin": ["admin"],
        "acme": ["events:publish", "subscriptions:write"],
        "reader": ["subscriptions:read"],
    }
    keys = [
        {"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest(), "scopes": scopes[name]}
        | ({} if name == "admin" else {"tenant": name})
        for name, key in KEYS.items()
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    (tmp_path / "policies.json").write_text(json.dumps(POLICIES))
    return _serve(
        served_apps, tmp_path, api_keys=tmp_path / "keys.json", tenant_policies=tmp_path / "policies.json"
    )


def _as(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {KEYS[name]}"}


def test_a_structured_event_is_committed_delivered_and_answered_directly(broker: Served, sink: Sink) -> None:
    made = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/a"})
    assert made.status_code == 201, made.text
    sent = event(1, data={"k": "v"})
    accepted = broker.metric("cebroker_events_received_total", outcome="accepted")
    first = broker.http.post("/events", content=json.dumps(sent), headers=STRUCTURED)
    again = broker.http.post("/events", content=json.dumps(sent), headers=STRUCTURED)
    assert (first.status_code, first.json()) == (202, {"accepted": 1, "duplicates": 0})
    assert (again.status_code, again.json()) == (202, {"accepted": 1, "duplicates": 1})
    assert first.headers["content-type"] == "application/json"
    assert broker.spy.taken == [True, True]
    received = sink.wait("/a", 1)
    assert received[0].headers["ce-id"] == "e-1"
    assert json.loads(received[0].body) == {"k": "v"}
    # Counted as the app counts them: the request metric and the events taken in.
    assert (
        broker.metric(
            "cebroker_http_server_request_duration_seconds_count",
            route="/events",
            method="POST",
            status="202",
        )
        == 2
    )
    # (The broker's own events are counted too: the subscription made one.)
    assert broker.metric("cebroker_events_received_total", outcome="accepted") == accepted + 1
    assert broker.metric("cebroker_events_received_total", outcome="duplicate") == 1


def test_a_binary_event_is_committed_directly(broker: Served, sink: Sink) -> None:
    made = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/b"})
    assert made.status_code == 201, made.text
    headers = {
        "ce-specversion": "1.0",
        "ce-id": "bin-1",
        "ce-source": "/bin",
        "ce-type": "com.example.bin",
        "ce-note": "caf%C3%A9",
        "content-type": "application/json",
    }
    answer = broker.http.post("/events", content=b'{"x": 1}', headers=headers)
    assert (answer.status_code, answer.json()) == (202, {"accepted": 1, "duplicates": 0})
    assert broker.spy.taken == [True]
    received = sink.wait("/b", 1)[0]
    assert received.headers["ce-note"] == "caf%C3%A9"
    assert json.loads(received.body) == {"x": 1}


@pytest.mark.parametrize(
    ("body", "headers", "status", "pointer"),
    [
        (json.dumps({k: v for k, v in event(1).items() if k != "id"}), STRUCTURED, 400, "/id"),
        ('{"specversion": "1.0", "id": ', STRUCTURED, 400, None),
        ('{"id": "a", "id": "b"}', STRUCTURED, 400, None),
        ("[1]", STRUCTURED, 400, None),
        (json.dumps(event(1, type="dev.cebroker.forged")), STRUCTURED, 403, None),
        ("x", {"content-type": "text/plain"}, 415, None),
        ("{}", {"content-type": "application/cloudevents+xml"}, 415, None),
        ("{}", {"ce-specversion": "1.0", "ce-id": "%ZZ", "content-type": "application/json"}, 400, None),
    ],
    ids=[
        "no-id",
        "malformed",
        "repeated-member",
        "not-an-object",
        "reserved",
        "not-an-event",
        "format",
        "bad-header",
    ],
)
def test_a_request_the_app_refuses_is_refused_by_the_app(
    broker: Served, body: str, headers: dict[str, str], status: int, pointer: str | None
) -> None:
    answer = broker.http.post("/events", content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    if pointer is not None:
        assert any(error.get("pointer") == pointer for error in answer.json()["errors"]), answer.json()
    assert broker.spy.taken == [False]
    assert (
        broker.metric(
            "cebroker_http_server_request_duration_seconds_count",
            route="/events",
            method="POST",
            status=str(status),
        )
        == 1
    )


def test_batches_and_request_reply_go_to_the_app(broker: Served) -> None:
    batch = broker.http.post(
        "/events",
        content=json.dumps([event(1), event(2)]),
        headers={"content-type": "application/cloudevents-batch+json"},
    )
    assert (batch.status_code, batch.json()) == (202, {"accepted": 2, "duplicates": 0})
    waited = broker.http.post(
        "/events", content=json.dumps(event(3)), headers={**STRUCTURED, "prefer": "wait=1"}
    )
    # The app's answer to Prefer (504: no reply came; the event is accepted either way).
    assert waited.status_code == 504, waited.text
    assert waited.headers["preference-applied"] == "wait=1"
    assert broker.spy.taken == [False, False]


def test_credentials_and_policies_are_checked_as_the_app_checks_them(keyed: Served) -> None:
    def post(who: str | None, body: dict[str, Any]) -> httpx.Response:
        headers = {**STRUCTURED, **(_as(who) if who else {})}
        return keyed.http.post("/events", content=json.dumps(body), headers=headers)

    assert post("acme", event(1, source="/acme/orders")).status_code == 202
    assert post("admin", event(2, source="/anything")).status_code == 202
    assert keyed.spy.taken == [True, True]
    assert post(None, event(3)).status_code == 401  # no credentials
    assert (
        keyed.http.post(
            "/events",
            content=json.dumps(event(4)),
            headers={**STRUCTURED, "authorization": "Bearer cbk_unknown"},
        ).status_code
        == 401
    )
    assert post("reader", event(5)).status_code == 403  # lacks events:publish
    refused = post("acme", event(6, source="/globex/orders"))  # the tenant's publish policy
    assert refused.status_code == 403
    assert "publish policy" in refused.json()["detail"]
    assert keyed.spy.taken == [True, True, False, False, False, False]


def test_a_full_backlog_is_refused_by_the_app(served_apps: ServedApps, tmp_path: Path, sink: Sink) -> None:
    broker = _serve(served_apps, tmp_path, max_backlog=1)
    made = broker.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/held", "config": {"ratelimit": "1"}}
    )
    assert made.status_code == 201, made.text
    first = broker.http.post("/events", content=json.dumps(event(1)), headers=STRUCTURED)
    assert first.status_code == 202
    wait_until(lambda: broker.pipeline.ingestor.admitted([event(9)]) is None, message="the backlog to fill")
    second = broker.http.post("/events", content=json.dumps(event(2)), headers=STRUCTURED)
    assert second.status_code == 503, second.text
    assert broker.spy.taken[-1] is False


def test_a_commit_that_fails_is_handed_to_the_app_which_tries_once_more(
    broker: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingestor = broker.pipeline.ingestor
    commit = ingestor.commit_each
    calls: list[int] = []

    async def failing_once(clean: list[dict[str, Any]], **kwargs: Any) -> list[bool]:
        calls.append(len(clean))
        if len(calls) == 1:
            raise Overloaded("the storage is busy", retry_after=1.0, status=503)
        return await commit(clean, **kwargs)

    monkeypatch.setattr(ingestor, "commit_each", failing_once)
    answer = broker.http.post("/events", content=json.dumps(event(1)), headers=STRUCTURED)
    assert (answer.status_code, answer.json()) == (202, {"accepted": 1, "duplicates": 0})
    assert broker.spy.taken == [True]
    assert calls == [1, 1]  # the route's commit, then the app's


def test_an_event_is_answered_once_durable_and_delivered_even_if_handing_it_over_fails(
    broker: Served, sink: Sink, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The answer goes out as soon as the commit is durable, before the dispatcher is handed the
    event: a failure there leaves the 202 as it is (the app does not answer a second time), is
    logged, and the subscription loads the delivery from the log instead."""
    made = broker.http.post("/subscriptions", json={"protocol": "HTTP", "sink": f"{sink.url}/late"})
    assert made.status_code == 201, made.text
    dispatcher = broker.pipeline.dispatcher
    accept = dispatcher.accept
    failed: list[int] = []

    def failing_once(events: Any, written: Any, traces: Any = None) -> None:
        if not failed:
            failed.append(len(events))
            raise RuntimeError("no lane today")
        accept(events, written, traces)

    monkeypatch.setattr(dispatcher, "accept", failing_once)
    answer = broker.http.post("/events", content=json.dumps(event(1)), headers=STRUCTURED)
    assert (answer.status_code, answer.json()) == (202, {"accepted": 1, "duplicates": 0})
    assert broker.spy.taken == [True]
    assert failed == [1]
    received = sink.wait("/late", 1)
    assert received[0].headers["ce-id"] == "e-1"
    assert "could not be handed to the dispatcher" in caplog.text


def test_with_tracing_on_the_app_is_built_without_the_route(tmp_path: Path) -> None:
    settings = Settings(db=tmp_path / "t.db", otel_exporter_otlp_endpoint="http://127.0.0.1:9")
    assert create_app(settings).state.direct is None
    assert create_app(Settings(db=tmp_path / "u.db")).state.direct is not None


def test_concurrent_requests_are_answered_each_with_its_own_outcome(keyed: Served) -> None:
    """Requests taken in one turn are committed together, one call per tenant: each is answered
    with its own event's outcome, and de-duplication stays per publishing tenant."""
    base = str(keyed.http.base_url)

    async def burst(bodies: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
        limits = httpx.Limits(max_connections=len(bodies))
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:
            answers = await asyncio.gather(
                *(
                    client.post("/events", content=json.dumps(body), headers={**STRUCTURED, **_as(who)})
                    for who, body in bodies
                )
            )
        assert all(answer.status_code == 202 for answer in answers), [a.text for a in answers]
        return [answer.json() for answer in answers]

    first = [("acme", event(n, source="/acme/x")) for n in range(10)]
    assert asyncio.run(burst(first)) == [{"accepted": 1, "duplicates": 0}] * 10
    # The same ten from acme again (duplicates), from admin (another tenant: new), and ten new.
    again = (
        first
        + [("admin", body) for _, body in first]
        + [("acme", event(n, source="/acme/x")) for n in range(10, 20)]
    )
    answers = asyncio.run(burst(again))
    assert answers[:10] == [{"accepted": 1, "duplicates": 1}] * 10
    assert answers[10:] == [{"accepted": 1, "duplicates": 0}] * 20
    assert keyed.spy.taken == [True] * 40
