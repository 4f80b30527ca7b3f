"""The transformation's pieces without a broker: what the expression sees, what its output may
hold (the broker's own attributes, data, ``$delivery`` per protocol and its limits), and how the
destination is derived from it."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from ceprotocols.sender import Destination

from cebroker.pipeline.transform import Dropped, Failed, Outgoing, transform, transform_problems
from cebroker.pipeline.transform.extras import ExtrasError, destination_with, parse_extras
from cebroker.pipeline.transform.spec import parse_transform

EVENT: dict[str, Any] = {
    "specversion": "1.0",
    "id": "e-1",
    "source": "/s",
    "type": "t",
    "datacontenttype": "application/json",
    "data": {"n": 1},
}
HTTP = Destination(
    protocol="HTTP", sink="https://sink.example/base?a=1", settings={"headers": {"x-static": "1"}}
)


def run(
    cel: str, event: dict[str, Any] | None = None, destination: Destination = HTTP, **options: Any
) -> Any:
    return transform(parse_transform({"cel": cel}), event or EVENT, destination, **options)


def test_binary_data_is_seen_as_bytes_and_sent_as_base64() -> None:
    raw = bytes(range(5))
    event = {
        **EVENT,
        "datacontenttype": "application/octet-stream",
        "data_base64": base64.b64encode(raw).decode(),
    }
    del event["data"]
    outcome = run('{"source": "/s", "type": "t", "n": size(event.data), "data": event.data + b"!"}', event)
    assert isinstance(outcome, Outgoing)
    assert outcome.event["n"] == 5
    assert base64.b64decode(outcome.event["data_base64"]) == raw + b"!"
    assert "data" not in outcome.event


def test_the_broker_owns_id_specversion_and_replayid() -> None:
    replayed = {**EVENT, "replayid": "r-1"}
    outcome = run('{"source": "/s", "type": "t"}', replayed)
    assert isinstance(outcome, Outgoing)
    assert (outcome.event["id"], outcome.event["specversion"], outcome.event["replayid"]) == (
        "e-1",
        "1.0",
        "r-1",
    )
    for changed in (
        '{"id": "x", "source": "/s", "type": "t"}',
        '{"replayid": "x", "source": "/s", "type": "t"}',
    ):
        failed = run(changed, replayed)
        assert isinstance(failed, Failed)
        assert "set by the broker" in failed.reason


@pytest.mark.parametrize(
    ("cel", "words"),
    [
        ("1", "must be a map"),
        ('{"source": "/s"}', "/type"),
        ('{"source": "/s", "type": "t", "Bad": 1}', "/Bad"),
        (
            '{"source": "/s", "type": "t", "datacontenttype": "text/plain", "data": {"a": 1}}',
            "JSON datacontenttype",
        ),
    ],
)
def test_an_output_that_is_not_an_event_fails(cel: str, words: str) -> None:
    failed = run(cel)
    assert isinstance(failed, Failed)
    assert words in failed.reason


def test_null_drops() -> None:
    assert run("null") == Dropped()


def test_the_failure_message_names_the_position() -> None:
    failed = run('{"source": "/s", "type": "t", "data": event.data.n / 0}')
    assert isinstance(failed, Failed)
    assert failed.message.startswith("transformation failed: ")
    assert "at line 1, column" in failed.message


def test_http_extras_make_the_destination() -> None:
    extras = parse_extras({"headers": {"X-A": "1"}, "path": "/o/7?b=2"}, "HTTP", batch=False)
    derived = destination_with(HTTP, extras)
    assert derived.sink == "https://sink.example/base/o/7?a=1&b=2"
    assert derived.settings["headers"] == {"x-static": "1", "x-a": "1"}
    assert HTTP.settings["headers"] == {"x-static": "1"}  # the subscription's own is unchanged
    assert destination_with(HTTP, parse_extras(None, "HTTP", batch=False)) is HTTP


@pytest.mark.parametrize(
    ("value", "protocol", "pointer"),
    [
        ({"headers": {"Authorization": "x"}}, "HTTP", "/$delivery/headers/Authorization"),
        ({"headers": {"ce-id": "x"}}, "HTTP", "/$delivery/headers/ce-id"),
        ({"headers": {"webhook-signature": "x"}}, "HTTP", "/$delivery/headers/webhook-signature"),
        ({"headers": {"X-A": "a\r\nb"}}, "HTTP", "/$delivery/headers/X-A"),
        ({"headers": {f"x-{n}": "v" for n in range(17)}}, "HTTP", "/$delivery/headers"),
        ({"path": "//evil.example/x"}, "HTTP", "/$delivery/path"),
        ({"path": "https://evil.example/x"}, "HTTP", "/$delivery/path"),
        ({"path": "/a/../b"}, "HTTP", "/$delivery/path"),
        ({"path": "/a#f"}, "HTTP", "/$delivery/path"),
        ({"path": "x"}, "HTTP", "/$delivery/path"),
        ({"key": "k"}, "HTTP", "/$delivery/key"),
        ({"topic": "a/+"}, "MQTT5", "/$delivery/topic"),
        ({"topic": "a//b"}, "MQTT5", "/$delivery/topic"),
        ({"subject": "a.*"}, "NATS", "/$delivery/subject"),
        ({"subject": "a..b"}, "NATS", "/$delivery/subject"),
        ({"path": "/x"}, "AMQP", "/$delivery/path"),
        ({"other": 1}, "HTTP", "/$delivery/other"),
        ("text", "HTTP", "/$delivery"),
    ],
)
def test_refused_extras(value: Any, protocol: str, pointer: str) -> None:
    with pytest.raises(ExtrasError) as refused:
        parse_extras(value, protocol, batch=False)
    assert refused.value.pointer == pointer


def test_a_batch_takes_no_extras() -> None:
    with pytest.raises(ExtrasError, match="batch"):
        parse_extras({"path": "/x"}, "HTTP", batch=True)
    failed = run('{"source": "/s", "type": "t", "$delivery": {"path": "/x"}}', batch=True)
    assert isinstance(failed, Failed)


def test_topic_subject_and_key() -> None:
    mqtt = Destination(protocol="MQTT5", sink="mqtt://m", settings={"topicname": "orders"})
    outcome = run('{"source": "/s", "type": "t", "$delivery": {"topic": "eu/fr"}}', destination=mqtt)
    assert isinstance(outcome, Outgoing)
    assert outcome.destination.settings["topicname"] == "orders/eu/fr"
    nats = Destination(protocol="NATS", sink="nats://n", settings={"subject": "orders"})
    outcome = run('{"source": "/s", "type": "t", "$delivery": {"subject": "eu.fr"}}', destination=nats)
    assert isinstance(outcome, Outgoing)
    assert outcome.destination.settings["subject"] == "orders.eu.fr"
    kafka = Destination(protocol="KAFKA", sink="kafka://k", settings={"partitionkeyextractor": "orderkey"})
    outcome = run('{"source": "/s", "type": "t", "$delivery": {"key": "o-1"}}', destination=kafka)
    assert isinstance(outcome, Outgoing)
    assert outcome.event["orderkey"] == "o-1"
    assert outcome.destination is kafka


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"cel": "event.data +"}, "syntax error at line 1, column"),
        ({"cel": ""}, "empty"),
        ({"cel": 3}, '"cel" must be a string'),
        ({"cel": "event", "sample": {}}, "unknown member 'sample'"),
        ([], "must be an object"),
    ],
)
def test_refused_when_saved(value: Any, words: str) -> None:
    (problem,) = transform_problems(value)
    assert words in problem


def test_a_good_transformation_has_no_problems() -> None:
    assert transform_problems({"cel": "event"}) == []
