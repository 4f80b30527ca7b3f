"""The batch client's answers to each broker response, with a scripted transport (no network).

The contract (event-pipeline ingress): 202 after the whole batch is durable; 400 problem+json
naming each bad event as ``/<index>/<attribute>``; 413 oversize; 429/503 with ``Retry-After``
under pressure. HTTP batch content mode: CloudEvents HTTP binding section 3.3.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from cebroker.spark.client import (
    BATCH_CONTENT_TYPE,
    BatchClient,
    IngestRejected,
    IngestUnavailable,
    parse_retry_after,
)
from cebroker.spark.options import RetryPolicy, SinkOptions

Handler = Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers requests from a list of handlers and records the batches it saw."""

    def __init__(self, *answers: Handler | int) -> None:
        self.answers = list(answers)
        self.batches: list[list[dict[str, object]]] = []
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.batches.append(json.loads(request.content))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(request) if callable(answer) else httpx.Response(answer)


def client_for(script: Script, sleeps: list[float], **retry: float) -> BatchClient:
    options = SinkOptions(
        url="http://broker.test/events", authorization="Bearer s3cret", retry=RetryPolicy(**retry)
    )
    clock = iter(range(0, 10_000))
    return BatchClient(
        options,
        transport=httpx.MockTransport(script),
        sleep=sleeps.append,
        clock=lambda: float(next(clock)),
    )


def events(n: int) -> list[dict[str, object]]:
    return [{"specversion": "1.0", "id": str(i), "source": "/s", "type": "t"} for i in range(n)]


def test_batch_mode_request_and_credentials() -> None:
    """A batch is one POST in the batch content mode with the configured Authorization header."""
    script, sleeps = Script(202), list[float]()
    with client_for(script, sleeps) as client:
        client.send(events(3))
    request = script.requests[0]
    assert request.headers["content-type"] == BATCH_CONTENT_TYPE
    assert request.headers["authorization"] == "Bearer s3cret"
    assert script.batches == [events(3)]
    assert client.stats.accepted == 3


def test_503_then_202_honours_retry_after() -> None:
    """429/503 are retried after the server's Retry-After; the batch is sent again unchanged."""

    def busy(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "2"})

    script, sleeps = Script(busy, 429, 202), list[float]()
    with client_for(script, sleeps, initial_backoff=0.5) as client:
        client.send(events(2))
    assert sleeps[0] == 2.0
    assert 0.25 <= sleeps[1] <= 1.0  # 429 without Retry-After: second backoff step with jitter
    assert script.batches == [events(2)] * 3
    assert (client.stats.accepted, client.stats.retries) == (2, 2)


def test_connection_errors_are_retried_until_the_budget_runs_out() -> None:
    """A broker that stays unreachable makes the task fail (so Spark retries the micro-batch)."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    script, sleeps = Script(refuse), list[float]()
    client = client_for(script, sleeps, max_time=20, max_backoff=1)
    with client, pytest.raises(IngestUnavailable, match="ConnectError"):
        client.send(events(1))
    assert 3 <= len(sleeps) < 20


def test_400_naming_events_moves_them_aside_and_resends_the_rest() -> None:
    """A 400 rejects the batch whole; the events it names are refused, the others sent again."""
    problem = {
        "status": 400,
        "errors": [{"pointer": "/1/type", "detail": "must not be empty"}, {"pointer": "/3", "detail": "bad"}],
    }
    script, sleeps = Script(lambda _: httpx.Response(400, json=problem), 202), list[float]()
    with client_for(script, sleeps) as client:
        refused = client.send(events(4))
    assert [e["id"] for e in script.batches[1]] == ["0", "2"]
    refusals = [(r.event["id"], r.pointer, r.reason) for r in refused]
    assert refusals == [
        ("1", "/type", "refused by the broker: must not be empty"),
        ("3", None, "refused by the broker: bad"),
    ]
    assert client.stats.accepted == 2


def test_400_without_event_pointers_fails_the_task() -> None:
    """A 400 that names no event cannot be resent safely: the task fails with the broker's detail."""
    script, sleeps = Script(lambda _: httpx.Response(400, json={"detail": "nope"})), list[float]()
    with client_for(script, sleeps) as client, pytest.raises(IngestRejected, match="nope"):
        client.send(events(2))


def test_413_splits_the_batch_and_refuses_a_lone_oversize_event() -> None:
    """413: halves are sent separately; one event that alone is too large is refused."""

    def answer(request: httpx.Request) -> httpx.Response:
        batch = json.loads(request.content)
        too_big = len(batch) > 2 or any(e["id"] == "3" for e in batch)
        return httpx.Response(413 if too_big else 202)

    script, sleeps = Script(answer), list[float]()
    with client_for(script, sleeps) as client:
        refused = client.send(events(4))
    assert client.stats.accepted == 3
    assert [r.event["id"] for r in refused] == ["3"]


def test_401_fails_at_once() -> None:
    """Authentication failures are not retried."""
    script, sleeps = Script(401), list[float]()
    with client_for(script, sleeps) as client, pytest.raises(IngestRejected, match="401"):
        client.send(events(1))
    assert sleeps == []


def test_retry_after_forms() -> None:
    """RFC 9110 section 10.2.3: delta-seconds or an HTTP-date."""
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now=784111770.0) == 7.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
