"""Request-reply: ``POST /events`` with ``Prefer: wait`` answered with the first reply to the
event (binary and structured, from a real HTTP sink that replies or a producer replying on its
own), 504 after the wait with the event still accepted, the wait cut to ``--reply-max-wait``,
a late reply delivered as an ordinary event, a batch answered 202 as always; and across two
``cebroker serve`` instances on one PostgreSQL database."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import httpx
import pytest
from support.broker import Broker, BrokerProcess, BrokerProcesses
from support.events import event
from support.sinks import Received, Reply, Sink

from cebroker.pipeline.requestreply import parse_wait

REPLY = {"reply": "publish"}
STRUCTURED = {"content-type": "application/cloudevents+json"}


def binary_request(n: int, wait: str) -> tuple[dict[str, str], bytes]:
    headers = {
        "ce-specversion": "1.0",
        "ce-id": f"q-{n}",
        "ce-source": "/client",
        "ce-type": "com.example.question",
        "content-type": "application/json",
        "prefer": wait,
    }
    return headers, b'{"q": 1}'


def answering(got: Received) -> Reply | None:
    """Answers each question with a binary reply whose id derives from the question's."""
    if got.path != "/svc":
        return None
    return Reply(
        200,
        {
            "ce-specversion": "1.0",
            "ce-id": f"a-{got.headers['ce-id']}",
            "ce-source": "/answerer",
            "ce-type": "com.example.answer",
            "content-type": "application/json",
        },
        b'{"a": 2}',
    )


def test_parse_wait() -> None:
    assert parse_wait("wait=5") == 5.0
    assert parse_wait("respond-async, WAIT = 10") == 10.0
    assert parse_wait('return=minimal, wait="3"') == 3.0
    assert parse_wait("wait=0") is None
    assert parse_wait("wait=soon") is None
    assert parse_wait("return=minimal") is None
    assert parse_wait(None) is None


def test_a_binary_request_gets_the_sinks_reply(broker: Broker, sink: Sink) -> None:
    sink.responder = answering
    broker.subscribe(f"{sink.url}/svc", types=["com.example.question"], config=REPLY)
    headers, body = binary_request(1, "wait=10")
    response = broker.http.post("/events", content=body, headers=headers, timeout=20)
    assert response.status_code == 200, response.text
    assert response.headers["preference-applied"] == "wait=10"
    assert response.headers["ce-id"] == "a-q-1"
    assert response.headers["ce-inreplyto"] == "q-1"
    assert response.headers["ce-cebrokerhops"] == "1"
    assert response.json() == {"a": 2}


def test_a_structured_request_gets_a_structured_reply(broker: Broker, sink: Sink) -> None:
    sink.responder = answering
    broker.subscribe(f"{sink.url}/svc", types=["com.example.test"], config=REPLY)
    response = broker.http.post(
        "/events", json=event(2), headers={**STRUCTURED, "prefer": "wait=10"}, timeout=20
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/cloudevents+json")
    reply = response.json()
    assert reply["id"] == "a-e-2"
    assert reply["inreplyto"] == "e-2"
    assert reply["data"] == {"a": 2}


def test_a_reply_published_by_a_producer_answers_the_request(broker: Broker, sink: Sink) -> None:
    results: list[httpx.Response] = []

    def ask() -> None:
        results.append(
            broker.http.post(
                "/events", json=event(3), headers={**STRUCTURED, "prefer": "wait=10"}, timeout=20
            )
        )

    broker.subscribe(f"{sink.url}/questions", types=["com.example.test"])
    asking = threading.Thread(target=ask)
    asking.start()
    sink.wait("/questions", 1)  # the request is accepted (and delivered): now answer it
    answer = event(30, type="com.example.answer", inreplyto="e-3")
    assert broker.send(answer).status_code == 202
    asking.join(20)
    (response,) = results
    assert response.status_code == 200
    assert response.json()["id"] == "e-30"


def test_no_reply_in_time_is_a_504_and_a_late_reply_is_an_ordinary_event(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(reply_max_wait=1.0)
    broker.subscribe(f"{sink.url}/questions", types=["com.example.test"])
    broker.subscribe(f"{sink.url}/late", types=["com.example.answer"])
    response = broker.http.post(
        "/events", json=event(4), headers={**STRUCTURED, "prefer": "wait=100"}, timeout=20
    )
    assert response.status_code == 504
    assert response.headers["preference-applied"] == "wait=1"
    assert response.headers["content-type"] == "application/problem+json"
    assert "no reply came within 1s" in response.json()["detail"]
    sink.wait("/questions", 1)  # accepted and delivered all the same
    late = event(40, type="com.example.answer", inreplyto="e-4")
    assert broker.send(late).status_code == 202
    (got,) = sink.wait("/late", 1)
    assert got.headers["ce-inreplyto"] == "e-4"


def test_a_batch_ignores_the_preference(broker: Broker) -> None:
    response = broker.http.post(
        "/events",
        content=json.dumps([event(5)]),
        headers={"content-type": "application/cloudevents-batch+json", "prefer": "wait=5"},
    )
    assert response.status_code == 202
    assert "preference-applied" not in response.headers


@pytest.mark.postgres
@pytest.mark.slow
def test_the_reply_may_be_ingested_by_another_instance(
    postgres_url: str, broker_processes: BrokerProcesses, sink: Sink
) -> None:
    logs = itertools.count()

    def launch() -> BrokerProcess:
        flags = ("--webhook-validation", "off", "--log-level", "warning")
        return broker_processes(postgres_url, f"broker-{next(logs)}.log", *flags).start().ready()

    first, second = launch(), launch()
    body = {"protocol": "HTTP", "sink": f"{sink.url}/questions", "types": ["com.example.test"]}
    assert httpx.post(f"{second.url}/subscriptions", json=body).status_code == 201
    results: list[httpx.Response] = []

    def ask() -> None:
        results.append(
            httpx.post(
                f"{first.url}/events", json=event(6), headers={**STRUCTURED, "prefer": "wait=20"}, timeout=30
            )
        )

    asking = threading.Thread(target=ask)
    asking.start()
    sink.wait("/questions", 1, timeout=20)
    answer = event(60, type="com.example.answer", inreplyto="e-6")
    assert httpx.post(f"{second.url}/events", json=answer, headers=STRUCTURED).status_code == 202
    asking.join(30)
    (response,) = results
    assert response.status_code == 200, response.text
    assert response.json()["id"] == "e-60"
    assert response.headers["preference-applied"] == "wait=20"
