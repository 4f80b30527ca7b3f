"""Sink replies (``config.reply: publish``) with a real HTTP sink that answers with CloudEvents:
binary and structured answers published and delivered to a second subscription, a reply answered
twice counted once, a reply refused by the tenant's publish policy counted on the status, a loop
of two subscriptions stopped at the hop limit with a dead letter, and a bad ``config.reply``
refused when the subscription is saved; and a broker process SIGKILLed right after the sink
answered loses no reply and publishes it once."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.broker import Broker, BrokerProcesses
from support.events import event
from support.sinks import Received, Reply, Sink
from support.waiting import wait_for

REPLY = {"reply": "publish"}


def binary_reply(rid: str, kind: str = "com.example.reply") -> Reply:
    return Reply(
        200,
        {
            "ce-specversion": "1.0",
            "ce-id": rid,
            "ce-source": "/replier",
            "ce-type": kind,
            "content-type": "application/json",
        },
        b'{"answer": 42}',
    )


def structured_reply(rid: str, kind: str = "com.example.reply") -> Reply:
    body = {"specversion": "1.0", "id": rid, "source": "/replier", "type": kind, "data": {"answer": 43}}
    return Reply(200, {"content-type": "application/cloudevents+json"}, json.dumps(body).encode())


def test_binary_reply_is_published_and_delivered(broker: Broker, sink: Sink) -> None:
    sink.default["/svc"] = binary_reply("r-1")
    sub = broker.subscribe(f"{sink.url}/svc", types=["com.example.test"], config=REPLY)
    broker.subscribe(f"{sink.url}/replies", types=["com.example.reply"])
    assert broker.send(event(1)).status_code == 202
    (got,) = sink.wait("/replies", 1)
    assert got.headers["ce-id"] == "r-1"
    assert got.headers["ce-source"] == "/replier"
    assert got.headers["ce-inreplyto"] == "e-1"
    assert got.headers["ce-cebrokerhops"] == "1"
    assert json.loads(got.body) == {"answer": 42}
    broker.settled()
    status = broker.status(sub)
    assert status["delivered"] == 1
    assert status["replies"] == {"published": 1, "duplicates": 0, "refused": 0, "lastRefusal": None}


def test_structured_reply_keeps_its_own_inreplyto(broker: Broker, sink: Sink) -> None:
    answer = structured_reply("r-2")
    doc = json.loads(answer.body)
    doc["inreplyto"] = "elsewhere"
    sink.default["/svc"] = Reply(200, answer.headers, json.dumps(doc).encode())
    broker.subscribe(
        f"{sink.url}/svc",
        types=["com.example.test"],
        protocolsettings={"contentmode": "structured"},
        config=REPLY,
    )
    broker.subscribe(
        f"{sink.url}/replies", types=["com.example.reply"], protocolsettings={"contentmode": "structured"}
    )
    assert broker.send(event(2)).status_code == 202
    sink.wait("/replies", 1)
    (reply,) = sink.events("/replies")
    assert reply["id"] == "r-2"
    assert reply["data"] == {"answer": 43}
    assert reply["inreplyto"] == "elsewhere"
    assert reply["cebrokerhops"] == 1


def test_answers_without_an_event_or_with_replies_off_publish_nothing(broker: Broker, sink: Sink) -> None:
    sink.default["/plain"] = Reply(200, {"content-type": "application/json"}, b'{"ok": true}')
    sink.default["/off"] = binary_reply("r-off")
    plain = broker.subscribe(f"{sink.url}/plain", types=["com.example.test"], config=REPLY)
    broker.subscribe(f"{sink.url}/off", types=["com.example.test"])
    broker.subscribe(f"{sink.url}/replies", types=["com.example.reply"])
    assert broker.send(event(3)).status_code == 202
    broker.settled()
    assert len(sink.at("/plain")) == 1
    assert len(sink.at("/off")) == 1
    assert sink.at("/replies") == []
    assert broker.status(plain)["replies"]["published"] == 0


def test_the_same_reply_twice_is_published_once(broker: Broker, sink: Sink) -> None:
    # Two deliveries answered with the same (source, id): what a retried delivery's sink does.
    sink.default["/svc"] = binary_reply("r-same")
    sub = broker.subscribe(f"{sink.url}/svc", types=["com.example.test"], config=REPLY)
    broker.subscribe(f"{sink.url}/replies", types=["com.example.reply"])
    assert broker.send(event(4)).status_code == 202
    sink.wait("/replies", 1)
    assert broker.send(event(5)).status_code == 202
    sink.wait("/svc", 2)
    broker.settled()
    assert sink.ids("/replies") == ["r-same"]
    counts = broker.status(sub)["replies"]
    assert counts["published"] == 1
    assert counts["duplicates"] == 1


def test_a_reply_the_publish_policy_refuses_is_counted(
    make_broker: Callable[..., Broker], tmp_path: Path, sink: Sink
) -> None:
    keys = [
        {"id": "admin", "sha256": hashlib.sha256(b"cbk_admin-key").hexdigest(), "scopes": ["admin"]},
        {
            "id": "acme",
            "sha256": hashlib.sha256(b"cbk_acme-key").hexdigest(),
            "tenant": "acme",
            "scopes": ["subscriptions:read", "subscriptions:write", "events:publish"],
        },
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    policies = {"tenants": {"acme": {"publish": "source LIKE '/acme/%'"}}}
    (tmp_path / "policies.json").write_text(json.dumps(policies))
    broker = make_broker(
        api_keys=tmp_path / "keys.json",
        tenant_policies=tmp_path / "policies.json",
        allow_sink_networks=("127.0.0.0/8",),
    )
    acme = {"authorization": "Bearer cbk_acme-key"}
    sink.default["/svc"] = binary_reply("r-refused")  # source /replier: not acme's to publish
    created = broker.http.post(
        "/subscriptions",
        json={"protocol": "HTTP", "sink": f"{sink.url}/svc", "types": ["com.example.test"], "config": REPLY},
        headers=acme,
    )
    assert created.status_code == 201, created.text
    sub = created.json()
    broker.http.headers.update({"authorization": "Bearer cbk_admin-key"})
    broker.subscribe(f"{sink.url}/replies", types=["com.example.reply"])
    sent = broker.http.post(
        "/events",
        content=json.dumps(event(6, source="/acme/orders")),
        headers={**acme, "content-type": "application/cloudevents+json"},
    )
    assert sent.status_code == 202, sent.text
    sink.wait("/svc", 1)
    broker.settled()
    status = broker.status(sub)
    assert status["delivered"] == 1  # the sink has it: the delivery is done
    assert status["replies"]["refused"] == 1
    assert status["replies"]["published"] == 0
    assert "publish policy" in status["replies"]["lastRefusal"]
    assert sink.at("/replies") == []


def test_a_reply_loop_stops_at_the_hop_limit_with_a_dead_letter(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(reply_max_hops=3)

    def answer(got: Received) -> Reply | None:
        # /a answers with a ping for /b, /b with a pong for /a; each reply's id is new.
        kind = "com.example.ping" if got.path == "/a" else "com.example.pong"
        return binary_reply(f"{got.headers['ce-id']}>", kind)

    sink.responder = answer
    a = broker.subscribe(f"{sink.url}/a", types=["com.example.test", "com.example.pong"], config=REPLY)
    b = broker.subscribe(f"{sink.url}/b", types=["com.example.ping"], config=REPLY)
    assert broker.send(event(7)).status_code == 202
    # e-7 (hop 0) -> /a, ping hop 1 -> /b, pong hop 2 -> /a, ping hop 3 -> /b: its reply would be hop 4.
    letters = wait_for(
        lambda: broker.http.get(f"/subscriptions/{b['id']}/deadletters").json()["items"],
        lambda items: len(items) == 1,
        15.0,
        "a dead letter on /b",
    )
    assert "hop 4" in letters[0]["lastError"]
    assert letters[0]["event"]["cebrokerhops"] == 3
    broker.settled()
    assert sink.ids("/a") == ["e-7", "e-7>>"]
    assert sink.ids("/b") == ["e-7>", "e-7>>>"]
    assert broker.status(a)["deadlettered"] == 0


def test_a_bad_reply_mode_is_refused(broker: Broker, sink: Sink) -> None:
    response = broker.http.post(
        "/subscriptions", json={"protocol": "HTTP", "sink": sink.url, "config": {"reply": "sometimes"}}
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["pointer"] == "/config/reply"


@pytest.mark.slow
def test_sigkill_right_after_the_sink_answers_loses_no_reply(
    tmp_path: Path, sink: Sink, broker_processes: BrokerProcesses
) -> None:
    """The sink answers with a reply and the broker process is SIGKILLed at once: after a
    restart on the same database the reply has been published exactly once (the delivery is
    retried if it had not completed, and its reply de-duplicated).

    The reply's own deliveries are at least once, like any other: the first process may have
    delivered it to ``/replies`` and been killed before it recorded that, so ``/replies`` may
    get it twice. What was published is read from the archive instead (a duplicate is not
    archived): a subscription made after the restart that starts at the earliest event
    receives each published event once."""
    first = (
        broker_processes(tmp_path / "broker.db", "broker.log", "--webhook-validation", "off").start().ready()
    )
    killed = threading.Event()

    def answer(got: Received) -> Reply | None:
        if got.path == "/svc" and not killed.is_set():
            killed.set()
            threading.Timer(0.02, first.kill).start()  # once the answer is on its way
        return None

    sink.responder = answer
    sink.default["/svc"] = binary_reply("r-crash")
    for body in (
        {"protocol": "HTTP", "sink": f"{sink.url}/svc", "types": ["com.example.test"], "config": REPLY},
        {"protocol": "HTTP", "sink": f"{sink.url}/replies", "types": ["com.example.reply"]},
    ):
        assert httpx.post(f"{first.url}/subscriptions", json=body).status_code == 201
    sent = httpx.post(
        f"{first.url}/events", json=event(8), headers={"content-type": "application/cloudevents+json"}
    )
    assert sent.status_code == 202
    wait_for(lambda: first.running, lambda running: not running, 15.0, "the broker killed")
    first.start().ready()
    sink.wait("/replies", 1, timeout=30.0)
    wait_for(
        lambda: httpx.get(f"{first.url}/status").json()["backlog"],
        lambda pending: pending == 0,
        30.0,
        "no pending delivery",
    )
    assert set(sink.ids("/replies")) == {"r-crash"}  # not lost
    published = {
        "protocol": "HTTP",
        "sink": f"{sink.url}/published",
        "types": ["com.example.reply"],
        "config": {"startfrom": "earliest"},
    }
    created = httpx.post(f"{first.url}/subscriptions", json=published)
    assert created.status_code == 201
    replays = f"{first.url}/subscriptions/{created.json()['id']}/replays"
    (start,) = wait_for(
        lambda: httpx.get(replays).json()["items"],
        lambda items: len(items) == 1 and items[0]["state"] == "done",
        30.0,
        "the start replay done",
    )
    assert start["matched"] == 1  # published once
    assert sink.ids("/published") == ["r-crash"]
    assert len(sink.at("/svc")) >= 1
    first.terminate()


def test_explain_says_whether_a_sample_reply_would_be_published(
    make_broker: Callable[..., Broker], tmp_path: Path
) -> None:
    keys = [
        {
            "id": "acme",
            "sha256": hashlib.sha256(b"cbk_acme-key").hexdigest(),
            "tenant": "acme",
            "scopes": ["subscriptions:read", "subscriptions:write", "events:publish"],
        }
    ]
    (tmp_path / "keys.json").write_text(json.dumps({"keys": keys}))
    (tmp_path / "policies.json").write_text(
        json.dumps({"tenants": {"acme": {"publish": "source LIKE '/acme/%'"}}})
    )
    broker = make_broker(
        api_keys=tmp_path / "keys.json",
        tenant_policies=tmp_path / "policies.json",
        allow_sink_networks=("127.0.0.0/8",),
    )
    broker.http.headers.update({"authorization": "Bearer cbk_acme-key"})
    draft: dict[str, object] = {"protocol": "HTTP", "sink": "http://127.0.0.1:9/svc", "config": REPLY}

    def verdict(subscription: dict[str, object], reply: dict[str, object]) -> dict[str, object]:
        response = broker.http.post(
            "/explain", json={"subscription": subscription, "event": event(1), "reply": reply}
        )
        assert response.status_code == 200, response.text
        return dict(response.json()["reply"])

    assert verdict(draft, event(2, source="/acme/replies")) == {"accepted": True, "reason": None}
    refused = verdict(draft, event(3, source="/elsewhere"))
    assert refused["accepted"] is False
    assert "publish policy" in str(refused["reason"])
    reserved = verdict(draft, event(4, source="/acme/x", type="dev.cebroker.circuit.opened"))
    assert "reserved" in str(reserved["reason"])
    off = verdict({**draft, "config": {}}, event(5, source="/acme/replies"))
    assert "config.reply" in str(off["reason"])
    bad = broker.http.post("/explain", json={"subscription": draft, "event": event(1), "reply": {"id": "x"}})
    assert bad.status_code == 400
    assert "/reply/source" in [p["pointer"] for p in bad.json()["errors"]]


def test_a_batched_delivery_answered_with_a_batch_publishes_each_reply(broker: Broker, sink: Sink) -> None:
    answers = [
        {"specversion": "1.0", "id": f"rb-{n}", "source": "/replier", "type": "com.example.reply"}
        for n in (1, 2)
    ]
    sink.default["/svc"] = Reply(
        200, {"content-type": "application/cloudevents-batch+json"}, json.dumps(answers).encode()
    )
    sub = broker.subscribe(
        f"{sink.url}/svc",
        types=["com.example.test"],
        protocolsettings={"contentmode": "batch"},
        config={**REPLY, "maxbatchsize": "10", "maxbatchdelay": "0.5"},
    )
    broker.subscribe(f"{sink.url}/replies", types=["com.example.reply"])
    for n in (10, 11):
        assert broker.send(event(n)).status_code == 202
    sink.wait("/replies", 2)
    broker.settled()
    assert sorted(sink.ids("/replies")) == ["rb-1", "rb-2"]
    (first, second) = sorted(sink.at("/replies"), key=lambda r: r.headers["ce-id"])
    # A batch's answer is correlated with the batch's first event.
    batches = [json.loads(r.body) for r in sink.at("/svc")]
    assert first.headers["ce-inreplyto"] == batches[0][0]["id"]
    assert second.headers["ce-cebrokerhops"] == "1"
    counts = broker.status(sub)["replies"]
    assert counts["published"] == 2
    assert counts["duplicates"] == 2 * (len(batches) - 1)  # a second batch gets the same answer


def test_an_unreadable_or_too_large_reply_is_refused_and_counted(
    make_broker: Callable[..., Broker], sink: Sink
) -> None:
    broker = make_broker(max_event_size=4096)
    sink.default["/broken"] = Reply(200, {"content-type": "application/cloudevents+json"}, b'{"id": ')
    big = {
        "specversion": "1.0",
        "id": "r-big",
        "source": "/replier",
        "type": "com.example.reply",
        "data": "x" * 5000,
    }
    sink.default["/big"] = Reply(
        200, {"content-type": "application/cloudevents+json"}, json.dumps(big).encode()
    )
    broken = broker.subscribe(f"{sink.url}/broken", types=["com.example.test"], config=REPLY)
    large = broker.subscribe(f"{sink.url}/big", types=["com.example.test"], config=REPLY)
    assert broker.send(event(12)).status_code == 202
    broker.settled()
    for sub, reason in ((broken, "not a readable CloudEvent"), (large, "larger than 4096 bytes")):
        status = broker.status(sub)
        assert status["delivered"] == 1
        assert status["replies"]["refused"] == 1
        assert reason in status["replies"]["lastRefusal"]
